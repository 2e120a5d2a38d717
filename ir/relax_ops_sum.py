"""Relax summations that are not plain reductions: collapse_sum_like / collapse_sum_to (the
gradient of broadcasting) and einsum, registered when ``relax_ops`` imports this module."""
from __future__ import annotations

from dataclasses import dataclass

from .errors import TVMSError
from .expr import IntImm, Max
from .relax_infer import (fmt_dim, fmt_dims, int_of, known_dims, make_tensor,
                          prepare_shape_arg, prepare_tuple_arg, prove_equal, shape_arg, tensor_arg, tensor_of_shape,
                          tuple_of_tensors)
from .relax_op import ATTR_STR, Attr, CallInfo, register
from .struct_info import StructInfo, TensorStructInfo


# ---------------------------------------------------------------- collapse_sum
def _check_collapse(info: CallInfo, data: tuple, target: tuple) -> None:
    """Right to left, each target dimension equals the data's or is 1 (summed over); a data
    dimension that cannot be matched is an error, as in TVM (a symbolic one needs a match_cast)."""
    t = len(target) - 1
    for d in range(len(data) - 1, -1, -1):
        if t < 0:
            continue
        a, b = data[d], target[t]
        if prove_equal(a, b) or int_of(b) == 1:
            t -= 1
        elif int_of(a) is not None and int_of(b) is not None:
            raise info.fail(f"the data shape {fmt_dims(data)} does not collapse to {fmt_dims(target)}: "
                            f"dimension {d} is {fmt_dim(a)}, against {fmt_dim(b)}")
        else:
            raise info.fail(f"cannot match dimension {d} of the data shape {fmt_dims(data)} ({fmt_dim(a)}) "
                            f"with {fmt_dim(b)} of {fmt_dims(target)}; a symbolic size needs "
                            f"R.match_cast first")


def _infer_collapse_sum_like(info: CallInfo) -> StructInfo:
    data, target = tensor_arg(info, 0), tensor_arg(info, 1)
    dims, target_dims = known_dims(data), known_dims(target)
    if dims is not None and target_dims is not None:
        _check_collapse(info, dims, target_dims)
    return TensorStructInfo(target.shape, data.dtype, target.ndim, target.vdevice)


register("collapse_sum_like", ("data", "collapse_target"), _infer_collapse_sum_like)


def _infer_collapse_sum_to(info: CallInfo) -> StructInfo:
    data, shape = tensor_arg(info, 0), shape_arg(info, 1)
    dims = known_dims(data)
    if dims is not None and shape.values is not None:
        _check_collapse(info, dims, tuple(shape.values))
    return tensor_of_shape(info.args[1], shape, data.dtype, data.vdevice)


register("collapse_sum_to", ("data", "shape"), _infer_collapse_sum_to, prepare=prepare_shape_arg(1))


# ---------------------------------------------------------------- einsum
ELLIPSIS = "..."


@dataclass(frozen=True)
class Equation:
    """An einsum equation with its output made explicit: each subscript is a tuple of labels
    (letters, or ``ELLIPSIS``)."""

    inputs: tuple
    output: tuple

    @staticmethod
    def parse(text: str) -> "Equation":
        """``"ij,jk->ik"``; without an arrow the output is every label used once, in alphabetical
        order, after the ellipsis (numpy's implicit mode)."""
        subscripts, current, arrow = [], [], False
        i = 0
        while i < len(text):
            c = text[i]
            if c == "-" and text[i:i + 2] == "->" and not arrow:
                arrow, i = True, i + 1
                subscripts.append(tuple(current))
                current = []
            elif c == ",":
                subscripts.append(tuple(current))
                current = []
            elif text.startswith(ELLIPSIS, i) and ELLIPSIS not in current:
                current.append(ELLIPSIS)
                i += 2
            elif c.isalpha():
                current.append(c)
            elif c != " ":
                raise TVMSError(f"cannot read the einsum equation {text!r}: unexpected {c!r} at {i}")
            i += 1
        if arrow:
            return Equation(tuple(subscripts), tuple(current))
        subscripts.append(tuple(current))
        counts: dict = {}
        for s in subscripts:
            for label in s:
                counts[label] = counts.get(label, 0) + 1
        # (the ellipsis first: it sorts before the letters, as TVM's "\0" does)
        output = sorted((l for l, n in counts.items() if l == ELLIPSIS or n == 1), key=lambda l: (l != ELLIPSIS, l))
        return Equation(tuple(subscripts), tuple(output))

    def extents(self, shapes: list) -> tuple[dict, tuple]:
        """The extent of each label (1 broadcasts against the others) and the ellipsis' shape."""
        labels: dict = {}
        ellipses = []
        if len(shapes) != len(self.inputs):
            raise TVMSError(f"the einsum equation has {len(self.inputs)} operands, got {len(shapes)}")
        for subscript, shape in zip(self.inputs, shapes):
            covered = len(shape) - len(subscript) + 1  # (the dimensions an ellipsis stands for)
            if covered < 0 if ELLIPSIS in subscript else len(shape) != len(subscript):
                raise TVMSError(f"the einsum subscript {''.join(subscript)!r} does not fit the shape "
                                f"{fmt_dims(tuple(shape))}")
            pos = 0
            for label in subscript:
                if label == ELLIPSIS:
                    ellipses.append(tuple(shape[pos:pos + covered]))
                    pos += covered
                else:
                    labels[label] = broadcast_extent(labels[label], shape[pos]) if label in labels else shape[pos]
                    pos += 1
        common: tuple = ()
        if ellipses:
            common = max(ellipses, key=len)
            for shape in ellipses:
                common = _broadcast_tail(common, shape)
        return labels, common

    def output_shape(self, shapes: list) -> tuple:
        labels, ellipsis = self.extents(shapes)
        out: list = []
        for label in self.output:
            out.extend(ellipsis if label == ELLIPSIS else (labels[label],))
        return tuple(out)


def broadcast_extent(a, b):
    """topi's einsum broadcasting of two extents: equal, 1 against anything, else their max."""
    ca, cb = int_of(a), int_of(b)
    if ca is not None and cb is not None:
        if ca == cb:
            return a
        if 1 in (ca, cb):
            return IntImm(a.dtype, max(ca, cb))  # (topi makes an int32; a Relax shape holds int64)
        raise TVMSError(f"einsum: the extents {ca} and {cb} do not broadcast")
    if ca is not None:
        return b
    if cb is not None or a is b:  # (TVM's max folds a value against itself)
        return a
    return Max(a, b)


def _broadcast_tail(a: tuple, b: tuple) -> tuple:
    """numpy broadcasting of two shapes, aligned at the right."""
    n = max(len(a), len(b))
    a = (None,) * (n - len(a)) + tuple(a)
    b = (None,) * (n - len(b)) + tuple(b)
    out = []
    for x, y in zip(a, b):
        if x is None or int_of(x) == 1:
            out.append(y)
        elif y is None or int_of(y) == 1 or prove_equal(x, y):
            out.append(x)
        else:
            out.append(Max(x, y))
    return tuple(out)


def _infer_einsum(info: CallInfo) -> StructInfo:
    tensors = tuple_of_tensors(info, 0)
    if not tensors:
        raise info.fail("einsum needs at least one operand")
    dtype = tensors[0].dtype
    vdevice = next((t.vdevice for t in tensors if t.vdevice is not None), None)
    shapes = []
    for t in tensors:
        if t.dtype != dtype:
            raise info.fail(f"the operands must have one dtype, got {dtype} and {t.dtype}")
        if t.dims is None:  # (TVM gives the rank of that operand)
            return TensorStructInfo(None, dtype, t.ndim, vdevice)
        shapes.append(t.dims)
    try:
        out = Equation.parse(info.attrs["subscripts"]).output_shape(shapes)
    except TVMSError as err:
        raise info.fail(str(err)) from None
    return make_tensor(out, dtype, vdevice=vdevice)


register("einsum", ("operands",), _infer_einsum, (Attr("subscripts", None, ATTR_STR, required=True),),
         prepare=prepare_tuple_arg(0))
