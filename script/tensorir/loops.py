"""Loops: ``range``, ``T.serial``, ``T.parallel``, ``T.vectorized``, ``T.unroll``,
``T.thread_binding`` and ``T.grid``, read as nested ``For`` statements and printed back with the
grid sugar (nested serial loops from 0 over independent extents print as one ``T.grid``)."""
from __future__ import annotations

from typing import Any

from ...ir import arith
from ...ir.dtype import DataType
from ...ir.errors import Comments
from ...ir.expr import THREAD_INDEX, IntImm, IterVar, Var, const
from ...ir.node import EMPTY, FrozenDict
from ...ir.stmt import PARALLEL, SERIAL, THREAD_BINDING, UNROLLED, VECTORIZED, For, Stmt
from ...ir.visitor import walk
from .. import syntax as S
from .evaluator import Builtin, arith_extent
from .attrs import norm_attrs
from .rules import parses, prints
from .text import comments_of, display_add, is_zero, quote

_LOOP_KINDS = {"serial": SERIAL, "parallel": PARALLEL, "vectorized": VECTORIZED,
               "unroll": UNROLLED, "thread_binding": THREAD_BINDING}


class LoopParsing:
    """Reading loops (mixed into the TIRBuilder)."""

    @parses("for", "grid", *_LOOP_KINDS)
    def loop(self, syn: S.For, func: Builtin, rest: list) -> Stmt:
        """``for i in T.serial(...)`` and the other kinds, ``for i, j in T.grid(...)``."""
        it = syn.iter
        targets = syn.target.elts if isinstance(syn.target, S.TupleExpr) else [syn.target]
        names = [self.target_name(t) for t in targets]
        args = [self.ev(a) for a in it.args]
        kwargs = {k: self.ev(v) for k, v in it.kwargs}
        if func.path == "grid":
            if kwargs:
                raise self.error(it, "T.grid takes only extents")
            if len(args) != len(names):
                raise self.error(syn.target, f"T.grid has {len(args)} extents but the loop names "
                                 f"{len(names)} variables")
            loops = [(name, const(0, self.int_expr(a, it).dtype), self.int_expr(a, it), SERIAL, None, EMPTY, None)
                     for name, a in zip(names, args)]
        else:
            if len(names) != 1:
                raise self.error(syn.target, f"{'range' if func.path == 'serial' else 'T.' + func.path} "
                                 f"defines one loop variable, not {len(names)}")
            loops = [self.loop_header(names[0], func.path, args, kwargs, it)]
        vars_ = []
        for name, lo, extent, *_ in loops:
            var = self.declared_loop_var(name, extent.dtype) or Var(name, extent.dtype)
            vars_.append(var)
            self.loop_doms[var] = (lo, extent)
        body = self.scoped(lambda: self.body(syn.body), dict(zip(names, vars_)))
        for var, (_name, lo, extent, kind, thread, loop_annotations, step) in reversed(list(zip(vars_, loops))):
            binding = IterVar(None, Var("", var.dtype), THREAD_INDEX, thread) if thread else None
            body = For(var, lo, extent, kind, body, binding, loop_annotations, step, span=self.span(syn))
        return body

    def declared_loop_var(self, name: str, dtype: DataType) -> Var | None:
        """The variable ``name = T.int64()`` declared, when this loop is the first to bind it.
        TVM's printer writes a loop variable used before its loop (``T.attr(v, "pragma_...")``
        on the loop, a block predicate naming the loop inside the block) as such a declaration,
        and the loop under the same name."""
        var = self.lookup_local(name)
        if isinstance(var, Var) and var in self.func.unbound and var.dtype == dtype:
            self.func.unbound.discard(var)
            return var
        return None

    def loop_header(self, name: str, kind: str, args: list, kwargs: dict, syn: Any) -> tuple:
        thread = kwargs.pop("thread", None)
        annotations = norm_attrs(kwargs.pop("annotations", None) or {}, self.dialect)
        step = kwargs.pop("step", None) if kind != "thread_binding" else None
        if kind == "serial" and "unroll" in kwargs:
            annotations = FrozenDict({**annotations, **_unroll_annotation(self, kwargs.pop("unroll"), syn)})
        if kind == "serial" and isinstance(syn.func, S.Name) and len(args) == 3:  # range(a, b, step)
            step = args.pop()
        if kwargs:
            raise self.error(syn, f"unexpected argument {next(iter(kwargs))!r} for a loop")
        if kind == "thread_binding" and thread is None:
            raise self.error(syn, "T.thread_binding needs thread=\"threadIdx.x\" (or another thread)")
        if not 1 <= len(args) <= 2:
            raise self.error(syn, f"a loop takes an extent, or a start and an end (and a step: "
                             f"range(a, b, step), T.{kind}(a, b, step=s)); got {len(args)} "
                             f"argument{'s' if len(args) != 1 else ''}")
        if len(args) == 1:
            extent = self.int_expr(args[0], syn)
            lo = const(0, extent.dtype)
        else:
            lo, end = arith.match_types(self.int_expr(args[0], syn), self.int_expr(args[1], syn))
            extent = arith_extent(lo, end)
        if step is not None:
            lo, step = arith.match_types(lo, self.int_expr(step, syn))
        return (name, lo, extent, _LOOP_KINDS[kind], thread, annotations, step)


def _unroll_annotation(b: Any, unroll: Any, syn: Any) -> dict:
    """``T.serial(n, unroll=...)``, TVM 0.27's spelling of the unroll annotations the CUDA code
    generator reads: True (``#pragma unroll``), a count, or False (``#pragma unroll 1``)."""
    if unroll is False:
        return {"disable_unroll": True}
    if _unrolls(unroll):
        return {"pragma_unroll": unroll}  # (as written: T.bool(True) stays a TIR constant)
    raise b.error(syn, f"unroll= is True, False or a positive count, got {unroll!r}")


def _unrolls(value: Any) -> bool:
    """True, a positive count, or such a TIR constant."""
    if isinstance(value, IntImm):
        value = value.value
    return value is True or type(value) is int and value > 0


def _unroll_sugar(annotations: FrozenDict) -> Any:
    """The ``unroll=`` value that reads as exactly these annotations (False: ``disable_unroll``),
    or None."""
    if len(annotations) != 1:
        return None
    (key, value), = annotations.items()
    if key == "disable_unroll" and value is True:
        return False
    return value if key == "pragma_unroll" and _unrolls(value) else None


class LoopPrinting:
    """Printing loops (mixed into the TIRPrinter)."""

    @prints(For)
    def st_for(self, s: For, concise: bool, top: bool) -> None:
        grid: list[For] = []
        grid_vars: set[int] = set()
        loop: Any = s
        while isinstance(loop, For):
            if (loop.kind != SERIAL or not is_zero(loop.min) or loop.annotations or not loop.has_trivial_step
                    or any(isinstance(n, Var) and id(n) in grid_vars for n in walk(loop.extent))):
                break
            grid.append(loop)
            grid_vars.add(id(loop.loop_var))
            loop = loop.body
        self.namer.push()
        if len(grid) > 1:
            extents = ", ".join(self.expr(g.extent) for g in grid)
            names = ", ".join(self.loop_name(g.loop_var) for g in grid)
            for g in grid:
                self.loop_doms[id(g.loop_var)] = (g.min, g.extent)
            self.emit(f"for {names} in T.grid({extents}):")
            body = grid[-1].body
            inner = _merged_comments(grid)
        else:
            args = []
            if is_zero(s.min) and s.has_trivial_step:
                args.append(self.expr(s.extent))
            else:
                args += [self.expr(s.min), self.expr(display_add(s.min, s.extent))]
            if s.kind == SERIAL:
                head = "range" if not s.annotations else "T.serial"
            else:
                head = f"T.{s.kind}"
            if s.kind == THREAD_BINDING and s.thread_binding is not None:
                args.append(f"thread={quote(s.thread_binding.thread_tag)}")
            sugar = _unroll_sugar(s.annotations) if s.kind == SERIAL and self.d.name != "classic" else None
            if sugar is not None:
                args.append(f"unroll={self.value(sugar)}")
            elif s.annotations:
                args.append(f"annotations={self.attr_dict(s.annotations)}")
            if not s.has_trivial_step:
                args.append(f"{'' if head == 'range' else 'step='}{self.expr(s.step)}")
            name = self.loop_name(s.loop_var)
            self.loop_doms[id(s.loop_var)] = (s.min, s.extent)
            self.emit(f"for {name} in {head}({', '.join(args)}):")
            body = s.body
            inner = None
        self.indent += 1
        if inner is None:
            self.framed(s, lambda: self.body(body, top=True))
        else:  # the comments of loops merged into T.grid open and close its body
            head = self.comments_before(inner)
            self.framed(s, lambda: self.body(body, top=True))
            self.comments_after(inner, head)
        self.indent -= 1
        self.namer.pop()


def _merged_comments(grid: list) -> Comments | None:
    """The comments of the inner loops of a T.grid (the outer one prints its own), as lines at
    the start of its body and below it; the loops of one T.grid statement share the outer's."""
    outer, merged = comments_of(grid[0]), None
    for loop in grid[1:]:
        notes = comments_of(loop)
        if notes is None or notes is outer:
            continue
        part = Comments(before=notes.before + ((notes.after,) if notes.after else ()), below=notes.below)
        merged = part if merged is None else merged + part
    return merged
