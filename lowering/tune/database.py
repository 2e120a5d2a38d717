"""Tuning records and the databases that keep them (TVM's ``Database`` interface).

A ``Workload`` is a module with its structural hash; a ``TuningRecord`` is a trace that schedules it,
the seconds it measured, the target and the arguments. ``get_top_k`` gives a workload's fastest
records; the ``query_*`` methods give the best schedule of a module. ``MemoryDatabase`` keeps them
in memory; ``JSONDatabase`` (``json_database.py``) in two files of TVM's layout.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from statistics import mean
from typing import Any

from ...ir.context_stack import ContextStack
from ...ir.errors import TVMSError
from ...ir.module import IRModule
from ...ir.structural import structural_equal, structural_hash
from ...ir.target import Target, as_target
from ..schedule.schedule import Schedule
from ..schedule.trace import Trace
from .measure import TensorInfo

# TVM records a candidate that failed to build or run with this time, so it sorts last
FAILED_RUN_SECS = 1e10


def trace_key(trace: Trace) -> str:
    """A trace's JSON text: equal for two records of one schedule."""
    return json.dumps(trace.as_json(remove_postproc=False))


class Workload:
    """A module to tune, identified by its structural hash (two equal modules are one workload)."""

    def __init__(self, mod: IRModule, shash: int | None = None) -> None:
        self.mod = mod
        self.shash = structural_hash(mod) if shash is None else int(shash)

    def __eq__(self, other: object) -> bool:
        return self is other or (isinstance(other, Workload) and self.shash == other.shash
                                 and structural_equal(self.mod, other.mod))

    def __hash__(self) -> int:
        return hash(self.shash)

    def __repr__(self) -> str:
        return f"Workload(shash={self.shash})"


def target_as_json(target: Target) -> dict:
    """A target in TVM's exported-dict form: ``{"kind": ..., option: value, ...}``."""
    return {"kind": target.kind, **{k: list(v) if isinstance(v, tuple) else v for k, v in target.attrs.items()}}


@dataclass
class TuningRecord:
    """``TuningRecord(trace, workload, run_secs=None, target=None, args_info=None)``;
    ``confirmation``: a tuned best timed again beside the default schedule (the task
    scheduler's ``_confirm_best``; not written: ``JSONDatabase`` infers it when reading)."""

    trace: Trace
    workload: Workload
    run_secs: list | None = None
    target: Target | None = None
    args_info: list | None = None
    confirmation: bool = False
    _key: tuple | None = field(default=None, init=False, repr=False, compare=False)

    def schedule_key(self) -> tuple:
        """``(trace_key, target)``: equal for two measurements of one schedule on one target
        (computed once: ``get_top_k`` asks at each call, for every record)."""
        if self._key is None:
            self._key = (trace_key(self.trace), str(self.target))
        return self._key

    def is_valid(self) -> bool:
        """Measured, and every measurement succeeded."""
        return bool(self.run_secs) and all(s < FAILED_RUN_SECS for s in self.run_secs)

    def mean_secs(self) -> float:
        return mean(self.run_secs) if self.is_valid() else FAILED_RUN_SECS

    def as_measure_candidate(self) -> Any:
        from .measure import MeasureCandidate

        sch = Schedule(self.workload.mod)
        self.trace.apply_to_schedule(sch, remove_postproc=False)
        return MeasureCandidate(sch, list(self.args_info or []))

    def as_json(self) -> list:
        """TVM's record layout: ``[trace, run_secs, target, args_info]``."""
        return [self.trace.as_json(remove_postproc=False),
                None if self.run_secs is None else [float(s) for s in self.run_secs],
                None if self.target is None else target_as_json(self.target),
                None if self.args_info is None else [a.as_json() for a in self.args_info]]

    @staticmethod
    def from_json(json_obj: Any, workload: Workload) -> "TuningRecord":
        try:
            trace, run_secs, target, args_info = json_obj
        except (TypeError, ValueError):
            raise TVMSError(f"a tuning record is [trace, run_secs, target, args_info], got {json_obj!r:.80}") from None
        try:
            run_secs = None if run_secs is None else [float(s) for s in run_secs]
        except (TypeError, ValueError):
            raise TVMSError(f"a tuning record's run_secs is a list of numbers, got {run_secs!r:.80}") from None
        return TuningRecord(Trace.from_json(trace), workload, run_secs,
                            None if target is None else as_target(target),
                            None if args_info is None else [TensorInfo.from_json(a) for a in args_info])


def ranked(records: Any) -> list[TuningRecord]:
    """The valid ones of ``records`` (of one workload), fastest first, a schedule measured more
    than once on a target counting by its latest record: a later failure drops an earlier
    valid measurement of it."""
    latest: dict = {}
    for r in records:
        latest.pop(r.schedule_key(), None)  # (the latest measurement's place: the sort's tie order)
        latest[r.schedule_key()] = r
    return sorted((r for r in latest.values() if r.is_valid()), key=TuningRecord.mean_secs)


class Database:
    """What every database offers. Subclasses define the six storage methods; the queries are
    built on them."""

    # -- storage (per database)
    def has_workload(self, mod: IRModule) -> bool:
        raise NotImplementedError

    def commit_workload(self, mod: IRModule) -> Workload:
        raise NotImplementedError

    def commit_tuning_record(self, record: TuningRecord) -> None:
        raise NotImplementedError

    def get_all_tuning_records(self) -> list[TuningRecord]:
        raise NotImplementedError

    def __len__(self) -> int:
        return len(self.get_all_tuning_records())

    def get_top_k(self, workload: Workload, top_k: int) -> list[TuningRecord]:
        """The ``top_k`` fastest valid records of ``workload``, fastest first; a schedule measured
        more than once (the task scheduler's check of a tuned schedule against the default one)
        by its latest record."""
        if top_k < 0:
            raise TVMSError(f"get_top_k: top_k is at least 0, got {top_k}")
        return ranked(r for r in self.get_all_tuning_records() if r.workload == workload)[:top_k]

    # -- queries
    def query_tuning_record(self, mod: IRModule, target: Any = None, workload_name: str = "main") -> TuningRecord | None:
        """The best record of ``mod`` (for ``target`` when given), or None."""
        if not self.has_workload(mod):
            return None
        target = None if target is None else as_target(target)
        workload = self.commit_workload(mod)
        for record in self.get_top_k(workload, len(self)):
            if target is None or record.target is None or record.target.kind == target.kind:
                return record
        return None

    def query_schedule(self, mod: IRModule, target: Any = None, workload_name: str = "main") -> Schedule | None:
        """The best record's trace replayed on ``mod``, or None."""
        record = self.query_tuning_record(mod, target, workload_name)
        if record is None:
            return None
        sch = Schedule(record.workload.mod)
        record.trace.apply_to_schedule(sch, remove_postproc=False)
        return sch

    def query_ir_module(self, mod: IRModule, target: Any = None, workload_name: str = "main") -> IRModule | None:
        sch = self.query_schedule(mod, target, workload_name)
        return None if sch is None else sch.mod

    def __enter__(self) -> "Database":
        _CURRENT.push(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        _CURRENT.pop(self)

    @staticmethod
    def current() -> "Database | None":
        """The innermost database entered with ``with`` (as ``MetaScheduleApplyDatabase`` reads it)."""
        return _CURRENT.current()


_CURRENT = ContextStack("tvms_databases")  # (per thread, as TVM's)


class MemoryDatabase(Database):
    """Records in memory, lost with the process."""

    def __init__(self) -> None:
        self._workloads: dict[int, list[Workload]] = {}
        self._records: list[TuningRecord] = []

    def _find(self, mod: IRModule) -> Workload | None:
        probe = Workload(mod)
        return next((w for w in self._workloads.get(probe.shash, []) if structural_equal(w.mod, mod)), None)

    def has_workload(self, mod: IRModule) -> bool:
        return self._find(mod) is not None

    def commit_workload(self, mod: IRModule) -> Workload:
        found = self._find(mod)
        if found is None:
            found = Workload(mod)
            self._workloads.setdefault(found.shash, []).append(found)
        return found

    def commit_tuning_record(self, record: TuningRecord) -> None:
        self._records.append(record)

    def get_all_tuning_records(self) -> list[TuningRecord]:
        return list(self._records)
