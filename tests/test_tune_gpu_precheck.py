"""VerifyGPUCode's thread-range check during the replay (``thread_range_precheck``,
lowering/tune/postproc_verify_gpu_code.py): the cuda candidates whose bound threads fall outside
the range MultiLevelTiling marks are refused as soon as the trace marks it, before the cache reads
and the postprocessors; every candidate gets the verdict the full replay and VerifyGPUCode give."""
from __future__ import annotations

import random

from test_meta_schedule_space import base, cuda_target

from tvms.ir.errors import TVMSError
from tvms.lowering.schedule.schedule import Schedule
from tvms.lowering.schedule.trace import Trace
from tvms.lowering.tune.evolutionary_search import EvolutionarySearch, apply_postproc
from tvms.lowering.tune.post_order_apply import PostOrderApply
from tvms.lowering.tune.postproc_verify_gpu_code import thread_range_precheck
from tvms.lowering.tune.tune_context import TuneContext


def _verdict(ctx: TuneContext, trace: Trace, seed: int, early: bool) -> str:
    sch = Schedule(ctx.mod, seed=seed)
    try:
        trace.apply_to_schedule(sch, remove_postproc=True, decision_provider=thread_range_precheck(sch) if early else None)
    except TVMSError as error:
        assert "refused before the rest of the replay" in str(error)
        return "early"
    sch.enter_postproc()
    for postproc in ctx.space_generator.postprocs:
        if not apply_postproc(postproc, sch):
            return type(postproc).__name__
    return "accepted"


def test_early_refusals_are_verify_gpu_codes() -> None:
    ctx = TuneContext(base("gmm"), cuda_target("sm_75"), PostOrderApply(), rand_state=0)
    spaces = ctx.generate_design_space()
    for postproc in ctx.space_generator.postprocs:
        postproc._initialize_with_tune_context(ctx)
    rng = random.Random(1)
    verdicts = []
    for _ in range(12):
        trace = Trace(rng.choice(spaces).trace._kept(remove_postproc=True), {})
        seed = rng.randrange(1 << 31)
        verdicts.append((_verdict(ctx, trace, seed, early=False), _verdict(ctx, trace, seed, early=True)))
    assert all(late == early or (late, early) == ("VerifyGPUCode", "early") for late, early in verdicts)
    assert sum(early == "early" for _, early in verdicts) >= 3  # (most GMM candidates bind too few threads)
    assert ("accepted", "accepted") in verdicts


def test_the_evolutionary_search_checks_where_verify_gpu_code_would() -> None:
    ctx = TuneContext(base("gmm"), cuda_target("sm_75"), PostOrderApply(), rand_state=0)
    search = EvolutionarySearch()
    search.postprocs = list(ctx.space_generator.postprocs)  # (the cuda row's, VerifyGPUCode among them)
    assert search._precheck(Schedule(ctx.mod)) is not None
    search.postprocs = [p for p in search.postprocs if type(p).__name__ != "VerifyGPUCode"]
    assert search._precheck(Schedule(ctx.mod)) is None
