"""ONNX's string operators: StringConcat, StringSplit, StringNormalizer, RegexFullMatch, and the
string forms of Equal and ai.onnx.ml's LabelEncoder (``string_lookup``).

A string tensor is a Relax tensor of dtype ``string``; no kernel reads one, so each operator
becomes ``R.call_pure_packed`` of a run-time function (``runtime/string_ops.py``) with its
attributes as ``R.str``/``R.prim_value`` arguments and its result's struct info inferred here
(a size only the data decides, as StringSplit's longest split, is left unknown)."""
from __future__ import annotations

import numpy as np

from ..ir import relax as rx
from ..ir.expr import IntImm
from ..ir.re2 import PatternError, compile_pattern
from ..ir.relax_op import make_call
from ..ir.struct_info import TensorStructInfo, TupleStructInfo
from .block_builder import const
from .onnx_convert import OnnxOpConverter, Unsupported, converter, dims_of, dtype_of, rank_of, tensor_info

STRING = "string"


def string_call(name: str, args: list, sinfo) -> rx.Call:
    """``R.call_pure_packed("tvms.string.<name>", *args)`` typed ``sinfo``; str and int
    arguments become ``R.str`` and ``R.prim_value``."""
    values = [rx.StringImm(a) if isinstance(a, str) else rx.PrimValue(a) if isinstance(a, int) else a
              for a in args]
    return make_call("call_pure_packed", [rx.ExternFunc(f"tvms.string.{name}")] + values, {}, (sinfo,))


def _strings(x, what: str = "the input"):
    if dtype_of(x) != STRING:
        raise Unsupported(f"{what} must be a string tensor, not {dtype_of(x)}")
    return x


def _same_shape(x, dtype: str, extra: int = 0) -> TensorStructInfo:
    """The struct info of ``x``'s shape (``extra`` unknown axes added) in ``dtype``."""
    info = tensor_info(x)
    if info.dims is not None and not extra:
        return TensorStructInfo(info.dims, dtype)
    return TensorStructInfo(dtype=dtype, ndim=info.ndim + extra if info.ndim >= 0 else -1)


def _broadcast(a, b, dtype: str) -> TensorStructInfo:
    """numpy broadcasting of two inputs' shapes where both are static, their rank otherwise."""
    shapes = [tensor_info(x).dims for x in (a, b)]
    if all(s is not None and all(isinstance(d, IntImm) for d in s) for s in shapes):
        try:
            return TensorStructInfo(list(np.broadcast_shapes(*[tuple(d.value for d in s) for s in shapes])), dtype)
        except ValueError as err:
            raise Unsupported(f"the inputs do not broadcast: {err}") from None
    return TensorStructInfo(dtype=dtype, ndim=max(rank_of(a), rank_of(b)))


def string_equal(a, b) -> rx.Call:
    """Equal of two string tensors (ONNX from opset 19)."""
    return string_call("equal", [_strings(a), _strings(b, "the second input")], _broadcast(a, b, "bool"))


def string_lookup(x, keys: np.ndarray, values: np.ndarray, default) -> rx.Call:
    """LabelEncoder where its keys or values are strings: ``x``'s elements looked up in the
    table, ``default`` where no key matches."""
    x_strings, key_strings = dtype_of(x) == STRING, keys.dtype == object
    if x_strings != key_strings:
        raise Unsupported(f"{'string' if key_strings else keys.dtype} keys for a {dtype_of(x)} input")
    default = np.asarray(default, values.dtype)
    tables = [const(v, str(v.dtype)) for v in (keys, values, default)]  # (object: a string constant)
    return string_call("lookup", [x] + tables, _same_shape(x, STRING if values.dtype == object else str(values.dtype)))


@converter("StringConcat")
class StringConcat(OnnxOpConverter):
    takes_strings = True

    @classmethod
    def _impl_v20(cls, ctx, inputs, attrs):
        x, y = inputs
        return string_call("concat", [_strings(x), _strings(y, "the second input")], _broadcast(x, y, STRING))


@converter("StringSplit")
class StringSplit(OnnxOpConverter):
    """The pieces along a new last axis (as long as the most pieces of any element: known only
    from the data) and the count of each element's pieces."""

    takes_strings = True

    @classmethod
    def _impl_v20(cls, ctx, inputs, attrs):
        x = _strings(inputs[0])
        maxsplit = attrs.get("maxsplit")
        pieces = _same_shape(x, STRING, extra=1)
        sinfo = TupleStructInfo((pieces, _same_shape(x, "int64")))
        return ctx.emit(string_call("split", [x, attrs.get("delimiter") or "", -1 if maxsplit is None else maxsplit],
                                    sinfo))


# locales whose case mapping differs from Unicode's default (SpecialCasing.txt's dotted and
# dotless i of Turkish and Azeri, Lithuanian's retained dot)
_OWN_CASE_RULES = ("tr", "az", "lt")


@converter("StringNormalizer")
class StringNormalizer(OnnxOpConverter):
    """Stop words dropped, then the case changed, on a [C] or [1, C] tensor; the number of
    elements left is known only from the data."""

    takes_strings = True

    @classmethod
    def _impl_v10(cls, ctx, inputs, attrs):
        x = _strings(inputs[0])
        if rank_of(x) not in (1, 2) or (rank_of(x) == 2 and dims_of(x)[0] != 1):
            raise Unsupported(f"an input of rank {rank_of(x)} (ONNX takes [C] or [1, C])")
        action = attrs.get("case_change_action", "NONE")
        if action not in ("NONE", "LOWER", "UPPER"):
            raise Unsupported(f"the case_change_action {action!r} (NONE, LOWER or UPPER)")
        locale = attrs.get("locale") or "en_US"
        if locale.split("_")[0].split(".")[0].lower() in _OWN_CASE_RULES:
            raise Unsupported(f"the locale {locale!r}: its case mapping is not Unicode's default, "
                              f"the one implemented")
        stopwords = list(attrs.get("stopwords") or [])
        case_sensitive = int(attrs.get("is_case_sensitive", 0))
        sinfo = TensorStructInfo(dtype=STRING, ndim=rank_of(x))
        return string_call("normalize", [x, action, case_sensitive] + stopwords, sinfo)


@converter("RegexFullMatch")
class RegexFullMatch(OnnxOpConverter):
    """Whether each string matches the RE2 pattern in full (``ir/re2.py``: the pattern is parsed
    now, so one RE2 would refuse, or that would be read differently, is refused at import)."""

    takes_strings = True

    @classmethod
    def _impl_v20(cls, ctx, inputs, attrs):
        x = _strings(inputs[0])
        pattern = attrs.get("pattern")
        if pattern is None:
            raise Unsupported("a RegexFullMatch without a pattern")
        try:
            compile_pattern(pattern)
        except PatternError as err:
            raise Unsupported(str(err)) from None
        return string_call("regex_full_match", [x, pattern], _same_shape(x, "bool"))
