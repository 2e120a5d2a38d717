"""Runners: artifacts -> seconds (TVM's ``Runner`` / ``RunnerFuture`` / ``LocalRunner``).

``LocalRunner`` measures in one worker process of its own, one candidate at a time (two
measurements at once would slow each other down), so a kernel that crashes or hangs kills that
worker only: its trial is a ``RunnerResult`` with ``error_msg`` and the next candidate gets a
fresh worker. ``run`` returns at once with futures, so the caller can build the next batch
while this one is measured.

The worker loads the library with the runtime's public loader (``tvms.runtime.load_module``,
the one import of the runtime that DESIGN.md allows this layer), fills the arguments with random
data (copied to the GPU for a CUDA library) and times the entry function with the runtime's
``time_evaluator`` (CUDA events on a GPU). Workers are fresh interpreters, so each has a CUDA
context of its own.
"""
from __future__ import annotations

import itertools
import os
import time
from concurrent.futures import Future
from typing import Any, Callable

import numpy as np

from ...ir.errors import TVMSError
from .measure import EvaluatorConfig, RunnerInput, RunnerResult, TensorInfo
from .worker_pool import WorkerError, WorkerPool, WorkerSpoiled, failed_future


class RunnerFuture:
    """A measurement under way: ``done()``, and ``result() -> RunnerResult`` (waits).

    ``RunnerFuture(f_done, f_result)`` makes one from two functions, as TVM's; subclasses
    override the methods instead."""

    def __init__(self, f_done: Callable[[], bool] | None = None,
                 f_result: Callable[[], RunnerResult] | None = None) -> None:
        self._f_done, self._f_result = f_done, f_result

    def done(self) -> bool:
        if self._f_done is None:
            raise NotImplementedError
        return self._f_done()

    def result(self) -> RunnerResult:
        if self._f_result is None:
            raise NotImplementedError
        return self._f_result()


class Runner:
    """``run(runner_inputs) -> list[RunnerFuture]``, one future per input, in order."""

    def run(self, runner_inputs: list[RunnerInput]) -> list[RunnerFuture]:
        raise NotImplementedError

    @staticmethod
    def create(kind: str = "local", *args: Any, **kwargs: Any) -> "Runner":
        if kind == "local":
            return LocalRunner(*args, **kwargs)
        if kind == "ray":
            from .ray_executor import RayRunner

            return RayRunner(*args, **kwargs)
        raise TVMSError(f"unknown runner kind {kind!r} (tvms has 'local' and 'ray')")


MEASURED_ON = ("cpu", "llvm", "cuda")  # the device types a LocalRunner times on this machine


def check_measurable_here(target_kinds: set) -> None:
    """Refuse cuda candidates for a LocalRunner on a machine without a CUDA GPU: every trial
    would fail, after the search's time."""
    if "cuda" not in target_kinds:
        return
    from ...runtime import cuda_driver

    if cuda_driver.cuda_device_count() == 0:
        raise TVMSError("the local runner measures cuda candidates on this machine's GPU, and it has none ("
                        f"{cuda_driver.missing_reason(0)}); measure them where there is one (a RayRunner, "
                        "tvms tune --executor ray://ADDR)")


class LocalRunnerFuture(RunnerFuture):
    """A measurement running in a ``LocalRunner``'s worker."""

    def __init__(self, future: Future, runner_name: str = "LocalRunner") -> None:
        super().__init__()
        self._future = future
        self._runner_name = runner_name

    def done(self) -> bool:
        return self._future.done()

    def result(self) -> RunnerResult:
        try:
            return RunnerResult([float(s) for s in self._future.result()])
        except WorkerError as err:
            return RunnerResult(None, f"{self._runner_name}: {err}")


class LocalRunner(Runner):
    """``LocalRunner(timeout_sec=30, evaluator_config=None, cooldown_sec=0.0, alloc_repeat=1,
    f_alloc_argument=None, f_run_evaluator=None, initializer=None)``: measures on this machine.

    Each candidate gets ``alloc_repeat`` sets of random arguments and is timed
    ``evaluator_config.repeat`` times on each (``run_secs`` has ``alloc_repeat * repeat``
    entries). ``f_alloc_argument(args_info, alloc_repeat) -> list of argument lists`` and
    ``f_run_evaluator(rt_mod, args_lists, evaluator_config) -> run_secs`` replace the default
    steps (module-level functions, sent to the worker by name). ``timeout_sec`` bounds one
    candidate's loading and timing."""

    def __init__(self, timeout_sec: float = 30, evaluator_config: EvaluatorConfig | None = None,
                 cooldown_sec: float = 0.0, alloc_repeat: int = 1, f_alloc_argument: Callable | None = None,
                 f_run_evaluator: Callable | None = None, initializer: Callable | None = None) -> None:
        if alloc_repeat < 1:
            raise TVMSError(f"LocalRunner: alloc_repeat is at least 1, got {alloc_repeat}")
        self.timeout_sec = timeout_sec
        self.evaluator_config = evaluator_config or EvaluatorConfig()
        self.cooldown_sec = cooldown_sec
        self.alloc_repeat = alloc_repeat
        self.f_alloc_argument = f_alloc_argument or default_alloc_argument
        self.f_run_evaluator = f_run_evaluator or default_run_evaluator
        self.pool = WorkerPool(1, timeout_sec, initializer)

    def run(self, runner_inputs: list[RunnerInput]) -> list[RunnerFuture]:
        futures: list[RunnerFuture] = []
        for inp in runner_inputs:
            if inp.device_type not in MEASURED_ON:
                futures.append(LocalRunnerFuture(failed_future(
                    f"this runner measures on {', '.join(MEASURED_ON)}, not on {inp.device_type!r}")))
                continue
            futures.append(LocalRunnerFuture(self._submit(inp), type(self).__name__))
        return futures

    def _submit(self, inp: RunnerInput) -> Future:
        """Start measuring ``inp`` in the worker."""
        return self.pool.submit(_run_in_worker, inp.artifact_path, *self._measure_args(inp))

    def _measure_args(self, inp: RunnerInput) -> tuple:
        """The arguments of ``_run_in_worker`` after the artifact."""
        return (list(inp.args_info), self.evaluator_config, self.cooldown_sec, self.alloc_repeat,
                self.f_alloc_argument, self.f_run_evaluator)

    def shutdown(self) -> None:
        self.pool.shutdown()


def default_alloc_argument(args_info: list[TensorInfo], alloc_repeat: int) -> list[list]:
    """``alloc_repeat`` lists of random arrays matching ``args_info`` (floats in [0, 1), small
    integers), seeded so that every candidate of a workload sees the same data."""
    rng = np.random.default_rng(0)
    return [[_random_array(rng, info) for info in args_info] for _ in range(alloc_repeat)]


def _random_array(rng: np.random.Generator, info: TensorInfo) -> np.ndarray:
    dtype = np.dtype("bool" if info.dtype == "bool" else info.dtype)
    if dtype.kind == "f":
        return rng.random(info.shape).astype(dtype)
    if dtype.kind in "iu":
        return rng.integers(0, 8, info.shape).astype(dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, info.shape).astype(dtype)
    raise TVMSError(f"LocalRunner cannot make random arguments of dtype {info.dtype}")


def default_run_evaluator(rt_mod: Any, args_lists: list[list], config: EvaluatorConfig) -> list[float]:
    """Time ``rt_mod``'s entry function on each argument list with ``time_evaluator``; the
    seconds of every repeat, one list after the other."""
    flush = _flush_cpu_caches if config.enable_cpu_cache_flush else None
    evaluator = rt_mod.time_evaluator(rt_mod.entry_name, number=config.number, repeat=config.repeat,
                                      min_repeat_ms=config.min_repeat_ms, f_preproc=flush)
    return list(itertools.chain.from_iterable(evaluator(*args).results for args in args_lists))


_FLUSH: list = []


def _flush_cpu_caches(*_args: Any) -> None:
    """Evict the caches by writing a buffer larger than the last-level cache (TVM flushes the
    arguments' lines with clflush; sweeping a larger buffer has the same effect from Python)."""
    if not _FLUSH:
        _FLUSH.append(np.zeros(2 * _last_level_cache_bytes() // 8, dtype=np.float64))
    _FLUSH[0] += 1.0


def _last_level_cache_bytes() -> int:
    """The largest cache of CPU 0 (Linux's sysfs), else 32 MiB."""
    found = []
    base = "/sys/devices/system/cpu/cpu0/cache"
    for entry in os.listdir(base) if os.path.isdir(base) else []:
        try:
            with open(os.path.join(base, entry, "size")) as f:
                text = f.read().strip()
        except OSError:
            continue
        scale = {"K": 1 << 10, "M": 1 << 20}.get(text[-1:], 1)
        digits = text.rstrip("KM")
        if digits.isdigit():
            found.append(int(digits) * scale)
    return max(found, default=32 << 20)


def _run_in_worker(path: str, args_info: list, config: EvaluatorConfig, cooldown_sec: float,
                   alloc_repeat: int, f_alloc_argument: Callable, f_run_evaluator: Callable) -> list[float]:
    from ...runtime import load_module

    rt_mod = load_module(path)
    try:
        args_lists = _where_it_runs(rt_mod, f_alloc_argument(args_info, alloc_repeat))
        if cooldown_sec > 0:
            time.sleep(cooldown_sec)
        return f_run_evaluator(rt_mod, args_lists, config)
    except TVMSError as err:
        if any(name in str(err) for name in _CONTEXT_LOST):
            raise WorkerSpoiled(f"{type(err).__name__}: {err} (the worker's CUDA context is lost: a fresh "
                                f"worker measures the next candidate)") from None
        raise


# the CUDA errors after which a process's context runs nothing more (a kernel's fault)
_CONTEXT_LOST = ("CUDA_ERROR_ILLEGAL_ADDRESS", "CUDA_ERROR_LAUNCH_FAILED", "CUDA_ERROR_MISALIGNED_ADDRESS",
                 "CUDA_ERROR_ILLEGAL_INSTRUCTION", "CUDA_ERROR_INVALID_PC", "CUDA_ERROR_HARDWARE_STACK_ERROR",
                 "CUDA_ERROR_ASSERT", "CUDA_ERROR_LAUNCH_TIMEOUT")


def _where_it_runs(rt_mod: Any, args_lists: list[list]) -> list[list]:
    """The host arrays of ``args_lists`` copied to the device ``rt_mod``'s functions run on (GPU 0
    for a CUDA library: ``CUDA_VISIBLE_DEVICES`` chooses it); other arguments as they are. A
    candidate built for another GPU architecture than GPU 0's is refused: the driver would run
    its PTX there, and the time would be another GPU's."""
    from ...runtime import Device, tensor

    device_type = getattr(rt_mod, "device_type", 1)
    if device_type == 1:  # (DLPack's kDLCPU: the arrays are used in place)
        return args_lists
    dev = Device(device_type, 0)
    version = dev.compute_version.replace(".", "")
    for artifact in getattr(rt_mod, "artifacts", {}).values():
        if artifact.arch.removeprefix("sm_").rstrip("a") != version:
            raise TVMSError(f"the candidate is built for {artifact.arch}, and GPU 0 is of compute "
                            f"{dev.compute_version}: tuning measures on the GPU the target names "
                            f"(choose it with CUDA_VISIBLE_DEVICES)")
    return [[tensor(a, device=dev) if isinstance(a, np.ndarray) else a for a in args] for args in args_lists]
