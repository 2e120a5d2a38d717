"""Tuning an imported ONNX model end to end: a conv + batch-norm + relu graph made here goes
through ``from_onnx``, the lowering ``tvms.compile`` does, ``tune_relax`` (the llvm space, a few
trials) and ``compile_relax`` (the database applied), checked against numpy; and the rule that
a tuned program is never behind the default one: each task's first trial is its default (DLight)
schedule, timed as the compiled model runs it, and the database keeps whichever was fastest."""
from __future__ import annotations

import numpy as np
import pytest
from tune_standins import AddToDatabase, Future, InProcessBuilder, InProcessRunner

import tvms
from tvms import meta_schedule as ms
from tvms import relax
from tvms.ir import TVMSError, structural_equal
from tvms.lowering.build import run_relax_pipeline
from tvms.lowering.dlight.base import apply_rules
from tvms.lowering.targets import target_kind
from tvms.lowering.tune.database import trace_key
from tvms.lowering.tune.measure import MeasureCandidate, RunnerResult, args_info_of
from tvms.lowering.tune.task_scheduler import timed_kernel

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

RNG = np.random.default_rng(0)
W = RNG.standard_normal((8, 3, 3, 3)).astype("float32")
BIAS, SCALE, SHIFT = (RNG.standard_normal(8).astype("float32") for _ in range(3))
MEAN, VAR = RNG.standard_normal(8).astype("float32"), RNG.random(8).astype("float32") + 0.5


def conv_bn_relu_model():
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c", "scale", "shift", "mean", "var"], ["n"], epsilon=1e-5),
             helper.make_node("Relu", ["n"], ["y"])]
    inits = [numpy_helper.from_array(a, name) for a, name in
             [(W, "w"), (BIAS, "b"), (SCALE, "scale"), (SHIFT, "shift"), (MEAN, "mean"), (VAR, "var")]]
    graph = helper.make_graph(nodes, "conv_bn_relu", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 8, 8])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def numpy_conv_bn_relu(x):
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    windows = np.lib.stride_tricks.sliding_window_view(padded, (3, 3), axis=(2, 3))  # (1, 3, 8, 8, 3, 3)
    conv = np.einsum("nchwij,ocij->nohw", windows, W) + BIAS[:, None, None]
    norm = (conv - MEAN[:, None, None]) / np.sqrt(VAR[:, None, None] + 1e-5) * SCALE[:, None, None] + SHIFT[:, None, None]
    return np.maximum(norm, 0)


def lowered_model(model=None, **import_options):
    from tvms.relax.frontend.onnx import from_onnx

    return run_relax_pipeline(from_onnx(model or conv_bn_relu_model(), **import_options), "zero", True)


def conv_task(mod):
    tasks = [t for t in ms.relax_integration.extract_tasks(mod, "llvm") if "conv2d" in t.task_name]
    assert len(tasks) == 1
    return tasks[0]


def default_schedule(task):
    target = tvms.target.Target("llvm")
    with target:
        return apply_rules(task.mod["main"], target, target_kind(target).default_rules())


class ScriptedRunner(InProcessRunner):
    """Times a candidate by whether it is the task's default schedule (as built: its kernel
    without the weight packing): ``default_secs`` for it; for another, ``tuned_secs[0]`` the
    first time it is measured and ``tuned_secs[1]`` after (a lucky first measurement)."""

    def __init__(self, builder, default_mod, default_secs, tuned_secs):
        super().__init__(builder)
        self.default_mod, self.default_secs, self.tuned_secs, self.seen = default_mod, default_secs, tuned_secs, set()

    def run(self, inputs):
        super().run(inputs)  # (each candidate still runs: it must work)
        return [Future(RunnerResult([self.secs(self.builder.mods[i.artifact_path])])) for i in inputs]

    def secs(self, mod):
        if structural_equal(mod, self.default_mod):
            return self.default_secs
        key = mod.script()
        again, _ = key in self.seen, self.seen.add(key)
        return self.tuned_secs[again]


class KeepingBuilder(InProcessBuilder):
    def __init__(self):
        super().__init__()
        self.mods = {}

    def build(self, inputs):
        out = super().build(inputs)
        self.mods.update((r.artifact_path, i.mod) for i, r in zip(inputs, out) if r.artifact_path)
        return out


def tune(mod, tmp_path, trials, **parts):
    defaults = dict(builder=InProcessBuilder(), database=ms.MemoryDatabase(), measure_callbacks=[AddToDatabase()],
                    cost_model=None, progress=None, strategy="replay-trace", num_trials_per_iter=trials, seed=1,
                    op_names=["conv2d"])
    defaults["runner"] = InProcessRunner(defaults["builder"])
    return ms.relax_integration.tune_relax(mod, None, "llvm", str(tmp_path), trials, trials, **{**defaults, **parts})


def run(executable, x):
    return relax.VirtualMachine(executable, tvms.cpu())["main"](tvms.nd.array(x)).numpy()


@pytest.mark.slow
def test_a_tuned_conv_bn_relu_model_matches_numpy(tmp_path) -> None:
    mod = lowered_model()
    task = conv_task(mod)
    assert task.task_name.startswith("fused_conv2d")  # the bias, batch norm and relu fused into the conv
    db = tune(mod, tmp_path, 4)
    # four schedules (records of a tuned best timed again beside the default come twice)
    records = list({trace_key(r.trace): r for r in db.get_all_tuning_records()}.values())
    assert len(records) == 4 and all(r.is_valid() for r in records)
    x = RNG.random((1, 3, 8, 8), dtype="float32")
    expected = numpy_conv_bn_relu(x)
    # every measured schedule computes the model, the default one (trial 1) and the sampled ones
    for record in records:
        with ms.MemoryDatabase() as one:
            one.commit_tuning_record(ms.TuningRecord(record.trace, one.commit_workload(task.mod), [1e-3],
                                                     record.target, record.args_info))
            np.testing.assert_allclose(run(ms.relax_integration.compile_relax(one, mod, "llvm"), x), expected,
                                       rtol=1e-4, atol=1e-4)


def test_a_trial_times_the_weight_packing_the_model_runs_at_each_call() -> None:
    # with the weight an input of the model (not an initializer), the compiled model packs it at
    # each call: the trial times the packing too; a constant weight's packing is done once, untimed
    model = conv_bn_relu_model()
    model.graph.initializer.remove(next(i for i in model.graph.initializer if i.name == "w"))
    model.graph.input.append(helper.make_tensor_value_info("w", TensorProto.FLOAT, list(W.shape)))
    for task, packs in [(conv_task(lowered_model()), False), (conv_task(lowered_model(model)), True)]:
        assert (1 in task.constant_params) != packs
        default = default_schedule(task)
        timed, _ = timed_kernel(MeasureCandidate(default, args_info_of(task.mod["main"])), task.constant_params)
        assert ("layout_rewrite_preproc" in timed.script()) == packs


@pytest.mark.parametrize("tuned_secs, keeps_default", [((3e-3, 3e-3), True), ((1e-3, 1e-3), False),
                                                       ((1e-3, 3e-3), True)])
def test_a_task_keeps_its_default_schedule_unless_a_tuned_one_is_faster(tmp_path, tuned_secs, keeps_default) -> None:
    mod = lowered_model()
    task = conv_task(mod)
    default = default_schedule(task)
    timed_default, _ = timed_kernel(MeasureCandidate(default, args_info_of(task.mod["main"])), task.constant_params)
    assert "layout_rewrite_preproc" in default.mod.script()  # the default conv packs its weight ...
    assert "layout_rewrite_preproc" not in timed_default.script()  # ... which the model does once, untimed
    builder = KeepingBuilder()
    db = tune(mod, tmp_path, 3, builder=builder, runner=ScriptedRunner(builder, timed_default, 2e-3, tuned_secs))
    built = [structural_equal(m, timed_default) for m in builder.mods.values()]
    # trial 1 is the default schedule; a tuned best is timed again beside it (two more builds),
    # then the next one (here both tuned ones measured 1 ms: a tie, or the first lost)
    assert built == [True, False, False] + [True, False] * (0 if tuned_secs[0] > 2e-3 else 2)
    best = db.query_ir_module(task.mod, "llvm")["main"]
    assert structural_equal(best, default.mod["main"]) == keeps_default
    x = RNG.random((1, 3, 8, 8), dtype="float32")
    np.testing.assert_allclose(run(ms.relax_integration.compile_relax(db, mod, "llvm"), x), numpy_conv_bn_relu(x),
                               rtol=1e-4, atol=1e-4)


def test_a_schedule_sampled_twice_is_still_timed_again_beside_the_default(tmp_path) -> None:
    mod = lowered_model()
    task = conv_task(mod)
    timed_default, _ = timed_kernel(MeasureCandidate(default_schedule(task), args_info_of(task.mod["main"])),
                                    task.constant_params)
    builder = KeepingBuilder()
    first = tune(mod, tmp_path, 2, builder=builder, runner=ScriptedRunner(builder, timed_default, 2e-3, (3e-3, 3e-3)))
    tuned = next(r for r in first.get_all_tuning_records() if r.run_secs == [3e-3])
    # a database where that schedule was measured twice, lucky both times (two samples, not a confirmation)
    db = ms.MemoryDatabase()
    for _ in range(2):
        db.commit_tuning_record(ms.TuningRecord(tuned.trace, db.commit_workload(task.mod), [1e-3], tuned.target,
                                                tuned.args_info))
    builder = KeepingBuilder()
    tune(mod, tmp_path, 3, builder=builder, database=db,
         runner=ScriptedRunner(builder, timed_default, 2e-3, (3e-3, 3e-3)))
    assert structural_equal(db.query_ir_module(task.mod, "llvm")["main"], default_schedule(task).mod["main"])


@pytest.mark.slow
def test_conv_register_tiles_branch_the_space_around_the_default_schedule() -> None:
    from tvms.lowering.dlight.cpu_conv import channel_tile, register_tiles
    from tvms.lowering.tune.tile_space import tile_space

    # a 1x1 conv of 16 output channels over rows of 55 pixels (SqueezeNet's): 16-lane vectors,
    # MR a divisor of 55; the default rule's own pick is one of them
    assert register_tiles(16, 55, 16, 32) == [(1, 1, 16), (5, 1, 16), (11, 1, 16)]
    assert channel_tile(96, 56, 16, 32) in register_tiles(96, 56, 16, 32)
    assert register_tiles(1, 8, 16, 32) == []
    mod = lowered_model()
    task = conv_task(mod)
    ctx = ms.TuneContext(task.mod, tvms.target.Target("llvm"), tile_space("llvm"), "replay-trace", task.task_name, 1)
    spaces = ctx.space_generator.generate_design_space(task.mod)
    tiled = [s for s in spaces if "schedule_rule" in s.mod.script()]
    assert len(tiled) == len(register_tiles(8, 8, 8, 32)) == len(spaces) == 4  # (not TVM's sketches)
    x = RNG.random((1, 3, 8, 8), dtype="float32")
    for sch in tiled:
        assert "layout_rewrite_preproc" in sch.mod.script()  # the weight packed as the default rule packs it
        assert all(p.apply(sch) for p in ctx.space_generator.postprocs)
        with ms.MemoryDatabase() as db:
            db.commit_tuning_record(ms.TuningRecord(sch.trace, db.commit_workload(task.mod), [1e-3]))
            np.testing.assert_allclose(run(ms.relax_integration.compile_relax(db, mod, "llvm"), x),
                                       numpy_conv_bn_relu(x), rtol=1e-4, atol=1e-4)


def test_a_symbolic_batch_is_refused_until_bound(tmp_path) -> None:
    model = conv_bn_relu_model()
    for info in (model.graph.input[0], model.graph.output[0]):
        info.type.tensor_type.shape.dim[0].dim_param = "N"
    with pytest.raises(TVMSError, match="no task can be tuned .*shape_dict.*: fused_conv2d.*symbolic size N; bind it"):
        tune(lowered_model(model), tmp_path, 2)
    db = tune(lowered_model(model, shape_dict={"x": [1, 3, 8, 8]}), tmp_path, 2)
    assert len({trace_key(r.trace) for r in db.get_all_tuning_records()}) == 2


def test_tasks_that_cannot_be_tuned_keep_their_default_schedule_with_a_warning(tmp_path) -> None:
    # beside the conv, a relu of a symbolic batch (a trial measures one shape) and a conv of two
    # groups of 10 filters, which PadConvGroups pads to whole vectors in Relax (lowered for the
    # target): its default schedule replays from its trace, so it is tuned as the plain conv is
    model = conv_bn_relu_model()
    graph = model.graph
    graph.node.extend([helper.make_node("Relu", ["z"], ["r"]), helper.make_node("Conv", ["g", "gw"], ["gy"], group=2)])
    graph.initializer.append(numpy_helper.from_array(RNG.standard_normal((20, 6, 3, 3)).astype("float32"), "gw"))
    graph.input.extend([helper.make_tensor_value_info("z", TensorProto.FLOAT, ["N", 4]),
                        helper.make_tensor_value_info("g", TensorProto.FLOAT, [1, 12, 7, 7])])
    graph.output.extend([helper.make_tensor_value_info("r", TensorProto.FLOAT, ["N", 4]),
                         helper.make_tensor_value_info("gy", TensorProto.FLOAT, [1, 20, 5, 5])])
    from tvms.relax.frontend.onnx import from_onnx

    mod = run_relax_pipeline(from_onnx(model), "zero", True, "llvm")
    with pytest.warns(UserWarning, match=r"not tuned \(they keep the default schedule\): relu\w*: .*symbolic size N") \
            as warned:
        db = tune(mod, tmp_path, 2, op_names=None)
    assert not any("conv2d" in str(w.message) for w in warned), [str(w.message) for w in warned]
    tuned = {r.workload for r in db.get_all_tuning_records()}
    convs = [t for t in ms.relax_integration.extract_tasks(mod, "llvm") if "conv2d" in t.task_name]
    grouped = [t for t in convs if "T.int64(32), T.int64(6), T.int64(3), T.int64(3)" in t.mod.script()]  # (padded)
    assert len(convs) == len(tuned) == 2 and len(grouped) == 1, [t.task_name for t in convs]
    assert all(any(structural_equal(w.mod, t.mod) for w in tuned) for t in convs)


def register_tile_branches(task):
    """The conv's schedules at the register tiles other than the default one (ConvRegisterTile)."""
    from tvms.lowering.schedule import Schedule
    from tvms.lowering.tune.rule_conv_register_tile import ConvRegisterTile

    rule = ConvRegisterTile()
    rule.target = tvms.target.Target("llvm")
    sch = Schedule(task.mod)
    conv = next(b for b in sch.get_child_blocks(sch.get_sblock("root")) if "conv" in sch.get(b).name_hint)
    default = default_schedule(task).mod["main"]
    return [b for b in rule.apply(sch, conv)[1:] if not structural_equal(b.mod["main"], default)]


def database_with(task, default_secs, tuned):
    """A database where the task's default schedule measured ``default_secs`` and each of
    ``tuned`` (schedule, secs) pairs its secs."""
    from tvms.lowering.tune.task_scheduler import replayed_default

    db = ms.MemoryDatabase()
    workload = db.commit_workload(task.mod)
    for sch, secs in [(replayed_default(task.mod, tvms.target.Target("llvm"))[1], default_secs), *tuned]:
        db.commit_tuning_record(ms.TuningRecord(sch.trace, workload, [secs], tvms.target.Target("llvm"),
                                                args_info_of(task.mod["main"])))
    return db


@pytest.mark.slow
def test_a_tuned_schedule_is_timed_again_in_the_model_and_the_database_follows() -> None:
    from tvms.meta_schedule.model_check import check_in_model, default_is_best

    mod = lowered_model()
    task = conv_task(mod)
    tuned, unchecked = register_tile_branches(task)[:2]
    db = database_with(task, 2e-3, [(tuned, 1e-3), (unchecked, 1.1e-3)])
    assert not default_is_best(db, task)
    x = RNG.random((1, 3, 8, 8), dtype="float32")
    checked = check_in_model(db, mod, "llvm", [tvms.nd.array(x)], calls=2, rounds=2)
    (default_ms, tuned_ms), = checked.values()
    assert list(checked) == [task.task_name]
    # both timed in the model, one record a round each, the latest records: the faster one ranks
    # first, ahead of the tuned schedule not timed in the model
    again = [r for r in db.get_all_tuning_records() if r.confirmation]
    assert [len(r.run_secs) for r in again] == [2, 2]
    assert default_is_best(db, task) == (tuned_ms >= default_ms)
    top = db.query_tuning_record(task.mod, "llvm")
    assert trace_key(top.trace) == trace_key((again[0] if tuned_ms >= default_ms else tuned).trace)
    np.testing.assert_allclose(run(ms.relax_integration.compile_relax(db, mod, "llvm"), x), numpy_conv_bn_relu(x),
                               rtol=1e-4, atol=1e-4)


def scripted_model_check(monkeypatch, db, task, tuned_in_model: list) -> tuple:
    """``check_in_model`` on the conv model with a fake clock: every kernel of the default program
    runs 2.5 ms in the model, those of the program with the k-th tuned candidate
    ``tuned_in_model[k]`` (the programs timed in turns, two rounds a candidate). Returns (its
    result, the programs timed, the task's schedule in each program compiled with the database)."""
    from tvms.meta_schedule import model_check

    timed, compiled = [], []

    def scripted(executable, inputs, calls):
        secs = tuned_in_model[len(timed) // 4] if len(timed) % 2 else 2.5e-3
        timed.append(executable)
        return [secs] * calls, {name: [secs] * calls for name in executable.kernels().functions}

    def compile_with(database, *args, **kwargs):
        compiled.append(database.query_tuning_record(task.mod, "llvm").trace)
        return compile_relax(database, *args, **kwargs)

    compile_relax = model_check.compile_relax
    monkeypatch.setattr(model_check, "kernel_seconds", scripted)
    monkeypatch.setattr(model_check, "compile_relax", compile_with)
    return model_check.check_in_model(db, lowered_model(), "llvm", [], calls=1, rounds=2), timed, compiled


@pytest.mark.parametrize("tuned_in_model, best", [([3e-3] * 3, "default"), ([2.2e-3], 0), ([3e-3, 2.2e-3], 1),
                                                  ([3e-3, 2.6e-3, 2.4e-3], 2)])
def test_the_check_in_the_model_decides_the_best_above_the_schedules_not_checked(monkeypatch, tuned_in_model,
                                                                                 best) -> None:
    """The tuned schedules faster than the default in their trials (three) are timed in the model
    against the default, fastest first, until one wins there: the first, the second, the third,
    or none (then the default)."""
    from tvms.meta_schedule import model_check
    from tvms.lowering.tune.task_scheduler import replayed_default

    task = conv_task(lowered_model())
    tiles = register_tile_branches(task)[:4]
    db = database_with(task, 2e-3, list(zip(tiles, [1.0e-3, 1.1e-3, 1.2e-3, 2.1e-3])))  # (the 4th: behind the default)
    checked, timed, compiled = scripted_model_check(monkeypatch, db, task, tuned_in_model)
    winner = min(tuned_in_model)
    assert len(timed) == 4 * len(tuned_in_model) and len({id(ex) for ex in timed[::2]}) == 1  # (one default program)
    assert [trace_key(t) for t in compiled] == [trace_key(s.trace) for s in tiles[:len(tuned_in_model)]]
    assert checked == {task.task_name: pytest.approx((2.5, winner * 1e3 if best != "default" else 3.0))}
    # the check's verdict ranks first: the default when every tuned schedule lost in the model (the
    # tuned ones never timed there, faster in their trials than the default in the model, below
    # it), else the winner, ahead of the tuned ones not checked (the first at its trial's time)
    expected = replayed_default(task.mod, tvms.target.Target("llvm"))[1] if best == "default" else tiles[best]
    top = db.query_tuning_record(task.mod, "llvm")
    assert trace_key(top.trace) == trace_key(expected.trace)
    assert model_check.default_is_best(db, task) == (best == "default")
    if best != "default":
        assert top.mean_secs() == pytest.approx(1e-3 * winner / tuned_in_model[0])


def test_a_top_record_whose_trace_fails_is_passed_over_and_what_is_timed_is_recorded(monkeypatch) -> None:
    """The best record's trace does not apply to the task (a record of another function): the
    check times the next one, a tuned schedule, in the program it compiles, and records that one."""
    from tvms.lowering.schedule import Schedule
    from tvms.lowering.tune.task_scheduler import replayed_default
    from tvms.script import from_source

    broken = Schedule(tvms.IRModule({"main": from_source(OTHER_FUNCTION)}))
    broken.get_loops(broken.get_sblock("elsewhere"))
    task = conv_task(lowered_model())
    (tuned,) = register_tile_branches(task)[:1]
    db = database_with(task, 2e-3, [(broken, 0.9e-3), (tuned, 1.0e-3)])
    checked, timed, compiled = scripted_model_check(monkeypatch, db, task, [2.2e-3])
    assert [trace_key(t) for t in compiled] == [trace_key(tuned.trace)]
    assert checked == {task.task_name: pytest.approx((2.5, 2.2))}
    default = replayed_default(task.mod, tvms.target.Target("llvm"))[1]
    again = [r for r in db.get_all_tuning_records() if r.confirmation]
    assert [trace_key(r.trace) for r in again] == [trace_key(default.trace), trace_key(tuned.trace)]
    assert again[1].mean_secs() == pytest.approx(1.0e-3)  # (the tuned one won: its trial's time)


OTHER_FUNCTION = """
@T.prim_func(s_tir=True)
def main(A: T.Buffer((4,), "float32")):
    for i in range(4):
        with T.sblock("elsewhere"):
            vi = T.axis.spatial(4, i)
            A[vi] = T.float32(0)
"""


def test_the_check_leaves_tasks_without_records_alone(monkeypatch) -> None:
    """A task the database has no record of is not checked: its default schedule is not even made."""
    from tvms.meta_schedule import model_check

    made = []
    monkeypatch.setattr(model_check, "replayed_default", lambda *args, **kw: made.append(args) or (None, None))
    assert model_check.check_in_model(ms.MemoryDatabase(), lowered_model(), "llvm", []) == {}
    assert made == []


def test_timing_the_kernels_of_a_model_leaves_its_executable_as_it_was() -> None:
    from tvms.meta_schedule.model_check import kernel_seconds

    # (tvms.compile hands out one cached executable: its kernels are what every later call runs)
    executable = tvms.compile(lowered_model(), "llvm", exec_mode="bytecode")
    functions = executable.kernels().functions
    own = {name: fn.run for name, fn in functions.items()}
    x = tvms.nd.array(RNG.random((1, 3, 8, 8), dtype="float32"))
    for _ in range(2):
        whole, spent = kernel_seconds(executable, [x], calls=2)
        assert len(whole) == 2 and spent and all(len(times) == 2 for times in spent.values())
        assert all(fn.run is own[name] for name, fn in functions.items())
