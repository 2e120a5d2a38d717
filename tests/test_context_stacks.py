"""What ``with`` makes current is per thread, as in TVM (its contexts are thread-local): a target,
a PassContext or a tuning database one thread enters is not another's, and leaving one in a
thread does not leave another thread's (the entered objects had been one list for the process,
and ``__exit__`` popped whatever was on top). A walk tvms moves to a thread of its own (deep
programs: ir/deep.py) keeps the caller's."""
from __future__ import annotations

import threading

import tvms
from tvms.ir.deep import run_deep
from tvms.ir.target import Target
from tvms.lowering.transform import PassContext
from tvms.lowering.tune.database import Database, MemoryDatabase


def _current() -> tuple:
    return Target.current(), PassContext.current().config.get("k"), Database.current()


def test_contexts_entered_in_one_thread_are_not_anothers() -> None:
    entered, leave, seen = threading.Event(), threading.Event(), []
    target, database = Target("llvm"), MemoryDatabase()

    def other() -> None:
        with Target("cuda"), PassContext(config={"k": "other"}), MemoryDatabase():
            entered.set()
            leave.wait(30)
            seen.append(str(_current()[0].kind))

    thread = threading.Thread(target=other)
    thread.start()
    try:
        assert entered.wait(30)
        assert _current() == (None, None, None)
        with target, PassContext(config={"k": "mine"}), database:
            leave.set()
            thread.join(30)
            assert _current() == (target, "mine", database)  # (the other thread's exits took nothing of ours)
        assert _current() == (None, None, None)
    finally:
        leave.set()
        thread.join(30)
    assert seen == ["cuda"]


def test_a_deep_walk_keeps_the_callers_contexts() -> None:
    target, database = Target("llvm"), MemoryDatabase()
    with target, PassContext(config={"k": "mine"}), database:
        assert run_deep(_current) == (target, "mine", database)
    assert run_deep(_current) == (None, None, None)
