"""LegalizeOps for collapse_sum_like / collapse_sum_to (``topi.collapse_sum``) and einsum
(``topi.einsum``), as TVM 0.27 builds them."""
from __future__ import annotations

from typing import Any

from ...ir import relax as rx
from ...ir.relax_infer import prove_equal
from ...ir.relax_ops_sum import ELLIPSIS, Equation
from .. import te
from .legalize import _NotLegalized, _compute, call_te, register_legalize
from .legalize_manip import _i64, _tuple_fields


def _collapse_sum(x: te.Tensor, target: tuple) -> te.Tensor:
    """Sum ``x`` down to ``target``: right to left, an axis the target lacks or holds as 1 is summed
    (and a missing one squeezed away)."""
    shape = tuple(x.shape)
    reduced, squeezed = [], []
    t = len(target) - 1
    for i in range(len(shape) - 1, -1, -1):
        if t >= 0 and prove_equal(shape[i], target[t]):
            t -= 1
            continue
        reduced.append(i)
        if t < 0:
            squeezed.append(i)
        elif prove_equal(_i64(1), target[t]):
            t -= 1
    if not reduced:
        return _compute(shape, lambda idx: x[idx], "tensor", "comm_reduce", "ax")

    def body(idx: tuple) -> Any:
        ks = {i: te.reduce_axis((0, shape[i]), name=f"k{i}") for i in sorted(reduced)}
        src, out = [], 0
        for i in range(len(shape)):
            if i in ks:
                src.append(ks[i])
                out += i not in squeezed  # (a kept 1 of the target takes an output index)
            else:
                src.append(idx[out])
                out += 1
        return te.sum(x[tuple(src)], axis=list(ks.values()))

    return _compute(target, body, f"{x.name}_red", "comm_reduce", "ax")


def _collapse_legalize(like: bool) -> Any:
    def legalize(bb: Any, call: rx.Call) -> Any:
        shape = call.args[1].struct_info.shape if like else call.args[1]
        if isinstance(shape, rx.Var):
            shape = bb.lookup_binding(shape)
        if not isinstance(shape, rx.ShapeExpr):
            raise _NotLegalized  # a shape known only at run time

        def collapse_sum(x: te.Tensor) -> te.Tensor:
            return _collapse_sum(x, tuple(shape.values))

        return call_te(bb, collapse_sum, call.args[0])

    return legalize


register_legalize("relax.collapse_sum_like")(_collapse_legalize(True))
register_legalize("relax.collapse_sum_to")(_collapse_legalize(False))


@register_legalize("relax.einsum")
def _einsum(bb: Any, call: rx.Call) -> Any:
    equation = Equation.parse(call.attrs["subscripts"])
    summed = sorted({l for s in equation.inputs for l in s} - set(equation.output))
    if ELLIPSIS in summed:
        raise _NotLegalized  # (an ellipsis summed over: not covered)

    def einsum(*xs: te.Tensor) -> te.Tensor:
        shapes = [tuple(x.shape) for x in xs]
        extents, ellipsis = equation.extents(shapes)
        out_shape = equation.output_shape(shapes)

        def body(idx: tuple) -> Any:
            index, pos = {}, 0
            for label in equation.output:
                width = len(ellipsis) if label == ELLIPSIS else 1
                index[label] = idx[pos:pos + width]
                pos += width
            ks = [te.reduce_axis((0, extents[l]), name=l) for l in summed]
            index.update({l: (k,) for l, k in zip(summed, ks)})
            result = None
            for x, subscript in zip(xs, equation.inputs):
                term = x[_operand_index(x, subscript, index, extents, ellipsis)]
                result = term if result is None else result * term
            return te.sum(result, axis=ks) if ks else result

        return _compute(out_shape, body, "T_einsum", "einsum", "ax")

    return call_te(bb, einsum, *_tuple_fields(bb, call.args[0]))


def _operand_index(x: te.Tensor, subscript: tuple, index: dict, extents: dict, ellipsis: tuple) -> tuple:
    """The index into one operand; a dimension of 1 broadcast to more is read at 0."""
    shape = tuple(x.shape)
    out, pos = [], 0
    for label in subscript:
        if label == ELLIPSIS:
            width = len(shape) - len(subscript) + 1
            full = index[ELLIPSIS]
            pairs = zip(full[len(full) - width:], ellipsis[len(ellipsis) - width:])
        else:
            width, pairs = 1, [(index[label][0], extents[label])]
        for (i, extent), dim in zip(pairs, shape[pos:pos + width]):
            out.append(_i64(0) if _is_one(dim) and not _is_one(extent) else i)
        pos += width
    return tuple(out)


def _is_one(d: Any) -> bool:
    return getattr(d, "value", None) == 1
