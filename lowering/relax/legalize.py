"""``LegalizeOps``: Relax operator calls become ``R.call_tir`` of TensorIR functions made with TE.

This mirrors ``tvm.relax.transform.LegalizeOps()`` of Apache TVM 0.27 for the operators listed in
``LEGALIZE``: each legalization builds the same TE computation as TVM's (topi's ``add``,
``transpose``, ``nn.relu``, the ``matmul`` of ``legalize_ops/linear_algebra.py``, ...) through
``call_te``, which names the PrimFunc's parameters after the Relax arguments and adds the PrimFunc
to the module under TVM's name (``add``, ``add1``, ...). Calls of operators without a
legalization are left as they are.
"""
from __future__ import annotations

from typing import Any, Callable

from ...ir import arith
from ...ir import relax as rx
from ...ir.dtype import DataType
from ...ir.errors import TVMSError
from ...ir.expr import (EQ, GE, GT, LE, LT, NE, Add, And, BufferLoad, Div, FloatImm, FloorDiv, FloorMod, IntImm,
                        IterVar, Mod, Mul, Op, Or, Range, Sub, Var)
from ...ir.expr import Call as PrimCall
from ...ir.op import get_op
from ...ir.stmt import BufferStore
from ...ir.visitor import Mutator, collect
from ...ir.module import IRModule
from ...ir.node import FrozenDict
from ...ir.relax_op import make_call
from ...ir.struct_info import ObjectStructInfo, PrimStructInfo, TensorStructInfo
from .. import te
from ..pass_registry import register_pass
from ..transform import module_pass
from .expr_functor import PyExprMutator
from .passes import tvm_print_order

class _NotLegalized(Exception):
    """Raised by a legalization for a case it does not cover: the call stays as it is."""


LegalizeFunc = Callable[[Any, rx.Call], Any]
LEGALIZE: dict[str, LegalizeFunc] = {}
# operators that, without a legalization (or with shapes it needs unknown), become a call of a
# packed function of the runtime, as TVM's FCallPacked: op -> (function name, whether it is pure)
CALL_PACKED: dict[str, tuple[str, bool]] = {}


def register_legalize(op_name: str) -> Callable[[LegalizeFunc], LegalizeFunc]:
    def add(f: LegalizeFunc) -> LegalizeFunc:
        LEGALIZE[op_name] = f
        return f
    return add


# ---------------------------------------------------------------- call_te
def _tensor_sinfo(expr: Any) -> TensorStructInfo | None:
    sinfo = getattr(expr, "struct_info", None)
    if isinstance(sinfo, TensorStructInfo) and sinfo.dims is not None and not sinfo.dtype.is_void:
        return sinfo
    return None


def call_te(bb: Any, fte: Callable, *args: Any, primfunc_name_hint: str | None = None) -> rx.Call:
    """TVM's ``BlockBuilder.call_te``: run ``fte`` on TE placeholders standing for the Relax
    tensor arguments (named after them), make a private PrimFunc of it, add it to the module and
    return the ``R.call_tir`` of it. Arguments that are not Relax expressions (scalars) pass
    through to ``fte`` unchanged; an ``R.prim_value`` of a symbolic size reaches ``fte`` as the
    size and becomes a scalar parameter of the PrimFunc, passed by the call."""
    func, rx_args, outs = gen_call_tir_inputs(fte, *args)
    gv = bb.add_func(func, primfunc_name_hint or fte.__name__)
    vdevice = _first_vdevice(args)  # (every output lives where the first placed argument lives, as in TVM)
    out_sinfo = tuple(TensorStructInfo(rx.ShapeExpr(tuple(o.shape)), o.dtype, vdevice=vdevice) for o in outs)
    return make_call("call_tir", [gv, rx.Tuple(tuple(rx_args))], {}, out_sinfo)


def _first_vdevice(args: Any) -> Any:
    """The vdevice of the first tensor argument that has one (in lists and dicts too), or None."""
    for a in args.values() if isinstance(args, dict) else args:
        if isinstance(a, (list, tuple, dict)):
            found = _first_vdevice(a)
        else:
            sinfo = getattr(a, "struct_info", None) if isinstance(a, rx.RelaxExpr) else None
            found = sinfo.vdevice if isinstance(sinfo, TensorStructInfo) else None
        if found is not None:
            return found
    return None


def gen_call_tir_inputs(fte: Callable, *args: Any) -> tuple:
    """What ``call_te`` builds before adding anything to the module (TVM's function of this
    name): the PrimFunc, the Relax arguments of its call, and the TE output tensors."""
    te_args, inputs, rx_args, params = [], [], [], []
    for a in args:
        if isinstance(a, rx.PrimValue) and isinstance(a.value, Var):
            te_args.append(a.value)
            if all(a.value is not p for p in params):  # (a size given twice is one parameter, as in TVM)
                params.append(a.value)
                rx_args.append(a)
        elif isinstance(a, rx.Var) and isinstance(a.struct_info, PrimStructInfo) and not a.struct_info.dtype.is_void:
            # a scalar variable (``y: R.Prim("float32")``) is a scalar parameter named after it,
            # passed by the call as it is (as TVM's call_te passes it)
            scalar = Var(a.name, a.struct_info.dtype)
            te_args.append(scalar)
            params.append(scalar)
            rx_args.append(a)
        elif isinstance(a, rx.RelaxExpr):
            sinfo = _tensor_sinfo(a)
            if sinfo is None:
                raise TVMSError(f"call_te: argument {a!r} is not a tensor of known shape and dtype")
            # TVM names a tensor argument that is not a variable (a constant) by its position
            name = a.name if isinstance(a, rx.Var) else chr(ord("A") + len(inputs))
            t = te.placeholder(sinfo.dims, str(sinfo.dtype), name=name)
            te_args.append(t)
            inputs.append(t)
            params.append(t)
            rx_args.append(a)
        else:
            te_args.append(a)
    out = fte(*te_args)
    outs = list(out) if isinstance(out, (list, tuple)) else [out]  # several: a tuple result
    sizes = _unbound_sizes(inputs + outs)
    # a symbolic size passed as a bare scalar is a parameter too, after the sizes (TVM's
    # ``shape_to_tensor`` of (n, m))
    scalars = []
    for a in args:
        if isinstance(a, Var) and all(a is not v for v in sizes + scalars):
            scalars.append(a)
    # a symbolic size the computation reads but no shape holds (R.strided_slice's begin ``index``)
    # is a scalar parameter too, as TVM's call_te finds it among the unbound variables
    known = {id(v) for v in sizes + scalars} | set(_size_vars(inputs + outs)) | {id(p) for p in params}
    scalars += [v for v in _body_vars(outs) if id(v) not in known]
    sizes += scalars
    func = _Int64Indices().visit(te.create_prim_func(params + sizes + outs, index_dtype_override="int64"))
    scalars += [p for p in params if isinstance(p, Var)]
    func = _OwnSizes(list(_size_vars(inputs + outs).values()) + scalars).visit(func)
    attrs = {k: v for k, v in func.attrs.items() if k != "global_symbol"}
    func = func.with_changes(attrs=FrozenDict(attrs))
    rx_args += [rx.PrimValue(v) for v in sizes]
    return func, rx_args, outs


class _OwnSizes(Mutator):
    """Gives the PrimFunc its own copy of each symbolic size of ``sizes`` (as TVM's call_te
    does), so that it shares no variable with the Relax function; each buffer is rebuilt once."""

    def __init__(self, sizes: list) -> None:
        self.copies = {id(v): type(v)(v.name, v.dtype) for v in sizes}
        self.buffers: dict = {}

    def visit_Var(self, v: Any) -> Any:
        return self.copies.get(id(v), v)

    def visit_Buffer(self, b: Any) -> Any:
        new = self.buffers.get(id(b))
        if new is None:
            new = self.buffers[id(b)] = self.generic_visit(b)
        return new


def _size_vars(tensors: list) -> dict:
    """The symbolic sizes the tensors' shapes use, by identity, in order of appearance."""
    used: dict = {}
    for t in tensors:
        for d in t.shape:
            for v in collect(d, Var):
                used.setdefault(id(v), v)
    return used


def _body_vars(outs: list) -> list:
    """The variables the computations of ``outs`` (and of the tensors they read) use other than
    their own axes, in order of first use."""
    found: dict = {}
    seen: set = set()
    stack = list(reversed(outs))
    while stack:
        t = stack.pop()
        op = t.op
        if not isinstance(op, te.ComputeOp) or id(op) in seen:
            continue
        seen.add(id(op))
        axes = {id(iv.var) for iv in (*op.axis, *op.reduce_axis)}
        body = op.body
        exprs = (body.source,) if isinstance(body, te.Reduce) else \
            (*body.sources, *body.identity) if isinstance(body, te.MultiReduce) else (body,)
        for e in exprs:
            for v in collect(e, Var):
                if id(v) not in axes and not v.dtype.is_handle:  # (a buffer's data is its tensor's)
                    found.setdefault(id(v), v)
        stack.extend(reversed(op.inputs))
    return list(found.values())


def _unbound_sizes(tensors: list) -> list:
    """The symbolic sizes the shapes use but no dimension is by itself (``n`` of a
    ``(n + 1) // 2`` dimension): the PrimFunc could not learn them from its buffers, so, as in
    TVM, they become scalar parameters before the outputs and the call passes them."""
    bound = {id(d) for t in tensors for d in t.shape if isinstance(d, Var)}
    return [v for k, v in _size_vars(tensors).items() if k not in bound]


class _Int64Indices(Mutator):
    """What ``te.create_prim_func(..., index_dtype_override="int64")`` changes in the functions
    that legalization makes: int32 constants among the indices (an iterator's start, a broadcast
    ``0`` index) become int64."""

    def visit_IterVar(self, iv: IterVar) -> IterVar:
        dom = iv.dom
        if dom is not None and iv.var.dtype == _I64 and _is_i32(dom.min):
            return iv.with_changes(dom=Range(IntImm(_I64, dom.min.value), dom.extent))
        return iv

    def visit_BufferLoad(self, load: BufferLoad) -> BufferLoad:
        return _widen_indices(self.generic_visit(load))

    def visit_BufferStore(self, store: BufferStore) -> Any:
        return _widen_indices(self.generic_visit(store))


def _widen_indices(access: Any) -> Any:
    """A buffer load or store with its int32 constant indices made int64."""
    if not any(_is_i32(i) for i in access.indices):
        return access
    return access.with_changes(indices=tuple(IntImm(_I64, i.value) if _is_i32(i) else i
                                             for i in access.indices))


_I64 = DataType("int64")


def _is_i32(x: Any) -> bool:
    return isinstance(x, IntImm) and x.dtype == DataType("int32")


# ---------------------------------------------------------------- topi-like computes
def _is_const(x: Any, value: int) -> bool:
    return isinstance(x, IntImm) and x.value == value


def _same(a: Any, b: Any) -> bool:
    from ...ir import structural_equal

    if isinstance(a, IntImm) and isinstance(b, IntImm):
        return a.value == b.value
    return a is b or structural_equal(a, b)


def _broadcast_shape(a: tuple, b: tuple) -> tuple:
    out = []
    for i in range(1, max(len(a), len(b)) + 1):
        da = a[-i] if i <= len(a) else None
        db = b[-i] if i <= len(b) else None
        if da is None:
            out.append(db)
        elif db is None or _same(da, db) or _is_const(db, 1):
            out.append(da)
        elif _is_const(da, 1):
            out.append(db)
        else:
            raise _NotLegalized  # two different symbolic sizes: not covered, the call stays
    return tuple(reversed(out))


def _broadcast_index(t: Any, out_shape: tuple, idx: tuple) -> list:
    """The indices into ``t`` for the output element ``idx`` (topi's InputIndexFromBroadcast)."""
    shape = tuple(t.shape)
    off = len(out_shape) - len(shape)
    return [IntImm(_I64, 0) if _is_const(d, 1) and not _is_const(out_shape[off + i], 1) else idx[off + i]
            for i, d in enumerate(shape)]


def _compute(shape: tuple, f: Callable, name: str, tag: str = "", prefix: str = "i",
             attrs: dict | None = None) -> te.Tensor:
    """``te.compute`` with the axes named ``{prefix}0, {prefix}1, ...``."""
    names = [f"{prefix}{i}" for i in range(len(shape))]
    return te.compute(shape, lambda *idx: f(idx), name=name, tag=tag, attrs=attrs, varargs_names=names)


def _binary_compute(name: str, fop: Callable) -> Callable:
    def compute(a: Any, b: Any) -> Any:
        a_t, b_t = isinstance(a, te.Tensor), isinstance(b, te.Tensor)
        if a_t and b_t:
            shape = _broadcast_shape(tuple(a.shape), tuple(b.shape))
            return _compute(shape, lambda idx: fop(a[tuple(_broadcast_index(a, shape, idx))],
                                                   b[tuple(_broadcast_index(b, shape, idx))]),
                            f"T_{name}", "broadcast", "ax")
        if a_t:
            return _compute(tuple(a.shape), lambda idx: fop(a[idx], b), f"T_{name}", "elemwise", "ax")
        if b_t:
            return _compute(tuple(b.shape), lambda idx: fop(a, b[idx]), f"T_{name}", "elemwise", "ax")
        raise TVMSError(f"legalize {name}: no tensor operand")

    compute.__name__ = name
    return compute


def _scalar_const(expr: Any) -> Any:
    """TVM's ``_try_convert_to_scalar_const``: a 0-d int/float constant becomes its value."""
    if isinstance(expr, rx.Constant):
        sinfo = expr.struct_info
        if isinstance(sinfo, TensorStructInfo) and sinfo.ndim == 0:
            dt = sinfo.dtype
            value = expr.data.item()
            if dt.is_float:
                return FloatImm(dt, float(value))
            if dt.is_int or dt.is_uint or dt.is_bool:
                return IntImm(dt, int(value))
    return expr


def _floor_divide(x: Any, y: Any) -> Any:
    """topi's floor_divide: ``floor(x / y)`` for floats, ``x // y`` (FloorDiv) for integers."""
    if arith.to_expr(x).dtype.is_float or arith.to_expr(y).dtype.is_float:
        q = arith.truediv(x, y)
        return PrimCall(q.dtype, get_op("tir.floor"), (q,))
    return arith.binary(FloorDiv, x, y)


def _power(x: Any, y: Any) -> Any:
    x, y = arith.match_types(x, y)
    return PrimCall(x.dtype, get_op("tir.pow"), (x, y))


def _floor_mod(x: Any, y: Any) -> Any:
    """topi's floor_mod: an integer FloorMod; for floats ``x - floor(x / y) * y``."""
    x, y = arith.match_types(x, y)
    if not x.dtype.is_float:
        return arith.binary(FloorMod, x, y)
    floor = PrimCall(x.dtype, get_op("tir.floor"), (arith.truediv(x, y),))
    return arith.binary(Sub, x, arith.binary(Mul, floor, y))


def _atan2(x: Any, y: Any) -> Any:
    x, y = arith.match_types(x, y)
    return PrimCall(x.dtype, get_op("tir.atan2"), (x, y))


def _log_add_exp(x: Any, y: Any) -> Any:
    """topi's log_add_exp as TVM 0.27 writes it: ``log(exp(x) + exp(y))``."""
    x, y = arith.match_types(x, y)
    exp = get_op("tir.exp")
    total = arith.binary(Add, PrimCall(x.dtype, exp, (x,)), PrimCall(y.dtype, exp, (y,)))
    return PrimCall(x.dtype, get_op("tir.log"), (total,))


_BINARY = {
    "add": lambda x, y: x + y,
    "subtract": lambda x, y: x - y,
    "multiply": lambda x, y: x * y,
    "divide": lambda x, y: arith.binary(Div, x, y),  # (TVM's div: of integers too, rounding towards zero)
    "maximum": lambda x, y: te.max(x, y),
    "minimum": lambda x, y: te.min(x, y),
    "floor_divide": _floor_divide,
    "power": _power,
    "equal": lambda x, y: arith.binary(EQ, x, y),
    "not_equal": lambda x, y: arith.binary(NE, x, y),
    "greater": lambda x, y: arith.binary(GT, x, y),
    "greater_equal": lambda x, y: arith.binary(GE, x, y),
    "less": lambda x, y: arith.binary(LT, x, y),
    "less_equal": lambda x, y: arith.binary(LE, x, y),
    "floor_mod": _floor_mod,
    "mod": lambda x, y: arith.binary(Mod, x, y),  # (TVM's truncmod, printed T.truncmod)
    "atan2": _atan2,
    "log_add_exp": _log_add_exp,
    "logical_and": lambda x, y: arith.binary(And, x, y),
    "logical_or": lambda x, y: arith.binary(Or, x, y),
    "logical_xor": lambda x, y: arith.bitwise_binary("^", x, y),  # (topi: bitwise_xor of bools)
    "bitwise_and": lambda x, y: arith.bitwise_binary("&", x, y),
    "bitwise_or": lambda x, y: arith.bitwise_binary("|", x, y),
    "bitwise_xor": lambda x, y: arith.bitwise_binary("^", x, y),
    "left_shift": lambda x, y: arith.bitwise_binary("<<", x, y),
    "right_shift": lambda x, y: arith.bitwise_binary(">>", x, y),
}


def _binary_legalize(name: str) -> LegalizeFunc:
    compute = _binary_compute(name, _BINARY[name])

    def legalize(bb: Any, call: rx.Call) -> Any:
        arg0, arg1 = (_prim_value_operand(a) for a in call.args)
        arg1 = _scalar_const(arg1)
        if isinstance(arg1, rx.RelaxExpr):
            arg0 = _scalar_const(arg0)
        return call_te(bb, compute, arg0, arg1, primfunc_name_hint=name)

    return legalize


def _prim_value_operand(expr: Any) -> Any:
    """An ``R.prim_value`` operand: its constant, which TVM's call_te writes into the body
    (``x[i] + T.float32(0.5)``); a symbolic one is not covered, the call stays."""
    if not isinstance(expr, rx.PrimValue):
        return expr
    if isinstance(expr.value, (IntImm, FloatImm)):
        return expr.value
    raise _NotLegalized


for _name in _BINARY:
    register_legalize(f"relax.{_name}")(_binary_legalize(_name))


@register_legalize("relax.nn.relu")
def _relu(bb: Any, call: rx.Call) -> Any:
    def relu(x: te.Tensor) -> te.Tensor:
        from ...ir.expr import const

        return _compute(tuple(x.shape), lambda i: te.max(x[i], const(0, str(x.dtype))), "compute",
                        "elemwise")

    return call_te(bb, relu, call.args[0], primfunc_name_hint="relu")


@register_legalize("relax.nn.gelu")
def _gelu(bb: Any, call: rx.Call) -> Any:
    from ...ir.expr import Call as PrimCall, const
    from ...ir.op import get_op

    mul, add = _binary_compute("multiply", _BINARY["multiply"]), _binary_compute("add", _BINARY["add"])

    def unary(t: te.Tensor, f: Callable) -> te.Tensor:
        return _compute(tuple(t.shape), lambda i: f(t[i]), "compute", "elemwise")

    def erf(t: te.Tensor) -> te.Tensor:
        return unary(t, lambda v: PrimCall(v.dtype, get_op("tir.erf"), (v,)))

    def gelu(x: te.Tensor) -> te.Tensor:
        dtype = str(x.dtype)
        erf_inp = mul(x, const(0.5 ** 0.5, dtype))
        if dtype == "float16":  # TVM computes the erf in float32
            e = unary(erf(unary(erf_inp, lambda v: arith.cast("float32", v))),
                      lambda v: arith.cast("float16", v))
        else:
            e = erf(erf_inp)
        return mul(x, add(const(0.5, dtype), mul(e, const(0.5, dtype))))

    return call_te(bb, gelu, call.args[0], primfunc_name_hint="gelu")


@register_legalize("relax.permute_dims")
def _permute_dims(bb: Any, call: rx.Call) -> Any:
    axes = call.attrs.get("axes")

    def transpose(x: te.Tensor) -> te.Tensor:
        n = len(x.shape)
        return transpose_compute(x, list(range(n - 1, -1, -1)) if axes is None else [int(a) % n for a in axes])

    return call_te(bb, transpose, call.args[0], primfunc_name_hint="transpose")


def transpose_compute(x: te.Tensor, perm: list) -> te.Tensor:
    """topi's transpose: output axis ``i`` is input axis ``perm[i]``."""
    def body(idx: tuple) -> Any:
        src = [None] * len(perm)
        for i, p in enumerate(perm):
            src[p] = idx[i]
        return x[tuple(src)]

    return _compute(tuple(x.shape[p] for p in perm), body, "T_transpose", "injective", "ax")


@register_legalize("relax.matmul")
def _matmul(bb: Any, call: rx.Call) -> Any:
    out_dtype = call.attrs.get("out_dtype")
    out_dtype = None if out_dtype is None or str(out_dtype) in ("", "void") else str(out_dtype)
    compute = matmul_te(tuple(call.struct_info.dims), str(call.struct_info.dtype), out_dtype, "matmul")
    return call_te(bb, compute, call.args[0], call.args[1], primfunc_name_hint="matmul")


def matmul_te(out_shape: tuple, result_dtype: str, out_dtype: str | None, name: str,
              transpose_b: bool = False) -> Callable:
    """The TE function of ``matmul(a, b)`` with numpy's broadcasting (a 1-d ``a`` is a row, a
    1-d ``b`` a column); ``transpose_b``: ``b`` holds its last two axes swapped (``NT_matmul``)."""

    def matmul(a: te.Tensor, b: te.Tensor) -> te.Tensor:
        a_shape, b_shape = list(a.shape), list(b.shape)
        a_prepended = len(a_shape) == 1
        b_appended = len(b_shape) == 1
        if a_prepended:
            a_shape.insert(0, IntImm(DataType("int64"), 1))
        if b_appended:
            b_shape.append(IntImm(DataType("int64"), 1))
        is_a_larger = len(a_shape) > len(b_shape)
        offset = abs(len(a_shape) - len(b_shape))
        if _is_const(a_shape[-1], 0) and not transpose_b:
            from ...ir.expr import const

            return _compute(out_shape, lambda idx: const(0, result_dtype), name)

        def body(idx: tuple) -> Any:
            k = te.reduce_axis((0, a_shape[-1]), name="k")
            a_idx, b_idx = [], []
            for i in range(offset):
                (a_idx if is_a_larger else b_idx).append(idx[i])
            for i in range(offset, len(out_shape) - (2 - a_prepended - b_appended)):
                a_dim = a_shape[i if is_a_larger else i - offset]
                b_dim = b_shape[i if not is_a_larger else i - offset]
                if not _same(a_dim, b_dim):
                    a_idx.append(IntImm(_I64, 0) if _is_const(a_dim, 1) else idx[i])
                    b_idx.append(IntImm(_I64, 0) if _is_const(b_dim, 1) else idx[i])
                else:
                    a_idx.append(idx[i])
                    b_idx.append(idx[i])
            if not a_prepended:
                a_idx.append(idx[-2 + b_appended])
            a_idx.append(k)
            column = [] if b_appended else [idx[-1]]
            b_idx += column + [k] if transpose_b else [k] + column
            x, y = a[tuple(a_idx)], b[tuple(b_idx)]
            if out_dtype is not None:
                x, y = arith.cast(out_dtype, x), arith.cast(out_dtype, y)
            return te.sum(x * y, axis=k)

        return _compute(out_shape, body, name)

    return matmul


# ---------------------------------------------------------------- the pass
def _shapes_known(sinfo: Any) -> bool:
    """TVM's ``KnowAllShapeValues``: tensors (of a known dtype) and shapes with known sizes,
    tuples of such, and scalars."""
    from ...ir.struct_info import PrimStructInfo, ShapeStructInfo, TupleStructInfo

    if isinstance(sinfo, TensorStructInfo):
        return sinfo.dims is not None and not sinfo.dtype.is_void
    if isinstance(sinfo, TupleStructInfo):
        return all(_shapes_known(f) for f in sinfo.fields)
    if isinstance(sinfo, ShapeStructInfo):
        return sinfo.values is not None
    return isinstance(sinfo, PrimStructInfo)


class _Legalizer(PyExprMutator):
    def __init__(self, mod: IRModule, table: dict, fallback: Callable[[rx.Call], Any] | None) -> None:
        super().__init__(mod)
        self.table = table
        self.fallback = fallback  # what becomes of a call the table does not lower

    def visit_call_(self, call: rx.Call) -> Any:
        call = self.visit_expr_post_order(call)
        if not isinstance(call, rx.Call) or not isinstance(call.op, Op):
            return call
        legalize = self.table.get(call.op.name)
        if legalize is None or not all(_shapes_known(getattr(e, "struct_info", None))
                                       for e in call.args + (call,)):
            # (TVM skips other calls whose shapes are not known)
            return call if self.fallback is None else self.fallback(call)
        try:
            return legalize(self.builder_, call)
        except _NotLegalized:
            return call


def _as_packed_call(call: rx.Call) -> rx.Call:
    """``call`` as the call of its runtime packed function (``CALL_PACKED``), else unchanged; a
    pure operator stays pure (``R.call_pure_packed``), as TVM's LegalizeOps wraps it."""
    if call.op.name not in CALL_PACKED:
        return call
    name, pure = CALL_PACKED[call.op.name]
    func = rx.ExternFunc(name, ObjectStructInfo())
    return make_call("call_pure_packed" if pure else "call_packed", [func, *call.args], {}, (call.struct_info,))


@module_pass(opt_level=0, name="LegalizeOps")
class LegalizeOps:
    """``relax.transform.LegalizeOps()``: lower the Relax operator calls that have a
    legalization to ``R.call_tir`` of PrimFuncs; other calls stay as they are."""

    def transform_module(self, mod: IRModule, ctx: Any = None) -> IRModule:
        return rewrite_calls(mod, LEGALIZE, _as_packed_call)


def rewrite_calls(mod: IRModule, table: dict[str, LegalizeFunc],
                  fallback: Callable[[rx.Call], Any] | None = None) -> IRModule:
    """``mod`` with each operator call of the table's operators (of known shapes) replaced by
    what its entry builds, and the other calls by ``fallback`` (LegalizeOps: their runtime
    packed functions) or left as they are (the backend dispatch passes, with their own tables)."""
    mutator = _Legalizer(mod, table, fallback)
    for gv, func in mod.functions_items():
        if isinstance(func, rx.Function):
            new = mutator.visit_expr(func)
            if new is not func:
                mutator.builder_.update_func(gv, new)
    return tvm_print_order(mutator.builder_.get())


register_pass("LegalizeOps", LegalizeOps, override=True)

# The other operator families register themselves into LEGALIZE when imported.
from . import legalize_create, legalize_image, legalize_index, legalize_manip, legalize_math, legalize_sort  # noqa: E402,F401,E501
from . import legalize_misc, legalize_nn, legalize_quant, legalize_relayout, legalize_scatter, legalize_sum  # noqa: E402,F401

__all__ = ["LEGALIZE", "LegalizeOps", "call_te", "matmul_te", "register_legalize", "rewrite_calls"]
