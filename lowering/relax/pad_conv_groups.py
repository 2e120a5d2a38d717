"""``PadConvGroups(target)``: grouped convolutions whose groups have an awkward number of output
channels (ShuffleNet's 34 and 68) computed on groups padded with zero filters to whole vectors,
the padding cropped off after. (A 1x1 conv whose rows fill whole vectors of pixels, ShuffleNet's
34-channel groups at 28x28, is left to the Conv2D rule's plane-vector plan instead: no zero
filters, no crop pass.)

Why: the Conv2D default schedule (``dlight/cpu_conv.py``) vectorizes along a group's output
channels and a vector never straddles two groups, so 34 channels a group left it vectors of 2
lanes (of 16 on AVX-512: 23 GFLOPS for ShuffleNet's 136-channel 1x1 layer, where groups of 32 ran
at 67). Padded to 48 (three full vectors), 34 of every 48 lanes compute; on AMD Zen 4, whose
512-bit FMAs are two 256-bit halves, to 40 (five vectors of 8: ``fma_lanes``). A group of whole
vectors whose count tiles badly along a row (17 vectors of 8 along rows of 7) gets one vector more.

In a Relax function before LegalizeOps, ``y = R.nn.conv2d(x, w, groups=G)`` in NCHW/OIHW with static
shapes, ``F = G * Fg`` filters, becomes (``Fp`` the padded group)::

    wp = reshape(nn.pad(reshape(w, (G, Fg, K)), [0, 0, 0, Fp - Fg, 0, 0]), (G * Fp, C / G, kh, kw))
    yp = nn.conv2d(x, wp, groups=G)
    y = reshape(strided_slice(reshape(yp, (N, G, Fp, H, W)), axes=[2], begin=[0], end=[Fg]), (N, F, H, W))

The weight's padding is folded at compile time for a constant weight (FoldConstant), and runs
once per weight where LiftTransformParams lifts it. The padded conv is a plain conv of whole
vectors, which its default schedule (and tuning) handles as any other; the crop is injective,
so FuseOps fuses it with the elementwise epilogue after it (bias, batch norm, relu) into one
pass over the result (the PlaneCopy rule's: a parallel task a channel, its plane in vectors).
The PassContext option ``"relax.PadConvGroups.enable": False`` turns the pass off in
``tvms.compile``.
"""
from __future__ import annotations

from typing import Any

from ...ir import relax as rx
from ...ir.dtype import DataType
from ...ir.errors import TVMSError
from ...ir.expr import const
from ...ir.module import IRModule
from ...ir.relax_op import make_call
from ...ir.struct_info import static_dims
from ...ir.target import Target, as_target
from ..pass_registry import register_pass
from ..transform import module_pass
from .expr_functor import PyExprMutator, mutate_relax_functions
from .passes import tvm_print_order

# CPUs whose 512-bit FMAs run as two 256-bit halves (AMD Zen 4): per cycle, vectors of 256 bits
# do as many lanes' FMAs as vectors of 512
_HALF_RATE_512 = ("znver4",)


def fma_lanes(target: Any, dtype: Any) -> int:
    """The lanes of ``dtype`` of the narrowest vector whose FMAs reach the target's full rate:
    ``vector_lanes``, but 256 bits' worth on a CPU of ``_HALF_RATE_512``, where padding a group to
    whole 256-bit vectors wastes fewer lanes (68 channels to 72, not 80: 85 against 92 us for
    ShuffleNet's 272-channel 1x1 layer; 34 to 40, not 48: 102 against 120 us)."""
    from ..codegen.llvm_target import parse_llvm_target
    from ..dlight.analysis import vector_lanes

    lanes = vector_lanes(target, dtype)
    try:
        cpu = parse_llvm_target(str(target)).cpu
    except TVMSError:
        return lanes
    bits = int(dtype) if isinstance(dtype, int) else int(getattr(dtype, "bits", 32))
    return min(lanes, 256 // bits) if cpu in _HALF_RATE_512 else lanes


def padded_group(group_channels: int, lanes: int, vec: int) -> int | None:
    """The channels to pad a group of ``group_channels`` to (a multiple of ``lanes``) when that
    makes at least 1.5 times the use of the vector lanes that vectors of ``vec`` lanes make
    (68 channels in vectors of 4, padded to 72 in vectors of 8: 85 against 146 us); None when it
    does not."""
    padded = -(-group_channels // lanes) * lanes
    if group_channels < 2 or 2 * group_channels * lanes < 3 * vec * padded:
        return None
    return padded


def group_padding(groups: int, group_in: int, group_out: int, window: int, width: int, dtype: Any,
                  target: Any, height: int | None = None) -> int | None:
    """The output channels to pad each of a conv's ``groups`` to (``group_in`` input and
    ``group_out`` output channels a group, a ``window`` of kernel pixels, output rows of
    ``width``), or None to leave it: not grouped, depthwise, a short reduction (the crop's pass
    would cost what the vectors save), a group that already fills vectors well, or (``height``
    given: a float32 1x1 conv that reads its input in place) one the Conv2D rule computes faster
    in vectors of pixels, with no padding and no crop (``plane_tile``)."""
    from ..dlight.cpu_conv import channel_tile, tile_speed, vector_registers
    from ..dlight.cpu_tactics import vector_factor

    if groups == 1 or group_in == 1 or group_in * window < 16:
        return None
    if window == 1 and height is not None and DataType(str(dtype)) == DataType("float32"):
        from ..dlight.cpu_conv import plane_tile

        if plane_tile(groups, group_in, group_out, height, width, target) is not None:
            return None
    lanes = fma_lanes(target, dtype)
    padded = padded_group(group_out, lanes, vector_factor(group_out, lanes))
    if padded is None and group_out % lanes == 0:  # (whole vectors, maybe a prime count of them)
        registers = vector_registers(target)
        speed = lambda f: tile_speed(channel_tile(f, width, lanes, registers)) * group_out / f
        if speed(group_out + lanes) >= 1.2 * speed(group_out):
            padded = group_out + lanes
    return padded


def _shape(*dims: int) -> rx.ShapeExpr:
    return rx.ShapeExpr([const(d, "int64") for d in dims])


class _GroupPadder(PyExprMutator):
    def __init__(self, mod: IRModule, target: Any):
        super().__init__(mod)
        self.target = target

    def emit(self, op: str, args: list, attrs: dict | None = None) -> rx.Var:
        return self.builder_.emit(make_call(op, args, attrs or {}))

    def visit_call_(self, call: rx.Call) -> Any:
        call = self.visit_expr_post_order(call)  # (its struct info inferred)
        if getattr(call.op, "name", None) != "relax.nn.conv2d":
            return call
        a = call.attrs
        x, w = call.args
        kernel, out = static_dims(w.struct_info), static_dims(call.struct_info)
        dtype = DataType(str(call.struct_info.dtype))
        if (a["data_layout"], a["kernel_layout"], a["out_layout"] or "NCHW") != ("NCHW", "OIHW", "NCHW") or \
                None in (kernel, out) or not dtype.is_float:
            return call
        groups = a["groups"]
        n, filters, height, width = out
        group_out = filters // groups
        # (a 1x1's dilation changes nothing)
        in_place = all(int(v) == 1 for v in a["strides"]) and not any(int(v) for v in a["padding"])
        padded = group_padding(groups, kernel[1], group_out, kernel[2] * kernel[3], width, dtype, self.target,
                               height if in_place else None)
        if padded is None:
            return call
        rest = kernel[1] * kernel[2] * kernel[3]
        w = self.emit("reshape", [w, _shape(groups, group_out, rest)])
        w = self.emit("nn.pad", [w], {"pad_width": [0, 0, 0, padded - group_out, 0, 0]})
        w = self.emit("reshape", [w, _shape(groups * padded, *kernel[1:])])
        y = self.emit("nn.conv2d", [x, w], dict(a))
        y = self.emit("reshape", [y, _shape(n, groups, padded, height, width)])
        y = self.emit("strided_slice", [y, [2], [0], [group_out]])
        return make_call("reshape", [y, _shape(*out)])


@module_pass(opt_level=0, name="PadConvGroups")
class PadConvGroups:
    """Pads awkward groups of output channels of grouped convs to whole vectors of ``target``
    (module docstring; unless given, the current target, else the host's); the module unchanged
    for a target that is not llvm."""

    def __init__(self, target: Any = None):
        self.target = target

    def transform_module(self, mod: IRModule, ctx: Any = None) -> IRModule:
        target = as_target(self.target if self.target is not None else Target.current() or "llvm")
        if target.kind != "llvm":  # (the vector widths are a CPU's: a GPU's threads are not lanes)
            return mod
        return tvm_print_order(mutate_relax_functions(_GroupPadder(mod, target), mod))


register_pass("PadConvGroups", PadConvGroups, override=True)

__all__ = ["PadConvGroups", "fma_lanes", "group_padding", "padded_group"]
