"""ONNX sequences and optionals.

A sequence is a Relax tuple whose length is known at import time (a sequence graph input gets
it from ``shape_dict``: ``{"seq": [[2, 3], [4]]}``, the shapes of its elements). A Loop with a
run-time trip count makes the sequence it carries one of run-time length, an object that the
packed functions of ``runtime/sequence.py`` rebuild, and so do SplitToSequence by a run-time
chunk size and SequenceInsert/Erase at a run-time position among tensors of different shapes
(among tensors of one shape, they stack and pick); only SequenceInsert, SequenceErase and
SequenceLength take a sequence of run-time length (others are a TVMSError naming the node).

An optional is its value when present; an empty optional is ``None``, as an omitted input (a
graph input is empty when ``shape_dict`` gives it None), so whether an optional holds a value is
also known at import time.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..ir import relax as rx
from ..ir.errors import TVMSError
from ..ir.relax_op import make_call
from ..ir.struct_info import ObjectStructInfo, TensorStructInfo, TupleStructInfo
from .onnx_convert import (OnnxOpConverter, Unsupported, as_dtype, converter, dims_of, normalize_axis, onnx_dtype,
                           rank_of, required_value, static_shape, value_of)
from .onnx_ops_control import refine, same_struct_info, scalar
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


def run_time_sequence(seq: Any) -> bool:
    """Whether ``seq`` is a sequence whose length is known only at run time (see
    ``runtime/sequence.py``): an object to the compiler."""
    return isinstance(getattr(seq, "struct_info", None), ObjectStructInfo)


def _sequence_call(name: str, args: list, sinfo: Any, family: str = "sequence") -> rx.Call:
    """A call of the packed function ``tvms.<family>.<name>`` of ``runtime/sequence.py``."""
    args = [rx.ExternFunc(f"tvms.{family}.{name}"), *(a for a in args if a is not None)]
    return make_call("call_pure_packed", args, {}, (sinfo,))


def elements(seq: Any) -> list:
    """The elements of a sequence (a tuple of a length known at import time)."""
    if isinstance(seq, rx.Tuple):
        return list(seq.fields)
    if run_time_sequence(seq):
        raise Unsupported("a sequence whose length is known only at run time (only SequenceInsert, "
                          "SequenceErase and SequenceLength take one)")
    sinfo = getattr(seq, "struct_info", None)
    if not isinstance(sinfo, TupleStructInfo):
        raise Unsupported(f"expected a sequence (a tuple of a length known at import time), got {sinfo}")
    return [rx.TupleGetItem(seq, i) for i in range(len(sinfo.fields))]


def _position(pos: Any, length: int, end_ok: bool) -> int | None:
    """A constant position, made non-negative; None for one known only at run time."""
    value = value_of(pos)
    if value is None:
        return None
    value = np.asarray(value)
    if value.size != 1:
        raise Unsupported(f"a sequence position is one integer, not a tensor of shape {value.shape}")
    p = int(value.reshape(-1)[0])
    if not -length <= p <= (length if end_ok else length - 1):
        raise Unsupported(f"position {p} is out of range for a sequence of length {length}")
    return p + length if p < 0 else p


def _uniform(items: list) -> bool:
    """Whether ``items`` are tensors of one shape (which stack)."""
    return bool(items) and isinstance(items[0].struct_info, TensorStructInfo) and \
        all(same_struct_info(x.struct_info, items[0].struct_info) for x in items)


def _picks(ctx: Any, items: list, pos: Any, length: int, index: Callable[[Any, Any], Any], count: int,
           end_ok: bool = False) -> rx.Tuple:
    """``count`` elements chosen at run time: the k-th is ``items[index(k, p)]`` for the position
    ``p`` (checked against ``length`` at run time, a TVMSError when out of range, and made
    non-negative); ``items`` are tensors of one shape, stacked."""
    p = ctx.emit(_sequence_call("position", [ctx.emit(scalar(pos, "int64")), ctx.constant(length, "int64"),
                                             ctx.constant(int(end_ok), "int64")], TensorStructInfo([], "int64")))
    stacked = ctx.emit(op.concat([op.expand_dims(x, 0) for x in items], axis=0))
    return rx.Tuple(tuple(ctx.emit(op.take(stacked, ctx.emit(index(ctx.constant(k, "int64"), p)), axis=0, mode="clip"))
                          for k in range(count)))


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
        if run_time_sequence(inputs[0]):
            return _sequence_call("length", inputs[:1], TensorStructInfo([], "int64"))
        return ctx.constant(len(elements(inputs[0])), "int64")


@converter("SequenceAt")
class SequenceAt(OnnxOpConverter):
    @classmethod
    def _impl_v11(cls, ctx, inputs, attrs):
        items = elements(inputs[0])
        at = _position(inputs[1], len(items), False)
        if at is not None:
            return items[at]
        if not _uniform(items):
            raise Unsupported("a position known only at run time, in a sequence whose elements differ in shape",
                              needs=inputs[1])
        return rx.TupleGetItem(_picks(ctx, items, inputs[1], len(items), lambda k, p: p, 1), 0)


@converter("SequenceInsert")
class SequenceInsert(OnnxOpConverter):
    @classmethod
    def _impl_v11(cls, ctx, inputs, attrs):
        pos = inputs[2] if len(inputs) > 2 else None
        if run_time_sequence(inputs[0]):
            return _sequence_call("insert", [inputs[0], inputs[1], pos], ObjectStructInfo())
        items, value = elements(inputs[0]), inputs[1]
        at = len(items) if pos is None else _position(pos, len(items), True)
        if at is not None:
            return rx.Tuple(tuple(items[:at] + [value] + items[at:]))
        if not _uniform(items + [value]):  # (the sequence becomes one rebuilt at run time)
            return _sequence_call("insert", [inputs[0], value, pos], ObjectStructInfo())
        n = len(items)
        # (element k is items[k] before p, the new value at p (stacked last), items[k - 1] after)
        return _picks(ctx, items + [value], pos, n, lambda k, p: op.where(
            op.less(k, p), k, op.where(op.equal(k, p), ctx.constant(n, "int64"),
                                       op.subtract(k, ctx.constant(1, "int64")))), n + 1, end_ok=True)


@converter("SequenceErase")
class SequenceErase(OnnxOpConverter):
    @classmethod
    def _impl_v11(cls, ctx, inputs, attrs):
        pos = inputs[1] if len(inputs) > 1 else None
        if run_time_sequence(inputs[0]):
            return _sequence_call("erase", [inputs[0], pos], ObjectStructInfo())
        items = elements(inputs[0])
        if not items:
            raise Unsupported("erasing from an empty sequence")
        at = len(items) - 1 if pos is None else _position(pos, len(items), False)
        if at is not None:
            return rx.Tuple(tuple(items[:at] + items[at + 1:]))
        if not _uniform(items):
            return _sequence_call("erase", [inputs[0], pos], ObjectStructInfo())
        return _picks(ctx, items, pos, len(items), lambda k, p: op.where(
            op.less(k, p), k, op.add(k, ctx.constant(1, "int64"))), len(items) - 1)


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
        if value_of(split) is None and static_shape(x) and static_shape(split) is not None:
            if static_shape(split) == []:
                return cls._run_time_chunks(ctx, x, axis, split)
            return cls._run_time_sizes(ctx, x, axis, split)
        sizes = np.asarray(required_value(split, "split")).astype("int64")
        if sizes.ndim == 0:  # (pieces of that size, the last one smaller)
            sizes = np.array([int(sizes)] * (length // int(sizes)) + [length % int(sizes)] * bool(length % int(sizes)))
        if sizes.sum() != length or (sizes < 0).any():
            raise Unsupported(f"split sizes {sizes.tolist()} do not add up to the axis's length {length}")
        if len(sizes) == 1:
            return rx.Tuple((x,))
        return rx.Tuple(tuple(elements(ctx.emit(op.split(x, [int(i) for i in np.cumsum(sizes)[:-1]], axis)))))

    @classmethod
    def _run_time_sizes(cls, ctx, x, axis, split):
        """Pieces of sizes known only at run time (as many as ``split`` has values): each a
        dynamic slice from the sum of the sizes before it."""
        ends = ctx.emit(op.cumsum(as_dtype(split, "int64"), axis=0))
        starts = ctx.emit(op.subtract(ends, as_dtype(split, "int64")))
        return rx.Tuple(tuple(_slice(ctx, x, axis, op.take(starts, ctx.constant([k], "int64"), axis=0),
                                     op.take(ends, ctx.constant([k], "int64"), axis=0))
                              for k in range(static_shape(split)[0])))

    @classmethod
    def _run_time_chunks(cls, ctx, x, axis, split):
        """Pieces of a size known only at run time (the last one smaller): as many as that size
        decides, so a sequence of run-time length, filled by a loop."""
        from .onnx_ops_control import recursive_loop

        length = ctx.constant(static_shape(x)[axis], "int64")
        size = ctx.emit(scalar(split, "int64"))
        count = ctx.emit(op.floor_divide(op.subtract(op.add(length, size), ctx.constant(1, "int64")), size))
        empty = ctx.bb.match_cast(rx.Tuple(()), ObjectStructInfo())

        def step(i, fixed, carried, captures):
            start = ctx.emit(op.multiply(i, fixed[1]))
            end = op.minimum(op.add(start, fixed[1]), length)
            piece = _slice(ctx, fixed[2], axis, op.reshape(start, [1]), op.reshape(end, [1]))
            return [ctx.emit(_sequence_call("insert", [carried[0], piece], ObjectStructInfo()))], []

        finals, _ = recursive_loop(ctx, "split", [count, size, x], [empty],
                                   lambda i, fixed, carried: op.less(i, fixed[0]), step)
        return finals[0]


def _slice(ctx: Any, x: Any, axis: int, start: Any, end: Any) -> Any:
    """``x`` from ``start`` to ``end`` (one-element tensors known at run time) along ``axis``, a
    tensor of static shape."""
    shape = static_shape(x)

    def bound(value, outer):  # (the full range on every axis but ``axis``)
        parts = [ctx.constant(outer[:axis], "int64"), value, ctx.constant(outer[axis + 1:], "int64")]
        return ctx.emit(op.concat([p for p in parts if not (isinstance(p, rx.Constant) and p.data.size == 0)],
                                  axis=0))

    ones = ctx.constant([1] * len(shape), "int64")
    return refine(ctx, ctx.emit(op.dynamic_strided_slice(x, bound(start, [0] * len(shape)), bound(end, shape), ones)))


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


def _decided_at_run_time(optional: Any) -> bool:
    """Whether only the run decides if ``optional`` holds a value: an R.Object (an If whose
    branches differ gives one, R.null_value() when empty; so does a run-time sequence)."""
    return run_time_sequence(optional)


@converter("OptionalHasElement")
class OptionalHasElement(OnnxOpConverter):
    @classmethod
    def _impl_v15(cls, ctx, inputs, attrs):
        x = inputs[0] if inputs else None
        if _decided_at_run_time(x):
            return ctx.emit(_sequence_call("has_element", [x], TensorStructInfo((), "bool"), "optional"))
        return ctx.constant(x is not None, "bool")


@converter("OptionalGetElement")
class OptionalGetElement(OnnxOpConverter):
    @classmethod
    def _impl_v15(cls, ctx, inputs, attrs):
        x = inputs[0] if inputs else None
        if _decided_at_run_time(x):
            return ctx.emit(_sequence_call("get_element", [x], x.struct_info, "optional"))
        if x is None:
            raise TVMSError("the optional is empty")
        return x
