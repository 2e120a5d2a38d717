"""LegalizeOps for the gather operators, building the TE computations of the topi functions TVM
0.27 calls (``topi.gather``, ``topi.gather_nd`` after moving the index axis of the indices first).

The scatters (``topi.scatter_elements``/``scatter_nd``) are TE extern functions written with TVM's
IR builder; they are not legalized here, and the VM runs them with their numpy references.
"""
from __future__ import annotations

from typing import Any

from ...ir import relax as rx
from .. import te
from .legalize import _compute, call_te, register_legalize, transpose_compute
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
