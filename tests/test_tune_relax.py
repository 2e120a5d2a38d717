"""Tuning a Relax program: task extraction (equal PrimFuncs once, weighted by their calls), the
passes MetaScheduleTuneTIR and MetaScheduleApplyDatabase inside a Sequential as seed 000 uses
them, and the tuned program against the reference executor."""
from __future__ import annotations

import numpy as np
import pytest
from tune_standins import FnSpace, Replay, parts

import tvms
from tvms import meta_schedule as ms
from tvms import relax
from tvms.ir import TVMSError
from tvms.lowering.dlight import is_scheduled
from tvms.runtime.reference_relax import run_relax

MLP = """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4, 16), dtype="float32"), w1: R.Tensor((16, 16), dtype="float32"), b1: R.Tensor((16,), dtype="float32"), w2: R.Tensor((16, 16), dtype="float32"), b2: R.Tensor((16,), dtype="float32")) -> R.Tensor((4, 16), dtype="float32"):
        with R.dataflow():
            h = R.nn.relu(R.matmul(x, w1) + b1)
            y = R.nn.relu(R.matmul(h, w2) + b2)
            R.output(y)
        return y
"""


def split_matmul(sch):
    block = sch.get_block("matmul")
    _, j, _ = sch.get_loops(block)
    sch.split(j, sch.sample_perfect_tile(j, n=2))
    return sch


def legalized():
    return relax.get_pipeline("zero")(tvms.script.from_source(MLP))


def test_extract_tasks_counts_equal_prim_funcs_once() -> None:
    tasks = ms.relax_integration.extract_tasks(legalized(), "llvm")
    assert sorted((t.task_name, t.weight) for t in tasks) == [("fused_matmul_add_relu", 2)]
    assert all(list(t.mod) == ["main"] and t.dispatched == [t.mod] for t in tasks)
    # (a task names every PrimFunc it stands for, each once: the kernels a model check times)
    (task,) = tasks
    mod = task.mod
    from tvms.lowering.tune.relax_integration import _distinct

    (again,) = _distinct([("f", mod, frozenset()), ("g", mod, frozenset()), ("f", mod, frozenset())], task.target)
    assert (again.task_name, again.weight, again.names) == ("f", 3, ["f", "g"])


def test_the_parts_of_a_concatenation_written_in_place_are_tasks() -> None:
    # ConcatInPlace turns the producers of a concatenation into R.call_tir_inplace: still tasks
    from tvms.lowering.build import run_relax_pipeline

    mod = run_relax_pipeline(tvms.script.from_source("""
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4, 16), dtype="float32"), w: R.Tensor((16, 16), dtype="float32")) -> R.Tensor((4, 32), dtype="float32"):
        with R.dataflow():
            y = R.concat((R.nn.relu(R.matmul(x, w)), R.exp(R.matmul(x, w))), axis=1)
            R.output(y)
        return y
"""), "zero", True)
    assert "R.call_tir_inplace(" in mod.script()
    names = sorted(t.task_name for t in ms.relax_integration.extract_tasks(mod, "llvm"))
    assert len(names) == 2 and all("concatenate" in n for n in names), names


def test_the_default_schedule_of_a_padded_matmul_replays_from_its_record() -> None:
    # its rows padded to 12 (transform_block_layout of int64 iterators, read back as a lambda):
    # the default schedule is the task's first trial, so its record must replay
    from tvms.lowering.tune.task_scheduler import replayed_default

    (task,) = ms.relax_integration.extract_tasks(legalized(), "llvm")
    default, replay = replayed_default(task.mod, task.target)
    assert "TransformBlockLayout" in str(default.trace.as_json(remove_postproc=False))
    assert replay is not None


def test_tune_tir_and_apply_database_passes_in_a_sequential(tmp_path) -> None:
    p = parts()
    db = p["database"]
    mod = tvms.script.from_source(MLP)
    with tvms.target.Target("llvm"), db:
        tuned = tvms.transform.Sequential([
            relax.get_pipeline("zero"),
            relax.transform.MetaScheduleTuneTIR(work_dir=str(tmp_path), max_trials_global=3, space=FnSpace(split_matmul),
                                                strategy=Replay(split_matmul), **p),
            relax.transform.MetaScheduleApplyDatabase(work_dir=str(tmp_path)),
        ])(mod)
    assert len(db.get_all_tuning_records()) == 3  # one task (called twice), three trials
    fused = tuned["fused_matmul_add_relu"]
    assert is_scheduled(fused) and "sample_perfect_tile" not in fused.script()
    assert fused.script() != legalized()["fused_matmul_add_relu"].script()  # the split is there
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(s).astype("float32") for s in [(4, 16), (16, 16), (16,), (16, 16), (16,)]]
    expected = np.asarray(run_relax(mod, "main", *args))
    for executable in (tvms.compile(tuned, target="llvm"), ms.relax_integration.compile_relax(db, mod, "llvm")):
        vm = relax.VirtualMachine(executable, tvms.cpu())
        np.testing.assert_allclose(vm["main"](*args).numpy(), expected, rtol=1e-5, atol=1e-5)


def test_apply_database_leaves_unknown_functions_and_needs_a_database(tmp_path) -> None:
    mod = legalized()
    with ms.MemoryDatabase():
        assert relax.transform.MetaScheduleApplyDatabase()(mod)["fused_matmul_add_relu"] is mod["fused_matmul_add_relu"]
    with pytest.raises(TVMSError, match="needs a database"):
        relax.transform.MetaScheduleApplyDatabase()(mod)
    # a mistyped work_dir is refused, and nothing is created there
    with pytest.raises(TVMSError, match="no tuning database in .*tnue"):
        relax.transform.MetaScheduleApplyDatabase(work_dir=str(tmp_path / "tnue"))(mod)
    assert not (tmp_path / "tnue").exists()
    with pytest.raises(TVMSError, match="needs a target"):
        relax.transform.MetaScheduleTuneTIR(work_dir="unused", max_trials_global=1)(mod)
