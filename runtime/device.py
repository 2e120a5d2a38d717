"""Devices: where a tensor lives and a kernel runs (``tvms.cpu(0)``, ``tvms.cuda(0)``,
``tvms.device("cuda", 1)``).

A device is a DLPack device type code and an index. It prints as TVM 0.27 prints its devices
(``cpu:0``, ``device(type='cpu', index=0)``) and answers ``.exist``: the CPU always exists; a CUDA
GPU exists when cuda-python is importable and its driver reports enough GPUs.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

from tvms.ir.errors import TVMSError

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

    def sync(self) -> None:
        """Wait for the device's queued work. Work on the CPU is synchronous: nothing waits."""
        if not self.exist:
            raise TVMSError(f"cannot synchronize {self}: {missing_reason(self)}")

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
    """Why ``dev`` does not exist, for error messages."""
    count = cuda_device_count()
    if _cuda_driver() is None:
        return "cuda-python is not installed, so tvms cannot reach a CUDA GPU"
    if count == 0:
        return "the CUDA driver reports no GPU"
    return f"the CUDA driver reports {count} GPU{'s' if count != 1 else ''}"


@functools.cache
def cuda_device_count() -> int:
    """How many CUDA GPUs the driver reports (0 without cuda-python or a working driver)."""
    driver = _cuda_driver()
    if driver is None:
        return 0
    try:
        (err,) = driver.cuInit(0)
        if int(err) != 0:
            return 0
        err, count = driver.cuDeviceGetCount()
        return int(count) if int(err) == 0 else 0
    except Exception:  # a broken driver install reads as "no GPU", never as a crash
        return 0


@functools.cache
def _cuda_driver():
    """cuda-python's driver API module: ``cuda.bindings.driver`` (12.6+) or ``cuda.cuda`` (older)."""
    try:
        from cuda.bindings import driver
        return driver
    except ImportError:
        pass
    try:
        from cuda import cuda as driver
        return driver
    except ImportError:
        return None


__all__ = ["CPU", "CUDA", "DEVICE_TYPE_NAMES", "Device", "cpu", "cuda", "device", "cuda_device_count",
           "missing_reason"]
