"""Compiling the CUDA that tests generate: the "Compiles" check of every kernel, without a GPU.

``assert_compiles(source)`` compiles a CUDA source with NVRTC for each architecture of
``CHECK_ARCHS`` (a cubin, which also assembles the PTX) and fails the test with NVRTC's errors
and the source lines they name. ``kernels_source(modules)`` renders the kernels of several
lowered modules as one source, so a test compiles them all at once (NVRTC spends most of a
compile reading the headers). ``ptxas_usage(source)`` is what ptxas reports of each kernel's
registers and spills (ptxas of the nvidia-cuda-nvcc wheel, a test dependency).
"""
from __future__ import annotations

import importlib.util
import re
import subprocess
import tempfile
from pathlib import Path

import pytest

from tvms.ir.errors import TVMSError
from tvms.lowering.codegen.cuda import cuda_source, kernels_of
from tvms.lowering.codegen.nvrtc import compile_cuda

CHECK_ARCHS = ("sm_80", "sm_90")


def assert_compiles(source: str, archs: tuple = CHECK_ARCHS) -> dict[str, bytes]:
    """The cubin of ``source`` for each of ``archs``; a compile error fails the test."""
    binaries, errors = {}, []
    for arch in archs:
        try:
            binaries[arch] = compile_cuda(source, arch=arch, fmt="cubin")
        except TVMSError as err:
            errors.append(str(err))
    if errors:
        pytest.fail("NVRTC rejected the generated CUDA:\n" + "\n".join(errors), pytrace=False)
    return binaries


def kernels_source(modules) -> str:
    """One CUDA source with the kernels of all ``modules`` (their kernel names must differ)."""
    kernels = [k for mod in modules for k in kernels_of(mod)]
    names = [name for name, _ in kernels]
    assert len(set(names)) == len(names), f"kernels with the same name: {names}"
    return cuda_source(kernels)


def ptxas_usage(source: str, arch: str = "sm_90") -> dict[str, tuple[int, int]]:
    """Per kernel of ``source``: the registers a thread uses and the bytes it spills to local
    memory (stores), as ``ptxas -v`` reports them for ``arch``. Skips the test without ptxas."""
    try:
        spec = importlib.util.find_spec("nvidia.cuda_nvcc")
    except ModuleNotFoundError:  # (no nvidia package at all)
        spec = None
    ptxas = Path(next(iter(spec.submodule_search_locations)), "bin", "ptxas") if spec else None
    if ptxas is None or not ptxas.is_file():
        pytest.skip("ptxas (the nvidia-cuda-nvcc-cu12 wheel) is not installed")
    with tempfile.TemporaryDirectory() as work:
        ptx = Path(work, "k.ptx")
        ptx.write_bytes(compile_cuda(source, arch=arch, fmt="ptx"))
        report = subprocess.run([str(ptxas), "-v", f"-arch={arch}", str(ptx), "-o", str(Path(work, "k.cubin"))],
                                capture_output=True, text=True, check=True).stderr
    usage = {}
    for kernel, body in re.findall(r"Compiling entry function '(\w+)'(.*?)(?=Compiling entry|\Z)", report, re.S):
        spills = re.search(r"(\d+) bytes spill stores", body)
        usage[kernel] = (int(re.search(r"Used (\d+) registers", body).group(1)), int(spills.group(1)) if spills else 0)
    return usage
