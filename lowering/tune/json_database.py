"""``JSONDatabase``: tuning records in two files of TVM's layout, appended as they come.

``database_workload.json`` has one line per workload, ``[shash, base64 of the module]``;
``database_tuning_record.json`` one line per record, ``[workload_index, record]`` where the
index counts the workload file's lines from 0 and ``record`` is ``TuningRecord.as_json()``.
Lines are written as TVM's ``JSONDumps`` writes them (no spaces, keys sorted, floats with 20
significant digits), each with one ``write`` and flushed at once, so a run that is interrupted
(Ctrl-C, kill) leaves files that load: at worst a last line cut short, which loading skips with
a warning and the next write removes. Opening the same files again continues where they ended.

The module of a workload is its TVMScript text (base64 of ``mod.script(show_meta=True)``, with
tvms's structural hash). TVM writes its own object graph there, which tvms does not decode: such
a workload is kept with its records (listed, and written back untouched), and is matched to a
module by replaying: a query for a module with the same argument shapes replays the workload's
best trace on that module, and if it applies the workload is taken as that module's.
"""
from __future__ import annotations

import base64
import binascii
import json
import os
import warnings
from collections import Counter
from typing import Any

from ...ir.errors import TVMSError
from ...ir.module import IRModule
from ...script.module_parser import from_source
from .database import Database, MemoryDatabase, TuningRecord, Workload, ranked
from .measure import args_info_of, main_func

WORKLOAD_FILE = "database_workload.json"
RECORD_FILE = "database_tuning_record.json"


def json_dumps(obj: Any) -> str:
    """``obj`` as TVM's ``JSONDumps`` writes it: ``[a,b]``, ``{"k":v}`` with sorted keys,
    ``true``/``false``/``null``, floats with 20 significant digits."""
    if obj is None:
        return "null"
    if isinstance(obj, bool):
        return "true" if obj else "false"
    if isinstance(obj, int):
        return str(obj)
    if isinstance(obj, float):
        return format(obj, ".20g")
    if isinstance(obj, str):
        return json.dumps(obj, ensure_ascii=False)
    if isinstance(obj, dict):
        return "{" + ",".join(f"{json_dumps(str(k))}:{json_dumps(v)}" for k, v in sorted(obj.items())) + "}"
    if isinstance(obj, (list, tuple)):
        return "[" + ",".join(json_dumps(v) for v in obj) + "]"
    raise TVMSError(f"cannot write {type(obj).__name__} to a tuning database")


class UndecodedWorkload(Workload):
    """A workload whose module tvms cannot read (TVM's object graph), kept as written."""

    def __init__(self, shash: int, payload: str) -> None:
        self.mod = None  # type: ignore[assignment]
        self.shash = shash
        self.payload = payload

    def __eq__(self, other: object) -> bool:
        return self is other

    def __hash__(self) -> int:
        return hash(self.shash)


class JSONDatabase(MemoryDatabase):
    """``JSONDatabase(path_workload=None, path_tuning_record=None, work_dir=None,
    allow_missing=True)``: records kept in memory and appended to the two files.

    With ``work_dir`` the files are ``work_dir/database_workload.json`` and
    ``work_dir/database_tuning_record.json``. Missing files are created when
    ``allow_missing`` (the default), an error otherwise."""

    def __init__(self, path_workload: str | None = None, path_tuning_record: str | None = None,
                 work_dir: str | None = None, allow_missing: bool = True, module_equality: str = "structural") -> None:
        super().__init__()
        if work_dir is not None:
            path_workload = path_workload or os.path.join(work_dir, WORKLOAD_FILE)
            path_tuning_record = path_tuning_record or os.path.join(work_dir, RECORD_FILE)
        if path_workload is None or path_tuning_record is None:
            raise TVMSError("JSONDatabase needs work_dir, or both path_workload and path_tuning_record")
        if module_equality != "structural":
            raise TVMSError(f"JSONDatabase: module_equality {module_equality!r} is not supported (tvms "
                            f"compares modules structurally)")
        self.path_workload, self.path_tuning_record = path_workload, path_tuning_record
        self._index: dict[int, int] = {}  # id(workload) -> its line in the workload file
        self._by_index: list[Workload] = []
        self._undecoded: list[UndecodedWorkload] = []
        for path in (path_workload, path_tuning_record):
            if not os.path.exists(path):
                if not allow_missing:
                    raise TVMSError(f"JSONDatabase: {path} does not exist (allow_missing=False)")
                os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
                open(path, "ab").close()
        for row in _read_lines(path_workload):
            self._load_workload(row)
        for row in _read_lines(path_tuning_record):
            self._load_record(row)
        # TVM's record layout has no place for TuningRecord.confirmation: a schedule written more
        # than once for a workload and target is taken as timed again by an earlier run
        counts = Counter((id(r.workload), r.schedule_key()) for r in self._records)
        for r in self._records:
            r.confirmation = counts[id(r.workload), r.schedule_key()] > 1

    # ------------------------------------------------------------ loading
    def _load_workload(self, line: "_Line") -> None:
        try:
            shash, payload = line.value
            shash = int(shash)
            text = base64.b64decode(payload, validate=True).decode("utf-8")
        except (TypeError, ValueError, binascii.Error, UnicodeDecodeError):
            raise line.error("a workload line is [shash, base64 of the module]") from None
        if text.lstrip().startswith("{"):  # TVM's object graph
            workload: Workload = UndecodedWorkload(shash, payload)
            self._undecoded.append(workload)  # type: ignore[arg-type]
        else:
            try:
                mod = from_source(text, f"{self.path_workload}:{line.number}")
            except TVMSError as err:
                raise line.error(f"the workload's module does not parse: {err}") from None
            if not isinstance(mod, IRModule):
                mod = IRModule({"main": mod})
            workload = Workload(mod)  # (the hash is tvms's own, whoever wrote the line)
            self._workloads.setdefault(workload.shash, []).append(workload)
        self._index[id(workload)] = len(self._by_index)
        self._by_index.append(workload)

    def _load_record(self, line: "_Line") -> None:
        try:
            index, record_json = line.value
            if int(index) < 0:
                raise IndexError(index)
            workload = self._by_index[int(index)]
        except (TypeError, ValueError, IndexError):
            raise line.error(f"a record line is [workload_index, record] with an index below "
                             f"{len(self._by_index)}") from None
        try:
            self._records.append(TuningRecord.from_json(record_json, workload))
        except TVMSError as err:
            raise line.error(str(err)) from None

    # ------------------------------------------------------------ storage
    def _find(self, mod: IRModule) -> Workload | None:
        found = super()._find(mod)
        if found is None and self._undecoded:
            found = self._adopt(mod)
        return found

    def _adopt(self, mod: IRModule) -> Workload | None:
        """A workload written by TVM that is ``mod``: same arguments, and its best trace replays
        on ``mod``. It becomes an ordinary workload of ``mod`` (in memory; the file is unchanged)."""
        from ..schedule.schedule import Schedule

        try:
            args = args_info_of(main_func(mod))
        except TVMSError:
            return None
        for workload in list(self._undecoded):
            records = [r for r in self._records if r.workload is workload]
            best = ranked(records)[:1]  # (get_top_k's rule)
            if not best or best[0].args_info != args:
                continue
            try:
                best[0].trace.apply_to_schedule(Schedule(mod), remove_postproc=False)
            except TVMSError:
                continue
            adopted = Workload(mod)
            index = self._index.pop(id(workload))
            self._index[id(adopted)] = index
            self._by_index[index] = adopted
            self._undecoded.remove(workload)
            self._workloads.setdefault(adopted.shash, []).append(adopted)
            for record in records:
                record.workload = adopted
            return adopted
        return None

    def commit_workload(self, mod: IRModule) -> Workload:
        found = self._find(mod)
        if found is not None:
            return found
        workload = super().commit_workload(mod)
        payload = base64.b64encode(mod.script(show_meta=True).encode("utf-8")).decode("ascii")
        _append_line(self.path_workload, json_dumps([str(workload.shash), payload]))
        self._index[id(workload)] = len(self._by_index)
        self._by_index.append(workload)
        return workload

    def commit_tuning_record(self, record: TuningRecord) -> None:
        index = self._index.get(id(record.workload))
        if index is None:  # (a workload of another database: committed here first)
            record = TuningRecord(record.trace, self.commit_workload(record.workload.mod), record.run_secs,
                                  record.target, record.args_info, record.confirmation)
            index = self._index[id(record.workload)]
        _append_line(self.path_tuning_record, json_dumps([index, record.as_json()]))
        super().commit_tuning_record(record)

    def __repr__(self) -> str:
        return f"JSONDatabase({self.path_workload!r}, {self.path_tuning_record!r}: {len(self._records)} records)"


class _Line:
    def __init__(self, path: str, number: int, value: Any) -> None:
        self.path, self.number, self.value = path, number, value

    def error(self, why: str) -> TVMSError:
        return TVMSError(f"{self.path}:{self.number}: {why}")


def _read_lines(path: str) -> list[_Line]:
    """The JSON value of each line of ``path``; a last line cut short is left out with a warning,
    any other line that is not JSON is an error."""
    with open(path, "rb") as f:
        data = f.read()
    lines = data.split(b"\n")
    out = []
    for number, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        try:
            out.append(_Line(path, number, json.loads(raw)))
        except (ValueError, UnicodeDecodeError) as err:
            if number == len(lines):  # (the file does not end with a newline: the write was cut)
                warnings.warn(f"{path}:{number}: the last line is cut short (an interrupted write); "
                              f"skipped", stacklevel=4)
                continue
            raise TVMSError(f"{path}:{number}: not a JSON line: {err}") from None
    return out


def _append_line(path: str, line: str) -> None:
    """Append ``line`` in one write (``O_APPEND``: two processes appending do not mix their
    lines), after removing a last line that was cut short."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            os.ftruncate(fd, _last_newline(fd, size))
        data = (line + "\n").encode("utf-8")
        while data:
            data = data[os.write(fd, data):]
    finally:
        os.close(fd)


def _last_newline(fd: int, size: int) -> int:
    """The offset just after the last newline in the first ``size`` bytes of ``fd`` (0: none)."""
    end = size
    while end > 0:
        start = max(0, end - 65536)
        at = os.pread(fd, end - start, start).rfind(b"\n")
        if at >= 0:
            return start + at + 1
        end = start
    return 0


def create(kind: str = "json", *args: Any, **kwargs: Any) -> Any:
    """A database from ``tune_tir``'s ``database=``: an instance, ``"json"`` (``JSONDatabase``
    with these arguments) or ``"memory"``."""
    if isinstance(kind, Database):
        return kind
    if kind == "json":
        return JSONDatabase(*args, **kwargs)
    if kind == "memory":
        return MemoryDatabase()
    raise TVMSError(f"unknown database kind {kind!r} (json, memory)")
