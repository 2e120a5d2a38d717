"""IRModule: named functions (TensorIR and, later, Relax) plus module attributes."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator

from .errors import TVMSError
from .node import EMPTY, FrozenDict, Node, printer


@dataclass(frozen=True, slots=True, eq=False)
class GlobalVar(Node):
    """The name of a function in a module; calls refer to functions through it."""

    name_hint: str

    def __repr__(self) -> str:
        return f"GlobalVar({self.name_hint!r})"


@dataclass(frozen=True, slots=True, eq=False)
class Target(Node):
    """A compilation target as written in attributes: ``T.target({"kind": "llvm", ...})``."""

    config: FrozenDict = EMPTY

    @property
    def kind(self) -> str:
        return str(self.config.get("kind", ""))


@dataclass(frozen=True, slots=True, eq=False)
class MetadataRef(Node):
    """``metadata["ffi.Module"][0]``: an entry of a metadata section that the text left out."""

    key: str
    index: int


class IRModule:
    """A set of named functions. Functions keep their insertion order (the order they print in).

    Unlike the nodes, a module is a mutable container, as in TVM (``mod["main"] = f``).

    ``source_dialect`` is the name of the dialect of the text the module was parsed from
    (``"classic"`` or ``"tvm-0.27"``), detected once per text by the parser, or None for a module
    built in Python (BlockBuilder, te, nn). It is what a schedule's trace, ``tvms fmt`` and the CLI
    print in by default. Like ``span`` it is a remark about where the IR came from, not part of
    it: structural equality and hashing ignore it. It travels the way ``span`` does: ``copy()``
    (and so every pass that copies the module) keeps it, a module assembled from parsed functions
    takes it from them (each parsed ``PrimFunc`` and Relax ``Function`` carries it as a
    non-structural field, which ``with_changes`` keeps), and a function a pass builds anew has none.
    """

    __slots__ = ("_functions", "attrs", "global_infos", "span", "source_dialect")

    def __init__(self, functions: dict | None = None, attrs: dict | None = None, span=None,
                 source_dialect: str | None = None):
        self._functions: dict[str, tuple[GlobalVar, Node]] = {}
        self.attrs: FrozenDict = FrozenDict(attrs) if attrs else EMPTY
        # I.module_global_infos: kind ("vdevice") -> tuple of entries (ir/global_info.py)
        self.global_infos: FrozenDict = EMPTY
        self.span = span
        for key, func in (functions or {}).items():
            self[key] = func
        self.source_dialect = source_dialect or next(
            (d for _, f in self._functions.values() if (d := getattr(f, "source_dialect", None))), None)

    @staticmethod
    def from_expr(func: Node, functions: "dict | None" = None) -> "IRModule":
        """A module holding ``func`` (and ``functions``), named as TVM names it: by the function's
        ``global_symbol`` attribute, or ``main`` for one without (e.g. a private function)."""
        attrs = getattr(func, "attrs", None)
        if attrs is None:
            raise TVMSError(f"IRModule.from_expr takes a PrimFunc or a Relax function, not a "
                            f"{type(func).__name__}")
        name = str(attrs["global_symbol"]) if "global_symbol" in attrs else "main"
        return IRModule({**(functions or {}), name: func})

    # -- mapping interface
    def __getitem__(self, key: "str | GlobalVar") -> Node:
        name = key.name_hint if isinstance(key, GlobalVar) else key
        try:
            return self._functions[name][1]
        except KeyError:
            raise TVMSError(f"the module has no function {name!r}; it has "
                            f"{', '.join(self._functions) or 'none'}") from None

    def __setitem__(self, key: "str | GlobalVar", func: Node) -> None:
        name = key.name_hint if isinstance(key, GlobalVar) else key
        gv = key if isinstance(key, GlobalVar) else (
            self._functions[name][0] if name in self._functions else GlobalVar(name))
        self._functions[name] = (gv, func)

    def __delitem__(self, key: "str | GlobalVar") -> None:
        del self._functions[key.name_hint if isinstance(key, GlobalVar) else key]

    def __contains__(self, key: object) -> bool:
        name = key.name_hint if isinstance(key, GlobalVar) else key
        return name in self._functions

    def __len__(self) -> int:
        return len(self._functions)

    def __iter__(self) -> Iterator[str]:
        return iter(self._functions)

    def functions_items(self) -> list[tuple[GlobalVar, Node]]:
        return list(self._functions.values())

    @property
    def functions(self) -> dict[GlobalVar, Node]:
        return dict(self._functions.values())

    def get_global_var(self, name: str) -> GlobalVar:
        if name not in self._functions:
            raise TVMSError(f"the module has no function {name!r}")
        return self._functions[name][0]

    def get_global_vars(self) -> list[GlobalVar]:
        return [gv for gv, _ in self._functions.values()]

    def update_func(self, gv: GlobalVar, func: Node) -> None:
        self[gv] = func

    def with_attrs(self, attrs: dict[str, Any]) -> "IRModule":
        mod = self.copy()
        merged = dict(self.attrs)
        merged.update(attrs)
        mod.attrs = FrozenDict(merged)
        return mod

    def copy(self) -> "IRModule":
        mod = self.empty_copy()
        mod._functions = dict(self._functions)
        return mod

    def empty_copy(self) -> "IRModule":
        """A module with none of the functions but all the rest of this one: attributes, global
        infos (the vdevices its functions name), span and dialect (what a pass that rebuilds
        the module function by function starts from)."""
        mod = IRModule(attrs=self.attrs, span=self.span, source_dialect=self.source_dialect)
        mod.global_infos = self.global_infos
        return mod

    # -- printing
    def script(self, **kwargs: Any) -> str:
        return printer()(self, **kwargs)

    def show(self, style: str | None = None, black_format: bool | None = None, **kwargs: Any) -> None:
        """Print ``script(**kwargs)`` (TVM's ``style`` and ``black_format`` are accepted; tvms
        prints plain text, already in its final layout)."""
        print(self.script(**kwargs))

    def __repr__(self) -> str:
        return f"IRModule({', '.join(self._functions)})"

    def __str__(self) -> str:
        return self.script()


def offloaded_functions(mod: IRModule) -> dict:
    """The functions RunCodegen built of ``mod``'s offloaded ones (its ``external_mods``), by
    symbol: what the module's packed calls of those symbols mean."""
    return {symbol: fn for made in mod.attrs.get("external_mods", ()) for symbol, fn in made.functions.items()}
