"""``tvms tune``: auto-tune a module's TensorIR and write it with the best schedules applied.

``tvms tune model.tvms --target "llvm -num-cores=2" --trials 256 --work-dir tune/ -o tuned.tvms``.
A Relax module is first lowered as ``tvms build`` lowers it (the ``zero`` pipeline, after
FuseTransposeMatmul), so that the tasks are the kernels a build compiles: its PrimFuncs (equal ones
once, weighted by their calls). The database and the logs live in ``--work-dir``; ``--resume``
continues a run whose database is there (its trials count toward ``--trials``).
``--space tiles`` adds tvms's tile rule of the target kind to the built-in space (a conv under
llvm, a large matmul under cuda: one candidate per tile shape of DLight's plan; ``tile_space.py``).
``--space FILE.py`` is a schedule written in the trace language (what ``print(sch.trace)`` shows,
with ``sch.sample_*`` calls left without ``decision=``): it is interpreted for every sample by the
trace interpreter, never executed as Python. Exit codes: 0 done, 1 tuning failed (a space that does
not apply, no candidate that built and ran for any function, cuda candidates and no GPU here to
run them), 2 a usage or input error, 130 interrupted (the database holds every trial measured so
far; ``--resume`` continues it).
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import sys

from .cli import (EXIT_ERROR, EXIT_FAILED, EXIT_INTERRUPTED, InputError, _error, add_pass_config_flag, emit_text,
                  module_command, read_source)
from .ir import TVMSError
from .ir.deep import run_deep


BUILT_IN_SPACES = ("default", "tiles")


def _has_database(work_dir: str) -> bool:
    from .lowering.tune.json_database import RECORD_FILE, WORKLOAD_FILE

    # (empty files, left by a run that failed before its first trial, hold nothing to resume)
    return any(os.path.isfile(path) and os.path.getsize(path) > 0
               for path in (os.path.join(work_dir, f) for f in (WORKLOAD_FILE, RECORD_FILE)))


def trace_space(text: str, name: str):
    """A schedule function that interprets the trace ``text`` on a schedule (each sampling call
    without a decision draws afresh)."""
    from .lowering.schedule.replay import apply_trace_text

    def apply(sch):
        apply_trace_text(text, sch, name)
        return sch

    return apply


def cmd_tune(args: argparse.Namespace) -> int:
    from .ir import IRModule
    from .ir.function import PrimFunc
    from .ir.target import as_target
    from .lowering.build import has_relax_operators, run_relax_pipeline
    from .lowering.schedule import Schedule, ScheduleError
    from .lowering.tune.progress import Progress, check_curve_path, check_display, write_curve
    from .lowering.tune.relax_integration import MetaScheduleApplyDatabase, tune_relax
    from .lowering.tune.tile_space import tile_space
    from .lowering.tune.tune import normalize_mod, tune_tir
    from .script import from_source

    if args.trials < 1 or args.trials_per_iter < 1:
        _error("tune: --trials and --trials-per-iter are positive numbers")
        return EXIT_ERROR
    if _has_database(args.work_dir) and not args.resume:
        _error(f"tune: {args.work_dir} already holds a tuning database; pass --resume to continue it, "
               "or give another --work-dir")
        return EXIT_ERROR
    try:
        target = as_target(args.target)
        name, text = read_source(args.input)
        space_name, space_text = read_source(args.space) if args.space not in BUILT_IN_SPACES else ("", "")
        tiles = tile_space(target) if args.space == "tiles" else None
    except (InputError, TVMSError) as err:
        _error(f"tune: {err}")
        return EXIT_ERROR
    try:  # (the deep walks on a thread with room for them; the tuning on the main thread, for Ctrl-C)
        mod = run_deep(from_source, text, name)
    except TVMSError as err:  # renders itself: file:line:col, the line, a caret
        print(str(err), file=sys.stderr)
        return EXIT_ERROR
    if isinstance(mod, PrimFunc):
        mod = IRModule({"main": mod})
    if not isinstance(mod, IRModule):
        _error(f"tune: {name} holds no module to tune")
        return EXIT_ERROR
    dialect = args.dialect or mod.source_dialect
    relax = has_relax_operators(mod) or any(not isinstance(mod[n], PrimFunc) for n in mod)
    space = trace_space(space_text, space_name) if space_text else tiles or "post-order-apply"
    try:
        if relax:  # (as tvms build lowers it: the tuned kernels are the ones a build compiles)
            mod = run_relax_pipeline(mod, "zero", schedule=True, target=target)
        if space_text:  # a space file that does not fit the module fails here, once, with its position
            for fname in mod:
                if isinstance(mod[fname], PrimFunc):
                    space(Schedule(normalize_mod(mod[fname])))
    except TVMSError as err:  # a primitive that fails on this module (1), or not a trace (2)
        print(str(err), file=sys.stderr)
        return EXIT_FAILED if isinstance(err, ScheduleError) else EXIT_ERROR
    try:  # (a display or a curve path that cannot work is refused before any tuning)
        progress = Progress(display=args.progress, work_dir=args.work_dir)
        check_display(args.progress)
        if args.plot:
            check_curve_path(args.plot)
    except TVMSError as err:
        _error(f"tune: {err}")
        return EXIT_ERROR
    options = dict(num_trials_per_iter=args.trials_per_iter, space=space, strategy=args.strategy,
                   cost_model=args.cost_model, seed=args.seed, progress=progress)
    try:
        executors = _executors(args.executor, args.ray_resources)
    except TVMSError as err:  # no Ray, a bad address or resources: a usage error
        _error(f"tune: {err}")
        return EXIT_ERROR
    if executors:
        options.update(builder=executors[0], runner=executors[1])
    try:
        if relax:
            database = tune_relax(mod, None, target, args.work_dir, args.trials, **options)
        else:
            database = tune_tir(mod, target, args.work_dir, args.trials, **options)
        with database, target:
            tuned = MetaScheduleApplyDatabase()(mod)
        if args.plot:
            write_curve(args.plot, progress.curve)
    except TVMSError as err:
        _error(f"tune: {err}")
        return EXIT_FAILED
    except KeyboardInterrupt:
        _error(f"tune: interrupted; the database in {args.work_dir} keeps every trial measured "
               "(continue with --resume)")
        return EXIT_INTERRUPTED
    finally:
        for executor in executors:  # (tune_tir shuts down only the builders and runners it made)
            executor.shutdown()
    funcs = [n for n in mod if isinstance(mod[n], PrimFunc)]
    untuned = [n for n in funcs if tuned[n] is mod[n]]
    if untuned and len(untuned) == len(funcs):
        _error(f"tune: no trial succeeded, for any function ({', '.join(untuned)}); the trials' errors are "
               f"in {os.path.join(args.work_dir, 'logs')}")
        return EXIT_FAILED
    if untuned:
        print(f"tvms: warning: no successful trial for {', '.join(untuned)}; left as it was", file=sys.stderr)
    if args.pass_config:  # (the schedules were measured as built under them)
        options = " ".join("--pass-config " + shlex.quote(f"{key}={json.dumps(value, separators=(',', ':'))}")
                           for key, value in args.pass_config.items())
        print(f"tvms: note: the candidates were built under {options}; build the result with the same", file=sys.stderr)
    return emit_text(run_deep(tuned.script, dialect=dialect), args.output)


def _executors(executor: str, resources: str | None) -> list:
    """[builder, runner] on a Ray cluster for ``--executor ray|auto|ray://ADDR|HOST:PORT``; [] for
    ``local`` (tune_tir's own local builder and runner)."""
    if executor == "local":
        if resources is not None:
            raise TVMSError("--ray-resources goes with --executor ray, auto or ray://ADDR")
        return []
    try:
        wanted = json.loads(resources) if resources is not None else None
    except ValueError as err:
        raise TVMSError(f"--ray-resources is a JSON object such as '{{\"tvms-target-znver4\": 1}}': {err}") from None
    if wanted is not None and not (isinstance(wanted, dict) and all(
            isinstance(k, str) and isinstance(v, (int, float)) and v > 0 for k, v in wanted.items())):
        raise TVMSError("--ray-resources is a JSON object of resource names and positive amounts")
    from .lowering.tune.ray_executor import RayBuilder, RayRunner

    address = None if executor == "ray" else executor
    builder = RayBuilder(address=address)
    try:
        return [builder, RayRunner(address=address, resources=wanted)]
    except BaseException:
        builder.shutdown()
        raise


def add_tune_parser(subparsers) -> None:
    from .script.dialect import DIALECTS

    p = module_command(
        subparsers, "tune",
        help="auto-tune the TensorIR of a module and apply the best schedules",
        description=(
            "Search schedules for each PrimFunc of a module (a Relax module is first lowered with "
            "the zero pipeline), measuring candidates on this machine; write the module with the "
            "best schedule of each function applied (to standard output, or atomically to -o FILE), "
            "ready for 'tvms build'. The database and logs are kept in --work-dir. --space FILE.py "
            "is a trace-language schedule with sampling calls, interpreted, never executed. Exit "
            "codes: 0 done, 1 tuning failed, 2 usage or input error, 130 interrupted (the database "
            "keeps the trials so far; continue with --resume)."),
        what="tune",
    )
    p.add_argument("--target", default="llvm", help='the target, e.g. "llvm -num-cores=2" (default: llvm)')
    p.add_argument("--trials", type=int, default=64, metavar="N", help="the trial budget of the run (default 64)")
    p.add_argument("--trials-per-iter", type=int, default=64, metavar="N",
                   help="candidates measured per round (default 64)")
    p.add_argument("--work-dir", required=True, metavar="DIR", help="where the database and logs are kept")
    p.add_argument("--resume", action="store_true",
                   help="continue the database in --work-dir (its trials count toward --trials)")
    p.add_argument("--space", default="default", metavar="default|tiles|FILE.py",
                   help="the search space: the built-in one (default), it with tvms's tile rule of the "
                        "target (a conv under llvm, a large matmul under cuda), or a trace-language schedule")
    p.add_argument("--strategy", default="evolutionary", choices=["evolutionary", "replay-trace", "replay-func"],
                   help="the search strategy (default: evolutionary)")
    p.add_argument("--cost-model", default="xgb", choices=["xgb", "random"],
                   help="the cost model that ranks candidates before they are measured (default: xgb)")
    p.add_argument("--seed", type=int, default=None, help="random seed of the search")
    p.add_argument("--executor", default="local", metavar="local|ray|auto|ray://ADDR",
                   help="where candidates are built and measured: worker processes here (local, the "
                        "default), a new local Ray (ray), or the Ray cluster at ADDR (auto: the one this "
                        "machine belongs to); Ray needs pip install 'tvms[distributed]'")
    p.add_argument("--ray-resources", metavar="JSON",
                   help='Ray resources each measuring actor asks for, e.g. \'{"tvms-target-znver4": 1}\', '
                        "so candidates run on the machines that have the target hardware")
    p.add_argument("--plot", metavar="CURVE.svg|.png", help="write the tuning curve (best GFLOPS by trial)")
    p.add_argument("--progress", default="auto", choices=["auto", "rich", "tqdm", "line", "plain", "none"],
                   help="the live display on standard error (default: auto)")
    p.add_argument("--dialect", choices=sorted(DIALECTS),
                   help="dialect of the output (default: the dialect of the input)")
    add_pass_config_flag(p)
    p.set_defaults(func=cmd_tune, main_thread=True)
