"""Devices: where a tensor lives and a kernel runs (``tvms.cpu(0)``, ``tvms.cuda(0)``,
``tvms.device("cuda", 1)``).

A device is a DLPack device type code and an index. It prints as TVM 0.27 prints its devices
(``cpu:0``, ``device(type='cpu', index=0)``) and answers ``.exist``: the CPU always exists; a CUDA
GPU exists when cuda-python is importable and its driver reports enough GPUs. A CUDA device
answers TVM's attributes (``max_threads_per_block``, ``compute_version``, ...) from the driver
(``cuda_driver.py``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tvms.ir.errors import TVMSError

from . import cuda_driver

# DLPack's device type codes (dlpack.h: kDLCPU, kDLCUDA), which TVM uses too.
CPU = 1
CUDA = 2
DEVICE_TYPE_NAMES = {CPU: "cpu", CUDA: "cuda"}
_NAME_TO_TYPE = {name: code for code, name in DEVICE_TYPE_NAMES.items()}


@dataclass(frozen=True, slots=True)
class Device:
    """A device: ``device_type`` is the DLPack code (1 = CPU, 2 = CUDA), ``device_id`` the index."""

    device_type: int
    device_id: int = 0

    def __post_init__(self) -> None:
        if self.device_type not in DEVICE_TYPE_NAMES:
            raise TVMSError(f"unknown device type code {self.device_type!r}: tvms knows "
                            f"{', '.join(f'{c} ({n})' for c, n in DEVICE_TYPE_NAMES.items())}")
        if not isinstance(self.device_id, int) or isinstance(self.device_id, bool) or self.device_id < 0:
            raise TVMSError(f"a device index is a non-negative integer, not {self.device_id!r}")

    # TVM 0.27 spells the two fields ``type`` (the name) and ``index``
    @property
    def type(self) -> str:
        return DEVICE_TYPE_NAMES[self.device_type]

    @property
    def index(self) -> int:
        return self.device_id

    def dlpack_device_type(self) -> int:
        return self.device_type

    @property
    def exist(self) -> bool:
        return self.device_type == CPU or self.device_id < cuda_device_count()

    @property
    def missing_reason(self) -> str:
        """Why the device does not exist ("" when it does): what is missing, for messages."""
        return "" if self.exist else missing_reason(self)

    def sync(self, stream: Any = None) -> None:
        """Wait for the device's queued work (on ``stream`` only, when given). Work on the CPU
        is synchronous: nothing waits."""
        self._check_exists("synchronize")
        if self.device_type == CUDA:
            stream.synchronize() if stream is not None else cuda_driver.synchronize(self.device_id)

    # streams, as TVM's devices make them: work launched on this device after set_raw_stream
    # queues on that stream (None on the CPU, whose work is synchronous)
    def create_raw_stream(self) -> Any:
        if self.device_type == CPU:
            return None
        self._check_exists("create a stream on")
        return cuda_driver.Stream(self.device_id)

    def set_raw_stream(self, stream: Any) -> None:
        if self.device_type == CUDA:
            self._check_exists("set the stream of")
            cuda_driver.set_current_stream(self.device_id, stream)

    def _check_exists(self, what: str) -> None:
        if not self.exist:
            raise TVMSError(f"cannot {what} {self}: {missing_reason(self)}")

    # the attributes TVM's devices answer (None on the CPU, as TVM's); a CUDA device that does
    # not exist is a TVMSError naming what is missing
    def _attribute(self, name: str) -> Any:
        if self.device_type == CPU:
            return None
        self._check_exists(f"read {name} of")
        return cuda_driver.attribute(self.device_id, name)

    max_threads_per_block = property(lambda self: self._attribute("max_threads_per_block"))
    warp_size = property(lambda self: self._attribute("warp_size"))
    max_shared_memory_per_block = property(lambda self: self._attribute("max_shared_memory_per_block"))
    # (not TVM's: what a kernel may ask for beyond that; tvms's runtime asks for it when a kernel needs it)
    max_shared_memory_per_block_optin = property(lambda self: self._attribute("max_shared_memory_per_block_optin"))
    multi_processor_count = property(lambda self: self._attribute("multi_processor_count"))
    compute_version = property(lambda self: self._attribute("compute_version"))
    device_name = property(lambda self: self._attribute("device_name"))
    max_clock_rate = property(lambda self: self._attribute("max_clock_rate"))
    l2_cache_size_bytes = property(lambda self: self._attribute("l2_cache_size_bytes"))
    total_global_memory = property(lambda self: self._attribute("total_global_memory"))

    def __str__(self) -> str:
        return f"{self.type}:{self.device_id}"

    def __repr__(self) -> str:
        return f"device(type={self.type!r}, index={self.device_id})"


def cpu(index: int = 0) -> Device:
    return Device(CPU, index)


def cuda(index: int = 0) -> Device:
    return Device(CUDA, index)


def device(dev_type: str | int | Device, index: int | None = None) -> Device:
    """``device("cpu")``, ``device("cuda", 1)``, ``device("cuda:1")`` or ``device(2, 0)``."""
    if isinstance(dev_type, Device):
        return dev_type if index is None else Device(dev_type.device_type, index)
    if isinstance(dev_type, int) and not isinstance(dev_type, bool):
        return Device(dev_type, 0 if index is None else index)
    if not isinstance(dev_type, str):
        raise TVMSError(f"a device is named by a string such as 'cpu' or 'cuda', not {dev_type!r}")
    name, colon, suffix = dev_type.strip().partition(":")
    if colon:
        if index is not None:
            raise TVMSError(f"the device {dev_type!r} already names its index; do not pass index={index}")
        if not suffix.isdigit():
            raise TVMSError(f"the device index in {dev_type!r} is not a non-negative integer")
        index = int(suffix)
    code = _NAME_TO_TYPE.get(name)
    if code is None:
        hint = " (a target, not a device: use tvms.cpu())" if name == "llvm" else ""
        raise TVMSError(f"unknown device {name!r}{hint}; tvms knows {', '.join(map(repr, _NAME_TO_TYPE))}")
    return Device(code, 0 if index is None else index)


def missing_reason(dev: Device) -> str:
    """Why ``dev`` does not exist, for error messages: cuda-python, the NVIDIA driver, a GPU or
    the device index."""
    return cuda_driver.missing_reason(dev.device_id)


def cuda_device_count() -> int:
    """How many CUDA GPUs the driver reports (0 without cuda-python, a driver or a GPU)."""
    return cuda_driver.cuda_device_count()


__all__ = ["CPU", "CUDA", "DEVICE_TYPE_NAMES", "Device", "cpu", "cuda", "device", "cuda_device_count",
           "missing_reason"]
