"""LegalizeOps for scatter_elements, index_put and scatter_nd, as TVM 0.27 builds them on CPU:
topi's IR-builder kernels (``te.extern``), each one opaque block ``<name>_generic`` whose
sequential scope copies the data, then applies every update in order (flat positions spelled as
the IR builder spells them, see ``ir_kernels``)."""
from __future__ import annotations

from typing import Any

from ...ir import arith
from ...ir import relax as rx
from ...ir.buffer import decl_buffer
from ...ir.dtype import DataType, handle
from ...ir.expr import LT, Add, BufferLoad, Div, FloorDiv, FloorMod, IntImm, Max, Min, Mul, StringImm, Var, const
from ...ir.node import FrozenDict
from ...ir.stmt import PARALLEL, SERIAL, AttrStmt, Block, BlockRealize, BufferStore, For, seq
from .. import te
from .ir_kernels import _as_i64, _extern_func, _unravel, call_kernel, product
from .legalize import _NotLegalized, _tensor_sinfo, gen_call_tir_inputs, register_legalize, transpose_compute

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

    fused, k = Var("v", _I64), Var("v", _I64)
    i, j = arith.binary(FloorDiv, fused, ind_after), arith.binary(FloorMod, fused, ind_after)
    index1 = arith.binary(Add, arith.binary(Add, arith.binary(Mul, i, ind_before_stride), j),
                          arith.binary(Mul, k, ind_after))
    shifted = _wrapped(_load(indices, index1), axis_range)
    index2 = arith.binary(Add, arith.binary(Add, arith.binary(Mul, i, before_stride), j),
                          arith.binary(Mul, shifted, after))
    target = _unravel(index2, shape)
    update = BufferStore(out, reduce(BufferLoad(out, target), _load(updates, index1)), target)
    scatter = For(fused, IntImm(_I64, 0), _as_i64(product(ind_shape[:axis] + ind_shape[axis + 1:])), PARALLEL,
                  For(k, IntImm(_I64, 0), ind_shape[axis], SERIAL, update))
    return _copy_then(data, out, scatter, "scatter_elements_generic", (indices, updates))


def _load(buf: Any, flat: Any) -> BufferLoad:
    return BufferLoad(buf, _unravel(flat, tuple(buf.shape)))


def _copy_then(data: Any, out: Any, updates: Any, name: str, inputs: tuple) -> Any:
    """The kernel: ``out`` a copy of ``data`` (a parallel loop over flat positions), then the
    ``updates`` loop, in the sequential scope of one opaque block."""
    v = Var("v", _I64)
    copy = For(v, IntImm(_I64, 0), _as_i64(product(tuple(data.shape))), PARALLEL,
               BufferStore(out, _load(data, v), _unravel(v, tuple(data.shape))))
    body = AttrStmt(0, "pragma_scope", StringImm("seq"), seq([copy, updates]))  # (over the node 0)
    return _extern_func(name, body, (data,) + inputs + (out,))


def _wrapped(index: Any, extent: Any) -> Any:
    """A negative index counted from the end: ``i + (i < 0) * extent``."""
    return arith.binary(Add, index, arith.binary(Mul, LT(index, IntImm(index.dtype, 0)), extent))


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


def _index_put_kernel(data: Any, indices: list, values: Any, out: Any, accumulate: bool) -> Any:
    """topi.index_put: for each position k of the broadcast index shape, the flat position that
    the indices (one per dimension, negative ones wrapped) name receives ``values[k]``."""
    shape = tuple(data.shape)
    rank = max(len(t.shape) for t in indices)
    broadcast = [IntImm(_I64, 1)] * rank
    for t in indices:
        for i, d in enumerate(t.shape[::-1]):
            if int(broadcast[rank - 1 - i].value) == 1:
                broadcast[rank - 1 - i] = d
    k = Var("v", _I64)
    position, rest = [], k
    for d in reversed(broadcast):
        position.insert(0, arith.binary(FloorMod, rest, d))
        rest = arith.binary(FloorDiv, rest, d)
    flat, stride = 0, 1
    for dim in range(len(shape) - 1, -1, -1):
        index_shape = tuple(indices[dim].shape)
        offset, index_stride = 0, 1
        for i in range(rank - 1, -1, -1):
            at = len(index_shape) - rank + i
            if at >= 0:
                step = 0 if int(index_shape[at].value) == 1 else position[i]
                offset = arith.binary(Add, offset, arith.binary(Mul, step, index_stride))
                index_stride = arith.binary(Mul, index_stride, index_shape[at])
        shifted = _wrapped(_load(indices[dim], offset), shape[dim])
        flat = arith.binary(Add, flat, arith.binary(Mul, shifted, stride))
        stride = arith.binary(Mul, stride, shape[dim])
    target = _unravel(flat, shape)
    value = _load(values, k)
    update = BufferStore(out, arith.binary(Add, BufferLoad(out, target), value) if accumulate else value, target)
    loop = For(k, IntImm(_I64, 0), product(tuple(broadcast)), PARALLEL, update)
    return _copy_then(data, out, loop, "index_put_generic", tuple(indices) + (values,))


@register_legalize("relax.index_put")
def _index_put(bb: Any, call: rx.Call) -> Any:
    data, indices, values = call.args
    if not isinstance(indices, rx.Tuple):
        raise _NotLegalized  # (TVM unpacks a tuple written out only)
    args = [data, *indices.fields, values]
    if not all(isinstance(a, rx.Var) and _tensor_sinfo(a) is not None for a in args):
        raise _NotLegalized
    data_buf, *index_bufs, values_buf = _input_buffers(args)
    out = decl_buffer(data_buf.shape, data_buf.dtype, "out_buf")
    func = _index_put_kernel(data_buf, index_bufs, values_buf, out, call.attrs["accumulate"])
    return call_kernel(bb, func, "index_put", args, out)


def _scatter_nd_block(data: Any, indices: Any, updates: Any, out: Any, reduce: Any) -> Any:
    """topi.scatter_nd's IR-builder block, the indices with their index axis first: a serial copy,
    then for each index tuple (serial) every element of its update (parallel)."""
    ind_shape = tuple(indices.shape)
    fused_indices = _as_i64(product(ind_shape[1:]))
    fused_updates = _as_i64(product(tuple(updates.shape)[len(ind_shape) - 1:]))  # (1 when one element each)
    shape = tuple(data.shape)
    v, i, j = Var("v", _I64), Var("v", _I64), Var("v", _I64)
    copy = For(v, IntImm(_I64, 0), product(shape), SERIAL, BufferStore(out, _load(data, v), _unravel(v, shape)))
    index, offset = j, fused_updates
    for axis in reversed(range(int(ind_shape[0].value))):
        at = arith.binary(Add, i, arith.binary(Mul, axis, fused_indices))
        index = arith.binary(Add, index, arith.binary(Mul, offset, _load(indices, at)))
        offset = arith.binary(Mul, offset, shape[axis])
    target = _unravel(index, shape)
    value = _load(updates, arith.binary(Add, arith.binary(Mul, i, fused_updates), j))
    update = BufferStore(out, reduce(BufferLoad(out, target), value), target)
    scatter = For(i, IntImm(_I64, 0), fused_indices, SERIAL, For(j, IntImm(_I64, 0), fused_updates, PARALLEL, update))
    body = AttrStmt(0, "pragma_scope", StringImm("seq"), seq([copy, scatter]))
    return BlockRealize((), const(True), Block((), name_hint="scatter_nd_generic", body=body))


@register_legalize("relax.scatter_nd")
def _scatter_nd(bb: Any, call: rx.Call) -> Any:
    """One PrimFunc as TVM's: the TE transpose moving the index axis of the indices first (into a
    buffer of the root block), then the extern block reading it."""
    data, indices, updates = call.args
    reduction = call.attrs["reduction"]
    if reduction == "mean" or not all(isinstance(a, rx.Var) and _tensor_sinfo(a) is not None for a in call.args) \
            or not all(isinstance(d, IntImm) for a in call.args for d in a.struct_info.dims):
        raise _NotLegalized  # (topi has no mean; symbolic sizes not covered)

    def transpose(j: te.Tensor) -> te.Tensor:
        n = len(j.shape)
        return transpose_compute(j, [n - 1] + list(range(n - 1)))

    func, _, _ = gen_call_tir_inputs(transpose, indices)
    indices_buf, moved = (func.buffer_map[p] for p in func.params)
    data_buf, updates_buf = _input_buffers([data, updates])
    out = decl_buffer(data_buf.shape, data_buf.dtype, "out_buf")
    root = func.body.block
    root = root.with_changes(alloc_buffers=(moved,), body=seq([root.body, _scatter_nd_block(
        data_buf, moved, updates_buf, out, _REDUCE[reduction])]))
    buffers = (data_buf, indices_buf, updates_buf, out)
    params = tuple(Var(p.name, handle) for p in (call.args[0], indices, updates)) + (Var("out_buf", handle),)
    func = func.with_changes(params=params, buffer_map=FrozenDict(zip(params, buffers)),
                             body=func.body.with_changes(block=root))
    return call_kernel(bb, func, "scatter_nd", list(call.args), out)
