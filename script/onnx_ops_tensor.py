"""ONNX converters that move, index and create tensors, and the shape computations around them
(Shape -> Gather -> Concat -> Reshape is evaluated at import time when the shapes are static)."""
from __future__ import annotations

import numpy as np

from .onnx_convert import (CONSTANT_LIMIT, OnnxOpConverter, Unsupported, as_dtype, converter, dims_of,
                           dtype_of, element_count, fold, normalize_axis, range_count, onnx_dtype, rank_of,
                           required_value, static_shape, tensor_info, value_of)
from ..ir import relax as rx
from ..ir.dtype import DataType, float_format, ml_dtype
from ..ir.struct_info import TensorStructInfo
from .relax_op_api import op


@converter("Constant")
class Constant(OnnxOpConverter):
    takes_strings = True

    @classmethod
    def _impl_v1(cls, ctx, inputs, attrs):
        for key, dtype in (("value", None), ("value_float", "float32"), ("value_floats", "float32"),
                           ("value_int", "int64"), ("value_ints", "int64"), ("value_string", object),
                           ("value_strings", object)):
            if key in attrs:
                return ctx.constant(attrs[key], dtype)
        raise Unsupported(f"a Constant given as {', '.join(attrs)}")


@converter("Shape")
class Shape(OnnxOpConverter):
    takes_strings = True  # (it reads no element)

    @classmethod
    def _impl_v1(cls, ctx, inputs, attrs):
        x = inputs[0]
        rank = rank_of(x)
        start, end = attrs.get("start", 0), attrs.get("end", rank)
        start, end = (max(0, min(rank, v + rank if v < 0 else v)) for v in (start, end))
        shape = static_shape(x)
        if shape is not None:
            return ctx.constant(shape[start:end], "int64")
        full = ctx.emit(op.shape_to_tensor(ctx.emit(op.shape_of(x))))
        if (start, end) == (0, rank):
            return full
        return op.strided_slice(full, [0], [start], [end])


@converter("Size")
class Size(OnnxOpConverter):
    takes_strings = True  # (it reads no element)

    @classmethod
    def _impl_v1(cls, ctx, inputs, attrs):
        shape = static_shape(inputs[0])
        if shape is not None:
            return ctx.constant(int(np.prod(shape)), "int64")
        return op.astype(op.size(inputs[0]), "int64")


@converter("Cast")
class Cast(OnnxOpConverter):
    @classmethod
    def _impl_v1(cls, ctx, inputs, attrs):
        to = attrs["to"]
        dtype = onnx_dtype(to) if isinstance(to, int) else to.lower()
        if dtype == "float8_e8m0fnu":
            return _to_e8m0(ctx, inputs[0], attrs.get("saturate", 1), attrs.get("round_mode", "up"))
        return _cast(ctx, inputs[0], dtype, attrs.get("saturate", 1))


@converter("CastLike")
class CastLike(OnnxOpConverter):
    @classmethod
    def _impl_v15(cls, ctx, inputs, attrs):
        return _cast(ctx, inputs[0], dtype_of(inputs[1]), attrs.get("saturate", 1))


def _cast(ctx, x, dtype: str, saturate: int):
    """``x`` as ``dtype``; to a float8 type with ``saturate`` (ONNX's default), a value past the
    type's range (inf included) becomes its largest value (a clip first: NaN stays NaN)."""
    if saturate and dtype.startswith("float8") and DataType(dtype_of(x)).is_float:
        limit = float_format(dtype).max_value
        value = value_of(x)
        if value is not None:
            return ctx.constant(np.clip(value, -limit, limit).astype(ml_dtype(dtype)))
        x = ctx.emit(op.clip(x, -limit, limit))
    return as_dtype(x, dtype)


def _to_e8m0(ctx, x, saturate: int, round_mode: str):
    """Cast to float8_e8m0fnu with ONNX's ``round_mode``, on the float32 bits of ``x``: its
    exponent (the sign is ignored), plus one where the mantissa rounds up ("up": any fraction;
    "nearest": at least half, except exactly half of a subnormal, as onnx's reference rounds;
    "down": never). NaN and inf give 0xff (NaN); with ``saturate`` no value rounds up to it."""
    if round_mode not in ("up", "down", "nearest"):
        raise Unsupported(f"round_mode {round_mode!r} (up, down or nearest)")
    bits = ctx.emit(_view(as_dtype(x, "float32"), "uint32"))

    def const(v):
        return ctx.constant(np.array(v, "uint32"))

    exponent = ctx.emit(op.bitwise_and(op.right_shift(bits, const(23)), const(0xFF)))
    mantissa = op.bitwise_and(bits, const(0x7FFFFF))
    if round_mode == "up":
        up = op.not_equal(mantissa, const(0))
    elif round_mode == "nearest":  # the guard bit, and a round bit, sticky bits or a normal number
        guard = op.not_equal(op.bitwise_and(bits, const(0x400000)), const(0))
        rest = op.not_equal(op.bitwise_and(bits, const(0x3FFFFF)), const(0))
        up = op.logical_and(guard, op.logical_or(rest, op.greater(exponent, const(0))))
    else:
        up = None
    special = ctx.emit(op.equal(exponent, const(0xFF)))
    if up is not None:
        up = op.logical_and(up, op.logical_not(special))
        if saturate:
            up = op.logical_and(up, op.not_equal(exponent, const(0xFE)))
        exponent = op.add(exponent, op.astype(up, "uint32"))
    code = op.astype(op.where(special, const(0xFF), exponent), "uint8")
    return _view(ctx.emit(code), "float8_e8m0fnu")


def _view(x, dtype: str, dims=None):
    """``x``'s bytes read as ``dtype`` (in ``dims``, by default ``x``'s)."""
    shape = rx.ShapeExpr(tuple(dims_of(x) if dims is None else dims))
    return op.memory.view(x, shape, rx.DataTypeImm(DataType(dtype)), rx.PrimValue(0))


@converter("BitCast")
class BitCast(OnnxOpConverter):
    """The bits of each element read as ``to``: to a narrower type, the last dimension grows by
    the ratio of the sizes; to a wider one, a last dimension of that ratio goes."""

    @classmethod
    def _impl_v26(cls, ctx, inputs, attrs):
        x = inputs[0]
        src, dst = DataType(dtype_of(x)), DataType(onnx_dtype(attrs["to"]))
        have, want = (8 if d.is_bool else d.bits for d in (src, dst))  # (bool is a byte)
        if have % 8 or want % 8:
            raise Unsupported(f"bit casts of {src} to {dst} (types of whole bytes are supported)")
        if src.is_bool:  # (its byte is 0 or 1: the view of the same bytes)
            x = as_dtype(x, "uint8")
        dims = dims_of(x)
        if have > want:
            dims = [*dims, have // want]
        elif have < want:
            if not dims or dims[-1] != want // have:
                raise Unsupported(f"a bit cast of {src} to {dst} needs a last dimension of "
                                  f"{want // have}, the shape is {dims}")
            dims = dims[:-1]
        if dst.is_bool:
            return op.not_equal(_view(x, "uint8", dims), ctx.constant(np.array(0, "uint8")))
        return _view(x, str(dst), dims)


def _resolve_reshape(in_shape: list, target: list, allowzero: bool) -> list:
    """ONNX's 0 (copy the input's dimension, unless allowzero) and -1 (infer) resolved."""
    out = [in_shape[i] if (d == 0 and not allowzero) else int(d) for i, d in enumerate(target)]
    if -1 in out:
        known = int(np.prod([d for d in out if d != -1]))
        out[out.index(-1)] = int(np.prod(in_shape)) // known if known else 0
    return out


@converter("Reshape")
class Reshape(OnnxOpConverter):
    @classmethod
    def _impl_v1(cls, ctx, inputs, attrs):
        attrs.ignore("consumed_inputs")
        return cls._reshape(ctx, inputs[0], np.asarray(attrs["shape"]), False)

    @classmethod
    def _impl_v5(cls, ctx, inputs, attrs):
        x, shape = inputs
        allowzero = bool(attrs.get("allowzero", 0))
        target = value_of(shape)
        if target is None:
            return cls._dynamic(ctx, x, shape, allowzero)
        return cls._reshape(ctx, x, target, allowzero)

    @staticmethod
    def _reshape(ctx, x, target, allowzero):
        value = value_of(x)
        dims = dims_of(x)
        if value is not None:
            return ctx.constant(value.reshape(_resolve_reshape(list(value.shape), list(target), allowzero)))
        out = [dims[i] if (d == 0 and not allowzero) else int(d) for i, d in enumerate(target)]
        return op.reshape(x, out)

    @staticmethod
    def _dynamic(ctx, x, shape, allowzero):
        """A target shape known only at run time: 0 and -1 resolved with tensor arithmetic."""
        (k,) = dims_of(shape)
        if not isinstance(k, int):
            raise Unsupported("a target shape of symbolic length")
        shape = as_dtype(shape, "int64")
        current = ctx.emit(op.shape_to_tensor(ctx.emit(op.shape_of(x))))
        rank = rank_of(x)
        if not allowzero:
            # (a 0 at an index past the input's rank is invalid: those entries copy a 1)
            copied = op.strided_slice(current, [0], [0], [k]) if k < rank else \
                op.concat([current, ctx.constant(np.ones(k - rank, "int64"))], axis=0) if k > rank else current
            shape = ctx.emit(op.where(op.equal(shape, ctx.constant(0, "int64")), copied, shape))
        is_free = ctx.emit(op.equal(shape, ctx.constant(-1, "int64")))
        known = op.prod(op.where(is_free, ctx.constant(1, "int64"), shape))
        inferred = op.floor_divide(op.prod(current), ctx.emit(known))
        shape = ctx.emit(op.where(is_free, ctx.emit(inferred), shape))
        return op.reshape(x, ctx.emit(op.tensor_to_shape(shape)))


@converter("Transpose")
class Transpose(OnnxOpConverter):
    @classmethod
    def _impl_v1(cls, ctx, inputs, attrs):
        x = inputs[0]
        perm = attrs.get("perm")
        if perm is not None and tensor_info(x).ndim < 0:  # (ONNX: one axis of perm per dimension, checked when run)
            x = ctx.bb.match_cast(x, TensorStructInfo(dtype=dtype_of(x), ndim=len(perm)))
        perm = list(perm) if perm is not None else list(range(rank_of(x)))[::-1]
        return fold(lambda v: np.transpose(v, perm), [x]) or op.permute_dims(x, perm)


@converter("Concat")
class Concat(OnnxOpConverter):
    @classmethod
    def _impl_v1(cls, ctx, inputs, attrs):
        axis = attrs.get("axis", 1)
        return fold(lambda *v: np.concatenate(v, axis), inputs) or op.concat(list(inputs), axis=axis)


@converter("Split")
class Split(OnnxOpConverter):
    @classmethod
    def _impl_v1(cls, ctx, inputs, attrs):
        split = attrs.get("split")
        if split is None and len(inputs) > 1:
            split = required_value(inputs[1], "split")
        return cls._split(ctx, inputs[0], attrs.get("axis", 0), split, None)

    @classmethod
    def _impl_v13(cls, ctx, inputs, attrs):
        split = inputs[1] if len(inputs) > 1 else None
        split = None if split is None else required_value(split, "split")
        return cls._split(ctx, inputs[0], attrs.get("axis", 0), split, attrs.get("num_outputs"))

    @classmethod
    def _split(cls, ctx, x, axis, split, num_outputs):
        if split is not None:
            indices = [int(i) for i in np.cumsum(split)[:-1]]
            return op.split(x, indices, axis)
        num_outputs = num_outputs or ctx.node_outputs  # (opset 13-17: as many parts as outputs)
        length = dims_of(x)[axis]
        if not isinstance(length, int):
            raise Unsupported("num_outputs on an axis of symbolic length")
        chunk = -(-length // num_outputs)  # (the last part is the smaller one, as ONNX says)
        return op.split(x, [chunk * i for i in range(1, num_outputs) if chunk * i < length], axis)


class _AxesOp(OnnxOpConverter):
    """Squeeze/Unsqueeze: ``axes`` an attribute before opset 13, the second input from then on."""

    @classmethod
    def _impl_v1(cls, ctx, inputs, attrs):
        return cls._apply(ctx, inputs[0], attrs.get("axes"))

    @classmethod
    def _impl_v13(cls, ctx, inputs, attrs):
        axes = inputs[1] if len(inputs) > 1 else None
        # (a scalar axes, as onnx's reference evaluator takes it, is one axis)
        return cls._apply(ctx, inputs[0], None if axes is None else list(required_value(axes, "axes").reshape(-1)))


@converter("Squeeze")
class Squeeze(_AxesOp):
    @staticmethod
    def _apply(ctx, x, axes):
        axes = None if axes is None else [normalize_axis(int(a), rank_of(x)) for a in axes]
        return fold(lambda v: np.squeeze(v, None if axes is None else tuple(axes)), [x]) or \
            op.squeeze(x, axes)


@converter("Unsqueeze")
class Unsqueeze(_AxesOp):
    @staticmethod
    def _apply(ctx, x, axes):
        if axes is None:
            raise Unsupported("Unsqueeze without axes")
        rank = rank_of(x) + len(axes)
        axes = sorted(normalize_axis(int(a), rank) for a in axes)
        return fold(lambda v: np.expand_dims(v, tuple(axes)), [x]) or op.expand_dims(x, axes)


@converter("Slice")
class Slice(OnnxOpConverter):
    @classmethod
    def _impl_v1(cls, ctx, inputs, attrs):
        starts, ends = list(attrs["starts"]), list(attrs["ends"])
        axes = attrs.get("axes")
        return cls._slice(ctx, inputs[0], starts, ends, axes, None)

    @classmethod
    def _impl_v10(cls, ctx, inputs, attrs):
        x, starts, ends, axes, steps = (inputs + [None, None])[:5]
        values = [None if v is None else [int(i) for i in required_value(v, name)]
                  for v, name in ((axes, "axes"), (steps, "steps"))]
        return cls._slice(ctx, x, [int(v) for v in required_value(starts, "starts")],
                          [int(v) for v in required_value(ends, "ends")], *values)

    @staticmethod
    def _slice(ctx, x, starts, ends, axes, steps):
        rank = rank_of(x)
        axes = list(range(len(starts))) if axes is None else [normalize_axis(a, rank) for a in axes]
        steps = [1] * len(starts) if steps is None else steps
        # numpy's clamping is ONNX's; ends past int64's range mean "to the end"
        limit = 2 ** 62
        ends = [max(min(e, limit), -limit) for e in ends]
        starts = [max(min(s, limit), -limit) for s in starts]
        value = value_of(x)
        if value is not None:
            index = [slice(None)] * rank
            for a, s, e, st in zip(axes, starts, ends, steps):
                index[a] = slice(s, e, st)
            return ctx.constant(value[tuple(index)])
        return op.strided_slice(x, axes, starts, ends, steps)


def _wrap_negative(ctx, x, indices, axis):
    """Indices into ``x``'s ``axis`` with negative ones counted from the end."""
    dtype = dtype_of(indices)
    length = dims_of(x)[axis]
    values = value_of(indices)
    if values is not None and isinstance(length, int):
        return ctx.constant(np.where(values < 0, values + length, values).astype(values.dtype))
    if isinstance(length, int):
        size = ctx.constant(length, dtype)
    else:
        shape = ctx.emit(op.shape_to_tensor(ctx.emit(op.shape_of(x))))
        size = ctx.emit(op.astype(op.take(shape, ctx.constant(axis, "int64"), axis=0), dtype))
    return ctx.emit(op.where(op.less(indices, ctx.constant(0, dtype)), op.add(indices, size), indices))


@converter("Gather")
class Gather(OnnxOpConverter):
    @classmethod
    def _impl_v1(cls, ctx, inputs, attrs):
        x, indices = inputs
        axis = normalize_axis(attrs.get("axis", 0), rank_of(x))
        folded = fold(lambda v, i: np.take(v, i, axis), [x, indices])
        if folded is not None:
            return folded
        return op.take(x, _wrap_negative(ctx, x, indices, axis), axis=axis)


@converter("GatherElements")
class GatherElements(OnnxOpConverter):
    @classmethod
    def _impl_v11(cls, ctx, inputs, attrs):
        x, indices = inputs
        axis = normalize_axis(attrs.get("axis", 0), rank_of(x))
        return op.gather_elements(x, _wrap_negative(ctx, x, indices, axis), axis=axis)


@converter("GatherND")
class GatherND(OnnxOpConverter):
    @classmethod
    def _impl_v11(cls, ctx, inputs, attrs):
        return op.gather_nd(inputs[0], inputs[1], batch_dims=attrs.get("batch_dims", 0))


@converter("ConstantOfShape")
class ConstantOfShape(OnnxOpConverter):
    @classmethod
    def _impl_v9(cls, ctx, inputs, attrs):
        fill = attrs.get("value")
        fill = np.zeros(1, "float32") if fill is None else fill
        shape = value_of(inputs[0])
        if shape is not None and element_count(shape) <= CONSTANT_LIMIT:
            return ctx.constant(np.full([int(d) for d in shape], fill.reshape(-1)[0], fill.dtype))
        # (a shape known at run time, or one too large for a constant: filled when the module runs)
        target = [int(d) for d in shape] if shape is not None else ctx.emit(op.tensor_to_shape(inputs[0]))
        return op.full(target, ctx.constant(fill.reshape(())), str(fill.dtype))


@converter("Expand")
class Expand(OnnxOpConverter):
    @classmethod
    def _impl_v8(cls, ctx, inputs, attrs):
        x, shape = inputs
        if value_of(shape) is None:
            return cls._dynamic(ctx, x, shape)
        target = [int(d) for d in value_of(shape)]
        dims = dims_of(x)
        # ONNX broadcasts both ways (a 1 in the target keeps the input's dimension)
        rank = max(len(dims), len(target))
        dims = [1] * (rank - len(dims)) + dims
        target = [1] * (rank - len(target)) + target
        out = [d if t == 1 else t for d, t in zip(dims, target)]
        return fold(lambda v: np.broadcast_to(v, out).copy(), [x], lambda v: element_count(out),
                    "the expanded constant") or op.broadcast_to(x, out)

    @staticmethod
    def _dynamic(ctx, x, shape):
        """A target shape known only at run time (of a static length): the output's dimensions
        are computed with tensor arithmetic, the input's where the target says 1."""
        (k,) = dims_of(shape)
        if not isinstance(k, int):
            raise Unsupported("a target shape of symbolic length")
        rank = max(rank_of(x), k)

        def padded(dims, n):  # (leading ones up to the output's rank)
            ones = ctx.constant(np.ones(rank - n, "int64"))
            return ctx.emit(op.concat([ones, dims], axis=0)) if n < rank else dims

        current = padded(ctx.emit(op.shape_to_tensor(ctx.emit(op.shape_of(x)))), rank_of(x))
        target = padded(ctx.emit(as_dtype(shape, "int64")), k)
        keep = ctx.emit(op.equal(target, ctx.constant(1, "int64")))
        out = ctx.emit(op.where(keep, current, target))
        return op.broadcast_to(x, ctx.emit(op.tensor_to_shape(out)))


@converter("Tile")
class Tile(OnnxOpConverter):
    @classmethod
    def _impl_v6(cls, ctx, inputs, attrs):
        repeats = [int(r) for r in required_value(inputs[1], "repeats")]
        return op.tile(inputs[0], repeats)


@converter("Range")
class Range(OnnxOpConverter):
    @classmethod
    def _impl_v11(cls, ctx, inputs, attrs):
        # (a one-element tensor is taken as the scalar ONNX asks for, as range_count takes it)
        folded = fold(lambda a, b, c: np.arange(*(v.reshape(-1)[0] for v in (a, b, c)), dtype=a.dtype),
                      inputs, range_count, "the range")
        if folded is not None:
            return folded
        for x, name in zip(inputs, ("start", "limit", "delta")):
            required_value(x, name)


@converter("Pad")
class Pad(OnnxOpConverter):
    @classmethod
    def _impl_v1(cls, ctx, inputs, attrs):
        pads = attrs.get("pads", attrs.get("paddings"))
        return cls._pad(ctx, inputs[0], list(pads), attrs.get("value", 0.0), attrs.get("mode", "constant"),
                        None)

    @classmethod
    def _impl_v11(cls, ctx, inputs, attrs):
        x, pads, value, axes = (inputs + [None, None])[:4]
        pads = [int(p) for p in required_value(pads, "pads")]
        fill = 0.0 if value is None else required_value(value, "constant_value").item()
        axes = None if axes is None else [int(a) for a in required_value(axes, "axes")]
        return cls._pad(ctx, x, pads, fill, attrs.get("mode", "constant"), axes)

    @staticmethod
    def _pad(ctx, x, pads, fill, mode, axes):
        rank = rank_of(x)
        axes = list(range(rank)) if axes is None else [normalize_axis(a, rank) for a in axes]
        n = len(axes)
        width = [0] * (2 * rank)
        for i, a in enumerate(axes):
            width[2 * a], width[2 * a + 1] = pads[i], pads[n + i]
        if min(width) < 0:
            raise Unsupported("negative pads (cropping)")
        if mode == "wrap":  # (each padded axis: a gather of the indices taken modulo its length)
            dims = dims_of(x)
            for a in range(rank):
                before, after = width[2 * a], width[2 * a + 1]
                if before or after:
                    if not isinstance(dims[a], int) or dims[a] == 0:
                        raise Unsupported(f"mode='wrap' along an axis of length {dims[a]}")
                    picks = np.arange(-before, dims[a] + after) % dims[a]
                    x = ctx.emit(op.take(x, ctx.constant(picks, "int64"), axis=a))
            return x
        if mode not in ("constant", "reflect", "edge"):
            raise Unsupported(f"mode={mode!r}")
        return op.nn.pad(x, width, pad_value=float(fill), pad_mode="replicate" if mode == "edge" else mode)


@converter("Trilu")
class Trilu(OnnxOpConverter):
    @classmethod
    def _impl_v14(cls, ctx, inputs, attrs):
        x, k = (inputs + [None])[:2]
        upper = attrs.get("upper", 1)
        if k is not None and value_of(k) is None:
            return cls._runtime_k(ctx, x, k, upper)
        k = 0 if k is None else int(value_of(k))
        return (op.triu if upper else op.tril)(x, k)

    @staticmethod
    def _runtime_k(ctx, x, k, upper):
        """A diagonal offset known only at run time: x where column - row >= k (upper) or <= k."""
        rows, cols = dims_of(x)[-2:]
        if not isinstance(rows, int) or not isinstance(cols, int):
            raise Unsupported("a diagonal known at run time on a matrix of symbolic size")
        diff = ctx.constant(np.arange(cols)[None, :] - np.arange(rows)[:, None], "int64")
        keep = (op.greater_equal if upper else op.less_equal)(diff, as_dtype(k, "int64"))
        return op.where(ctx.emit(keep), x, ctx.constant(np.zeros((), dtype_of(x))))


class _Cumulative(OnnxOpConverter):
    @classmethod
    def _impl_v11(cls, ctx, inputs, attrs):
        x, axis = inputs
        axis = normalize_axis(int(required_value(axis, "axis")), rank_of(x))
        exclusive = bool(attrs.get("exclusive", 0))
        if attrs.get("reverse", 0):
            flipped = ctx.emit(cls.relax(ctx.emit(op.flip(x, axis)), axis, exclusive=exclusive))
            return op.flip(flipped, axis)
        return cls.relax(x, axis, exclusive=exclusive)


converter("CumSum")(type("CumSum", (_Cumulative,), {"relax": staticmethod(op.cumsum)}))
converter("CumProd")(type("CumProd", (_Cumulative,), {"relax": staticmethod(op.cumprod)}))


@converter("DepthToSpace")
class DepthToSpace(OnnxOpConverter):
    @classmethod
    def _impl_v1(cls, ctx, inputs, attrs):
        x = inputs[0]
        b = attrs["blocksize"]
        n, c, h, w = dims_of(x)
        if attrs.get("mode", "DCR") == "DCR":
            split = op.reshape(x, [n, b, b, c // b // b, h, w])
            moved = op.permute_dims(ctx.emit(split), [0, 3, 4, 1, 5, 2])
        else:
            split = op.reshape(x, [n, c // b // b, b, b, h, w])
            moved = op.permute_dims(ctx.emit(split), [0, 1, 4, 2, 5, 3])
        return op.reshape(ctx.emit(moved), [n, c // b // b, h * b, w * b])


@converter("SpaceToDepth")
class SpaceToDepth(OnnxOpConverter):
    """Each b x b block becomes channels: ordered (row, column, channel) in DCR mode, the only one
    before opset 28, (channel, row, column) in CRD mode."""

    @classmethod
    def _impl_v1(cls, ctx, inputs, attrs):
        x = inputs[0]
        b = attrs["blocksize"]
        mode = attrs.get("mode", "DCR")
        if mode not in ("DCR", "CRD"):
            raise Unsupported(f"the mode {mode!r} (DCR or CRD)")
        n, c, h, w = dims_of(x)
        split = op.reshape(x, [n, c, h // b, b, w // b, b])
        moved = op.permute_dims(ctx.emit(split), [0, 3, 5, 1, 2, 4] if mode == "DCR" else [0, 1, 3, 5, 2, 4])
        return op.reshape(ctx.emit(moved), [n, c * b * b, h // b, w // b])


@converter("EyeLike")
class EyeLike(OnnxOpConverter):
    @classmethod
    def _impl_v9(cls, ctx, inputs, attrs):
        x = inputs[0]
        dtype = attrs.get("dtype")
        dtype = dtype_of(x) if dtype is None else onnx_dtype(dtype)
        # (R.eye_like's kernel is of the input's dtype whatever its dtype attribute says, as
        # TVM's: the cast makes the ONNX dtype)
        return op.astype(ctx.emit(op.eye_like(x, attrs.get("k", 0))), dtype)


@converter("Einsum")
class Einsum(OnnxOpConverter):
    @classmethod
    def _impl_v12(cls, ctx, inputs, attrs):
        return op.einsum(list(inputs), attrs["equation"].replace(" ", ""))


def _reduction(attrs) -> str:
    """ONNX's scatter reduction under Relax's name."""
    reduction = attrs.get("reduction", "none")
    if reduction not in ("none", "add", "mul", "max", "min"):
        raise Unsupported(f"reduction={reduction!r}")
    return "update" if reduction == "none" else reduction


@converter("ScatterElements", "Scatter")
class ScatterElements(OnnxOpConverter):
    @classmethod
    def _impl_v9(cls, ctx, inputs, attrs):  # (Scatter, which ScatterElements replaced in opset 11)
        return cls._impl_v11(ctx, inputs, attrs)

    @classmethod
    def _impl_v11(cls, ctx, inputs, attrs):
        return op.scatter_elements(*inputs, axis=attrs.get("axis", 0), reduction=_reduction(attrs))


@converter("ScatterND")
class ScatterND(OnnxOpConverter):
    @classmethod
    def _impl_v11(cls, ctx, inputs, attrs):
        return op.scatter_nd(*inputs, reduction=_reduction(attrs))



@converter("TopK")
class TopK(OnnxOpConverter):
    @classmethod
    def _impl_v1(cls, ctx, inputs, attrs):
        return cls._topk(inputs[0], attrs["k"], attrs.get("axis", -1), True)

    @classmethod
    def _impl_v10(cls, ctx, inputs, attrs):
        k = int(required_value(inputs[1], "k").reshape(-1)[0])
        attrs.ignore("sorted")  # (sorted=0 allows any order, the sorted one included)
        return cls._topk(inputs[0], k, attrs.get("axis", -1), bool(attrs.get("largest", 1)))

    @staticmethod
    def _topk(x, k, axis, largest):
        return op.topk(x, k, axis, "both", largest, "int64")


@converter("ReverseSequence")
class ReverseSequence(OnnxOpConverter):
    @classmethod
    def _impl_v10(cls, ctx, inputs, attrs):
        return op.reverse_sequence(inputs[0], inputs[1], seq_axis=attrs.get("time_axis", 0),
                                   batch_axis=attrs.get("batch_axis", 1))


@converter("NonZero")
class NonZero(OnnxOpConverter):
    @classmethod
    def _impl_v9(cls, ctx, inputs, attrs):
        return op.astype(op.nonzero(inputs[0]), "int64")


@converter("OneHot")
class OneHot(OnnxOpConverter):
    """values[1] where the index (negative ones counted from depth) is the position along the
    new axis, values[0] elsewhere (also for every position of an out-of-range index)."""

    @classmethod
    def _impl_v9(cls, ctx, inputs, attrs):
        indices, depth, values = inputs
        depth = int(required_value(depth, "depth").reshape(-1)[0])
        rank = rank_of(indices) + 1
        axis = normalize_axis(attrs.get("axis", -1), rank)
        index = ctx.emit(as_dtype(indices, "int64"))
        index = ctx.emit(op.where(op.less(index, ctx.constant(0, "int64")),
                                  op.add(index, ctx.constant(depth, "int64")), index))
        positions = ctx.constant(np.arange(depth, dtype="int64").reshape([-1] + [1] * (rank - 1 - axis)))
        hit = ctx.emit(op.equal(ctx.emit(op.expand_dims(index, [axis])), positions))
        off, on = (ctx.emit(op.take(values, ctx.constant(i, "int64"), axis=0)) for i in (0, 1))
        return op.where(hit, on, off)
