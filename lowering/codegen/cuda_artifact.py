"""What the cuda target's code generator hands to the runtime: the shared shape of a CUDA build.

The cuda row of the target table lowers a scheduled PrimFunc to an IRModule of one host function
and its device kernels (``SplitHostDevice``, as TVM 0.27 prints that stage: the host calls each
kernel with ``T.call_ffi_kernel(name, *args, *launch_extents, launch_params=[...])``), then its
code generator renders the kernels as CUDA C and compiles them with NVRTC. The runtime loads the
binary with the driver API (``runtime/cuda_module.py``) and runs the host function, which
computes each launch's grid and block from the arguments; without a GPU the same kernels run on
the reference executor with GPU semantics.
"""
from __future__ import annotations

from dataclasses import dataclass

from ...ir.function import PrimFunc


@dataclass(frozen=True)
class CudaKernel:
    """One ``__global__`` function: its symbol in the source and the binary, its parameters
    (TIR variables, in order: data pointers as handles, then scalars) and its launch parameters
    (``"blockIdx.x"``, ``"threadIdx.x"``, ..., and ``"tirx.use_dyn_shared_memory"`` last when it
    takes dynamic shared memory): the host passes one extent per launch parameter after the
    arguments."""

    name: str
    func: PrimFunc  # the device function as TIR (the reference launcher runs it)
    launch_params: tuple[str, ...]


@dataclass(frozen=True)
class CudaArtifact:
    """A compiled PrimFunc for the cuda target: the host function (buffers in, kernel launches
    out), the kernels, their CUDA C source and the NVRTC output for ``arch``."""

    symbol: str
    host: PrimFunc
    kernels: tuple[CudaKernel, ...]
    source: str  # CUDA C, as ``lib.imported_modules[0].get_source()`` shows it
    arch: str  # "sm_80"
    binary: bytes  # what the driver loads: a cubin, or PTX text for the driver's JIT
    binary_format: str  # "cubin" or "ptx"
    # the PTX the binary came from: the driver compiles it where a cubin's architecture is not
    # the GPU's (a cubin for sm_80 does not load on sm_90), as a fatbin's PTX is used
    ptx: bytes = b""

    def kernel(self, name: str) -> CudaKernel:
        for k in self.kernels:
            if k.name == name:
                return k
        raise KeyError(name)
