"""The tuning entry points: ``tune_tasks``, ``tune_tir`` and ``compile_tir`` (TVM's names and
arguments), plus seed 002's older ``tune_tir(..., config=TuneConfig(...))`` that returns the best
schedule.

Every part may be given as an object or by TVM's short name (``builder="local"``,
``database="json"``, ``cost_model="xgb"``, ``space="post-order-apply"``,
``strategy="evolutionary"``, ``task_scheduler="gradient"``, ``measure_callbacks="default"``).
A run on a ``work_dir`` that already holds a database resumes: the trials recorded there count
toward the budget, and the search starts from the best of them.
"""
from __future__ import annotations

import importlib
import os
from dataclasses import dataclass
from typing import Any

from ...ir.errors import TVMSError
from ...ir.function import PrimFunc
from ...ir.module import IRModule
from ...ir.target import as_target, host_cores
from .measure_callback import removes_artifacts
from .progress import Progress, close_loggers, task_loggers
from .task_scheduler import GradientBased, TaskScheduler
from .tune_context import TuneContext

# short name -> (module of lowering.tune, class)
_NAMED = {
    "builder": {"local": ("builder", "LocalBuilder")},
    "runner": {"local": ("runner", "LocalRunner")},
    "database": {"json": ("json_database", "JSONDatabase"), "memory": ("database", "MemoryDatabase")},
    "cost_model": {"xgb": ("xgb_model", "XGBModel"), "random": ("cost_model", "RandomModel")},
    "space": {"post-order-apply": ("post_order_apply", "PostOrderApply")},
    "strategy": {"evolutionary": ("evolutionary_search", "EvolutionarySearch"),
                 "replay-trace": ("search_strategy", "ReplayTrace"),
                 "replay-func": ("search_strategy", "ReplayFunc")},
}


def _named_class(part: str, name: str) -> Any:
    table = _NAMED[part]
    if name not in table:
        raise TVMSError(f"unknown {part.replace('_', ' ')} {name!r}; known: {', '.join(table)}")
    module, cls = table[name]
    return getattr(importlib.import_module(f"{__package__}.{module}"), cls)


def make_part(part: str, value: Any, **kwargs: Any) -> Any:
    """``value`` itself, or a new object of the class its short name stands for."""
    return _named_class(part, value)(**kwargs) if isinstance(value, str) else value


def make_space(value: Any) -> Any:
    """A space generator: ``value`` itself, a ``ScheduleFn`` of a schedule function, or the
    space a short name stands for."""
    if callable(value) and not hasattr(value, "generate_design_space"):  # a user's schedule function
        from .space_generator import ScheduleFn

        return ScheduleFn(value)
    return make_part("space", value)


def _callbacks(value: Any) -> list:
    if value == "default":
        from .measure_callback import MeasureCallback

        return MeasureCallback.create("default")
    return [value] if hasattr(value, "apply") else list(value or [])


def seeded_scheduler(kind: Any, rng: Any) -> Any:
    """``"gradient"`` as a scheduler whose tie-breaks draw from the run's seed (so that one seed
    replays a whole run); anything else as it is."""
    return GradientBased(seed=rng.randrange(1 << 31)) if kind == "gradient" else kind


def normalize_mod(mod: "IRModule | PrimFunc") -> IRModule:
    """A tuning task's module: one PrimFunc, under the name ``main``."""
    if isinstance(mod, PrimFunc):
        return IRModule({"main": mod})
    if not isinstance(mod, IRModule):
        raise TVMSError(f"tuning takes an IRModule or a PrimFunc, got {type(mod).__name__}")
    names = list(mod)
    return IRModule({"main": mod[names[0]]}) if len(names) == 1 and names[0] != "main" else mod


def tune_tasks(*, tasks: list, task_weights: list, work_dir: str, max_trials_global: int,
               max_trials_per_task: int | None = None, num_trials_per_iter: int = 64,
               builder: Any = "local", runner: Any = "local", database: Any = "json",
               cost_model: Any = "xgb", measure_callbacks: Any = "default",
               task_scheduler: Any = "gradient", module_equality: str = "structural",
               progress: Any = "auto") -> Any:
    """Tune ``tasks`` (TuneContexts) together within ``max_trials_global`` trials; returns the
    database. ``progress``: a ``Progress``, a display name ("auto", "rich", "tqdm", "plain",
    "none"), or None."""
    if not tasks:
        raise TVMSError("no tasks to tune")
    if len(tasks) != len(task_weights):
        raise TVMSError(f"{len(tasks)} task(s) but {len(task_weights)} weight(s)")
    if module_equality != "structural":
        raise TVMSError(f"module_equality {module_equality!r}: tvms compares modules structurally only")
    for what, n in (("max_trials_global", max_trials_global), ("num_trials_per_iter", num_trials_per_iter)):
        if not isinstance(n, int) or n < 1:
            raise TVMSError(f"{what} is a positive integer, got {n!r}")
    max_trials_per_task = max_trials_global if max_trials_per_task is None else max_trials_per_task
    if runner == "local":  # (cuda tasks on a machine without a GPU: refused before anything is built)
        from .runner import check_measurable_here  # (the runner loads when tuning starts, as make_part does)

        check_measurable_here({getattr(t.target, "kind", None) for t in tasks})
    os.makedirs(work_dir, exist_ok=True)
    num_cores = tasks[0].num_threads
    made_here = [isinstance(builder, str), isinstance(runner, str)]
    # measuring overlaps building (TaskScheduler.build_chunk): the builder leaves a core to the runner
    builder = make_part("builder", builder, max_workers=max(1, host_cores() - 1))
    runner = make_part("runner", runner)
    database = make_part("database", database, **({"work_dir": work_dir} if database == "json" else {}))
    cost_model = make_part("cost_model", cost_model, **({"num_tuning_cores": num_cores} if cost_model == "xgb" else {}))
    scheduler = TaskScheduler.create(task_scheduler) if isinstance(task_scheduler, str) else task_scheduler
    if progress is not None and not isinstance(progress, Progress):
        progress = Progress(display=progress, work_dir=work_dir)
    scheduler.progress = progress
    callbacks = _callbacks(measure_callbacks)
    try:
        scheduler.tune(tasks, [float(w) for w in task_weights], max_trials_global, max_trials_per_task,
                       num_trials_per_iter, builder, runner, callbacks, database, cost_model)
    finally:
        if made_here[0]:  # the worker processes of a builder made here end with the run; the artifacts
            # stay when the run keeps them (no RemoveBuildArtifact, as in TVM)
            builder.shutdown(keep_artifacts=not removes_artifacts(callbacks))
        if made_here[1]:
            runner.shutdown()
    return database


def _prim_funcs(mod: "IRModule | PrimFunc") -> list[tuple[str, PrimFunc]]:
    if isinstance(mod, PrimFunc):
        return [("main", mod)]
    if not isinstance(mod, IRModule):
        raise TVMSError(f"tune_tir takes an IRModule or a PrimFunc, got {type(mod).__name__}")
    funcs = sorted((name, mod[name]) for name in mod if isinstance(mod[name], PrimFunc))
    if not funcs:
        raise TVMSError("tune_tir: the module has no PrimFunc to tune")
    return funcs


@dataclass
class TuneConfig:
    """The budget of the older ``tune_tir(..., config=TuneConfig(...))`` form (seed 002)."""

    max_trials_global: int
    num_trials_per_iter: int = 64
    max_trials_per_task: int | None = None
    task_scheduler: str | None = None  # None: tune_tir's own argument
    strategy: str | None = None
    seed: int | None = None


def tune_tir(mod: "IRModule | PrimFunc", target: Any, work_dir: str | None = None,
             max_trials_global: int | None = None, *, config: TuneConfig | None = None,
             max_trials_per_task: int | None = None, num_trials_per_iter: int = 64,
             builder: Any = "local", runner: Any = "local", database: Any = "json",
             cost_model: Any = "xgb", measure_callbacks: Any = "default", task_scheduler: Any = "gradient",
             space: Any = "post-order-apply", strategy: Any = "evolutionary",
             num_tuning_cores: "int | str" = "physical", seed: int | None = None,
             module_equality: str = "structural", special_space: dict | None = None,
             task_name: str | None = None, progress: Any = "auto") -> Any:
    """Tune each PrimFunc of ``mod`` for ``target``; returns the database (TVM 0.27).

    With ``config=TuneConfig(...)`` (the older form) the budget comes from the config and the
    best ``Schedule`` of ``mod`` is returned instead (None if no trial succeeded).
    """
    if work_dir is None:
        raise TVMSError("tune_tir needs a work_dir (where the database and the logs are kept)")
    if config is not None:
        max_trials_global = config.max_trials_global
        num_trials_per_iter = config.num_trials_per_iter
        max_trials_per_task = config.max_trials_per_task
        task_scheduler = config.task_scheduler or task_scheduler
        strategy = config.strategy or strategy
        seed = config.seed if seed is None else seed
    if max_trials_global is None:
        raise TVMSError("tune_tir needs max_trials_global (or config=TuneConfig(max_trials_global=...))")
    named = _prim_funcs(mod)
    if task_name is not None and len(named) == 1:
        named = [(task_name, named[0][1])]
    target = as_target(target)
    tasks = [(name, normalize_mod(func), 1.0, (special_space or {}).get(name, space)) for name, func in named]
    db = tune_named_tasks([t for t in tasks if t[3] is not None], target, work_dir, strategy=strategy, seed=seed,
                          num_tuning_cores=num_tuning_cores, task_scheduler=task_scheduler,
                          max_trials_global=max_trials_global, max_trials_per_task=max_trials_per_task,
                          num_trials_per_iter=num_trials_per_iter, builder=builder, runner=runner,
                          database=database, cost_model=cost_model, measure_callbacks=measure_callbacks,
                          module_equality=module_equality, progress=progress)
    return compile_tir(db, mod, target) if config is not None else db


def tune_named_tasks(named: list, target: Any, work_dir: str, *, strategy: Any, seed: int | None,
                     num_tuning_cores: "int | str" = "physical", task_scheduler: Any = "gradient",
                     constant_params: list | None = None, **options: Any) -> Any:
    """Tune ``(name, module, weight, space)`` tasks (one-function modules, as ``normalize_mod``
    makes them) for ``target``: each gets its context, seeded from ``seed``, and a log in
    ``work_dir/logs``; ``constant_params``: per task, the parameters its callers pass as
    constants (``TuneContext.constant_params``); ``options`` go to ``tune_tasks``. Returns the
    database."""
    seeds = TuneContext(rand_state=-1 if seed is None else seed).rng
    loggers = task_loggers(work_dir, [name for name, *_ in named])
    try:
        contexts = [TuneContext(task_mod, target, make_space(space), make_part("strategy", strategy), name,
                                seeds.randrange(1 << 31), num_tuning_cores, logger, constants).clone()
                    for (name, task_mod, _, space), logger, constants
                    in zip(named, loggers, constant_params or [frozenset()] * len(named))]
        return tune_tasks(tasks=contexts, task_weights=[weight for _, _, weight, _ in named], work_dir=work_dir,
                          task_scheduler=seeded_scheduler(task_scheduler, seeds), **options)
    finally:
        close_loggers(loggers)


def compile_tir(database: Any, mod: "IRModule | PrimFunc", target: Any) -> Any:
    """The best schedule the database holds for ``mod`` (a PrimFunc or a one-function module),
    or None."""
    return database.query_schedule(normalize_mod(mod), as_target(target), workload_name="main")
