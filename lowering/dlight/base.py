"""Default schedules without tuning: ``ScheduleRule`` and the ``ApplyDefaultSchedule`` pass.

A rule looks at one PrimFunc and either schedules it (returns a ``Schedule``) or declines
(returns None), leaving the function to the next rule. ``ApplyDefaultSchedule(*rules)`` runs the
rules in order on every PrimFunc of a module that is not scheduled yet, and marks each function
it schedules with ``"tir.is_scheduled": True`` so a second run leaves it alone.

    mod = tvms.dlight.ApplyDefaultSchedule(dl.cpu.Matmul(), dl.cpu.Reduction(),
                                           dl.cpu.Fallback())(mod)     # under `with target:`
"""
from __future__ import annotations

from typing import Any, Callable

from ...ir import stmt as S
from ...ir.errors import TVMSError
from ...ir.function import PrimFunc
from ...ir.module import IRModule
from ...ir.module import Target as IRTarget
from ...ir.node import FrozenDict
from ...ir.target import Target
from ...ir.visitor import collect
from ..schedule import Schedule, ScheduleError
from ..transform import module_pass

IS_SCHEDULED = "tir.is_scheduled"


class ScheduleRule:
    """``apply(func, target, tunable)`` returns a ``Schedule`` of ``func`` (whose module holds
    it as ``"main"``), or None when the rule does not apply."""

    name = "ScheduleRule"

    def apply(self, func: PrimFunc, target: Any, tunable: bool) -> "Schedule | list | None":
        raise NotImplementedError(f"{type(self).__name__}.apply")

    def is_target_available(self, target: Any) -> bool:
        return True

    @staticmethod
    def from_callable(name: str) -> Callable[[Callable], "ScheduleRule"]:
        """``@ScheduleRule.from_callable("MyRule")`` turns ``f(func, target, tunable)`` into a rule."""

        def decorator(f: Callable) -> ScheduleRule:
            rule = ScheduleRule()
            rule.name = name
            rule.apply = f  # type: ignore[method-assign]
            return rule

        return decorator

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


def is_scheduled(func: PrimFunc) -> bool:
    """Whether ``func`` needs no default schedule: marked ``tir.is_scheduled``, already lowered
    to loops (no blocks), or carrying a loop a schedule made (parallel, vectorized, unrolled,
    bound to a thread)."""
    if bool(func.attrs.get(IS_SCHEDULED, False)):
        return True
    if not collect(func.body, (S.Block, S.BlockRealize)):
        return True
    return any(loop.kind != S.SERIAL or loop.annotations for loop in collect(func.body, S.For))


def mark_scheduled(func: PrimFunc) -> PrimFunc:
    return func.with_changes(attrs=FrozenDict({**func.attrs, IS_SCHEDULED: True}))


def function_target(func: PrimFunc) -> Any:
    """The target a function is scheduled for: its ``target`` attribute, else the current one."""
    target = func.attrs.get("target") or Target.current()
    if target is None:
        raise TVMSError("ApplyDefaultSchedule needs a target: run it under "
                        "`with tvms.target.Target(\"llvm\"):`")
    if isinstance(target, IRTarget):  # T.target({...}) in the function's attributes
        return Target(target.config)  # (the dict form, parsed where every target is)
    return target if isinstance(target, Target) else Target(str(target))


def apply_rules(func: PrimFunc, target: Any, rules: list, tunable: bool = False) -> "Schedule | None":
    """The first schedule a rule gives for ``func`` (rules for other targets are skipped). A rule
    that fails with a ScheduleError counts as declining: the next rule gets the function."""
    for rule in rules:
        if not rule.is_target_available(target):
            continue
        try:
            space = rule.apply(func, target, tunable)
        except ScheduleError:
            continue
        if isinstance(space, list):
            space = space[0] if space else None
        if space is not None:
            return space
    return None


@module_pass(opt_level=0, name="ApplyDefaultSchedule")
class ApplyDefaultSchedule:
    """Schedule every PrimFunc that ``is_scheduled`` says is not, with the first rule that applies."""

    def __init__(self, *rules: ScheduleRule) -> None:
        for rule in rules:
            if not isinstance(rule, ScheduleRule):
                raise TVMSError(f"ApplyDefaultSchedule takes ScheduleRules, got {type(rule).__name__}")
        self.rules = list(rules)

    def transform_module(self, mod: IRModule, ctx: Any) -> IRModule:
        for name in list(mod):
            func = mod[name]
            if not isinstance(func, PrimFunc) or is_scheduled(func):
                continue
            sch = apply_rules(func, function_target(func), self.rules)
            if sch is not None:
                mod[mod.get_global_var(name)] = mark_scheduled(sch.mod["main"])
        return mod


__all__ = ["IS_SCHEDULED", "ApplyDefaultSchedule", "ScheduleRule", "apply_rules", "function_target",
           "is_scheduled", "mark_scheduled"]
