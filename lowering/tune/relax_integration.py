"""Tuning a Relax program: its tasks are the PrimFuncs it calls with ``R.call_tir`` (TVM's
``extract_tasks`` / ``tune_relax``), and two Relax passes as seed 000 uses them:

    with target, tempfile.TemporaryDirectory() as tmp_dir:
        mod = tvms.transform.Sequential([
            relax.get_pipeline("zero"),
            relax.transform.MetaScheduleTuneTIR(work_dir=tmp_dir, max_trials_global=trials),
            relax.transform.MetaScheduleApplyDatabase(work_dir=tmp_dir),
        ])(mod)

``MetaScheduleApplyDatabase`` replaces each PrimFunc the database has a record of with its best
schedule, marked ``tir.is_scheduled`` so that the default schedules leave it alone.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...ir import relax as rx
from ...ir.errors import TVMSError
from ...ir.function import PrimFunc
from ...ir.module import GlobalVar, IRModule
from ...ir.structural import structural_equal, structural_hash
from ...ir.target import Target, as_target
from ...ir.visitor import collect
from ..dlight.base import is_scheduled, mark_scheduled
from ..pass_registry import register_pass
from ..transform import module_pass


def _tune() -> Any:
    """The tuning loop and its parts (task scheduler, rules, search), imported when a task is
    extracted or a pass runs, not by ``import tvms`` (which registers these passes)."""
    from . import tune

    return tune


@dataclass
class ExtractedTask:
    """A PrimFunc to tune: ``task_name`` (its first name), ``mod`` (it, as ``main``), the
    ``target``, ``dispatched`` (the modules it stands for), ``weight`` (how many
    ``R.call_tir`` call it), ``constant_params`` (the indices of the parameters every call
    passes a constant: weights whose repacking a compiled model does once, untimed in a trial)
    and ``names`` (the names of the module's PrimFuncs it stands for, in order of first call)."""

    task_name: str
    mod: IRModule
    target: Target
    dispatched: list
    weight: int
    constant_params: frozenset = frozenset()
    names: list = field(default_factory=list)


def _distinct(named: list, target: Target) -> list[ExtractedTask]:
    """One task per structurally distinct module of ``(name, module, constant parameters)``,
    named after its first occurrence, weighted by its number of occurrences, its constant
    parameters those that are constant in all of them."""
    buckets: dict[int, list[ExtractedTask]] = {}
    tasks: list[ExtractedTask] = []
    for name, task_mod, constants in named:
        bucket = buckets.setdefault(structural_hash(task_mod), [])
        same = next((t for t in bucket if structural_equal(t.mod, task_mod)), None)
        if same is not None:
            same.weight += 1
            same.constant_params &= constants
            if name not in same.names:
                same.names.append(name)
        else:
            bucket.append(ExtractedTask(name, task_mod, target, [task_mod], 1, constants, [name]))
            tasks.append(bucket[-1])
    return tasks


def extract_tasks(mod: "IRModule | rx.Function", target: Any, params: dict | None = None,
                  module_equality: str = "structural") -> list[ExtractedTask]:
    """One task per distinct PrimFunc called by ``R.call_tir`` from the module's Relax functions;
    equal PrimFuncs (structurally) are one task whose weight counts all their calls."""
    if isinstance(mod, rx.Function):
        mod = IRModule({"main": mod})
    if module_equality != "structural":
        raise TVMSError(f"module_equality {module_equality!r}: tvms compares modules structurally only")
    if params:
        from ..relax.passes import BindParams

        mod = BindParams("main", params)(mod)
    return _distinct([(name, _tune().normalize_mod(mod[name]), constants) for name, constants in _tir_calls(mod)],
                     as_target(target))


_TIR_CALLS = ("relax.call_tir", "relax.call_tir_inplace")  # (ConcatInPlace makes the second)


def _tir_calls(mod: IRModule) -> list:
    """``(PrimFunc name, indices of the arguments that are constants)`` of each ``R.call_tir`` (or
    ``R.call_tir_inplace``) of the module's Relax functions."""
    calls = []
    for func in mod.functions.values():
        if isinstance(func, rx.Function):
            for call in collect(func, rx.Call):
                if getattr(call.op, "name", None) in _TIR_CALLS and isinstance(call.args[0], GlobalVar) \
                        and isinstance(mod[call.args[0]], PrimFunc):
                    args = call.args[1].fields if isinstance(call.args[1], rx.Tuple) else ()
                    calls.append((call.args[0].name_hint,
                                  frozenset(i for i, a in enumerate(args) if isinstance(a, rx.Constant))))
    return calls


def _tunable(tasks: list, caller: str) -> list:
    """The tasks a trial can measure against their default schedule: a task with a scalar
    parameter or a buffer of symbolic size (an imported model's batch ``N``: a trial measures
    one shape), or whose default schedule does not replay from its trace (no baseline: any
    tuned schedule would replace it, faster or not), keeps its default schedule, with a warning
    naming each and why; an error when that leaves none of ``tasks``."""
    from .measure import args_info_of
    from .task_scheduler import replayed_default

    tunable, skipped, sized = [], [], False
    for task in tasks:
        try:
            args_info_of(task.dispatched[0]["main"])
        except TVMSError as err:
            skipped.append(f"{task.task_name}: {err}")
            sized = True
            continue
        default, replay = replayed_default(task.dispatched[0], task.target, via_json=False)
        if default is not None and replay is None:
            skipped.append(f"{task.task_name}: its default schedule rewrites the function outside its trace")
        else:
            tunable.append(task)
    if tasks and not tunable:
        hint = " (an imported model's sizes: from_onnx's shape_dict)" if sized else ""
        raise TVMSError(f"{caller}: no task can be tuned{hint}: " + "; ".join(skipped))
    if skipped:
        import warnings

        warnings.warn("not tuned (they keep the default schedule): " + "; ".join(skipped), stacklevel=3)
    return tunable


def _tune_extracted(tasks: list, work_dir: str, max_trials_global: int, max_trials_per_task: int | None,
                    space: Any = "post-order-apply", strategy: Any = "evolutionary", seed: int | None = None,
                    **options: Any) -> Any:
    named = [(t.task_name, t.dispatched[0], t.weight, space) for t in tasks]
    return _tune().tune_named_tasks(named, tasks[0].target if tasks else None, work_dir, strategy=strategy,
                                    constant_params=[t.constant_params for t in tasks],
                                    seed=seed, max_trials_global=max_trials_global,
                                    max_trials_per_task=max_trials_per_task, **options)


def tune_relax(mod: "IRModule | rx.Function", params: dict | None, target: Any, work_dir: str,
               max_trials_global: int, max_trials_per_task: int | None = None,
               op_names: list | None = None, *, num_trials_per_iter: int = 64, builder: Any = "local",
               runner: Any = "local", database: Any = "json", cost_model: Any = "xgb",
               measure_callbacks: Any = "default", task_scheduler: Any = "gradient",
               space: Any = "post-order-apply", strategy: Any = "evolutionary", seed: int | None = None,
               module_equality: str = "structural", progress: Any = "auto") -> Any:
    """Tune the tasks of a Relax program, weighted by their calls; returns the database.
    ``op_names``: tune only the tasks whose name contains one of them. Functions already
    scheduled are left out."""
    tasks = [t for t in extract_tasks(mod, target, params, module_equality)
             if not is_scheduled(t.dispatched[0]["main"])
             and (not op_names or any(name in t.task_name for name in op_names))]
    if not tasks:
        raise TVMSError("tune_relax: the module calls no unscheduled PrimFunc (legalize it first: "
                        "relax.get_pipeline('zero') or LegalizeOps)")
    tasks = _tunable(tasks, "tune_relax")
    return _tune_extracted(tasks, work_dir, max_trials_global, max_trials_per_task, space=space,
                           strategy=strategy, seed=seed, num_trials_per_iter=num_trials_per_iter,
                           builder=builder, runner=runner, database=database, cost_model=cost_model,
                           measure_callbacks=measure_callbacks, task_scheduler=task_scheduler,
                           module_equality=module_equality, progress=progress)


def compile_relax(database: Any, mod: IRModule, target: Any, params: dict | None = None,
                  exec_mode: str = "compiled") -> Any:
    """The executable of a Relax program with the database's best schedules: lowered by the
    Relax pipeline step of ``tvms.compile`` (nothing to do when ``mod`` is lowered already, as
    when its tasks were extracted from it), the tuned PrimFuncs applied, the others given the
    default schedules by ``tvms.compile`` (``exec_mode``: its)."""
    from ..build import compile as compile_module, run_relax_pipeline
    from ..relax.passes import BindParams

    target = as_target(target)
    if params:
        mod = BindParams("main", params)(mod)
    with database, target:
        mod = MetaScheduleApplyDatabase()(run_relax_pipeline(mod, "zero", True, target))
    return compile_module(mod, target, exec_mode=exec_mode)


def _current_target(pass_name: str, target: Any) -> Target:
    target = Target.current() if target is None else as_target(target)
    if target is None:
        raise TVMSError(f"{pass_name} needs a target: run it inside `with tvms.target.Target(...)`")
    return target


@module_pass(opt_level=0, name="MetaScheduleTuneTIR")
class MetaScheduleTuneTIR:
    """Tune every unscheduled PrimFunc of the module (equal ones once) with up to
    ``max_trials_global`` trials each, into the database of ``work_dir``; the module is returned
    unchanged (``MetaScheduleApplyDatabase`` applies the results). The tasks share one builder,
    runner and task scheduler."""

    def __init__(self, work_dir: str, max_trials_global: int, target: Any = None, **tune_options: Any) -> None:
        self.work_dir, self.max_trials_global = work_dir, max_trials_global
        self.target, self.tune_options = target, tune_options

    def transform_module(self, mod: IRModule, ctx: Any) -> IRModule:
        target = _current_target("MetaScheduleTuneTIR", self.target)
        constants: dict = {}
        for name, consts in _tir_calls(mod):  # (constant in every call)
            constants[name] = constants.get(name, consts) & consts
        tasks = _tunable(_distinct([(name, _tune().normalize_mod(mod[name]), constants.get(name, frozenset()))
                                          for name in mod
                                          if isinstance(mod[name], PrimFunc) and not is_scheduled(mod[name])],
                                         target), "MetaScheduleTuneTIR")
        if tasks:
            _tune_extracted(tasks, self.work_dir, self.max_trials_global * len(tasks), self.max_trials_global,
                            **{"task_scheduler": "round-robin", **self.tune_options})
        return mod


@module_pass(opt_level=0, name="MetaScheduleApplyDatabase")
class MetaScheduleApplyDatabase:
    """Each PrimFunc with a record in the database (the one entered with ``with database:``, else
    the JSON database of ``work_dir``) becomes its best schedule, keeping its attributes, marked
    scheduled."""

    def __init__(self, work_dir: str | None = None, enable_warning: bool = False, target: Any = None) -> None:
        self.work_dir, self.enable_warning, self.target = work_dir, enable_warning, target

    def transform_module(self, mod: IRModule, ctx: Any) -> IRModule:
        from .database import Database

        database = Database.current()
        if database is None:
            if self.work_dir is None:
                raise TVMSError("MetaScheduleApplyDatabase needs a database: give work_dir, or run it "
                                "inside `with database:`")
            # (reading only: a mistyped work_dir is an error, not a new empty database)
            try:
                database = _tune().make_part("database", "json", work_dir=self.work_dir, allow_missing=False)
            except TVMSError as err:
                raise TVMSError(f"MetaScheduleApplyDatabase: no tuning database in {self.work_dir!r} "
                                f"({err})") from None
        target = Target.current() if self.target is None else as_target(self.target)
        out = mod.copy()
        for name in mod:
            func = mod[name]
            if not isinstance(func, PrimFunc):
                continue
            sch = database.query_schedule(_tune().normalize_mod(func), target, workload_name=name)
            if sch is None:
                if self.enable_warning:
                    import warnings

                    warnings.warn(f"MetaScheduleApplyDatabase: no tuning record for {name}")
                continue
            tuned = sch.mod["main"]
            out[name] = mark_scheduled(tuned.with_changes(attrs=func.attrs))
        return out


register_pass(factory=MetaScheduleApplyDatabase)
