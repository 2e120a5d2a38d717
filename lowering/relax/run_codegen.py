"""RunCodegen: hand the functions FuseOpsByPattern marked ``"Codegen"`` to their backends, as
TVM's ``relax.transform.RunCodegen`` does.

For each backend named by a ``"Codegen"`` attribute, the codegen registered as
``relax.ext.<backend>`` (in the runtime's function registry) receives those functions and
returns the modules it built; the functions' packed implementations are registered under their
``global_symbol``. Every call of such a function becomes
``R.call_dps_packed("<global_symbol>", (args...), out_sinfo=...)``; the functions, and the
composite functions nothing calls any more, leave the module; the built modules are listed in
the module attribute ``external_mods`` (printed ``metadata["ffi.Module"][i]``, as TVM does).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from ...ir import relax as rx
from ...ir.errors import TVMSError
from ...ir.module import GlobalVar, IRModule, MetadataRef
from ...ir.node import FrozenDict
from ...ir.registry import get_global_func, register_func
from ...ir.relax_op import make_call
from ...ir.struct_info import TupleStructInfo
from ...ir.visitor import walk
from ..pass_registry import register_pass
from ..transform import module_pass
from .backend import unavailable_reason
from .passes import _substitute


@dataclass(frozen=True, slots=True, eq=False)
class ExternalModule(MetadataRef):
    """A module a backend built: its packed functions by global symbol. It sits in the
    module's ``external_mods`` and prints as the metadata entry TVM prints for it."""

    backend: str = ""
    functions: FrozenDict = FrozenDict()

    def get_function(self, symbol: str) -> Callable:
        if symbol not in self.functions:
            raise TVMSError(f"the {self.backend} module has no function {symbol!r}")
        return self.functions[symbol]


@dataclass(frozen=True, slots=True, eq=False)
class ExternalConstant(MetadataRef):
    """A constant an offloaded function holds, handed to its backend by name; it sits in the
    module's ``const_name_to_constant`` and prints as TVM's ``metadata["ffi.Tensor"][i]``."""

    data: Any = None


def external_module(backend: str, functions: dict, index: int = 0) -> ExternalModule:
    """An ExternalModule for ``backend`` holding ``functions`` (symbol -> packed function)."""
    return ExternalModule("ffi.Module", index, backend, FrozenDict(functions))


# the symbols RunCodegen registered (compiling a module again registers them anew); a symbol the
# script names is never let replace another global function, tvms's or the user's
_OFFLOADED: set[str] = set()


def _register_offloaded(symbol: str, fn: Any) -> None:
    if symbol not in _OFFLOADED and get_global_func(symbol, allow_missing=True) is not None:
        raise TVMSError(f"RunCodegen: the offloaded function's symbol {symbol!r} is the name of a global "
                        f"function already registered; give the function another global_symbol")
    register_func(symbol, fn, override=True)
    _OFFLOADED.add(symbol)


@module_pass(opt_level=0, name="RunCodegen")
class RunCodegen:
    """``relax.transform.RunCodegen(target_options, entry_functions)``: offload the functions
    annotated ``"Codegen"`` to their backends. ``target_options``: backend -> options dict,
    passed to the codegen. (``entry_functions`` is accepted for TVM's signature: every
    function of the module is rewritten.)"""

    def __init__(self, target_options: dict | None = None, entry_functions: list | None = None):
        self.target_options = dict(target_options or {})
        self.entry_functions = list(entry_functions or [])

    def transform_module(self, mod: IRModule, ctx: Any = None) -> IRModule:
        by_backend: dict[str, list] = {}
        for gv, func in mod.functions_items():
            if isinstance(func, rx.Function) and "Codegen" in func.attrs:
                by_backend.setdefault(str(func.attrs["Codegen"]), []).append((gv, func))
        if not by_backend:
            return mod
        built = list(mod.attrs.get("external_mods", ()))
        constants: dict = {}  # name -> ExternalConstant, as TVM names them
        for backend, items in by_backend.items():
            names = _constant_names(items, backend)
            constants.update((name, ExternalConstant("ffi.Tensor", i, c.data))
                             for i, (c, name) in enumerate(names.items(), len(constants)))
            try:
                codegen = get_global_func(f"relax.ext.{backend}")
            except TVMSError:
                why = unavailable_reason(backend)
                raise TVMSError(f"RunCodegen: no codegen for the backend {backend!r}: "
                                + (why if why else f"register one as 'relax.ext.{backend}'")) \
                    from None
            options = self.target_options.get(backend, {})
            for made in codegen([f for _, f in items], options, names):
                if not isinstance(made, ExternalModule):
                    raise TVMSError(f"RunCodegen: relax.ext.{backend} returned a "
                                    f"{type(made).__name__}, not an ExternalModule")
                made = external_module(made.backend, made.functions, len(built))
                for symbol, fn in made.functions.items():
                    _register_offloaded(symbol, fn)
                built.append(made)
        offloaded = {gv.name_hint: f for items in by_backend.values() for gv, f in items}
        for gv, func in mod.functions_items():
            if isinstance(func, rx.Function) and gv.name_hint not in offloaded:
                new = _call_packed_instead(func, offloaded)
                if new is not func:
                    mod[gv] = new
        for name in offloaded:
            del mod[name]
        _drop_unused_composites(mod)
        attrs = {"const_name_to_constant": FrozenDict(constants)} if constants else {}
        return mod.with_attrs({**attrs, "external_mods": tuple(built)})


def _constant_names(items: list, backend: str) -> dict:
    """Constant -> ``<global_symbol>_<backend>_const_<i>`` for the constants in the offloaded
    functions (TVM's RunCodegen gives these to the codegen and keeps them in the module)."""
    names: dict = {}
    for gv, func in items:
        symbol = str(func.attrs.get("global_symbol", gv.name_hint))
        found = [n for n in walk(func.body) if isinstance(n, rx.Constant)]
        names.update((c, f"{symbol}_{backend}_const_{i}") for i, c in enumerate(found))
    return names


def _call_packed_instead(func: rx.Function, offloaded: dict) -> rx.Function:
    """``func`` with each call of an offloaded function made a ``call_dps_packed`` of its
    global symbol."""
    mapping: dict = {}
    for n in walk(func):
        if isinstance(n, rx.Call) and isinstance(n.op, GlobalVar) and n.op.name_hint in offloaded:
            target = offloaded[n.op.name_hint]
            ret = n.struct_info
            outs = ret.fields if isinstance(ret, TupleStructInfo) else (ret,)
            symbol = str(target.attrs.get("global_symbol", n.op.name_hint))
            mapping[n] = make_call("call_dps_packed", [rx.ExternFunc(symbol), rx.Tuple(n.args)],
                                   sinfo_args=tuple(outs), span=n.span)
    return _substitute(func, mapping) if mapping else func


def _drop_unused_composites(mod: IRModule) -> None:
    used = {n.name_hint for _, f in mod.functions_items() for n in walk(f)
            if isinstance(n, GlobalVar)}
    for gv, func in mod.functions_items():
        if isinstance(func, rx.Function) and "Composite" in func.attrs and gv.name_hint not in used:
            del mod[gv]


register_pass(factory=RunCodegen)

__all__ = ["ExternalConstant", "ExternalModule", "RunCodegen", "external_module"]
