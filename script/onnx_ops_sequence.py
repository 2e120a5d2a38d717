"""ONNX sequences and optionals.

A sequence is a Relax tuple: its length must be known at import time (a sequence graph input
gets it from ``shape_dict``: ``{"seq": [[2, 3], [4]]}``, the shapes of its elements; positions
and split sizes must be constants). A form that needs a sequence whose length is known only at
run time (a Loop with a run-time trip count that grows one) is refused with a TVMSError.

An optional is its value when present; an empty optional is ``None``, as an omitted input (a
graph input is empty when ``shape_dict`` gives it None), so whether an optional holds a value is
also known at import time.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..ir import relax as rx
from ..ir.errors import TVMSError
from ..ir.struct_info import TensorStructInfo, TupleStructInfo
from .onnx_convert import (OnnxOpConverter, Unsupported, converter, dims_of, normalize_axis, onnx_dtype, rank_of,
                           required_value)
from .relax_op_api import op

# what a converter returns for an empty optional (the importer records it as None)
EMPTY_OPTIONAL = object()


def structured_input(name: str, type_proto: Any, given: Any, dim: Callable[[Any], Any]) -> Any:
    """The struct info of a graph input of a sequence or optional type: ``given`` is what
    ``shape_dict`` says of it (``...`` when nothing), ``dim`` makes a dimension. None for an
    empty optional."""
    kind = type_proto.WhichOneof("value")
    if kind == "optional_type":
        if given is None:
            return None
        return structured_input(name, type_proto.optional_type.elem_type, given, dim)
    if kind == "tensor_type":
        tensor = type_proto.tensor_type
        if given is ...:
            if not tensor.HasField("shape"):
                return TensorStructInfo(None, onnx_dtype(tensor.elem_type))
            given = [d.dim_value if d.HasField("dim_value") else d.dim_param for d in tensor.shape.dim]
        return TensorStructInfo([dim(d) for d in given], onnx_dtype(tensor.elem_type))
    if kind == "sequence_type":
        if given is ... or given is None:
            raise TVMSError(f"graph input {name!r} is a sequence: its length is needed at import time "
                            f"(give shape_dict={{{name!r}: [shape of each element, ...]}})")
        element = type_proto.sequence_type.elem_type
        return TupleStructInfo(tuple(structured_input(name, element, shape, dim) for shape in given))
    raise TVMSError(f"graph input {name!r} is of the type {kind}, which is not supported")


def elements(seq: Any) -> list:
    """The elements of a sequence (a tuple of a length known at import time)."""
    if isinstance(seq, rx.Tuple):
        return list(seq.fields)
    sinfo = getattr(seq, "struct_info", None)
    if not isinstance(sinfo, TupleStructInfo):
        raise Unsupported(f"expected a sequence (a tuple of a length known at import time), got {sinfo}")
    return [rx.TupleGetItem(seq, i) for i in range(len(sinfo.fields))]


def _position(pos: Any, length: int, what: str, end_ok: bool) -> int:
    p = int(np.asarray(required_value(pos, what)).reshape(-1)[0])
    if not -length <= p <= (length if end_ok else length - 1):
        raise Unsupported(f"{what} {p} is out of range for a sequence of length {length}")
    return p + length if p < 0 else p


@converter("SequenceConstruct")
class SequenceConstruct(OnnxOpConverter):
    @classmethod
    def _impl_v11(cls, ctx, inputs, attrs):
        return rx.Tuple(tuple(inputs))


@converter("SequenceEmpty")
class SequenceEmpty(OnnxOpConverter):
    @classmethod
    def _impl_v11(cls, ctx, inputs, attrs):
        attrs.ignore("dtype")  # (an empty tuple has no element type)
        return rx.Tuple(())


@converter("SequenceLength")
class SequenceLength(OnnxOpConverter):
    @classmethod
    def _impl_v11(cls, ctx, inputs, attrs):
        return ctx.constant(len(elements(inputs[0])), "int64")


@converter("SequenceAt")
class SequenceAt(OnnxOpConverter):
    @classmethod
    def _impl_v11(cls, ctx, inputs, attrs):
        items = elements(inputs[0])
        return items[_position(inputs[1], len(items), "position", False)]


@converter("SequenceInsert")
class SequenceInsert(OnnxOpConverter):
    @classmethod
    def _impl_v11(cls, ctx, inputs, attrs):
        items = elements(inputs[0])
        at = len(items) if len(inputs) < 3 or inputs[2] is None else \
            _position(inputs[2], len(items), "position", True)
        return rx.Tuple(tuple(items[:at] + [inputs[1]] + items[at:]))


@converter("SequenceErase")
class SequenceErase(OnnxOpConverter):
    @classmethod
    def _impl_v11(cls, ctx, inputs, attrs):
        items = elements(inputs[0])
        if not items:
            raise Unsupported("erasing from an empty sequence")
        at = len(items) - 1 if len(inputs) < 2 or inputs[1] is None else \
            _position(inputs[1], len(items), "position", False)
        return rx.Tuple(tuple(items[:at] + items[at + 1:]))


@converter("ConcatFromSequence")
class ConcatFromSequence(OnnxOpConverter):
    @classmethod
    def _impl_v11(cls, ctx, inputs, attrs):
        items = elements(inputs[0])
        if not items:
            raise Unsupported("concatenating an empty sequence")
        axis, new_axis = attrs["axis"], attrs.get("new_axis", 0)
        axis = normalize_axis(axis, rank_of(items[0]) + (1 if new_axis else 0))
        if new_axis:
            items = [op.expand_dims(x, axis) for x in items]
        return op.concat(items, axis=axis)


@converter("SplitToSequence")
class SplitToSequence(OnnxOpConverter):
    @classmethod
    def _impl_v11(cls, ctx, inputs, attrs):
        x = inputs[0]
        axis = normalize_axis(attrs.get("axis", 0), rank_of(x))
        length = dims_of(x)[axis]
        split = inputs[1] if len(inputs) > 1 else None
        if not isinstance(length, int):
            raise Unsupported("a split along an axis of a length known only at run time")
        if split is None:  # (pieces of 1, squeezed unless keepdims)
            pieces = elements(ctx.emit(op.split(x, length, axis))) if length > 1 else [x]
            return rx.Tuple(tuple(pieces if attrs.get("keepdims", 1) else
                                  [op.squeeze(p, [axis]) for p in pieces]))
        attrs.ignore("keepdims")  # (only for the form without split)
        sizes = np.asarray(required_value(split, "split")).astype("int64")
        if sizes.ndim == 0:  # (pieces of that size, the last one smaller)
            sizes = np.array([int(sizes)] * (length // int(sizes)) + [length % int(sizes)] * bool(length % int(sizes)))
        if sizes.sum() != length or (sizes < 0).any():
            raise Unsupported(f"split sizes {sizes.tolist()} do not add up to the axis's length {length}")
        if len(sizes) == 1:
            return rx.Tuple((x,))
        return rx.Tuple(tuple(elements(ctx.emit(op.split(x, [int(i) for i in np.cumsum(sizes)[:-1]], axis)))))


@converter("SequenceMap")
class SequenceMap(OnnxOpConverter):
    """The body applied to each position of the input sequences (tensors given as they are),
    unrolled: the sequences' length is known at import time."""

    @classmethod
    def _impl_v17(cls, ctx, inputs, attrs):
        body = attrs["body"]
        seqs = [elements(x) if isinstance(getattr(x, "struct_info", None), TupleStructInfo) else None
                for x in inputs]
        length = len(seqs[0])
        if any(s is not None and len(s) != length for s in seqs):
            raise Unsupported("sequences of different lengths")
        results = []
        for i in range(length):
            bound = {info.name: x if items is None else ctx.emit(items[i])
                     for info, x, items in zip(body.input, inputs, seqs)}
            results.append(ctx.subgraph(ctx, body, bound))
        return [rx.Tuple(tuple(r[k] for r in results)) for k in range(len(body.output))]


@converter("Optional")
class Optional(OnnxOpConverter):
    @classmethod
    def _impl_v15(cls, ctx, inputs, attrs):
        attrs.ignore("type")  # (the type of an empty optional: nothing to hold)
        return inputs[0] if inputs and inputs[0] is not None else EMPTY_OPTIONAL


@converter("OptionalHasElement")
class OptionalHasElement(OnnxOpConverter):
    @classmethod
    def _impl_v15(cls, ctx, inputs, attrs):
        return ctx.constant(bool(inputs) and inputs[0] is not None, "bool")


@converter("OptionalGetElement")
class OptionalGetElement(OnnxOpConverter):
    @classmethod
    def _impl_v15(cls, ctx, inputs, attrs):
        if not inputs or inputs[0] is None:
            raise TVMSError("the optional is empty")
        return inputs[0]
