"""The light models that the onnx package ships (``onnx/backend/test/data/light/``: AlexNet,
DenseNet-121, Inception v1/v2, ResNet-50, ShuffleNet, SqueezeNet, VGG-19, ZFNet-512) through tvms:
``from_onnx`` -> ``tvms.compile`` (default schedules) -> VM, checked against the expected output
shipped beside each model (the input is the one ONNX's backend runner makes for them:
``arange(n) / n`` in the input's shape; tolerances as ONNX's model test cases), then the latency
of tvms beside onnxruntime's in this process: the median of ``--repeat`` calls per side, timed in
three alternating blocks, each after a 0.2 s warm-up.

    .venv/bin/python benchmarks/onnx_models.py                     # all nine
    .venv/bin/python benchmarks/onnx_models.py --models squeezenet --repeat 5
    .venv/bin/python benchmarks/onnx_models.py --no-time          # correctness and compile time only
    .venv/bin/python benchmarks/onnx_models.py --models resnet50 --profile 15   # where the time goes
    .venv/bin/python benchmarks/onnx_models.py --nchw        # and without BlockChannels (NCHW convs)
    .venv/bin/python benchmarks/onnx_models.py --no-time --export /tmp/libs   # through export_library

The "vs ort" column is onnxruntime's latency over tvms's (above 1: tvms is faster).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

MODELS = {  # name -> (rtol, atol) of onnx.backend.test.case.model
    "bvlc_alexnet": (1e-3, 1e-7), "densenet121": (2e-3, 1e-7), "inception_v1": (1e-3, 1e-7),
    "inception_v2": (1e-3, 1e-7), "resnet50": (1e-3, 1e-7), "shufflenet": (1e-3, 1e-7),
    "squeezenet": (1e-3, 1e-7), "vgg19": (1e-3, 1e-7), "zfnet512": (1e-3, 1e-7),
}


def light_dir() -> str:
    import onnx

    return os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")


def load(name: str):
    """(model, {input name: the runner's input}, expected output) of one light model."""
    import onnx
    from onnx import numpy_helper

    path = os.path.join(light_dir(), f"light_{name}.onnx")
    model = onnx.load(path)
    inits = {i.name for i in model.graph.initializer}
    feeds = {}
    for info in model.graph.input:
        if info.name in inits:
            continue
        shape = tuple(d.dim_value if d.HasField("dim_value") else 1 for d in info.type.tensor_type.shape.dim)
        n = int(np.prod(shape))
        feeds[info.name] = (np.arange(n).reshape(shape) / n).astype(np.float32)
    expected = numpy_helper.to_array(onnx.load_tensor(path[:-len(".onnx")] + "_output_0.pb"))
    return model, feeds, expected


def vm_of(executable, export_dir: str | None, stem: str):
    """A VM of ``executable``, or with ``--export DIR`` of the shared library it is written to
    (``DIR/<stem>.so``) and loaded back from; the export's error (a string) when that fails."""
    import tvms
    from tvms import relax

    if export_dir:
        path = os.path.join(export_dir, f"{stem}.so")
        try:
            executable.export_library(path)
            executable = tvms.runtime.load_module(path)
        except tvms.TVMSError as err:
            return f"EXPORT FAILED: {err}"
    return relax.VirtualMachine(executable, tvms.cpu())


def compare(vm, inputs: list, expected, rtol: float, atol: float) -> tuple:
    """(whether ``main``'s output on ``inputs`` matches ``expected`` within the tolerances, its max error)."""
    out = vm["main"](*inputs).numpy()
    ok = out.shape == expected.shape and np.allclose(out, expected, rtol=rtol, atol=atol)
    return ok, float(np.max(np.abs(out - expected)))


def block_seconds(fn, calls: int) -> list:
    """The seconds of each of ``calls`` calls of ``fn``, right after a 0.2 s warm-up of it."""
    from cpu_e2e import warm_up

    warm_up(fn)
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times


def medians_ms(sides: list, repeat: int, rounds: int = 3) -> list:
    """Median milliseconds per call of each side (None for a side that is None), timed in
    alternating blocks of calls. Not one call each in turn: after a call onnxruntime's pool
    threads spin for a while, and on a small machine they took a core from the tvms call right
    after (ShuffleNet timed 8.2 ms interleaved, 8.9 ms in blocks for tvms, but onnxruntime 3.6 ms
    interleaved and 2.7 ms in blocks)."""
    calls = max(1, -(-repeat // rounds))
    runs: list = [[] for _ in sides]
    for _ in range(rounds):  # (alternating blocks: a load that comes and goes hits every side)
        for fn, times in zip(sides, runs):
            if fn:
                times += block_seconds(fn, calls)
    return [statistics.median(times) * 1e3 if times else None for times in runs]


def profile(mod, inputs: list, top: int, calls: int = 5) -> None:
    """Print the ``top`` kernels by time per call of ``main``: the module compiled in the
    interpreted mode (``exec_mode="bytecode"``, which calls each kernel through its ``run``),
    each kernel's ``run`` wrapped with a clock (``model_check.kernel_seconds``); per kernel the
    least of ``calls`` calls' totals (after a warm-up call), which a shared machine's load
    disturbs least."""
    import tvms
    from tvms.meta_schedule.model_check import kernel_seconds

    ex = tvms.compile(mod, "llvm", exec_mode="bytecode")
    whole, spent = kernel_seconds(ex, inputs, calls)
    best = {name: min(times) for name, times in spent.items()}
    counts = {name: sum(1 for inst in f.code if getattr(inst, "func", None) == name)
              for f in ex.program.functions for name in best}
    print(f"  one call {min(whole) * 1e3:.2f} ms (least of {calls}), its kernels' least times add up to "
          f"{sum(best.values()) * 1e3:.2f} ms; the top {top}:")
    for name, t in sorted(best.items(), key=lambda kv: -kv[1])[:top]:
        print(f"  {t * 1e3:9.3f} ms  x{counts[name]:<3} {name}")


# -- the tuned side (--tune TRIALS)
TUNE_OPS = ["conv2d", "matmul"]  # the tasks that hold nearly all of these models' time


def tune_model(name: str, mod, inputs: list, trials: int, work_root: str, ops: list, space: str, strategy,
               model_check: bool) -> tuple:
    """The model lowered as ``tvms.compile`` lowers it, each task whose name holds one of ``ops``
    tuned with up to ``trials`` trials (the first: its default schedule) by ``strategy`` in the ``space``
    ("default": TVM's llvm rules; "conv-tiles": those and ConvRegisterTile) into the database of
    ``work_root/space/name``, the tuned schedules timed again in the model against the default
    ones (``model_check``: ``check_in_model`` on ``inputs``), and compiled with it applied. A
    rerun resumes that database: its trials count toward the budget, so the same budget measures
    nothing new. Returns (executable, tuning seconds, tasks tuned, tasks whose best is still the
    default schedule, model check seconds, {task: (default ms, tuned ms)} of the check)."""
    import tvms
    from tvms import meta_schedule as ms
    from tvms.lowering.build import run_relax_pipeline
    from tvms.lowering.tune.tile_space import tile_space
    from tvms.meta_schedule.model_check import check_in_model, default_is_best

    target = tvms.target.Target("llvm")
    lowered = run_relax_pipeline(mod, "zero", True, target)
    start = time.perf_counter()
    db = ms.relax_integration.tune_relax(
        lowered, None, target, os.path.join(work_root, space, name), trials * len(lowered.functions), trials,
        op_names=ops, num_trials_per_iter=min(trials, 16), task_scheduler="round-robin",
        space=tile_space(target) if space == "conv-tiles" else "post-order-apply",
        strategy=strategy, progress="none")
    seconds = time.perf_counter() - start
    start = time.perf_counter()
    tasks = ms.relax_integration.extract_tasks(lowered, target)
    checked = check_in_model(db, lowered, target, inputs, tasks=tasks) if model_check else {}
    check_seconds = time.perf_counter() - start
    tasks = [t for t in tasks if any(op in t.task_name for op in ops)]
    kept = sum(default_is_best(db, t) for t in tasks)  # (a task left untuned has no record: it keeps the default)
    return (ms.relax_integration.compile_relax(db, lowered, target), seconds, len(tasks), kept, check_seconds,
            checked)


def search_strategy(args):
    if args.strategy == "evolutionary":
        from tvms.lowering.tune.evolutionary_search import EvolutionarySearch

        return EvolutionarySearch(population_size=args.population)
    return args.strategy


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", choices=list(MODELS), default=list(MODELS))
    parser.add_argument("--repeat", type=int, default=10, help="timed calls per side (default 10), in three alternating blocks")
    parser.add_argument("--no-time", action="store_true", help="check the outputs, do not time")
    parser.add_argument("--profile", type=int, metavar="N", default=0,
                        help="then print the N kernels that take the most time (interpreted VM)")
    parser.add_argument("--tune", type=int, metavar="TRIALS", default=0,
                        help="also tune each model's conv/matmul tasks, TRIALS trials per task (the first: the "
                             "default schedule), and time the tuned program beside the others")
    parser.add_argument("--tune-ops", nargs="+", default=TUNE_OPS, metavar="OP",
                        help=f"tune the tasks whose name holds one of these (default: {' '.join(TUNE_OPS)})")
    parser.add_argument("--work-dir", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".tune"),
                        help="where each model's tuning database is kept and reused (default benchmarks/.tune)")
    parser.add_argument("--space", choices=["conv-tiles", "default"], default="conv-tiles",
                        help="the tuning space: TVM's llvm rules with (default) or without ConvRegisterTile")
    parser.add_argument("--strategy", choices=["replay-trace", "evolutionary"], default="replay-trace",
                        help="the search (default replay-trace: within a few trials per task the evolutionary "
                             "search's cost model learns little, and its generations cost seconds per trial)")
    parser.add_argument("--no-model-check", action="store_true",
                        help="keep the tuned schedules that won their trials without timing them again in the "
                             "model against the default ones (model_check.check_in_model)")
    parser.add_argument("--population", type=int, default=128,
                        help="the evolutionary search's population (default 128; TVM's 512 costs minutes per batch)")
    parser.add_argument("--export", metavar="DIR",
                        help="check and time each model's libraries instead: its executable, and the tuned and "
                             "NCHW ones with --tune and --nchw, written to DIR/light_<model>.so, "
                             "DIR/light_<model>_tuned.so and DIR/light_<model>_nchw.so by export_library and loaded "
                             "back by load_module (they hold the weights: 1.8 GB for the nine, VGG-19's 0.8 GB)")
    parser.add_argument("--nchw", action="store_true",
                        help="also time the program compiled without BlockChannels (convolutions on plain NCHW "
                             "data), beside the others")
    args = parser.parse_args(argv)
    if args.export:
        os.makedirs(args.export, exist_ok=True)

    import tvms
    from tvms.relax.frontend.onnx import from_onnx

    try:
        import onnxruntime
    except ImportError:
        onnxruntime = None
    tuned_head = f"{'tuned ms':>9}{'vs ort':>8}" if args.tune else ""
    nchw_head = f"{'NCHW ms':>9}{'vs ort':>8}" if args.nchw else ""
    print(f"{'model':<14}{'import s':>9}{'compile s':>10}  {'result':<28}{'tvms ms':>9}{'ort ms':>9}{'vs ort':>8}"
          + tuned_head + nchw_head)
    failed = 0
    for name in args.models:
        model, feeds, expected = load(name)
        rtol, atol = MODELS[name]
        start = time.perf_counter()
        mod = from_onnx(model)
        imported = time.perf_counter() - start
        start = time.perf_counter()
        executable = tvms.compile(mod, "llvm")
        compiled = time.perf_counter() - start
        vm = vm_of(executable, args.export, f"light_{name}")
        if isinstance(vm, str):
            print(f"{name:<14}{imported:9.2f}{compiled:10.2f}  {vm}", flush=True)
            failed += 1
            continue
        inputs = [tvms.nd.array(v) for v in feeds.values()]
        ok, err = compare(vm, inputs, expected, rtol, atol)
        failed += not ok
        result = f"{'match' if ok else 'MISMATCH'} (max err {err:.1e})"
        tuned_vm = nchw_vm = None
        notes = []

        def checked(executable, stem: str, label: str) -> tuple:
            """(its VM, or None when its library failed: noted; whether it matches; its max error)."""
            vm = vm_of(executable, args.export, stem)
            if isinstance(vm, str):
                notes.append(f"  {label}: {vm}")
                return None, False, float("nan")
            return (vm, *compare(vm, inputs, expected, rtol, atol))

        if args.tune:
            executable, seconds, n_tasks, kept, check_seconds, checked_tasks = tune_model(
                name, mod, inputs, args.tune, args.work_dir, args.tune_ops, args.space, search_strategy(args),
                not args.no_model_check)
            tuned_vm, tuned_ok, tuned_err = checked(executable, f"light_{name}_tuned", "tuned")
            failed += not tuned_ok
            if tuned_vm is not None:
                notes.append(f"  tuned: {n_tasks} tasks x {args.tune} trials in {seconds:.0f} s, {kept} kept the "
                             f"default schedule; {'match' if tuned_ok else 'MISMATCH'} (max err {tuned_err:.1e})")
                if checked_tasks:
                    notes.append(f"  model check ({check_seconds:.0f} s): {len(checked_tasks)} tuned schedules timed "
                                 f"in the model, {sum(t < d for d, t in checked_tasks.values())} faster there than "
                                 f"the default:" + "".join(f"\n    {task}: default {d:.3f} ms, tuned {t:.3f} ms"
                                                           for task, (d, t) in checked_tasks.items()))
        if args.nchw:
            with tvms.transform.PassContext(config={"relax.BlockChannels.enable": False}):
                nchw_executable = tvms.compile(mod, "llvm")
            nchw_vm, nchw_ok, _ = checked(nchw_executable, f"light_{name}_nchw", "NCHW")
            failed += not nchw_ok
        ours = theirs = tuned = nchw = None
        if not args.no_time:
            session = onnxruntime.InferenceSession(model.SerializeToString(),
                                                   providers=["CPUExecutionProvider"]) if onnxruntime else None
            ours, theirs, tuned, nchw = medians_ms([lambda: vm["main"](*inputs),
                                                    session and (lambda: session.run(None, feeds)),
                                                    tuned_vm and (lambda: tuned_vm["main"](*inputs)),
                                                    nchw_vm and (lambda: nchw_vm["main"](*inputs))], args.repeat)
        cells = [f"{ours:9.2f}" if ours else f"{'-':>9}", f"{theirs:9.2f}" if theirs else f"{'-':>9}",
                 f"{theirs / ours:8.2f}" if ours and theirs else f"{'-':>8}"]
        for wanted, ms in ((args.tune, tuned), (args.nchw, nchw)):
            if wanted:
                cells += [f"{ms:9.2f}" if ms else f"{'-':>9}", f"{theirs / ms:8.2f}" if ms and theirs else f"{'-':>8}"]
        print(f"{name:<14}{imported:9.2f}{compiled:10.2f}  {result:<28}{''.join(cells)}", flush=True)
        for note in notes:
            print(note, flush=True)
        if args.profile:
            profile(mod, inputs, args.profile)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
