"""VerifyGPUCode's checks during the replay (``replay_precheck``,
lowering/tune/postproc_verify_gpu_code.py): the cuda candidates whose bound threads fall outside
the range MultiLevelTiling marks are refused as soon as the trace marks it, before the cache reads
and the postprocessors, and those whose shared memory is over the target's limit as soon as a
cache placed in shared memory takes it over; every candidate gets the verdict the full replay and
VerifyGPUCode give."""
from __future__ import annotations

import random

import pytest
from test_meta_schedule_space import GOLDEN, base, cuda_target

import tvms

from tvms.ir.errors import TVMSError
from tvms.lowering.schedule.schedule import Schedule
from tvms.lowering.schedule.trace import Trace
from tvms.lowering.tune import evolutionary_search, search_strategy
from tvms.lowering.tune.evolutionary_search import EvolutionarySearch, apply_postproc
from tvms.lowering.tune.post_order_apply import PostOrderApply
from tvms.lowering.tune.postproc_verify_gpu_code import VerifyGPUCode, postprocs_precheck
from tvms.lowering.tune.search_strategy import ReplayTrace
from tvms.lowering.tune.tune_context import TuneContext
from tvms.script import from_source


def _verdict(ctx: TuneContext, trace: Trace, seed: int, early: bool) -> str:
    sch = Schedule(ctx.mod, seed=seed)
    (verify,) = [p for p in ctx.space_generator.postprocs if isinstance(p, VerifyGPUCode)]
    try:
        trace.apply_to_schedule(sch, remove_postproc=True, decision_provider=verify.precheck(sch) if early else None)
    except TVMSError as error:
        assert "refused before the rest of the replay" in str(error)
        return "early (shared memory)" if "bytes of shared memory" in str(error) else "early (threads)"
    sch.enter_postproc()
    for postproc in ctx.space_generator.postprocs:
        if not apply_postproc(postproc, sch):
            return type(postproc).__name__
    return "accepted"


def _verdicts(mod: tvms.IRModule, target: tvms.target.Target, count: int) -> list:
    """(the full replay's verdict, the prechecked replay's) of ``count`` draws of the default space."""
    ctx = TuneContext(mod, target, PostOrderApply(), rand_state=0)
    spaces = ctx.generate_design_space()
    for postproc in ctx.space_generator.postprocs:
        postproc._initialize_with_tune_context(ctx)
    rng = random.Random(1)
    verdicts = []
    for _ in range(count):
        trace = Trace(rng.choice(spaces).trace._kept(remove_postproc=True), {})
        seed = rng.randrange(1 << 31)
        verdicts.append((_verdict(ctx, trace, seed, early=False), _verdict(ctx, trace, seed, early=True)))
    assert all(late == early or (late == "VerifyGPUCode" and early.startswith("early")) for late, early in verdicts)
    return verdicts


def test_early_refusals_are_verify_gpu_codes() -> None:
    """GMM under sm_75's 48 KiB, a convolution under 16 KiB (where more candidates overflow)."""
    verdicts = []
    for workload, shared, count in (("gmm", 49152, 12), ("c2d", 16384, 8)):
        target = tvms.target.Target({**cuda_target("sm_75").export(), "max_shared_memory_per_block": shared})
        verdicts += _verdicts(base(workload), target, count)
    assert sum(early == "early (threads)" for _, early in verdicts) >= 6  # (most candidates bind too few threads)
    assert sum(early == "early (shared memory)" for _, early in verdicts) >= 3
    assert ("accepted", "accepted") in verdicts


def test_a_tensor_core_block_runs_on_its_warps_lanes() -> None:
    """A tensor-core block (``warp_execution``) binds only its warps (threadIdx.y): the precheck
    counts a warp's lanes on threadIdx.x, as VerifyGPUCode does. Counting the warps alone, it
    refused nearly every candidate of a matmul large enough that its range starts at 32 threads
    (5 of some 4,500 samples of a 4096^3 fp16 one passed: the evolutionary search, short of its
    initial population, stopped after the first trial)."""
    text = (GOLDEN / "tc_matmul.tvms").read_text().replace("128", "256")
    verdicts = _verdicts(tvms.IRModule({"main": from_source(text)}), cuda_target("sm_90"), 6)
    assert ("accepted", "accepted") in verdicts


class _Prechecked(Exception):
    pass


def test_the_searches_check_where_verify_gpu_code_would(monkeypatch) -> None:
    """``postprocs_precheck``: VerifyGPUCode's precheck where it is among the postprocessors, none
    where not; the evolutionary search's replay and ReplayTrace's draws both replay with it."""
    ctx = TuneContext(base("gmm"), cuda_target("sm_75"), PostOrderApply(), rand_state=0)
    postprocs = list(ctx.space_generator.postprocs)  # (the cuda row's, VerifyGPUCode among them)
    assert postprocs_precheck(postprocs, Schedule(ctx.mod)) is not None
    assert postprocs_precheck([p for p in postprocs if not isinstance(p, VerifyGPUCode)], Schedule(ctx.mod)) is None
    asked = []

    def spy(given: list, sch: Schedule) -> None:
        asked.append(list(given))
        raise _Prechecked
    for module in (evolutionary_search, search_strategy):
        monkeypatch.setattr(module, "postprocs_precheck", spy)
    trace = ctx.generate_design_space()[0].trace
    evolutionary, replay = EvolutionarySearch(), ReplayTrace()
    for search in (evolutionary, replay):
        search._initialize_with_tune_context(ctx)
    with pytest.raises(_Prechecked):
        evolutionary.replay(trace)
    with pytest.raises(_Prechecked):
        replay._sample({"spaces": [trace], "live": [0]})
    assert asked == [postprocs, postprocs]
