"""LegalizeOps for the gather operators, index_tensor and reverse_sequence, building the TE
computations of the topi functions TVM 0.27 calls (``topi.gather``, ``topi.gather_nd`` after
moving the index axis of the indices first, ``topi.adv_index``, ``topi.reverse_sequence``).

The scatters and index_put (IR-builder kernels) are legalized in ``legalize_scatter``;
slice_scatter (a long chain of topi operators) and dynamic_strided_slice (its shape computed at
run time) are not: the VM runs them with their numpy references.
"""
from __future__ import annotations

from typing import Any

from ...ir import relax as rx
from ...ir.arith import canonical
from ...ir.expr import GT, LE, Cast, Or
from .. import te
from .legalize import _broadcast_index, _broadcast_shape, _compute, call_te, register_legalize, transpose_compute
from .legalize_manip import _i64


@register_legalize("relax.gather_elements")
def _gather_elements(bb: Any, call: rx.Call) -> Any:
    def gather(data: te.Tensor, indices: te.Tensor) -> te.Tensor:
        axis = call.attrs["axis"] % len(data.shape)

        def body(idx: tuple) -> Any:
            return data[idx[:axis] + (indices[idx],) + idx[axis + 1:]]

        return _compute(tuple(indices.shape), body, "T_gather", "injective", "ax")

    return call_te(bb, gather, call.args[0], call.args[1], primfunc_name_hint="gather")


@register_legalize("relax.gather_nd")
def _gather_nd(bb: Any, call: rx.Call) -> Any:
    batch = call.attrs["batch_dims"]

    def te_gather_nd(data: te.Tensor, indices: te.Tensor) -> te.Tensor:
        n = len(indices.shape)
        indices = transpose_compute(indices, [n - 1] + list(range(n - 1)))
        depth = int(indices.shape[0].value)
        shape = tuple(indices.shape[1:]) + tuple(data.shape[depth + batch:])

        def body(idx: tuple) -> Any:
            # (topi indexes with int32 constants, which the int64 index override widens)
            picked = tuple(indices[(_i64(k),) + idx[:n - 1]] for k in range(depth))
            return data[idx[:batch] + picked + idx[n - 1:]]

        return _compute(shape, body, "T_gather_nd", "injective", "ax")

    return call_te(bb, te_gather_nd, call.args[0], call.args[1])


@register_legalize("relax.reverse_sequence")
def _reverse_sequence(bb: Any, call: rx.Call) -> Any:
    def reverse_sequence(x: te.Tensor, lengths: te.Tensor) -> te.Tensor:
        shape = tuple(x.shape)
        seq, batch = call.attrs["seq_axis"] % len(shape), call.attrs["batch_axis"] % len(shape)

        def body(idx: tuple) -> Any:
            n, i, dim = lengths[(idx[batch],)], idx[seq], shape[seq]
            n = n if n.dtype == dim.dtype else Cast(dim.dtype, n)  # (int32 lengths: as TVM widens them)
            flipped = te.if_then_else(GT(n, dim), canonical(dim - _i64(1) - i), canonical(n - _i64(1) - i))
            src = te.if_then_else(Or(LE(n, _i64(1)), LE(n, i)), i, flipped)
            return x[idx[:seq] + (src,) + idx[seq + 1:]]

        return _compute(shape, body, "T_reverse_sequence", "injective", "ax")

    return call_te(bb, reverse_sequence, call.args[0], call.args[1])


@register_legalize("relax.index_tensor")
def _index_tensor(bb: Any, call: rx.Call) -> Any:
    count = len(call.args[1].struct_info.fields)
    # (TVM takes each index out of the tuple with a binding of its own, a literal tuple too)
    fields = [bb.emit(rx.TupleGetItem(call.args[1], i)) for i in range(count)]

    def index_tensor(data: te.Tensor, *indices: te.Tensor) -> te.Tensor:
        shape = tuple(indices[0].shape)
        for t in indices[1:]:
            shape = _broadcast_shape(shape, tuple(t.shape))
        if len(indices) > 1:  # (topi broadcasts every index when there are several)
            indices = tuple(_compute(shape, lambda idx, t=t: t[tuple(_broadcast_index(t, shape, idx))],
                                     "T_broadcast_to", "broadcast", "ax") for t in indices)
        out = shape + tuple(data.shape[len(indices):])

        def body(idx: tuple) -> Any:
            picked = tuple(t[idx[:len(shape)]] for t in indices)
            return data[picked + idx[len(shape):]]

        return _compute(out, body, "advanced_index", "injective", "ax")

    return call_te(bb, index_tensor, call.args[0], *fields)
