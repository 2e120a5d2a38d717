"""The target table: what compiling for each target kind takes, one row per kind.

A row names the kind's TIR lowering (the pipeline chosen by name, ``tir_pipelines.py``: s_tir for
scheduled TensorIR, tirx for tirx kernels -> loop-level code), its code
generator (loop-level PrimFunc -> an artifact: code plus what calling it needs), its default
schedule rules (``tvms.dlight``), the name of the runtime function that loads its artifacts
into a callable module, and the check of its options (llvm: the CPU and feature names LLVM
knows, ``codegen/llvm_names.py``). The build driver (``build.py``) only reads rows; ``cuda`` is
the second row (its lowering gives the host function and kernels of TVM's ``SplitHostDevice``,
its artifact is a ``codegen/cuda_artifact.CudaArtifact``). The loader is reached through the
packed-function registry, by name (``runtime.module.load_<kind>``), as TVM's
``runtime.module.loadbinary_<kind>``: the runtime registers it when imported, so this layer
never imports the runtime.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable

from ..ir.errors import TVMSError
from ..ir.function import PrimFunc
from ..ir.registry import get_global_func
from ..ir.target import Target, as_target


@dataclass(frozen=True)
class TargetKind:
    """One row of the table: how code for ``kind`` is lowered, generated, scheduled and loaded."""

    kind: str
    lower: Callable[[PrimFunc, Target, str], Any]  # the TIR pipeline ("s_tir" or "tirx") -> loop-level code
    codegen: Callable[[Any, Target, str], Any]  # what lower gave, its symbol -> artifact
    default_rules: Callable[[], list]  # the dlight rules tried on an unscheduled PrimFunc
    loader: str  # the registered runtime function: (artifacts by name, target text) -> Module
    check: Callable[[Target], Any]  # refuses options the kind's compiler would choke on

    def load(self, artifacts: dict, target: Target) -> Any:
        """The runtime module holding ``artifacts`` (the driver's link step)."""
        loader = get_global_func(self.loader, allow_missing=True)
        if loader is None:
            raise TVMSError(f"no runtime loader {self.loader!r} is registered for target kind "
                            f"{self.kind!r} (import tvms, which imports the runtime)")
        return loader(artifacts, str(target))


_TABLE: dict[str, TargetKind] = {}


def register_target_kind(row: TargetKind) -> TargetKind:
    """Add ``row`` to the table (one row per kind)."""
    if row.kind in _TABLE:
        raise TVMSError(f"the target kind {row.kind!r} is already registered")
    _TABLE[row.kind] = row
    return row


def target_kind(target: Target) -> TargetKind:
    """The row of ``target``'s kind; a kind without one is refused, naming the kinds that have."""
    row = _TABLE.get(target.kind)
    if row is None:
        raise TVMSError(f"no code generator for target kind {target.kind!r} (target {str(target)!r}); "
                        f"tvms compiles for: {', '.join(sorted(_TABLE))}")
    return row


def check_target(target: Any) -> Target:
    """``target`` parsed, and checked by its kind's row when it has one (a kind without a row
    is refused when something is compiled for it)."""
    target = as_target(target)
    row = _TABLE.get(target.kind)
    if row is not None:
        row.check(target)
    return target


def compiled_kinds() -> list[str]:
    return sorted(_TABLE)


# --------------------------------------------------------------------------- the rows
# (each row's modules are imported when it is used: llvmlite only when building)


def _llvm_lower(func: PrimFunc, target: Target, pipeline: str = "s_tir") -> PrimFunc:
    """s_tir: blocks lowered to loop-level code; loop-level code only has its loops counted from
    0 in steps of 1 (the pipeline's first pass, which the code generator expects) and its
    narrow-float arithmetic computed in float32 (which the code generator needs). tirx: TVM's
    tirx pipeline (``tir/tirx_pipeline.py``)."""
    if pipeline == "tirx":
        from .tir.tirx_pipeline import lower_for_codegen_tirx

        return lower_for_codegen_tirx(func)
    from ..ir import stmt as S
    from ..ir.visitor import collect
    from .tir.canonicalize_loop import canonicalize_loop
    from .tir.legalize_narrow import legalize_narrow
    from .tir.pipeline import lower_for_codegen

    if not collect(func.body, (S.Block, S.BlockRealize)):
        return legalize_narrow(canonicalize_loop(func))
    return lower_for_codegen(func)


def _llvm_codegen(func: PrimFunc, target: Target, symbol: str) -> Any:
    from .codegen.compile import compile_prim_func

    return compile_prim_func(func, target, symbol)


def _llvm_check(target: Target) -> Any:
    from .codegen.llvm_target import parse_llvm_target

    return parse_llvm_target(target)


def _cpu_rules() -> list:
    from .dlight.cpu import default_rules

    return default_rules()


register_target_kind(TargetKind("llvm", _llvm_lower, _llvm_codegen, _cpu_rules, "runtime.module.load_llvm",
                                _llvm_check))


# cuda: the GPU TIR pipeline ends at SplitHostDevice (an IRModule: the host function and its
# kernels), the code generator renders CUDA C and compiles it with NVRTC (a CudaArtifact)
def _cuda_lower(func: PrimFunc, target: Target, pipeline: str = "s_tir") -> Any:
    if pipeline == "tirx":
        from .tir.gpu.tirx_pipeline import lower_for_cuda_tirx

        return lower_for_cuda_tirx(func, target)
    from .tir.gpu.pipeline import lower_for_cuda

    return lower_for_cuda(func, target)


def _cuda_codegen(mod: Any, target: Target, symbol: str) -> Any:
    from .codegen.cuda import codegen_cuda

    return codegen_cuda(mod, target, symbol)


def _gpu_rules() -> list:
    from .dlight.gpu import default_rules

    return default_rules()


_CUDA_ARCH = re.compile(r"sm_(\d{2,3})[af]?")


def _cuda_check(target: Target) -> Target:
    """A cuda target's options as NVRTC and the driver take them: ``-arch=sm_XY`` (TVM refuses
    one not starting with ``sm_``; NVRTC knows sm_50 and later), and launch limits that a CUDA
    GPU has (at most 1024 threads per block, warps of 32)."""
    arch = target.arch
    match = _CUDA_ARCH.fullmatch(arch)
    if match is None or int(match.group(1)) < 50:
        raise TVMSError(f"target {str(target)!r}: -arch={arch} is not a CUDA architecture; "
                        f"write -arch=sm_XY with XY the compute capability, 50 or more (e.g. sm_80)")
    for key in ("max_num_threads", "max_threads_per_block"):
        if target.attrs.get(key, 1024) > 1024:
            raise TVMSError(f"target {str(target)!r}: -{key}={target.attrs[key]}: a CUDA block has at "
                            f"most 1024 threads")
    if target.thread_warp_size != 32:
        raise TVMSError(f"target {str(target)!r}: -thread_warp_size={target.thread_warp_size}: CUDA "
                        f"warps have 32 threads")
    return target


register_target_kind(TargetKind("cuda", _cuda_lower, _cuda_codegen, _gpu_rules, "runtime.module.load_cuda",
                                _cuda_check))


__all__ = ["TargetKind", "check_target", "compiled_kinds", "register_target_kind", "target_kind"]
