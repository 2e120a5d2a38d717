"""Well-formedness of Relax functions and modules (TVM's ``relax.analysis.well_formed``).

A Relax program is well formed when every variable is defined once (SSA) and used only where its
definition is visible: after its binding, inside the branch or function that binds it, and, for a
``DataflowVar``, inside its own dataflow block; when every symbolic size is defined by a parameter's
struct info or a ``match_cast`` before it is used; and when every ``GlobalVar`` names a function of
the module. ``well_formed`` answers yes or no; ``well_formed_problem`` says what is wrong.
"""
from __future__ import annotations

from typing import Any

from . import relax as rx
from .errors import ScriptError, TVMSError
from .expr import Var as SizeVar
from .module import GlobalVar, IRModule
from .struct_info import conflict
from .visitor import collect


class _Problem(Exception):
    pass


class _Checker:
    def __init__(self, functions: set | None):
        self.functions = functions  # a module's function names (None: a lone function)
        self.defined: set[int] = set()  # every Relax variable bound so far in the function
        self.visible: list[set[int]] = [set()]  # scopes, innermost last
        self.sizes: list[set[int]] = [set()]  # symbolic sizes defined, by the same scopes

    def fail(self, message: str) -> None:
        raise _Problem(message)

    # --- scopes
    def push(self) -> None:
        self.visible.append(set())
        self.sizes.append(set())

    def pop(self) -> None:
        self.visible.pop()
        self.sizes.pop()

    def is_visible(self, var: rx.Var) -> bool:
        return any(id(var) in scope for scope in self.visible)

    def define(self, var: rx.Var, in_dataflow: bool) -> None:
        if id(var) in self.defined:
            self.fail(f"the variable {var.name} is defined more than once")
        if isinstance(var, rx.DataflowVar) and not in_dataflow:
            self.fail(f"the dataflow variable {var.name} is bound outside a dataflow block")
        self.defined.add(id(var))
        self.visible[-1].add(id(var))

    def define_sizes(self, node: Any) -> None:
        for v in collect(node, SizeVar):
            self.sizes[-1].add(id(v))

    def use_sizes(self, node: Any, where: str) -> None:
        for v in collect(node, SizeVar):
            if not any(id(v) in scope for scope in self.sizes):
                self.fail(f"the symbolic size {v.name} is used in {where} before it is defined")

    # --- the program
    def function(self, func: rx.Function) -> None:
        self.push()
        for p in func.params:
            if isinstance(p, rx.DataflowVar):
                self.fail(f"the parameter {p.name} is a dataflow variable")
            self.define_sizes(p.struct_info)
            self.define(p, in_dataflow=False)
        self.expr(func.body)
        self.pop()

    def expr(self, e: Any) -> None:
        if isinstance(e, rx.Var):
            if not self.is_visible(e):
                kind = "dataflow variable" if isinstance(e, rx.DataflowVar) else "variable"
                self.fail(f"the {kind} {e.name} is used where it is not defined")
        elif isinstance(e, GlobalVar):
            if self.functions is not None and e.name_hint not in self.functions:
                self.fail(f"the global function {e.name_hint} is not in the module")
        elif isinstance(e, rx.SeqExpr):
            self.push()  # (bindings of a branch's or function's body end with it)
            for block in e.blocks:
                self.block(block)
            self.expr(e.body)
            self.pop()
        elif isinstance(e, rx.Function):
            self.function(e)  # a closure: it sees the enclosing variables
        elif isinstance(e, rx.If):
            self.expr(e.cond)
            self.expr(e.true_branch)
            self.expr(e.false_branch)
        elif isinstance(e, rx.Call):
            self.expr(e.op)
            for a in e.args:
                self.expr(a)
            self.use_sizes(e.sinfo_args, "a call's struct info")
        elif isinstance(e, rx.Tuple):
            for f in e.fields:
                self.expr(f)
        elif isinstance(e, rx.TupleGetItem):
            self.expr(e.tuple_value)
        elif isinstance(e, (rx.ShapeExpr, rx.PrimValue)):
            self.use_sizes(e, "an expression")

    def block(self, block: rx.BindingBlock) -> None:
        in_dataflow = isinstance(block, rx.DataflowBlock)
        dataflow_vars = []
        for b in block.bindings:
            self.expr(b.value)
            if isinstance(b, rx.MatchCast):
                self.define_sizes(b.struct_info)  # match_cast is where new sizes come from
            else:
                self.use_sizes(b.var.struct_info, f"the struct info of {b.var.name}")
            self.define(b.var, in_dataflow)
            if isinstance(b.var, rx.DataflowVar):
                dataflow_vars.append(id(b.var))
        for v in dataflow_vars:  # a dataflow variable does not outlive its block
            self.visible[-1].discard(v)


def well_formed_problem(obj: "IRModule | rx.Function") -> str | None:
    """What makes ``obj`` ill formed, or None when it is well formed."""
    if isinstance(obj, IRModule):
        names = {gv.name_hint for gv in obj.get_global_vars()}
        funcs = [(name, obj[name]) for name in names if isinstance(obj[name], rx.Function)]
    elif isinstance(obj, rx.Function):
        names, funcs = None, [("the function", obj)]
    else:
        raise TVMSError(f"well_formed takes an IRModule or a Relax function, not a {type(obj).__name__}")
    for name, func in sorted(funcs, key=lambda nf: nf[0]):
        try:
            _Checker(names).function(func)
        except _Problem as p:
            return f"{name}: {p}"
    return None


def well_formed(obj: "IRModule | rx.Function", check_struct_info: bool = True) -> bool:
    """True when ``obj`` is well formed (TVM's ``relax.analysis.well_formed``; tvms keeps every
    expression's struct info, so ``check_struct_info`` changes nothing)."""
    return well_formed_problem(obj) is None


def verify_return_annotations(mod: IRModule) -> None:
    """Raise a ``ScriptError`` at a Relax function whose return annotation no value of its body
    can satisfy (a kind, dtype, rank or constant size that differs). TVM reads and compiles such
    a function, which fails when it returns; ``tvms.compile`` refuses it before that."""
    for gv in sorted(mod.get_global_vars(), key=lambda g: g.name_hint):
        func = mod[gv]
        if not isinstance(func, rx.Function):
            continue
        reason = conflict(func.ret_struct_info, func.body.struct_info)
        if reason is not None:
            raise ScriptError(f"{gv.name_hint}: the return annotation contradicts the value returned "
                              f"(annotation vs value: {reason})", func.span)


__all__ = ["verify_return_annotations", "well_formed", "well_formed_problem"]
