"""CUDA modules in exported libraries: ``lib.export_library("model.so")`` for a cuda build.

A CUDA module has no host machine code: its host functions are evaluated (``cuda_host.py``) and
its kernels are the NVRTC binary. So its library is an empty shared object carrying, in the
metadata that ``export.py`` writes after every library, each function's host function and
kernel parameters as data (``ir/host_program.py``), the binary (base64) and the CUDA source;
``load_module`` gives back a ``CudaModule`` that loads the binary on the GPU when called.
"""
from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

from tvms.ir.errors import TVMSError
from tvms.ir.function import PrimFunc
from tvms.ir.host_program import host_json, host_of, kernel_json, kernel_of


@dataclass(frozen=True)
class LoadedKernel:
    """A kernel of a loaded library: its name, parameters (``func`` has no body: the code is
    the binary) and launch parameters."""

    name: str
    func: PrimFunc
    launch_params: tuple
    binary_only: bool = True


@dataclass(frozen=True)
class LoadedArtifact:
    """A CUDA function of a loaded library, in the shape of the code generator's ``CudaArtifact``."""

    symbol: str
    host: PrimFunc
    kernels: tuple
    source: str
    arch: str
    binary: bytes
    binary_format: str
    outputs: tuple  # the host's parameters the kernels write (their TIR is not kept to tell)
    ptx: bytes = b""  # (as CudaArtifact's; libraries exported before it was kept have none)


def cuda_functions_json(module: Any) -> list:
    """Each function of a CudaModule as JSON data."""
    entries = []
    for name, artifact in module.artifacts.items():
        try:
            host = host_json(artifact.host)
        except TVMSError as err:
            raise TVMSError(f"export_library: {name}: {err}") from None
        entries.append({"name": name, "symbol": artifact.symbol, "host": host,
                        "kernels": [kernel_json(k.name, k.func, k.launch_params) for k in artifact.kernels],
                        "source": artifact.source, "arch": artifact.arch, "binary_format": artifact.binary_format,
                        "binary": base64.b64encode(artifact.binary).decode("ascii"),
                        "outputs": list(module[name].outputs),
                        "ptx": base64.b64encode(getattr(artifact, "ptx", b"")).decode("ascii")})
    return entries


def cuda_module_of(entries: list, target: str) -> Any:
    from .cuda_module import CudaModule

    artifacts = {}
    for e in entries:
        kernels = tuple(LoadedKernel(*kernel_of(k)) for k in e["kernels"])
        artifacts[e["name"]] = LoadedArtifact(
            str(e["symbol"]), host_of(e["host"], e["name"]), kernels, str(e["source"]), str(e["arch"]),
            base64.b64decode(e["binary"], validate=True), str(e["binary_format"]),
            tuple(int(k) for k in e["outputs"]), base64.b64decode(e.get("ptx", ""), validate=True))
    return CudaModule(artifacts, target)


__all__ = ["LoadedArtifact", "LoadedKernel", "cuda_functions_json", "cuda_module_of"]
