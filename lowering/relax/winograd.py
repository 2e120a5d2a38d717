"""``WinogradConv2d(block)``: a 3x3 stride-1 convolution on channel-blocked data (``BlockChannels``'
``NCHW{b}c``) computed by Winograd's minimal filtering F(m x m, 3 x 3): per m x m tile of the
output, ``Y = A^T [(G g G^T) * (B^T d B)] A`` with ``d`` the tile's (m + 2)^2 input window and the
product elementwise, so the window's 9 m^2 multiply-adds per channel pair become (m + 2)^2: 4x
fewer at m = 4 (``A``, ``B``, ``G`` are exact, from ``winograd_matrices``).

The call becomes four kernels (alpha = m + 2, t = e * alpha + v one of the alpha^2 tile positions,
p = (n, ty, tx) a tile, b the channel block)::

    U[t, K // b, C // b, C % b, K % b] = (G g G^T)[e, v]      winograd_weight (weights only: constant
                                                                ones folded at compile time, lifted ones
                                                                run once, parameters at each call)
    V[t, C // b, p, C % b]             = (B^T d_p B)[e, v]     winograd_data   (d_p: of the input padded
                                                                by R.nn.pad)
    M[t, K // b, p, K % b]             = sum_C V[t, .., p, ..] U[t, .., ..]   winograd_gemm (alpha^2 GEMMs)
    Y[n, K // b, y, x, K % b]          = (A^T M_p A)[y % m, x % m]          winograd_output

The data and output kernels are made by hand: one block per tile and lane of channels, storing
each of the tile's values in turn as its nonzero terms (no multiply by a zero coefficient is left
for LLVM, which may not drop it). ``winograd_output`` is fusable as a convolution is (``op_pattern``
OUT_EWISE_FUSABLE: bias, batch norm, a residual add and relu fuse into it); the other three are
opaque. Each kernel's block carries ``schedule_rule`` (``winograd_*``) for the default CPU
rules (``dlight/cpu_winograd.py``) and for tuning's ApplyCustomRule.

Taken: float32 data ``NCHW{b}c``, weights ``OIHW{b}i{b}o`` of 3x3, output ``NCHW{b}c``, stride and
dilation of one, no groups, static shapes and enough work (``_worth_it``); other convolutions are
left as they are. The tiles are 4 x 4 (m = 4): where the output's rows or columns are not a
multiple of 4, the last tiles overhang it, reading zeros (the input is padded further) and storing
only what lies inside. F(2x2, 3x3) computes a 14 x 14 output with 2.25x fewer multiply-adds than
the direct convolution where F(4x4, 3x3), overhanging, has 3.1x fewer.
The PassContext option ``"relax.WinogradConv2d.enable": False`` turns the pass off.
"""
from __future__ import annotations

from fractions import Fraction
from functools import reduce
from math import lcm
from typing import Any

from ...ir import relax as rx
from ...ir.buffer import Buffer, BufferRegion, decl_buffer
from ...ir.dtype import DataType, handle
from ...ir.expr import (DATA_PAR, EQ, LT, And, BufferLoad, FloorDiv, FloorMod, IntImm, IterVar, Min, Range, Select,
                        Var, const)
from ...ir.function import PrimFunc
from ...ir.module import IRModule
from ...ir.node import FrozenDict
from ...ir.stmt import SERIAL, Block, BlockRealize, BufferStore, For, IfThenElse, seq
from ...ir.relax_op import make_call
from ...ir.struct_info import TensorStructInfo, static_dims
from .. import te
from ..pass_registry import register_pass
from ..transform import module_pass
from .expr_functor import PyExprMutator, mutate_relax_functions
from .ir_kernels import call_kernel
from .legalize import gen_call_tir_inputs
from .legalize_manip import channel_block
from .op_pattern import OPAQUE, OUT_EWISE_FUSABLE
from .passes import tvm_print_order

SCHEDULE_RULE = "schedule_rule"
WEIGHT_RULE, DATA_RULE, GEMM_RULE, OUTPUT_RULE = ("winograd_weight", "winograd_data", "winograd_gemm",
                                                  "winograd_output")
# the interpolation points, in the order they are taken (the last point is infinity): small
# integers and halves keep the matrices' entries small, which keeps float32's error small
_POINTS = (0, 1, -1, 2, -2, Fraction(1, 2), Fraction(-1, 2))
_I64 = DataType("int64")


def winograd_matrices(m: int, r: int = 3) -> tuple[list, list, list]:
    """``(A^T, G, B^T)`` of F(m, r) as exact fractions: ``A^T`` m x alpha, ``G`` alpha x r, ``B^T``
    alpha x alpha (alpha = m + r - 1), such that the correlation ``y[i] = sum_k g[k] d[i + k]``
    of alpha inputs is ``A^T [(G g) * (B^T d)]``.

    Why they are so (Toom-Cook, transposed): evaluating polynomials at the points (and taking the
    leading coefficient at infinity) is a Vandermonde matrix ``V_k`` (alpha x k, for k
    coefficients); the product of ``g`` and ``h`` is ``V_alpha^-1 [(V_r g) * (V_m h)]``, a
    linear map of ``h`` whose transpose is the correlation: ``A^T = V_m^T``, ``G = V_r``,
    ``B^T = V_alpha^-T``. Each row of ``B^T`` is scaled to integers and the same row of ``G``
    divided by the scale."""
    alpha = m + r - 1
    if not 2 <= alpha <= len(_POINTS) + 1:
        raise ValueError(f"F({m}, {r}) needs {alpha - 1} finite points; there are {len(_POINTS)}")
    points = [Fraction(p) for p in _POINTS[:alpha - 1]]

    def vandermonde(cols: int) -> list:
        return [[p ** k for k in range(cols)] for p in points] + [[Fraction(int(k == cols - 1)) for k in range(cols)]]

    a_t = [list(col) for col in zip(*vandermonde(m))]
    g = vandermonde(r)
    b_t = [list(col) for col in zip(*_inverse(vandermonde(alpha)))]
    for j, row in enumerate(b_t):
        scale = reduce(lcm, (x.denominator for x in row), 1)
        b_t[j] = [x * scale for x in row]
        g[j] = [x / scale for x in g[j]]
    return a_t, g, b_t


def _inverse(matrix: list) -> list:
    """The inverse of a square matrix of fractions (Gauss-Jordan; the Vandermonde matrices here
    are invertible: their points are distinct)."""
    n = len(matrix)
    rows = [list(row) + [Fraction(int(i == j)) for j in range(n)] for i, row in enumerate(matrix)]
    for col in range(n):
        pivot = next(i for i in range(col, n) if rows[i][col] != 0)
        rows[col], rows[pivot] = rows[pivot], rows[col]
        rows[col] = [x / rows[col][col] for x in rows[col]]
        for i in range(n):
            if i != col and rows[i][col] != 0:
                rows[i] = [x - rows[i][col] * y for x, y in zip(rows[i], rows[col])]
    return [row[n:] for row in rows]


def _combine(coefs: list, terms: list) -> Any:
    """``sum coefs[i] * terms[i]`` of the nonzero coefficients, a coefficient of +-1 as an add or
    a subtract (the terms are float32 expressions)."""
    out = None
    for c, term in zip(coefs, terms):
        if c == 0:
            continue
        if abs(c) != 1:
            term = const(float(abs(c)), term.dtype) * term
        out = term if out is None and c > 0 else (const(0.0, term.dtype) - term if out is None
                                                  else out + term if c > 0 else out - term)
    return out if out is not None else const(0.0, terms[0].dtype)


def _select(index: Any, values: list) -> Any:
    """``values[index]`` as a chain of ``Select``s (constant once ``index`` is: unrolled)."""
    out = values[-1]
    for k in range(len(values) - 2, -1, -1):
        out = Select(EQ(index, IntImm(index.dtype, k)), values[k], out)
    return out


def _i64(v: int) -> IntImm:
    return IntImm(_I64, v)


class WinogradPlan:
    """One convolution's Winograd form: output tile ``m``, the blocked shapes, and its four kernels
    (``weight`` and ``gemm`` TE computations; ``data`` and ``output`` PrimFuncs made by hand, see
    ``_tile_kernel``)."""

    def __init__(self, m: int, data_shape: tuple, weight_shape: tuple, out_shape: tuple, padding: tuple):
        self.m, self.alpha = m, m + 2
        self.a_t, self.g, self.b_t = winograd_matrices(m)
        self.n, self.cb, _, _, self.block = data_shape
        self.kb = weight_shape[0]
        self.out_shape = out_shape
        self.padding = padding
        self.th, self.tw = -(-out_shape[2] // m), -(-out_shape[3] // m)  # (the last tiles may overhang)
        self.tiles = self.n * self.th * self.tw

    def weight(self, kernel: te.Tensor) -> te.Tensor:
        ky = te.reduce_axis((0, _i64(3)), name="ky")
        kx = te.reduce_axis((0, _i64(3)), name="kx")
        dtype = str(kernel.dtype)
        g = [[const(float(x), dtype) for x in row] for row in self.g]

        def coef(row: Any, k: Any) -> Any:  # G[row, k] of loop variables
            return _select(row, [_select(k, g[e]) for e in range(self.alpha)])

        def body(t: Any, ko: Any, co: Any, ci: Any, ki: Any) -> Any:
            e, v = FloorDiv(t, _i64(self.alpha)), FloorMod(t, _i64(self.alpha))
            return te.sum(coef(e, ky.var) * coef(v, kx.var) * kernel[ko, co, ky.var, kx.var, ci, ki], axis=[ky, kx])

        shape = (self.alpha ** 2, self.kb, self.cb, self.block, self.block)
        return te.compute(tuple(map(_i64, shape)), body, name="winograd_weight", attrs={SCHEDULE_RULE: WEIGHT_RULE})

    def data(self, padded: Buffer, out: Buffer) -> PrimFunc:
        """Per (channel block, tile, lane): the tile position ``t``'s value ``(B^T d B)[e, v]``,
        ``d`` the tile's window of the padded input (``B^T d`` first: its entries recur across
        ``v``, and LLVM computes each once)."""
        m, alpha = self.m, self.alpha

        def stores(c: Var, n: Var, ty: Var, tx: Var, lane: Var) -> list:
            rows = [ty * _i64(m) + _i64(i) for i in range(alpha)]
            cols = [tx * _i64(m) + _i64(j) for j in range(alpha)]
            d = [[BufferLoad(padded, (n, c, rows[i], cols[j], lane)) for j in range(alpha)] for i in range(alpha)]
            left = [[_combine(self.b_t[e], [d[i][j] for i in range(alpha)]) for j in range(alpha)]
                    for e in range(alpha)]
            tile = self.tile_index(n, ty, tx)
            return [BufferStore(out, _combine(self.b_t[v], left[e]), (_i64(e * alpha + v), c, tile, lane))
                    for e in range(alpha) for v in range(alpha)]

        def regions(c: Var, n: Var, ty: Var, tx: Var, lane: Var) -> tuple:
            window = [Range(ty * _i64(m), _i64(alpha)), Range(tx * _i64(m), _i64(alpha))]
            return ([BufferRegion(padded, (_point(n), _point(c), *window, _point(lane)))],
                    [BufferRegion(out, (Range(_i64(0), _i64(alpha * alpha)), _point(c),
                                        _point(self.tile_index(n, ty, tx)), _point(lane)))])

        extents = (self.cb, self.n, self.th, self.tw, self.block)
        return _tile_kernel("winograd_data", DATA_RULE, [padded, out], ("c", "n", "ty", "tx", "lane"), extents,
                            stores, regions)

    def tile_range(self, t: Any, extent: int) -> Range:
        """The output rows (or columns) of tile row ``t``: m, fewer in an overhanging last tile."""
        if extent % self.m == 0:
            return Range(t * _i64(self.m), _i64(self.m))
        return Range(t * _i64(self.m), Min(_i64(self.m), _i64(extent) - t * _i64(self.m)))

    def tile_index(self, n: Any, ty: Any, tx: Any) -> Any:
        """The tile ``p`` of tile row ``ty`` and column ``tx`` of image ``n``."""
        return (n * _i64(self.th) + ty) * _i64(self.tw) + tx

    def gemm(self, v: te.Tensor, u: te.Tensor) -> te.Tensor:
        c = te.reduce_axis((0, _i64(self.cb * self.block)), name="c")
        b = _i64(self.block)

        def body(t: Any, ko: Any, p: Any, ki: Any) -> Any:
            return te.sum(v[t, FloorDiv(c.var, b), p, FloorMod(c.var, b)] * u[t, ko, FloorDiv(c.var, b),
                                                                               FloorMod(c.var, b), ki], axis=[c])

        shape = (self.alpha ** 2, self.kb, self.tiles, self.block)
        return te.compute(tuple(map(_i64, shape)), body, name="winograd_gemm", attrs={SCHEDULE_RULE: GEMM_RULE})

    def output(self, gemm: Buffer, out: Buffer) -> PrimFunc:
        """Per (image, output block, tile, lane): the tile's m x m outputs ``(A^T M_p A)[a, b]``
        (``A^T M_p`` first: its entries recur across ``b``)."""
        m, alpha = self.m, self.alpha

        def stores(n: Var, ko: Var, ty: Var, tx: Var, lane: Var) -> list:
            tile = self.tile_index(n, ty, tx)
            s = [[BufferLoad(gemm, (_i64(e * alpha + v), ko, tile, lane)) for v in range(alpha)] for e in range(alpha)]
            left = [[_combine(self.a_t[a], [s[e][v] for e in range(alpha)]) for v in range(alpha)]
                    for a in range(m)]
            y = [ty * _i64(m) + _i64(a) for a in range(m)]
            x = [tx * _i64(m) + _i64(b) for b in range(m)]
            return [_guarded(BufferStore(out, _combine(self.a_t[b], left[a]), (n, ko, y[a], x[b], lane)),
                             [(y[a], self.out_shape[2]) if a >= self.out_shape[2] % m > 0 else None,
                              (x[b], self.out_shape[3]) if b >= self.out_shape[3] % m > 0 else None])
                    for a in range(m) for b in range(m)]

        def regions(n: Var, ko: Var, ty: Var, tx: Var, lane: Var) -> tuple:
            tile = self.tile_index(n, ty, tx)
            return ([BufferRegion(gemm, (Range(_i64(0), _i64(alpha * alpha)), _point(ko), _point(tile), _point(lane)))],
                    [BufferRegion(out, (_point(n), _point(ko), self.tile_range(ty, self.out_shape[2]),
                                        self.tile_range(tx, self.out_shape[3]), _point(lane)))])

        extents = (self.n, self.kb, self.th, self.tw, self.block)
        return _tile_kernel("winograd_output", OUTPUT_RULE, [gemm, out], ("n", "ko", "ty", "tx", "lane"), extents,
                            stores, regions)


def _guarded(store: BufferStore, bounds: list) -> Any:
    """``store`` under the conditions ``index < extent`` of the ``(index, extent)`` in ``bounds``
    (None: always inside)."""
    conditions = [LT(i, _i64(e)) for i, e in (b for b in bounds if b is not None)]
    if not conditions:
        return store
    return IfThenElse(reduce(And, conditions), store, None)


def _point(index: Any) -> Range:
    return Range(index, _i64(1))


def _tile_kernel(name: str, rule: str, buffers: list, names: tuple, extents: tuple, stores: Any,
                 regions: Any) -> PrimFunc:
    """A PrimFunc of one loop nest over ``extents`` around one block (annotated ``schedule_rule``)
    whose body is ``stores(*block iterators)`` and whose accesses are ``regions(*iterators)``:
    hand-made where TE would make one store of a ``Select`` among all of them."""
    loop_vars = [Var(n, _I64) for n in names]
    block_vars = [Var(f"v_{n}", _I64) for n in names]
    reads, writes = regions(*block_vars)
    block = Block(tuple(IterVar(Range(_i64(0), _i64(e)), v, DATA_PAR) for v, e in zip(block_vars, extents)),
                  reads=tuple(reads), writes=tuple(writes), name_hint=name, body=seq(stores(*block_vars)),
                  annotations=FrozenDict({SCHEDULE_RULE: rule}))
    nest: Any = BlockRealize(tuple(loop_vars), const(True), block)
    for v, e in zip(reversed(loop_vars), reversed(extents)):
        nest = For(v, _i64(0), _i64(e), SERIAL, nest)
    params = tuple(Var(b.name, handle) for b in buffers)
    root = Block((), name_hint="root", body=nest)
    return PrimFunc(params, FrozenDict(zip(params, buffers)), BlockRealize((), const(True), root), None,
                    FrozenDict({"tir.noalias": True}), True)


def _static(expr: Any) -> tuple | None:
    """The static shape of a float32 tensor expression; None for anything else."""
    sinfo = getattr(expr, "struct_info", None)
    return static_dims(sinfo) if isinstance(sinfo, TensorStructInfo) and str(sinfo.dtype) == "float32" else None


def plan_for(call: rx.Call, block: int) -> WinogradPlan | None:
    """The Winograd form of ``call`` when it is a convolution this pass takes (module docstring)."""
    if getattr(call.op, "name", None) != "relax.nn.conv2d":
        return None
    a = call.attrs
    if (channel_block(a["data_layout"]) != block or a["kernel_layout"] != f"OIHW{block}i{block}o"
            or a["out_layout"] != a["data_layout"] or a["groups"] != 1 or list(a["strides"]) != [1, 1]
            or list(a["dilation"]) != [1, 1]):
        return None
    data, weight, out = _static(call.args[0]), _static(call.args[1]), _static(call)
    if None in (data, weight, out) or weight[2:4] != (3, 3):
        return None
    plan = WinogradPlan(4, data, weight, out, tuple(int(x) for x in a["padding"]))
    return plan if _worth_it(plan) else None


def _worth_it(plan: WinogradPlan) -> bool:
    """Whether the transforms and the larger transformed weights (alpha^2 / 9 times the conv's) cost
    less than the multiply-adds saved: two blocks of output channels or more, 16 tiles or more,
    channels x channels x tiles of 32K or more, and the GEMMs at least 2x fewer multiply-adds than
    the direct convolution (an output of a few pixels fills a tile's 16 poorly: a 1 x 2 output does
    twice the direct convolution's). One thread (default schedules, Zen 5), both
    convolutions of conv-relu-conv-relu, direct against Winograd: 64 -> 64 at 56x56 0.94 against
    0.33 ms, 512 -> 512 at 14x14 (16 tiles of which 3 overhang) 3.84 against 2.25, 64 -> 64 at
    14x14 0.059 against 0.043, 32 -> 32 at 14x14 (16K) 0.017 against 0.019."""
    saved = 9 * plan.out_shape[2] * plan.out_shape[3] / (plan.alpha ** 2 * plan.th * plan.tw)
    return (plan.kb >= 2 and plan.tiles >= 16 and plan.cb * plan.kb * plan.block ** 2 * plan.tiles >= 32768
            and saved >= 2)


class _Rewriter(PyExprMutator):
    def __init__(self, mod: IRModule, block: int):
        super().__init__(mod)
        self.block = block

    def visit_call_(self, call: rx.Call) -> Any:
        call = self.visit_expr_post_order(call)
        plan = plan_for(call, self.block) if isinstance(call, rx.Call) else None
        if plan is None:
            return call
        emit = self.builder_.emit
        u = emit(self._te_call(plan.weight, call.args[1]))
        top, left, bottom, right = plan.padding
        bottom += plan.th * plan.m - plan.out_shape[2]  # (zeros for the overhanging tiles to read)
        right += plan.tw * plan.m - plan.out_shape[3]
        padded = emit(make_call("nn.pad", [call.args[0]], {"pad_width": [0, 0, 0, 0, top, bottom, left, right, 0, 0],
                                                            "pad_value": 0.0}))
        v = emit(self._tir_call(plan.data, padded, (plan.alpha ** 2, plan.cb, plan.tiles, plan.block)))
        gemm = emit(self._te_call(plan.gemm, v, u))
        return self._tir_call(plan.output, gemm, plan.out_shape, OUT_EWISE_FUSABLE)

    def _te_call(self, fte: Any, *args: Any) -> rx.Call:
        func, rx_args, outs = gen_call_tir_inputs(fte, *args)
        return call_kernel(self.builder_, func.with_attr("op_pattern", OPAQUE), f"winograd_{fte.__name__}",
                           rx_args, outs[0])

    def _tir_call(self, make: Any, arg: rx.Expr, out_shape: tuple, pattern: int = OPAQUE) -> rx.Call:
        """The call of the hand-made kernel ``make(source, out)`` on ``arg``, giving ``out_shape``
        in ``arg``'s dtype."""
        sinfo = arg.struct_info
        source = decl_buffer(tuple(sinfo.dims), str(sinfo.dtype), "x")
        out = decl_buffer(tuple(map(_i64, out_shape)), str(sinfo.dtype), "y")
        return call_kernel(self.builder_, make(source, out).with_attr("op_pattern", pattern),
                           f"winograd_{make.__name__}", [arg], out)


@module_pass(opt_level=0, name="WinogradConv2d")
class WinogradConv2d:
    """Computes the 3x3 stride-1 blocked convolutions it takes by Winograd's F(m x m, 3 x 3)
    (module docstring); ``block`` is BlockChannels' channel block."""

    def __init__(self, block: int = 16):
        self.block = block

    def transform_module(self, mod: IRModule, ctx: Any = None) -> IRModule:
        return tvm_print_order(mutate_relax_functions(_Rewriter(mod, self.block), mod))


register_pass("WinogradConv2d", WinogradConv2d, override=True)

__all__ = ["WinogradConv2d", "WinogradPlan", "plan_for", "winograd_matrices"]
