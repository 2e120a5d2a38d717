"""``DispatchSortScan`` for cumsum and cumprod: TVM 0.27's ``relax.backend.DispatchSortScan`` on a
CPU target, which LegalizeOps does not cover (TVM's LegalizeOps leaves the scans alone).

Each call becomes an ``R.call_tir`` of topi's generic scan kernel (``cumsum_generic`` /
``cumprod_generic``): a parallel loop over the positions outside the scanned axis, each running
the scan serially along it, with the flat indices spelled as topi's IR builder spells them
(``v // 4 * 3 * 4 + v % 4``), so that the PrimFunc prints as TVM's.
"""
from __future__ import annotations

from typing import Any

from ...ir import arith
from ...ir import relax as rx
from ...ir.buffer import decl_buffer
from ...ir.dtype import DataType, handle
from ...ir.expr import Add, BufferLoad, FloorDiv, FloorMod, IntImm, Mul, PrimExpr, Sub, Var, const
from ...ir.function import PrimFunc
from ...ir.node import FrozenDict
from ...ir.relax_op import make_call
from ...ir.stmt import PARALLEL, SERIAL, Block, BlockRealize, BufferStore, For, seq
from ...ir.struct_info import TensorStructInfo
from ..pass_registry import register_pass
from ..transform import module_pass
from .legalize import _NotLegalized, _OwnSizes, _size_vars, rewrite_calls

_I64 = DataType("int64")


def _times(a: Any, b: Any) -> Any:
    """``a * b`` where a Python 1 (topi's starting product) folds away."""
    if isinstance(a, int) and a == 1:
        return b
    if isinstance(b, int) and b == 1:
        return a
    return arith.binary(Mul, a, b)


def _product(dims: Any) -> Any:
    out: Any = 1
    for d in dims:
        out = _times(out, d)
    return out


def _unravel(flat: PrimExpr, shape: tuple) -> tuple:
    """The indices of flat position ``flat`` in a buffer of ``shape`` (the IR builder's form:
    the innermost index ``flat % d``, the outermost the remaining quotient)."""
    indices = []
    for i, d in enumerate(reversed(shape)):
        if i == len(shape) - 1:
            indices.append(flat)
        else:
            indices.append(arith.binary(FloorMod, flat, d))
            flat = arith.binary(FloorDiv, flat, d)
    return tuple(reversed(indices))


def _scan_kernel(data: Any, out_shape: tuple, out_dtype: DataType, axis: int | None, exclusive: bool,
                 combine: type, identity: int, name: str) -> PrimFunc:
    """topi's ``scanop`` kernel for ``data`` (a buffer) into a new buffer ``out_buf``."""
    shape = tuple(data.shape)
    if axis is None:  # over the flattened input
        length, before, after = _product(shape), 1, 1
    else:
        length, before, after = shape[axis], _product(shape[:axis]), _product(shape[axis + 1:])
    out = decl_buffer(out_shape, out_dtype, "out_buf")

    def load(buf: Any, flat: PrimExpr) -> BufferLoad:
        return BufferLoad(buf, _unravel(flat, tuple(buf.shape)))

    def store(flat: PrimExpr, value: PrimExpr) -> BufferStore:
        return BufferStore(out, value, _unravel(flat, out_shape))

    def cast(value: PrimExpr) -> PrimExpr:
        return value if value.dtype == out_dtype else arith.cast(out_dtype, value)

    fused, k0 = Var("v", _I64), Var("v", _I64)
    i = fused if isinstance(after, int) else arith.binary(FloorDiv, fused, after)
    j = None if isinstance(after, int) else arith.binary(FloorMod, fused, after)
    base = _times(_times(i, length), after)
    base = base if j is None else arith.binary(Add, base, j)
    k = arith.binary(Add, k0, IntImm(_I64, 1))
    cur = arith.binary(Add, base, _times(k, after))
    prev = arith.binary(Add, base, _times(Sub(k, IntImm(_I64, 1)), after))  # (k - 1 left unfolded, as topi's)
    first = const(identity, str(out_dtype)) if exclusive else cast(load(data, base))
    step = combine(load(out, prev), cast(load(data, prev if exclusive else cur)))
    extent = arith.binary(Sub, length, IntImm(_I64, 1))
    body = For(fused, IntImm(_I64, 0), _as_i64(_times(before, after)), PARALLEL,
               seq([store(base, first), For(k0, IntImm(_I64, 0), extent, SERIAL, store(cur, step))]))
    block = Block((), name_hint=f"{name}_generic", body=body)
    params = (Var("var_" + data.name, handle), Var("var_out_buf", handle))
    return PrimFunc(params, FrozenDict({params[0]: data, params[1]: out}), BlockRealize((), const(True), block),
                    None, FrozenDict({"tir.noalias": True}), True)


def _as_i64(extent: Any) -> PrimExpr:
    return IntImm(_I64, extent) if isinstance(extent, int) else extent


def _scan_dispatch(name: str, combine: type, identity: int) -> Any:
    def dispatch(bb: Any, call: rx.Call) -> Any:
        x = call.args[0]
        if not isinstance(x, rx.Var):
            raise _NotLegalized
        sinfo = x.struct_info
        axis = call.attrs["axis"]
        axis = None if axis is None else axis % len(sinfo.dims)
        out_dtype = call.attrs["dtype"] or sinfo.dtype
        # te.extern's input buffer: an element offset of its own (printed as a module TypeVar)
        data = decl_buffer(sinfo.dims, sinfo.dtype, x.name, elem_offset=Var("elem_offset", _I64))
        out_shape = (_product(sinfo.dims),) if axis is None else tuple(sinfo.dims)
        out_shape = tuple(IntImm(_I64, d) if isinstance(d, int) else d for d in out_shape)
        func = _scan_kernel(data, out_shape, out_dtype, axis, call.attrs["exclusive"], combine, identity, name)
        func = _OwnSizes(list(_size_vars([data]).values())).visit(func)  # (no variable shared with Relax)
        gv = bb.add_func(func, name)
        return make_call("call_tir", [gv, rx.Tuple((x,))], {},
                         (TensorStructInfo(rx.ShapeExpr(out_shape), out_dtype),))

    return dispatch


SCANS = {"relax.cumsum": _scan_dispatch("cumsum", Add, 0), "relax.cumprod": _scan_dispatch("cumprod", Mul, 1)}


@module_pass(opt_level=0, name="DispatchSortScan")
class DispatchSortScan:
    """``relax.backend.DispatchSortScan()`` for a CPU target: cumsum and cumprod become calls of
    the generic scan kernel (sort, argsort and topk are not covered)."""

    def transform_module(self, mod: Any, ctx: Any = None) -> Any:
        return rewrite_calls(mod, SCANS)


register_pass("DispatchSortScan", DispatchSortScan, override=True)

__all__ = ["DispatchSortScan"]
