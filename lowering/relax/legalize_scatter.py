"""LegalizeOps for scatter_elements, as TVM 0.27 builds it on CPU: ``topi.scatter_elements``'s
IR-builder kernel (``te.extern``), one opaque block ``scatter_elements_generic`` in a sequential
scope that copies the data, then applies every update in order of the indices (flat positions
spelled as the IR builder spells them, see ``ir_kernels``)."""
from __future__ import annotations

from typing import Any

from ...ir import arith
from ...ir import relax as rx
from ...ir.buffer import decl_buffer
from ...ir.dtype import DataType
from ...ir.expr import LT, Add, BufferLoad, Cast, Div, FloorDiv, FloorMod, IntImm, Max, Min, Mul, StringImm, Var
from ...ir.stmt import PARALLEL, SERIAL, AttrStmt, BufferStore, For, seq
from .ir_kernels import _extern_func, _unravel, call_kernel, product
from .legalize import _NotLegalized, _tensor_sinfo, register_legalize

_I64 = DataType("int64")
# reduction -> the new value from the old one and the update, as topi's update functions write it
_REDUCE = {
    "update": lambda old, new: new, "add": lambda old, new: arith.binary(Add, old, new),
    "mul": lambda old, new: arith.binary(Mul, old, new), "min": lambda old, new: Min(old, new),
    "max": lambda old, new: Max(old, new),
    "mean": lambda old, new: arith.binary(Div, arith.binary(Add, old, new), 2),
}


def _input_buffers(args: list) -> list:
    """The buffers te.extern declares for the inputs: each with an element offset of its own,
    named as TVM prints them (the last input's first)."""
    names = ["elem_offset"] + [f"elem_offset_{k}" for k in range(1, len(args))]
    return [decl_buffer(a.struct_info.dims, a.struct_info.dtype, a.name,
                        elem_offset=Var(names[len(args) - 1 - k], _I64)) for k, a in enumerate(args)]


def _scatter_elements_kernel(data: Any, indices: Any, updates: Any, out: Any, axis: int, reduce: Any) -> Any:
    shape, ind_shape = tuple(data.shape), tuple(indices.shape)
    axis_range = arith.cast(indices.dtype, shape[axis])
    after = product(shape[axis + 1:])
    before_stride = arith.binary(Mul, axis_range, after)
    ind_after = product(ind_shape[axis + 1:])
    ind_before_stride = arith.binary(Mul, ind_shape[axis], ind_after)

    def load(buf: Any, flat: Any) -> BufferLoad:
        return BufferLoad(buf, _unravel(flat, tuple(buf.shape)))

    v = Var("v", _I64)
    copy = For(v, IntImm(_I64, 0), product(shape), PARALLEL,
               BufferStore(out, load(data, v), _unravel(v, shape)))
    fused, k = Var("v", _I64), Var("v", _I64)
    i, j = arith.binary(FloorDiv, fused, ind_after), arith.binary(FloorMod, fused, ind_after)
    index1 = arith.binary(Add, arith.binary(Add, arith.binary(Mul, i, ind_before_stride), j),
                          arith.binary(Mul, k, ind_after))
    new = load(indices, index1)
    shifted = arith.binary(Add, new, arith.binary(Mul, LT(new, IntImm(new.dtype, 0)), axis_range))
    index2 = arith.binary(Add, arith.binary(Add, arith.binary(Mul, i, before_stride), j),
                          arith.binary(Mul, shifted, after))
    target = _unravel(index2, shape)
    update = BufferStore(out, reduce(BufferLoad(out, target), load(updates, index1)), target)
    scatter = For(fused, IntImm(_I64, 0), product(ind_shape[:axis] + ind_shape[axis + 1:]), PARALLEL,
                  For(k, IntImm(_I64, 0), ind_shape[axis], SERIAL, update))
    body = AttrStmt(0, "pragma_scope", StringImm("seq"), seq([copy, scatter]))  # (over the node 0)
    return _extern_func("scatter_elements_generic", body, (data, indices, updates, out))


@register_legalize("relax.scatter_elements")
def _scatter_elements(bb: Any, call: rx.Call) -> Any:
    args = list(call.args)
    if not all(isinstance(a, rx.Var) and _tensor_sinfo(a) is not None for a in args) \
            or call.attrs["reduction"] not in _REDUCE:
        raise _NotLegalized
    data, indices, updates = _input_buffers(args)
    out = decl_buffer(data.shape, data.dtype, "out_buf")
    func = _scatter_elements_kernel(data, indices, updates, out, call.attrs["axis"] % len(data.shape),
                                    _REDUCE[call.attrs["reduction"]])
    return call_kernel(bb, func, "scatter_elements", args, out)
