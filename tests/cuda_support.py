"""Compiling the CUDA that tests generate: the "Compiles" check of every kernel, without a GPU.

``assert_compiles(source)`` compiles a CUDA source with NVRTC for each architecture of
``CHECK_ARCHS`` (a cubin, which also assembles the PTX) and fails the test with NVRTC's errors
and the source lines they name. ``kernels_source(modules)`` renders the kernels of several
lowered modules as one source, so a test compiles them all at once (NVRTC spends most of a
compile reading the headers).
"""
from __future__ import annotations

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
