"""The registry of Relax operators: one entry per operator, carrying its script spelling, its
arguments and attributes (with defaults, in printing order) and its struct-info inference.

Adding an operator means adding one ``register(...)`` call (see ``relax_ops.py``); the parser,
the printer, the builder (``relax.op.*``) and the passes all read this table.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from .errors import TVMSError
from .expr import Op
from .node import FrozenDict
from .struct_info import StructInfo

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
_OPS: dict[str, Op] = {}


def register(script_name: str, args: tuple[str, ...], infer: Callable[[CallInfo], StructInfo],
             attrs: tuple[Attr, ...] = (), *, name: str | None = None, variadic: bool = False,
             min_args: int | None = None) -> OpSpec:
    spec = OpSpec(name or f"relax.{script_name}", script_name, args, attrs, infer, variadic, min_args)
    _BY_NAME[spec.name] = spec
    _BY_SCRIPT[script_name] = spec
    return spec


def lookup(name: str) -> OpSpec | None:
    """The spec of ``relax.add`` (by operator name) or ``add`` / ``nn.relu`` (by script name)."""
    return _BY_NAME.get(name) or _BY_SCRIPT.get(name)


def spec_of(op: Op) -> OpSpec:
    spec = _BY_NAME.get(op.name)
    if spec is None:
        raise TVMSError(f"unknown Relax operator {op.name!r}")
    return spec


def get_op(name: str) -> Op:
    """The one Op object of a Relax operator (``relax.add``)."""
    op = _OPS.get(name)
    if op is None:
        op = _OPS[name] = Op(name)
    return op


def script_names() -> list[str]:
    return sorted(_BY_SCRIPT)


def normalize_attrs(spec: OpSpec, attrs: dict) -> FrozenDict:
    """All of the op's attributes, defaults filled in, in the declared order."""
    unknown = set(attrs) - {a.name for a in spec.attrs}
    if unknown:
        raise TVMSError(f"R.{spec.script_name} has no attribute {sorted(unknown)[0]!r}; "
                        f"it takes {', '.join(a.name for a in spec.attrs) or 'none'}")
    out = {}
    for a in spec.attrs:
        if a.name in attrs:
            out[a.name] = attrs[a.name]
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
    args = tuple(args)
    low = spec.min_args if spec.min_args is not None else len(spec.args)
    if len(args) < low or (not spec.variadic and len(args) > len(spec.args)):
        want = f"{low}" if low == len(spec.args) and not spec.variadic else f"at least {low}"
        raise TVMSError(f"R.{spec.script_name} takes {want} argument{'s' if want != '1' else ''} "
                        f"({', '.join(spec.args)}), got {len(args)}")
    normalized = normalize_attrs(spec, attrs or {})
    from .struct_info import ObjectStructInfo

    sinfo = tuple(getattr(a, "struct_info", None) or ObjectStructInfo() for a in args)
    info = CallInfo(spec, args, sinfo, normalized, tuple(sinfo_args))
    sinfo = spec.infer(info)
    return Call(get_op(spec.name), args, normalized, tuple(sinfo_args), sinfo, span=span)
