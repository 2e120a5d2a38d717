"""PostOrderApply: the design space made by applying schedule rules to every block in turn."""
from __future__ import annotations

import random
from typing import Any, Callable

from ...ir.errors import TVMSError
from ...ir.function import PrimFunc
from ...ir.module import IRModule
from ...ir.stmt import BlockRealize
from ..schedule.schedule import Schedule
from ..schedule.tree import stmt_children
from .rule_analysis import has_block, site
from .rule_apply_custom import SCHEDULE_RULE, ApplyCustomRule
from .space_generator import FROM_TARGET, SpaceGenerator


class PostOrderApply(SpaceGenerator):
    """``PostOrderApply(f_block_filter=None, sch_rules="from-target", postprocs="from-target",
    mutator_probs="from-target")`` as TVM's.

    The blocks of the function are collected in post order (inner blocks before the block around
    them) and each rule in turn visits all of them, last first; a rule that returns several
    schedules branches the space, and each branch goes on with the blocks left (TVM's stack
    walk, so the sketches come out in TVM's order). A block annotated ``schedule_rule`` is left to
    ApplyCustomRule. "from-target" takes the target kind's defaults (``default_space.py``) when
    the TuneContext is made.
    """

    def __init__(self, f_block_filter: "Callable | None" = None, sch_rules: Any = FROM_TARGET,
                 postprocs: Any = FROM_TARGET, mutator_probs: Any = FROM_TARGET) -> None:
        super().__init__(sch_rules, postprocs, mutator_probs)
        self.f_block_filter = f_block_filter
        self.rand_state = random.randrange(1 << 31)

    def _initialize_with_tune_context(self, context: Any) -> None:
        super()._initialize_with_tune_context(context)
        self.rand_state = self._fork_seed()

    def generate_design_space(self, mod: "IRModule | PrimFunc") -> list[Schedule]:
        if not isinstance(self.sch_rules, (list, tuple)):
            raise TVMSError("PostOrderApply has no schedule rules: give sch_rules, or a TuneContext "
                            "with a target for the default ones")
        rng = random.Random(self.rand_state)
        self.rand_state = rng.randrange(1 << 31)
        sch = Schedule(mod, seed=rng.randrange(1 << 31))
        blocks = [sch.get_sblock(name, func_name=fname) for fname, name in self._collect(sch)]
        results = [sch]
        for rule in self.sch_rules:
            stack = [(s, blocks) for s in results]
            results = []
            while stack:
                s, todo = stack.pop()
                if not todo:
                    results.append(s)
                    continue
                block, todo = todo[-1], todo[:-1]
                if not has_block(s, block) or (
                        not isinstance(rule, ApplyCustomRule)
                        and SCHEDULE_RULE in site(s, block)[1].block.annotations):
                    stack.append((s, todo))
                    continue
                stack.extend((after, todo) for after in rule.apply(s, block))
        return results

    def _collect(self, sch: Schedule) -> list[tuple[str, str]]:
        """(function, block name) of every block, inner blocks first, in program order."""
        mod = sch.mod
        fnames = [sch.func_working_on] if sch.func_working_on else [
            name for name in mod if isinstance(mod[name], PrimFunc)]
        found: list[tuple[str, str]] = []
        for fname in fnames:
            names: list[str] = []
            self._post_order(mod[fname].body, names)
            if len(set(names)) != len(names):
                raise TVMSError(f"function {fname!r} has two blocks of one name; PostOrderApply needs "
                                f"distinct block names")
            found.extend((fname, name) for name in names)
        return found

    def _post_order(self, stmt: Any, names: list[str]) -> None:
        for child in stmt_children(stmt.block if isinstance(stmt, BlockRealize) else stmt):
            self._post_order(child, names)
        if isinstance(stmt, BlockRealize) and (self.f_block_filter is None or self.f_block_filter(stmt.block)):
            names.append(stmt.block.name_hint)

