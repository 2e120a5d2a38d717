"""UnrollLoop: unroll ``T.unroll`` loops, and the small loops under an auto-unroll pragma.

A loop of kind unroll with a constant extent becomes one copy of its body per iteration, the loop
variable replaced by the iteration's value, unsimplified (TVM prints the first copy's
``k_0 * 4 + k_1`` as ``T.Add(k_0 * 4, 0)``).

Under ``T.attr(v, "pragma_auto_unroll_max_step", N)`` (what a loop annotation of that name becomes
in LowerOpaqueBlock; the meta-schedule's unroll decisions end up there) a serial loop of constant
extent is unrolled too, with TVM 0.27's rules: counting, bottom-up, a store or an ``Evaluate`` as
one step and a loop as its extent times its body's steps, a loop is unrolled when no loop inside it
stays a loop, it is at most ``auto_max_depth`` unrolled loops deep, and its steps are at most N (or
its extent at most ``auto_max_extent``; or, with ``unroll_local_access``, its variable indexes a
``local``/``warp`` buffer, so that the buffer can live in registers).
``T.attr(v, "pragma_unroll_explicit", 0)`` keeps those loops as loops of kind unroll (the code
generator asks LLVM to unroll them) instead of copying. Both pragmas are removed. The defaults are
TVM's (``tirx.UnrollLoop`` in the pass context's config may change them): max step 0, max depth
8, max extent 0, explicit, no local access rule.

A loop whose body breaks or continues stays a loop. A ``T.unroll`` loop whose extent is not a
constant is refused, as TVM refuses it ("Cannot unroll non-constant loop").
"""
from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any

from ...ir.analysis import controls_loop, substitute
from .fresh_bindings import fresh_bindings
from ...ir.errors import ScriptError, TVMSError
from ...ir.expr import Add, BufferLoad, IntImm, Var, const
from ...ir.function import PrimFunc
from ...ir.stmt import (SERIAL, THREAD_BINDING, UNROLLED, AttrStmt, BufferStore, Evaluate, For, SeqStmt,
                        Stmt, seq)
from ...ir.visitor import Mutator, collect
from ..pass_registry import register_pass
from ..transform import Pass, PassContext
from .tir_pass import checked_prim_func_pass

MAX_STEP, EXPLICIT = "pragma_auto_unroll_max_step", "pragma_unroll_explicit"


@dataclass(frozen=True)
class UnrollLoopConfig:
    """TVM's ``tirx.UnrollLoop`` pass config."""
    auto_max_step: int = 0
    auto_max_depth: int = 8
    auto_max_extent: int = 0
    explicit_unroll: bool = True
    unroll_local_access: bool = False


class _Unroller(Mutator):
    def __init__(self, config: UnrollLoopConfig) -> None:
        self.max_step, self.max_depth = config.auto_max_step, config.auto_max_depth
        self.max_extent, self.explicit = config.auto_max_extent, config.explicit_unroll
        self.local_access = config.unroll_local_access
        self.indexing_local: set = set()  # variables in the indices of local/warp buffers
        # In the statements visited so far (reset per statement of a sequence): steps, the depth
        # of unrolled loops, and of loops that stay loops.
        self.steps = self.unroll_depth = self.loop_depth = 0

    def visit_AttrStmt(self, attr: AttrStmt) -> Stmt:
        name = {MAX_STEP: "max_step", EXPLICIT: "explicit"}.get(attr.attr_key)
        if name is None:
            return self.generic_visit(attr)
        if not isinstance(attr.value, IntImm):
            raise TVMSError(f"{attr.attr_key} must be an integer constant, got {attr.value}")
        saved = getattr(self, name)
        setattr(self, name, attr.value.value if name == "max_step" else bool(attr.value.value))
        body = self.visit(attr.body)
        setattr(self, name, saved)
        return body

    def visit_BufferStore(self, store: BufferStore) -> Stmt:
        self.steps += 1
        if self.local_access:
            self._mark_local(store)
            self.visit(store.value)
        return store

    def visit_BufferLoad(self, load: BufferLoad) -> BufferLoad:
        if self.local_access:
            self._mark_local(load)
        return load

    def _mark_local(self, access: BufferLoad | BufferStore) -> None:
        if access.buffer.scope.split(".")[0] in ("local", "warp"):
            self.indexing_local.update(v for index in access.indices for v in collect(index, Var))

    def visit_Evaluate(self, ev: Evaluate) -> Stmt:
        self.steps += 1
        return ev

    def visit_SeqStmt(self, s: SeqStmt) -> Stmt:
        out = []
        for stmt in s.seq:
            steps, unroll_depth, loop_depth = self.steps, self.unroll_depth, self.loop_depth
            self.steps = self.unroll_depth = self.loop_depth = 0
            out.append(self.visit(stmt))
            self.steps += steps
            self.unroll_depth = max(self.unroll_depth, unroll_depth)
            self.loop_depth = max(self.loop_depth, loop_depth)
        return s if all(a is b for a, b in zip(out, s.seq)) else SeqStmt(tuple(out))

    def visit_For(self, loop: For) -> Stmt:
        loop = self.generic_visit(loop)
        extent = loop.extent.value if isinstance(loop.extent, IntImm) else None
        refuse_unknown_unroll(loop)
        # (a loop with a step: CanonicalizeLoop first; copies of a body that breaks or continues
        # would leave the wrong loop)
        copyable = extent is not None and loop.has_trivial_step and not controls_loop(loop.body)
        unroll = copyable and (
            loop.kind == UNROLLED
            or (loop.kind == SERIAL and self.loop_depth == 0 and self.unroll_depth <= self.max_depth
                and (extent * self.steps <= self.max_step or extent <= self.max_extent))
            or (self.local_access and extent > 0 and loop.loop_var in self.indexing_local
                and loop.kind != THREAD_BINDING))
        if unroll:
            self.steps *= extent
            self.unroll_depth += 1
        else:
            self.loop_depth += 1
        # (a loop of one iteration goes whenever auto_max_extent is 1, however long its body)
        if (unroll and self.explicit) or (copyable and extent <= 1 and self.max_extent == 1):
            return _copies(loop, extent)
        return replace(loop, kind=UNROLLED) if unroll and loop.kind != UNROLLED else loop


def refuse_unknown_unroll(loop: For) -> None:
    """Refuse a ``T.unroll`` loop whose extent is not a constant, as TVM's UnrollLoop does
    ("Cannot unroll non-constant loop"): its body cannot be copied a known number of times (and
    LLVM, asked to unroll it, only warns that it could not)."""
    if loop.kind == UNROLLED and not isinstance(loop.extent, IntImm):
        raise ScriptError(f"cannot unroll the loop over {loop.loop_var.name}: its extent is not a constant "
                          f"(T.unroll needs a known number of iterations; write range(...) for a plain loop)",
                          loop.span)  # (where the loop was read from a script: its position)


def _copies(loop: For, extent: int) -> Stmt:
    """The body once per iteration, the loop variable replaced by its value."""
    if extent == 0:
        return Evaluate(const(0, "int32"))
    def value(k: int):
        if isinstance(loop.min, IntImm):
            return const(loop.min.value + k, loop.loop_var.dtype)
        return loop.min if k == 0 else Add(loop.min, const(k, loop.loop_var.dtype))
    copies = [substitute(loop.body, {loop.loop_var: value(k)}) for k in range(extent)]
    return seq(copies[:1] + [fresh_bindings(c) for c in copies[1:]])  # (no variable bound twice, as TVM's)


def unroll_loop(func: PrimFunc, config: UnrollLoopConfig | None = None) -> PrimFunc:
    """``func`` with its unrolled loops expanded (see the module docstring)."""
    return func.with_changes(body=_Unroller(config or UnrollLoopConfig()).visit(func.body))


def config_of(options: Any) -> UnrollLoopConfig:
    """The config a ``{"tirx.UnrollLoop": {...}}`` pass-context entry asks for: its fields by
    name, ints as ints and bools as bools (or 0 and 1); anything else is refused by name."""
    if isinstance(options, UnrollLoopConfig):
        return options
    if not isinstance(options, dict):
        raise TVMSError(f"tirx.UnrollLoop: expected an object of options, got {type(options).__name__}")
    known = {f.name: f.type for f in fields(UnrollLoopConfig)}
    unknown = set(options) - set(known)
    if unknown:
        raise TVMSError(f"tirx.UnrollLoop: unknown option(s) {sorted(unknown)}; known: {sorted(known)}")
    values = {}
    for name, value in options.items():
        if known[name] == "bool" and (isinstance(value, bool) or value in (0, 1) and isinstance(value, int)):
            values[name] = bool(value)
        elif known[name] == "int" and isinstance(value, int) and not isinstance(value, bool):
            values[name] = value
        else:
            raise TVMSError(f"tirx.UnrollLoop: {name} takes {'a bool' if known[name] == 'bool' else 'an integer'}, "
                            f"not {value!r}")
    return UnrollLoopConfig(**values)


def unroll_loop_in_context(func: PrimFunc, ctx: PassContext | None = None) -> PrimFunc:
    """``unroll_loop`` with the thresholds of ``ctx`` (default: the current PassContext, as a
    build pipeline runs it)."""
    ctx = ctx or PassContext.current()
    return unroll_loop(func, config_of(ctx.config.get("tirx.UnrollLoop", {})))


def UnrollLoop() -> Pass:
    """The UnrollLoop pass; the pass context's ``tirx.UnrollLoop`` config sets its thresholds."""
    return checked_prim_func_pass(lambda func, mod, ctx: unroll_loop_in_context(func, ctx), "UnrollLoop")


register_pass("UnrollLoop", UnrollLoop)

__all__ = ["UnrollLoop", "UnrollLoopConfig", "config_of", "refuse_unknown_unroll", "unroll_loop",
           "unroll_loop_in_context"]
