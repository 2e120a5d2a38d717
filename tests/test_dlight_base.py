"""ApplyDefaultSchedule and ScheduleRule (lowering/dlight/base.py): which functions a rule
sees, what declining means, the is_scheduled mark, and the error when no target is set."""
from __future__ import annotations

import pytest

import tvms
from tvms.lowering.dlight import ApplyDefaultSchedule, ScheduleRule, is_scheduled
from tvms.script import from_source

from conftest import ROOT

MATMUL = (ROOT / "examples" / "matmul.tvms").read_text()


def _parallel_outer(func, target, tunable):
    sch = tvms.tir.Schedule(func)
    sch.parallel(sch.get_loops(sch.get_block("C"))[0])
    return sch


class Recorder(ScheduleRule):
    """Declines everything and remembers what it was offered."""

    def __init__(self):
        self.seen = []

    def apply(self, func, target, tunable):
        self.seen.append((func, str(target), tunable))
        return None


def test_first_applying_rule_wins_and_marks_the_function():
    recorder = Recorder()
    parallel = ScheduleRule.from_callable("ParallelOuter")(_parallel_outer)
    with tvms.target.Target("llvm -num-cores=2"):
        out = ApplyDefaultSchedule(recorder, parallel, Recorder())(from_source(MATMUL))
    assert [target for _, target, _ in recorder.seen] == ["llvm -num-cores=2"]
    assert recorder.seen[0][2] is False  # default schedules are not tunable
    text = out.script()
    assert 'T.func_attr({"tir.is_scheduled": True})' in text
    assert "for i in T.parallel(128):" in text
    assert is_scheduled(out["main"])
    assert from_source(text).script() == text


def test_scheduled_functions_are_left_alone():
    recorder = Recorder()
    parallel = ScheduleRule.from_callable("ParallelOuter")(_parallel_outer)
    with tvms.target.Target("llvm"):
        once = ApplyDefaultSchedule(parallel)(from_source(MATMUL))
        twice = ApplyDefaultSchedule(recorder, parallel)(once)
        hand = tvms.tir.Schedule(from_source(MATMUL))
        hand.vectorize(hand.get_loops(hand.get_block("C"))[1])
        ApplyDefaultSchedule(recorder)(hand.mod)
    assert twice.script() == once.script()
    assert recorder.seen == []  # neither the marked nor the hand-scheduled function was offered


def test_declining_rules_and_failing_schedules_leave_the_function_unchanged():
    def broken(func, target, tunable):
        sch = tvms.tir.Schedule(func)
        sch.vectorize(sch.get_loops(sch.get_block("C"))[2])  # a reduction loop: a ScheduleError
        return sch

    mod = from_source(MATMUL)
    with tvms.target.Target("llvm"):
        out = ApplyDefaultSchedule(Recorder(), ScheduleRule.from_callable("Broken")(broken))(mod)
    assert out.script() == mod.script()
    assert not is_scheduled(out["main"])


def test_no_target_is_a_clear_error():
    with pytest.raises(tvms.TVMSError, match="needs a target"):
        ApplyDefaultSchedule(Recorder())(from_source(MATMUL))


def test_rules_must_be_schedule_rules():
    with pytest.raises(tvms.TVMSError, match="takes ScheduleRules"):
        ApplyDefaultSchedule(_parallel_outer)
