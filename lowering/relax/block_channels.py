"""``BlockChannels(block)``: a network's convolutions, and the operators between them, computed on
channel-blocked data (``NCHW{b}c``, ``x[n, c // b, h, w, c % b]``, b the target's fp32 lanes).

Why: a conv kernel whose vectors run along the output channels (``cpu_conv.py``) must transpose
every tile of its result to store NCHW; on 16 lanes that is about two shuffles per output element,
as much as the FMAs of a 1x1 conv with 16-64 input channels. On blocked data the tile is stored as it
is, whole vectors, and the next conv reads its input pixels' channels side by side. onnxruntime runs
its x86 convolutions so (its NCHWc transformer), and so do TVM's x86 schedules.

What changes, in a Relax function before LegalizeOps:
- ``R.nn.conv2d`` in NCHW/OIHW with groups of one, static shapes and output channels that fill whole
  blocks (or nearly: zero filters fill the last) becomes ``data_layout="NCHW{b}c", kernel_layout="OIHW{b}i{b}o", out_layout="NCHW{b}c"``
  (a first layer whose few input channels do not fill a block reads its plain NCHW input, with
  ``OIHW{b}o``); its weight is relaid out by ``R.layout_transform``, which FoldConstant or
  LiftTransformParams runs once.
- Operators that take a blocked tensor stay blocked: elementwise ones (relu, clip, add, multiply, ...,
  with another blocked tensor of the same shape or a per-channel (1, C, 1, 1) / (C, 1, 1) operand,
  which is relaid out), max/avg pooling, adaptive average pooling, a mean over (H, W) keeping dims,
  and a concatenation of channels that fill whole blocks.
- Anything else that reads a converted tensor reads its NCHW form, made once by a
  ``layout_transform`` back, right before its first such use; the function's outputs stay NCHW.
- A region of blocked tensors (connected through those operators) that holds one conv only is
  left NCHW: its relayouts would cost what the conv saves (AlexNet's first layer, whose result
  goes to a local response normalization). A region starts at a conv whose input is plain:
  relaid out, or read as it is by a first layer whose few channels do not fill a block.
"""
from __future__ import annotations

from typing import Any

from ...ir import relax as rx
from ...ir.expr import const
from ...ir.index_map import IndexMap
from ...ir.module import IRModule
from ...ir.op import Op
from ...ir.relax_infer import int_of
from ...ir.relax_op import make_call
from ...ir.struct_info import TensorStructInfo
from ..pass_registry import register_pass
from ..transform import module_pass
from .expr_functor import PyExprMutator, mutate_relax_functions
from .passes import tvm_print_order

# elementwise operators whose attributes do not name an axis: they compute blocked data as plain
_UNARY = {"relax.nn.relu", "relax.clip", "relax.sigmoid", "relax.tanh", "relax.nn.silu", "relax.nn.gelu",
          "relax.nn.leakyrelu", "relax.exp", "relax.negative", "relax.sqrt", "relax.abs"}
_BINARY = {"relax.add", "relax.subtract", "relax.multiply", "relax.divide", "relax.maximum", "relax.minimum"}
_POOLS = {"relax.nn.max_pool2d", "relax.nn.avg_pool2d", "relax.nn.adaptive_avg_pool2d"}
_MEANS = {"relax.mean", "relax.sum", "relax.max"}


def _dims(expr: Any) -> tuple | None:
    """The static shape of a tensor expression; None when it is not one."""
    sinfo = getattr(expr, "struct_info", None)
    if not isinstance(sinfo, TensorStructInfo) or sinfo.dims is None:
        return None
    dims = tuple(int_of(d) for d in sinfo.dims)
    return None if None in dims else dims


def _to_blocks(block: int, ndim: int = 4) -> IndexMap:
    """(n, c, h, w) -> (n, c // b, h, w, c % b); for a kernel (o, i, h, w) -> (o // b, i // b, h,
    w, i % b, o % b) (``ndim`` 6) or (o // b, i, h, w, o % b) (``ndim`` 5: a plain input)."""
    if ndim == 6:
        return IndexMap.from_func(lambda o, i, h, w: (o // block, i // block, h, w, i % block, o % block))
    if ndim == 5:
        return IndexMap.from_func(lambda o, i, h, w: (o // block, i, h, w, o % block))
    return IndexMap.from_func(lambda n, c, h, w: (n, c // block, h, w, c % block))


def _from_blocks(block: int) -> IndexMap:
    return IndexMap.from_func(lambda n, c, h, w, b: (n, c * block + b, h, w))


class _Blocker(PyExprMutator):
    def __init__(self, mod: IRModule, block: int, lone: frozenset = frozenset()):
        super().__init__(mod)
        self.block = block
        self.lone = lone  # id(the conv variable a region starts at) whose region holds no other conv: left NCHW
        # regions of blocked variables connected through the operators between them (union-find
        # over id(variable)), each rooted at the conv it starts at, with its count of convs
        self.parent: dict[int, int] = {}
        self.convs: dict[int, int] = {}
        self.blocked: dict[int, rx.Var] = {}  # id(a plain variable) -> its blocked form
        self.unmade: dict[int, rx.Var] = {}  # id(a plain variable) -> itself, while only blocked
        self.forward: dict[int, rx.Var] = {}  # id(a plain variable) -> its blocked copy
        self.padded: set[int] = set()  # id(a plain variable) whose blocked form has zero channels added

    # -- the two forms of a tensor
    def blocked_form(self, x: Any) -> rx.Var:
        """``x`` (an argument, not yet visited) on blocked data: its converted producer's result,
        else a relaid-out copy (made once)."""
        if id(x) in self.blocked:
            return self.blocked[id(x)]
        if id(x) not in self.forward:
            self.forward[id(x)] = self.emit("layout_transform", [self.visit_expr(x)],
                                            {"index_map": _to_blocks(self.block)})
        return self.forward[id(x)]

    def visit_var_(self, var: rx.Var) -> Any:
        """A plain read of a variable known only blocked: its NCHW form, made here, once."""
        if id(var) in self.unmade:
            plain = self.unmade.pop(id(var))
            back = make_call("layout_transform", [self.blocked[id(var)]], {"index_map": _from_blocks(self.block)})
            if id(var) in self.padded:  # (the channels added to fill the last block dropped)
                channels = _dims(var)[1]
                back = make_call("strided_slice", [self.builder_.emit(back), [1], [0], [channels]], {})
            self.builder_.emit_normalized(rx.VarBinding(back, plain))
        return super().visit_var_(var)

    visit_dataflow_var_ = visit_var_

    def emit(self, op: str, args: list, attrs: dict) -> rx.Var:
        return self.builder_.emit(make_call(op, args, attrs))

    def is_blocked(self, x: Any) -> bool:
        return id(x) in self.blocked

    def root(self, key: int) -> int:
        while self.parent[key] != key:
            key = self.parent[key]
        return key

    def join_region(self, var: rx.Var, call: rx.Call) -> None:
        """Put ``var`` (just blocked) in the region of its blocked inputs (merging theirs), or in a
        new one (a conv whose input is plain); count it when it is a conv."""
        inputs = [a for arg in call.args for a in (arg.fields if isinstance(arg, rx.Tuple) else (arg,))]
        roots = {self.root(id(a)) for a in inputs if id(a) in self.parent}
        top = min(roots) if roots else id(var)
        self.convs.setdefault(top, 0)
        for other in roots - {top}:
            self.parent[other] = top
            self.convs[top] += self.convs.pop(other)
        self.parent[id(var)] = top
        self.convs[top] += call.op.name == "relax.nn.conv2d"

    def lone_regions(self) -> frozenset:
        """The regions (the conv variables they start at) with one conv: their blocking costs a
        relayout and saves only that conv's transpositions (AlexNet's first layer, whose result
        goes to a local response normalization)."""
        return frozenset(root for root, count in self.convs.items() if count == 1)

    # -- bindings
    def _rebuild_block(self, block: rx.BindingBlock, dataflow: bool) -> rx.BindingBlock:
        self.forward.clear()  # (a relaid-out copy is a variable of its own block only)
        return super()._rebuild_block(block, dataflow)

    def visit_var_binding_(self, binding: rx.VarBinding) -> None:
        value = binding.value
        if isinstance(binding.var, rx.DataflowVar) and isinstance(value, rx.Call) and isinstance(value.op, Op):
            made = self.rewrite(value, binding.var)
            if made is not None:
                self.join_region(binding.var, value)
                self.blocked[id(binding.var)] = made
                self.unmade[id(binding.var)] = binding.var
                dims = _dims(binding.var)
                if dims[1] % self.block:
                    self.padded.add(id(binding.var))
                return
        super().visit_var_binding_(binding)

    def rewrite(self, call: rx.Call, var: rx.Var) -> rx.Var | None:
        """The blocked form of ``call``'s result, emitted; None to leave the call as it is."""
        name, args = call.op.name, list(call.args)
        out = _dims(var)
        if out is None or len(out) != 4:
            return None
        if name == "relax.nn.conv2d":
            return None if id(var) in self.lone else self.conv2d(call, args, out)
        if out[1] % self.block and not (args and id(args[0]) in self.padded):
            return None  # (only a padded result's consumers carry its padding on)
        if name in _UNARY and self.is_blocked(args[0]):
            rest = [self.visit_expr(a) for a in args[1:]]
            return self.emit(name[len("relax."):], [self.blocked[id(args[0])]] + rest, dict(call.attrs))
        if name in _BINARY and any(self.is_blocked(a) for a in args) and \
                all(self.operand_kind(a, out) for a in args):
            return self.emit(name[len("relax."):], [self.operand(a, out) for a in args], dict(call.attrs))
        if name in _POOLS and self.is_blocked(args[0]) and call.attrs["layout"] == call.attrs["out_layout"] == "NCHW":
            layout = f"NCHW{self.block}c"
            return self.emit(name[len("relax."):], [self.blocked[id(args[0])]],
                             {**call.attrs, "layout": layout, "out_layout": layout})
        if name in _MEANS and self.is_blocked(args[0]) and call.attrs["keepdims"] and \
                sorted(int(a) % 4 for a in call.attrs["axis"] or ()) == [2, 3]:
            return self.emit(name[len("relax."):], [self.blocked[id(args[0])]], {**call.attrs, "axis": [2, 3]})
        if name == "relax.concat" and isinstance(args[0], rx.Tuple) and int(call.attrs["axis"]) % 4 == 1:
            parts = args[0].fields
            shapes = [_dims(p) for p in parts]
            if any(self.is_blocked(p) for p in parts) and not any(id(p) in self.padded for p in parts) and \
                    all(s and len(s) == 4 and s[1] % self.block == 0 for s in shapes):
                return self.emit("concat", [rx.Tuple([self.blocked_form(p) for p in parts])],
                                 {"axis": 1})
        return None

    def conv2d(self, call: rx.Call, args: list, out: tuple) -> rx.Var | None:
        a = call.attrs
        x, w = args
        shape, kernel = _dims(x), _dims(w)
        if (a["data_layout"], a["kernel_layout"], a["out_layout"] or "NCHW") != ("NCHW", "OIHW", "NCHW") or \
                a["groups"] != 1 or shape is None or kernel is None or str(call.struct_info.dtype) != "float32" \
                or id(x) in self.padded:
            return None
        channels, extra = shape[1], -out[1] % self.block
        if channels % self.block and channels > self.block // 2:
            return None  # (a plain input only for a first layer's few channels)
        if extra * 8 > out[1]:
            return None  # (zero filters to fill the last block: only where they cost little, 1000 -> 1008)
        plain_input = channels % self.block != 0
        layout = f"NCHW{self.block}c"
        w = self.visit_expr(w)
        if extra:
            w = self.emit("nn.pad", [w], {"pad_width": [0, extra, 0, 0, 0, 0, 0, 0]})
        w = self.emit("layout_transform", [w], {"index_map": _to_blocks(self.block, 5 if plain_input else 6)})
        data = self.visit_expr(x) if plain_input else self.blocked_form(x)
        kernel_layout = f"OIHW{self.block}o" if plain_input else f"OIHW{self.block}i{self.block}o"
        return self.emit("nn.conv2d", [data, w], {**a, "data_layout": "NCHW" if plain_input else layout,
                                                  "kernel_layout": kernel_layout, "out_layout": layout})

    def operand_kind(self, x: Any, out: tuple) -> str | None:
        """How an elementwise operand of a result of shape ``out`` is blocked: ``"blocked"`` (a
        converted variable), ``"channel"`` (a per-channel (1, C, 1, 1) or (C, 1, 1) one, reshaped
        and relaid out), ``"scalar"`` (as it is); None for anything else: a plain tensor of the
        result's shape stays plain, and the blocked operand goes back to NCHW (one relayout either
        way, and its NCHW form is often needed anyway: AlexNet's normalization divides its input
        by a plain tensor computed from it)."""
        if self.is_blocked(x):
            return "blocked"
        dims = _dims(x)
        if dims in ((), (1,)):
            return "scalar"
        if dims in ((out[1], 1, 1), (1, out[1], 1, 1)):
            return "channel"
        return None

    def operand(self, x: Any, out: tuple) -> Any:
        kind = self.operand_kind(x, out)
        if kind == "blocked":
            return self.blocked[id(x)]
        x = self.visit_expr(x)
        if kind == "channel":
            if len(_dims(x)) == 3:
                x = self.emit("reshape", [x, rx.ShapeExpr([const(d, "int64") for d in (1, out[1], 1, 1)])], {})
            if out[1] % self.block:  # (the padded channels' values: ones, which no operator turns infinite)
                x = self.emit("nn.pad", [x], {"pad_width": [0, 0, 0, -out[1] % self.block, 0, 0, 0, 0],
                                              "pad_value": 1.0})
            x = self.emit("layout_transform", [x], {"index_map": _to_blocks(self.block)})
        return x


@module_pass(opt_level=0, name="BlockChannels")
class BlockChannels:
    """Computes convolutions and the operators around them on NCHW{block}c data (module docstring)."""

    def __init__(self, block: int = 16):
        self.block = block

    def transform_module(self, mod: IRModule, ctx: Any = None) -> IRModule:
        blocker = _Blocker(mod, self.block)
        out = mutate_relax_functions(blocker, mod)
        lone = blocker.lone_regions()
        if lone:  # (again, with the convs those regions start at left NCHW)
            out = mutate_relax_functions(_Blocker(mod, self.block, lone), mod)
        return tvm_print_order(out)


register_pass("BlockChannels", BlockChannels, override=True)

__all__ = ["BlockChannels"]
