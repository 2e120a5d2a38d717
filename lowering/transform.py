"""Pass infrastructure, shaped like TVM's ``tvm.transform``: passes, ``Sequential``, ``PassContext``.

::

    @tvms.transform.module_pass(opt_level=0, name="ReluToGelu")
    class ReluToGelu:
        def transform_module(self, mod, ctx):
            ...
            return new_mod

    with tvms.transform.PassContext(opt_level=3, instruments=[PrintAfterAll()]):
        mod = tvms.transform.Sequential([ReluToGelu(), OtherPass()])(mod)

A pass never changes the module it is given: the module (a mutable container) is copied before
the pass function sees it, so a pass may update its argument in place and return it.

As in TVM, a pass called directly always runs; ``Sequential`` skips the passes that the current
context does not enable (``opt_level`` above the context's, or named in ``disabled_pass``, unless
named in ``required_pass``). Instruments (``tvms.lowering.instrument``) wrap every pass that is
not a ``Sequential``: a Sequential is a container, and its children report for it.
"""
from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from ..ir.context_stack import ContextStack
from ..ir.deep import deep_recursion
from ..ir.errors import TVMSError
from ..ir.module import IRModule
from ..ir.relax import Function as RelaxFunction
from ..ir.function import PrimFunc


class PassError(TVMSError):
    """A pass failed (it raised, returned something that is not an IRModule, or an instrument
    found its result broken). ``pass_name`` names the pass."""

    def __init__(self, pass_name: str, message: str):
        super().__init__(f"pass {pass_name!r}: {message}")
        self.pass_name = pass_name


@dataclass(frozen=True)
class PassInfo:
    """What a pass is called and when it runs."""

    opt_level: int
    name: str
    required: tuple = ()

    def __str__(self) -> str:
        return f"{self.name} (opt_level={self.opt_level})"


# --------------------------------------------------------------------------- the context


_ENTERED = ContextStack("tvms_pass_contexts")  # (per thread, as TVM's: ir/context_stack.py)


class PassContext:
    """The settings passes run under; ``with PassContext(opt_level=3): ...`` makes it current.

    ``config`` holds free-form options for passes (``{"relax.FuseOps.max_depth": 4}``);
    ``instruments`` are ``PassInstrument`` objects called around every pass."""

    def __init__(self, opt_level: int = 2, required_pass: Sequence[str] | None = None,
                 disabled_pass: Sequence[str] | None = None, instruments: Sequence[Any] | None = None,
                 config: dict | None = None):
        if not isinstance(opt_level, int) or opt_level < 0:
            raise TVMSError(f"PassContext: opt_level must be a non-negative int, got {opt_level!r}")
        self.opt_level = opt_level
        self.required_pass = tuple(required_pass or ())
        self.disabled_pass = tuple(disabled_pass or ())
        self.instruments = list(instruments or ())
        self.config = dict(config or {})

    @staticmethod
    def current() -> "PassContext":
        """The innermost context entered with ``with``, or a default one (opt_level 2)."""
        return _ENTERED.current() or _DEFAULT_CONTEXT

    def __enter__(self) -> "PassContext":
        for inst in self.instruments:
            _call(inst, "enter_pass_ctx")
        _ENTERED.push(self)
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        _ENTERED.pop(self)
        for inst in self.instruments:
            _call(inst, "exit_pass_ctx")

    @staticmethod
    def list_configs() -> dict[str, dict[str, str]]:
        """The config options tvms's passes read: ``{name: {"type": kind}}``, as TVM lists its own."""
        from .pass_config import PASS_CONFIGS

        return {name: {"type": kind} for name, (kind, _) in sorted(PASS_CONFIGS.items())}

    def portable(self) -> "PassContext":
        """This context's settings without its instruments (which belong to this process): what a
        build in a worker process runs under."""
        return PassContext(self.opt_level, self.required_pass, self.disabled_pass, config=self.config)

    def pass_enabled(self, info: PassInfo) -> bool:
        """Whether ``Sequential`` runs a pass with this info under this context."""
        if info.name in self.disabled_pass:
            return False
        if info.name in self.required_pass:
            return True
        return info.opt_level <= self.opt_level

    def override_instruments(self, instruments: Sequence[Any]) -> None:
        for inst in self.instruments:
            _call(inst, "exit_pass_ctx")
        self.instruments = list(instruments)
        for inst in self.instruments:
            _call(inst, "enter_pass_ctx")


_DEFAULT_CONTEXT = PassContext()


@deep_recursion  # (a rerun on deep IR starts from a fresh copy; the instruments see one run)
def _transform_copy(pass_: "Pass", mod: IRModule, ctx: "PassContext") -> IRModule:
    return pass_._transform(mod.copy(), ctx)


def _call(instrument: Any, hook: str, *args: Any) -> Any:
    method = getattr(instrument, hook, None)
    return method(*args) if method is not None else None


# --------------------------------------------------------------------------- passes


class Pass:
    """A transformation of an IRModule. ``pass_(mod)`` returns a new module; ``mod`` is unchanged."""

    info: PassInfo

    def __call__(self, mod: IRModule) -> IRModule:
        if not isinstance(mod, IRModule):
            raise TVMSError(f"{self.info.name}: a pass applies to an IRModule, got {type(mod).__name__}")
        return self._apply(mod, PassContext.current())

    def _apply(self, mod: IRModule, ctx: PassContext) -> IRModule:
        """Run under ``ctx`` with its instruments around the pass."""
        for inst in ctx.instruments:
            if _call(inst, "should_run", mod, self.info) is False:
                return mod
        for inst in ctx.instruments:
            _call(inst, "run_before_pass", mod, self.info)
        try:
            result = _transform_copy(self, mod, ctx)
        except PassError:
            raise
        except Exception as err:  # a pass's own failure: say which pass it was
            raise PassError(self.info.name, f"{type(err).__name__}: {err}") from err
        if not isinstance(result, IRModule):
            raise PassError(self.info.name, f"returned {type(result).__name__}, not an IRModule")
        for inst in ctx.instruments:
            _call(inst, "run_after_pass", result, self.info)
        return result

    def _transform(self, mod: IRModule, ctx: PassContext) -> IRModule:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.info.name!r}, opt_level={self.info.opt_level})"


class ModulePass(Pass):
    """A pass made from ``transform_module(mod, ctx) -> IRModule``."""

    def __init__(self, pass_func: Callable[[IRModule, PassContext], IRModule], info: PassInfo):
        self.pass_func = pass_func
        self.info = info

    def _transform(self, mod: IRModule, ctx: PassContext) -> IRModule:
        return self.pass_func(mod, ctx)


class FunctionPass(Pass):
    """A pass made from ``transform_function(func, mod, ctx) -> func``, applied to every function
    of one kind (Relax functions; PrimFuncs for ``prim_func_pass``). A function it returns
    unchanged (the same object) stays as it was."""

    def __init__(self, pass_func: Callable, info: PassInfo, kind: type = RelaxFunction):
        self.pass_func = pass_func
        self.info = info
        self.kind = kind

    def _transform(self, mod: IRModule, ctx: PassContext) -> IRModule:
        for gv, func in mod.functions_items():
            if isinstance(func, self.kind):
                new = self.pass_func(func, mod, ctx)
                if new is not func:
                    mod[gv] = new
        return mod


class Sequential(Pass):
    """Passes run in order, each on the result of the one before; those the context does not
    enable are skipped."""

    def __init__(self, passes: Sequence[Pass] | None = None, opt_level: int = 0,
                 name: str = "sequential", required: Sequence[str] | None = None):
        self.passes = list(passes or [])
        for p in self.passes:
            if not isinstance(p, Pass):
                raise TVMSError(f"Sequential: expected passes, got {type(p).__name__}")
        self.info = PassInfo(opt_level, name, tuple(required or ()))

    def _apply(self, mod: IRModule, ctx: PassContext) -> IRModule:
        for p in self.passes:
            if ctx.pass_enabled(p.info):
                mod = p._apply(mod, ctx)
        return mod


# --------------------------------------------------------------------------- decorators


def _check_opt_level(opt_level: Any) -> int:
    if opt_level is None:  # TVM insists on one; 0 (always enabled) is the useful default
        return 0
    if not isinstance(opt_level, int) or isinstance(opt_level, bool) or opt_level < 0:
        raise TVMSError(f"opt_level must be a non-negative int, got {opt_level!r}")
    return opt_level


def _decorator(pass_cls: type, method: str, pass_arg: Any, opt_level: Any, name: str | None,
               required: Sequence[str] | None, extra: dict) -> Any:
    opt_level = _check_opt_level(opt_level)

    def make(target: Any) -> Any:
        pass_name = name or target.__name__
        info = PassInfo(opt_level, pass_name, tuple(required or ()))
        if inspect.isclass(target):
            if not callable(getattr(target, method, None)):
                raise TVMSError(f"{target.__name__}: a pass class needs a {method}() method")
            return _pass_class(target, pass_cls, method, info, extra)
        if callable(target):
            return pass_cls(target, info, **extra)
        raise TVMSError(f"cannot make a pass of a {type(target).__name__}")

    return make(pass_arg) if pass_arg is not None else make


def _pass_class(target: type, pass_cls: type, method: str, info: PassInfo, extra: dict) -> type:
    """A subclass of ``pass_cls`` whose constructor builds a ``target`` with the same arguments."""

    def __init__(self: Pass, *args: Any, **kwargs: Any) -> None:
        inst = target(*args, **kwargs)
        pass_cls.__init__(self, getattr(inst, method), info, **extra)
        self.instance = inst

    def __getattr__(self: Pass, attr: str) -> Any:  # the user's attributes, through the pass
        if attr == "instance":
            raise AttributeError(attr)
        return getattr(self.instance, attr)

    wrapper = type(target.__name__, (pass_cls,), {
        "__init__": __init__, "__getattr__": __getattr__, "__doc__": target.__doc__,
        "__module__": target.__module__, "__qualname__": target.__qualname__,
        "__wrapped__": target, "pass_info": info,
    })
    functools.update_wrapper(wrapper.__init__, target.__init__, updated=())
    return wrapper


def module_pass(pass_func: Any = None, opt_level: int | None = None, name: str | None = None,
                required: Sequence[str] | None = None) -> Any:
    """Make a ``ModulePass`` of a function ``f(mod, ctx)`` or of a class with
    ``transform_module(self, mod, ctx)``; as a decorator with arguments, or called directly.
    A decorated class becomes a pass class: ``ReluToGelu()`` is a pass."""
    return _decorator(ModulePass, "transform_module", pass_func, opt_level, name, required, {})


def function_pass(pass_func: Any = None, opt_level: int | None = None, name: str | None = None,
                  required: Sequence[str] | None = None) -> Any:
    """Make a ``FunctionPass`` over the module's Relax functions of ``f(func, mod, ctx)`` or of a
    class with ``transform_function(self, func, mod, ctx)``."""
    return _decorator(FunctionPass, "transform_function", pass_func, opt_level, name, required,
                      {"kind": RelaxFunction})


def prim_func_pass(pass_func: Any = None, opt_level: int | None = None, name: str | None = None,
                   required: Sequence[str] | None = None) -> Any:
    """As ``function_pass``, over the module's PrimFuncs."""
    return _decorator(FunctionPass, "transform_function", pass_func, opt_level, name, required,
                      {"kind": PrimFunc})


__all__ = ["FunctionPass", "ModulePass", "Pass", "PassContext", "PassError", "PassInfo",
           "Sequential", "function_pass", "module_pass", "prim_func_pass"]
