"""Text helpers of the TensorIR printer: string and float literals, printable names (``Namer``),
the positions of comments, and the small folds TVM's printer applies (``display_add``)."""
from __future__ import annotations

import keyword
import math
import re
from typing import Any

from ...ir.errors import Comments
from ...ir.expr import Add, FloatImm, IntImm, PrimExpr, Var
from ...ir.stmt import Evaluate, Stmt

_INVALID = re.compile(r"\W")


def quote(s: str) -> str:
    """A Python string literal in double quotes, as TVM prints strings."""
    out = s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t").replace("\r", "\\r")
    return f'"{out}"'


def format_float(value: float) -> str:
    """As TVM prints a float: whole numbers with one decimal, others with 17 significant digits
    (C's %.17g), and inf/nan as strings."""
    if math.isinf(value) or math.isnan(value):
        return quote("nan" if math.isnan(value) else "inf" if value > 0 else "-inf")
    if value == math.floor(value):
        return "%.1f" % value
    return "%.17g" % value


# Names a printed variable may not take: the script's module aliases and Python's keywords.
RESERVED = frozenset(["T", "I", "R"] + keyword.kwlist + ["range", "metadata", "cls", "Module"])


def def_name(name: str) -> str:
    """A function's name as its ``def`` line can hold it: as TVM prints it, every character that
    cannot be in a Python identifier becomes ``_`` (and a leading digit or a keyword gets one). The
    parser takes the ``def`` name for the global symbol only when ``T.func_attr`` gives none; the
    printers print the real one there whenever the two differ, so the name parses back."""
    shown = _INVALID.sub("_", name) or "_"
    if shown[0].isdigit():
        shown = "_" + shown
    return shown + "_" if keyword.iskeyword(shown) else shown


class Namer:
    """Gives variables and buffers unique printable names; names are freed when scopes end."""

    def __init__(self) -> None:
        self.names: dict[int, str] = {}
        self.used: dict[str, int] = {name: 1 for name in RESERVED}
        self.frames: list[list[tuple[int, str]]] = [[]]
        self.keep: list = []

    def push(self) -> None:
        self.frames.append([])

    def pop(self) -> None:
        for key, name in self.frames.pop():
            if self.names.get(key) == name:  # (an object defined again inside keeps the new name
                del self.names[key]           # until that frame ends)
            self.used[name] -= 1
            if not self.used[name]:
                del self.used[name]

    def define(self, obj: Any, hint: str, frame: int = -1) -> str:
        """A unique name for ``obj``, held until ``frame`` (default: the innermost) ends."""
        base = _INVALID.sub("_", hint) or "v"
        if base[0].isdigit():
            base = "v" + base
        name, n = base, 0
        while name in self.used:
            n += 1
            name = f"{base}_{n}"
        self.names[id(obj)] = name
        self.used[name] = self.used.get(name, 0) + 1
        self.frames[frame].append((id(obj), name))
        self.keep.append(obj)
        return name

    def get(self, obj: Any) -> str | None:
        return self.names.get(id(obj))

    def alias(self, obj: Any, other: Any) -> None:
        """``obj`` takes the name of ``other`` (two objects that print as one), in its frame."""
        name = self.names[id(other)]
        self.names[id(obj)] = name
        self.used[name] += 1
        self.frames[-1].append((id(obj), name))
        self.keep.append(obj)


class ParamUsed(Exception):
    """The body uses a handle parameter that was printed inline as its buffer."""

    def __init__(self, param: Var):
        super().__init__(param.name)
        self.param = param


def comments_of(node: Any) -> Comments | None:
    span = getattr(node, "span", None)
    return span.comments if span is not None else None


def display_add(a: PrimExpr, b: PrimExpr) -> PrimExpr:
    """``a + b`` folded as TVM's printer folds it: constants add up and zeros vanish."""
    if isinstance(a, IntImm) and isinstance(b, IntImm):
        return IntImm(a.dtype, a.value + b.value)
    if is_zero(b):
        return a
    if is_zero(a):
        return b
    return Add(a, b)


def is_nop(s: Stmt) -> bool:
    return isinstance(s, Evaluate) and isinstance(s.value, IntImm) and s.value.value == 0


def is_filler(s: Stmt) -> bool:
    """The ``T.evaluate(0)`` (int32) that the parser makes the body of a flat statement (an
    assert, a binding, an allocation) that nothing follows: printed as nothing, it reads back so
    (a ``T.evaluate(T.bool(False))`` there does not: it prints)."""
    return is_nop(s) and s.value.dtype.name == "int32"


def is_zero(e: Any) -> bool:
    return isinstance(e, IntImm) and e.value == 0


def is_number(e: Any) -> bool:
    return isinstance(e, (IntImm, FloatImm))
