"""The search's faster paths against the plain ones they replace: the statement walk that finds
a function's blocks (``all_realizes``) finds what collecting over every node finds, in the same
order; and a search with the fast paths (that walk, loop rebinding that skips expressions
without the rebound variables, structural hashes kept per function) draws the same candidates
for a seed as one with the plain paths."""
from __future__ import annotations

import test_tune_evolutionary_search as stand_ins
from conftest import FIXTURES

import tvms
from tvms.ir.function import PrimFunc
from tvms.ir.stmt import BlockRealize
from tvms.ir.structural import structural_hash
from tvms.ir.visitor import Mutator, collect
from tvms.lowering.schedule import loop_transform
from tvms.lowering.schedule import schedule as schedule_module
from tvms.lowering.schedule.tree import all_realizes
from tvms.lowering.tune import evolutionary_search, per_store_feature
from tvms.lowering.tune.database import MemoryDatabase
from tvms.lowering.tune.search_strategy import decisions_key


def test_all_realizes_finds_what_collect_finds() -> None:
    checked = 0
    for path in sorted((FIXTURES / "meta_schedule").glob("*_post.tvms"))[::6]:  # (a sample, to stay quick)
        mod = tvms.script.from_source(path.read_text())
        for func in (mod[name] for name in mod if isinstance(mod[name], PrimFunc)):
            found = all_realizes(func.body)
            assert [id(r) for r in found] == [id(r) for r in collect(func.body, BlockRealize)], path.name
            checked += len(found)
    assert checked >= 20


def drawn(seed: int) -> list:
    batches = stand_ins.search_batches(seed=seed, database=MemoryDatabase())
    return [(decisions_key(sch.trace), sch.mod.script()) for batch in batches for sch in batch]


def test_fast_paths_draw_the_candidates_the_plain_paths_draw(monkeypatch) -> None:
    fast = drawn(seed=5)
    monkeypatch.setattr(evolutionary_search, "module_hash", structural_hash)
    monkeypatch.setattr(per_store_feature, "module_hash", structural_hash)
    monkeypatch.setattr(loop_transform._Rebind, "visit", Mutator.visit)
    monkeypatch.setattr(schedule_module, "all_realizes", lambda s: collect(s, BlockRealize))
    plain = drawn(seed=5)
    assert len(fast) == 8 and fast == plain
