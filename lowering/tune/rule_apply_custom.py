"""ApplyCustomRule: a block annotated ``schedule_rule="name"`` is scheduled by the function the
user registered as ``s_tir.meta_schedule.<target key>.<name>``."""
from __future__ import annotations

import warnings
from typing import Any

from ...ir.errors import TVMSError
from ...ir.registry import get_global_func
from ...ir.stmt import Block
from ...ir.visitor import collect
from .rule_analysis import site
from .schedule_rule import ScheduleRule

SCHEDULE_RULE = "schedule_rule"
# the keys TVM gives a target kind when the target names none
_DEFAULT_KEYS = {"llvm": ("cpu",), "cuda": ("cuda", "gpu")}


def leave_to_no_other_rule(sch: Any) -> None:
    """Mark every block of the function ``sch`` works on ``schedule_rule="None"``, so that the
    rules after the one that scheduled it leave it as it is."""
    for name in {b.name_hint for b in collect(sch.mod[sch.func_working_on].body, Block)}:
        sch.annotate(sch.get_block(name), SCHEDULE_RULE, "None")


class ApplyCustomRule(ScheduleRule):
    """Runs the registered function ``f(sch, block) -> list[Schedule]`` named by the block's
    ``schedule_rule`` annotation (``"None"``: no rule); an unknown name warns, drops the
    annotation and leaves the block to the other rules, as TVM does."""

    def __init__(self) -> None:
        self.keys: tuple = ()
        self.target: Any = None

    def _initialize_with_tune_context(self, context: Any) -> None:
        target = getattr(context, "target", None)
        if target is None:
            raise TVMSError("ApplyCustomRule needs a TuneContext with a target")
        self.keys = tuple(target.keys) or _DEFAULT_KEYS.get(target.kind, (target.kind,))
        self.target = target

    def apply(self, sch: Any, block: Any) -> list:
        name = site(sch, block)[1].block.annotations.get(SCHEDULE_RULE)
        if name is None or name == "None":
            return [sch]
        names = [f"s_tir.meta_schedule.{key}.{name}" for key in self.keys]
        for full_name in names:
            custom = get_global_func(full_name, allow_missing=True)
            if custom is not None:  # (under the task's target: a rule may size its tiles by it)
                with self.target:
                    return list(custom(sch, block))
        warnings.warn(f"unknown schedule rule {name!r} for target keys {list(self.keys)}; looked for "
                      + ", ".join(names), stacklevel=2)
        sch.unannotate(block, SCHEDULE_RULE)
        return [sch]
