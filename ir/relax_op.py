"""The registry of Relax operators: one entry per operator, carrying its script spelling, its
arguments and attributes (with defaults, in printing order) and its struct-info inference.

Adding an operator means adding one ``register(...)`` call (see ``relax_ops.py``); the parser,
the printer, the builder (``relax.op.*``) and the passes all read this table.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from .distributed import DTensorStructInfo
from .errors import TVMSError
from .expr import Op
from .node import FrozenDict
from .op import get_op  # one interning table for every operator, TensorIR and Relax
from .struct_info import StructInfo

# The operators that call functions (kernels, packed functions) rather than compute: the
# executors run them themselves, and a module calling only these needs no Relax pipeline.
SPECIAL_OPS = ("relax.call_tir", "relax.call_dps_packed", "relax.call_packed", "relax.call_pure_packed",
               "relax.call_inplace_packed", "relax.call_builtin_with_ctx", "relax.call_tir_inplace",
               "relax.call_tir_with_grad", "relax.vm.call_tir_dyn", "relax.make_closure",
               "relax.invoke_closure", "relax.invoke_pure_closure", "relax.call_py_func")

# The operators whose Python function makes a float argument a float64 scalar, as TVM's
# ``relax.prim_value`` does (``R.clip(x, 0.0, 6.0)``, also by keyword), as a bare float is outside
# operators (tuples, ``R.call_packed``); TVM's FFI hands the other operators a float32
# (``R.add(x, 1.5)``).
PRIM_VALUE_ARGS: set[str] = set()

# Attribute kinds, which decide how values are checked, stored and printed.
ATTR_ANY, ATTR_INT, ATTR_INTS, ATTR_BOOL, ATTR_STR, ATTR_DTYPE, ATTR_FLOAT, ATTR_PRIM = (
    "any", "int", "ints", "bool", "str", "dtype", "float", "prim")


@dataclass(frozen=True)
class Attr:
    name: str
    default: Any = None
    kind: str = ATTR_ANY
    required: bool = False


@dataclass(frozen=True)
class OpSpec:
    """One Relax operator.

    ``args`` names the Relax arguments (tensors, tuples, shapes); ``variadic`` lets the last one
    repeat. ``attrs`` are the keyword attributes, printed in this order. ``infer`` computes the
    struct info of a call from the arguments' struct info and the attributes, and raises a
    TVMSError naming the operator when they do not fit.
    """

    name: str  # "relax.nn.relu"
    script_name: str  # "nn.relu": printed as R.nn.relu(...)
    args: tuple[str, ...]
    attrs: tuple[Attr, ...]
    infer: Callable[["CallInfo"], StructInfo]
    variadic: bool = False
    min_args: int | None = None  # fewer Relax arguments than ``args`` are allowed (optional ones)
    # Rewrites the arguments and the (normalized, mutable) attributes the way TVM's constructor
    # does before inference: ``R.reshape(x, (-1, 2))`` resolves the -1, ``strides=2`` becomes
    # ``[2, 2]``. ``prepare(spec, args, attrs) -> (args, attrs)``.
    prepare: Callable[["OpSpec", tuple, dict], tuple] | None = None
    # The order in which extra positional arguments fill the attributes, when it is not the
    # printing order (TVM's ``R.nn.max_pool2d(x, pool_size, strides, padding, dilation, ...)``).
    positional: tuple[str, ...] | None = None
    # Values of trailing Relax arguments that may be left out when a later one is given by
    # keyword (TVM's ``R.unique(x, return_counts=True)``); ``prepare`` makes them Relax values.
    arg_defaults: dict | None = None
    # The operator a call really builds, by its bound arguments, when it is another one
    # (``R.nn.attention(q, k, v, bias)`` builds nn.attention_bias, as in TVM); None: this one.
    redirect: Callable[[tuple], str | None] | None = None
    # Attributes of any name, kept as given (``R.call_packed("f", x, test_attr=True)``: TVM's
    # DictAttrs); ``attrs`` is then empty.
    free_attrs: bool = False


@dataclass(frozen=True)
class CallInfo:
    """What inference sees of a call: the op, the arguments and their struct info, the attributes."""

    spec: OpSpec
    args: tuple
    sinfo: tuple  # struct info of each argument
    attrs: FrozenDict
    sinfo_args: tuple

    def fail(self, message: str) -> TVMSError:
        return TVMSError(f"R.{self.spec.script_name}: {message}")


_BY_NAME: dict[str, OpSpec] = {}
_BY_SCRIPT: dict[str, OpSpec] = {}
_tables_loaded = False


def load_tables() -> None:
    """Import the operator tables (``relax_ops*.py``, each module registers its operators) on the
    first lookup rather than with the IR layer: ``import tvms`` does not pay for them."""
    global _tables_loaded
    if not _tables_loaded:
        _tables_loaded = True
        from . import relax_ops, relax_ops_vm  # noqa: F401


def register(script_name: str, args: tuple[str, ...], infer: Callable[[CallInfo], StructInfo],
             attrs: tuple[Attr, ...] = (), *, name: str | None = None, variadic: bool = False,
             min_args: int | None = None, prepare: Callable | None = None,
             positional: tuple[str, ...] | None = None, arg_defaults: dict | None = None,
             redirect: Callable | None = None, free_attrs: bool = False) -> OpSpec:
    spec = OpSpec(name or f"relax.{script_name}", script_name, args, attrs, infer, variadic, min_args,
                  prepare, positional, arg_defaults, redirect, free_attrs)
    _BY_NAME[spec.name] = spec
    _BY_SCRIPT[script_name] = spec
    return spec


def lookup(name: str) -> OpSpec | None:
    """The spec of ``relax.add`` (by operator name) or ``add`` / ``nn.relu`` (by script name)."""
    load_tables()
    return _BY_NAME.get(name) or _BY_SCRIPT.get(name)


def spec_of(op: Op) -> OpSpec:
    load_tables()
    spec = _BY_NAME.get(op.name)
    if spec is None:
        raise TVMSError(f"unknown Relax operator {op.name!r}")
    return spec


def script_names() -> list[str]:
    load_tables()
    return sorted(_BY_SCRIPT)


def coerce_attr(spec: OpSpec, attr: Attr, value: Any) -> Any:
    """``value`` in the canonical form of the attribute's kind: ``ints`` are tuples of Python ints
    (a single int becomes a one-element tuple), ``dtype`` a DataType (None when unset), ``int``,
    ``bool``, ``float`` and ``str`` the Python values. None stays None where the default is None."""
    from .dtype import DataType
    from .expr import FloatImm, IntImm

    kind = attr.kind
    if kind == ATTR_PRIM:  # a float kept as a TensorIR constant (printed T.float32(0.5)), or None
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return FloatImm(DataType("float32"), float(value))
        if value is None or isinstance(value, FloatImm):
            return value
        raise TVMSError(f"R.{spec.script_name}: attribute {attr.name!r} must be a float, got {value!r}")
    if isinstance(value, (IntImm, FloatImm)):
        value = bool(value.value) if value.dtype.is_bool else value.value
    if value is None and (attr.default is None or kind == ATTR_DTYPE):
        return None

    def bad(want: str) -> TVMSError:
        return TVMSError(f"R.{spec.script_name}: attribute {attr.name!r} must be {want}, got {value!r}")

    def as_int(v: Any) -> int:
        if isinstance(v, IntImm):
            v = v.value
        if isinstance(v, bool) or not isinstance(v, int):
            raise bad("an integer" if kind == ATTR_INT else "a list of integers")
        return v

    if kind == ATTR_INT:
        return as_int(value)
    if kind == ATTR_INTS:
        if isinstance(value, (list, tuple)):
            return tuple(as_int(v) for v in value)
        return (as_int(value),)
    if kind == ATTR_BOOL:
        if isinstance(value, bool):
            return value
        if isinstance(value, int) and value in (0, 1):
            return bool(value)
        raise bad("True or False")
    if kind == ATTR_FLOAT:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise bad("a number")
        return float(value)
    if kind == ATTR_STR:
        if not isinstance(value, str):
            raise bad("a string")
        return value
    if kind == ATTR_DTYPE:
        if isinstance(value, str) and value in ("", "void"):
            return None
        try:
            return DataType(value)
        except TVMSError:
            raise bad("a data type such as \"float32\"") from None
    return value


def bind_arguments(spec: OpSpec, args: tuple, attrs: dict) -> tuple[tuple, dict]:
    """Python's calling convention, as TVM's ``R.*`` functions have it: attributes may come
    positionally after the Relax arguments (``R.expand_dims(x, 1)``, ``R.astype(x, "float16")``)
    and Relax arguments by keyword (``R.full(shape=s, fill_value=v)``)."""
    args, attrs = list(args), dict(attrs)
    attr_names = {a.name for a in spec.attrs}
    for i, name in enumerate(spec.args):
        if name not in attrs or name in attr_names:
            continue
        if i < len(args):
            raise TVMSError(f"R.{spec.script_name} got the argument {name!r} twice")
        while i > len(args) and spec.args[len(args)] in (spec.arg_defaults or {}):
            args.append(spec.arg_defaults[spec.args[len(args)]])
        if i > len(args):
            if spec.min_args is None or len(args) < spec.min_args:
                raise TVMSError(f"R.{spec.script_name}: argument {spec.args[len(args)]!r} is missing")
            args += [None] * (i - len(args))  # optional ones left out: the op's prepare fills them
        args.append(attrs.pop(name))
    if not spec.variadic and len(args) > len(spec.args):
        order = spec.positional or tuple(a.name for a in spec.attrs)
        extra = args[len(spec.args):]
        if len(extra) > len(order):
            raise TVMSError(f"R.{spec.script_name} takes at most {len(spec.args) + len(order)} "
                            f"arguments ({', '.join(spec.args + order)}), got {len(args)}")
        del args[len(spec.args):]
        for name, value in zip(order, extra):
            if name in attrs:
                raise TVMSError(f"R.{spec.script_name} got the attribute {name!r} twice")
            attrs[name] = _attr_from_relax(value)
    if spec.min_args is not None:  # an optional argument given as None is absent (bias=None)
        while len(args) > spec.min_args and args[-1] is None:
            args.pop()
    return tuple(args), attrs


def _attr_from_relax(value: Any) -> Any:
    """A positional attribute the parser has made a Relax value (``1`` a PrimValue, ``[0, 1]`` a
    Tuple, ``"float16"`` a StringImm) as the plain value the attribute holds."""
    from .relax import DataTypeImm, PrimValue, ShapeExpr, StringImm, Tuple

    if isinstance(value, PrimValue):
        return value.value
    if isinstance(value, (StringImm, DataTypeImm)):
        return value.value
    if isinstance(value, Tuple):
        return tuple(_attr_from_relax(f) for f in value.fields)
    if isinstance(value, ShapeExpr):
        return tuple(value.values)
    return value


def normalize_attrs(spec: OpSpec, attrs: dict) -> FrozenDict:
    """All of the op's attributes, defaults filled in, in the declared order."""
    if spec.free_attrs:
        return FrozenDict(attrs)
    unknown = set(attrs) - {a.name for a in spec.attrs}
    if unknown:
        raise TVMSError(f"R.{spec.script_name} has no attribute {sorted(unknown)[0]!r}; "
                        f"it takes {', '.join(a.name for a in spec.attrs) or 'none'}")
    out = {}
    for a in spec.attrs:
        if a.name in attrs:
            out[a.name] = coerce_attr(spec, a, attrs[a.name])
        elif a.required:
            raise TVMSError(f"R.{spec.script_name} needs the attribute {a.name!r}")
        else:
            out[a.name] = a.default
    return FrozenDict(out)


def make_call(op: "str | OpSpec", args: list | tuple, attrs: dict | None = None,
              sinfo_args: tuple = (), span: Any = None) -> Any:
    """A Call of a registered operator with its struct info inferred (the builder's ``emit``
    and the parser both build calls through here)."""
    from .relax import Call

    spec = op if isinstance(op, OpSpec) else lookup(op)
    if spec is None:
        raise TVMSError(f"unknown Relax operator {op!r}")
    args, attrs = bind_arguments(spec, tuple(args), attrs or {})
    target = spec.redirect(args) if spec.redirect is not None else None
    if target is not None:
        spec = lookup(target)
    low = spec.min_args if spec.min_args is not None else len(spec.args)
    if len(args) < low or (not spec.variadic and len(args) > len(spec.args)):
        want = f"{low}" if low == len(spec.args) and not spec.variadic else f"at least {low}"
        raise TVMSError(f"R.{spec.script_name} takes {want} argument{'s' if want != '1' else ''} "
                        f"({', '.join(spec.args)}), got {len(args)}")
    try:
        normalized = normalize_attrs(spec, attrs)
        if spec.prepare is not None:  # the op's constructor rewrites (see OpSpec.prepare)
            args, prepared = spec.prepare(spec, args, dict(normalized))
            args, normalized = tuple(args), FrozenDict(prepared)
        from .struct_info import ObjectStructInfo

        sinfo = tuple(getattr(a, "struct_info", None) or ObjectStructInfo() for a in args)
        info = CallInfo(spec, args, sinfo, normalized, tuple(sinfo_args))
        if spec.name in SPECIAL_OPS or spec.name.startswith("relax.dist.") \
                or not any(isinstance(s, DTensorStructInfo) for s in sinfo):
            sinfo = spec.infer(info)
        else:  # operands distributed over a device mesh
            from .relax_ops_dist import infer_on_dtensors

            sinfo = infer_on_dtensors(spec, info)
    except TVMSError as e:  # every error of a call names its operator
        message = str(e)
        prefix = f"R.{spec.script_name}"
        raise TVMSError(message if message.startswith(prefix) else f"{prefix}: {message}") from None
    except (TypeError, AttributeError, ValueError, KeyError, IndexError) as e:
        raise TVMSError(f"R.{spec.script_name}: invalid arguments or attributes ({e})") from None
    return Call(get_op(spec.name), args, normalized, tuple(sinfo_args), sinfo, span=span)
