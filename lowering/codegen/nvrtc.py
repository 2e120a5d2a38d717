"""CUDA C to PTX or a cubin with NVRTC (cuda-python's ``cuda.bindings.nvrtc``), no GPU needed.

``compile_cuda(source, arch="sm_80", fmt="cubin")`` compiles for one architecture: ``"ptx"`` for
the virtual architecture (``compute_80``: text the driver compiles for the GPU it runs on),
``"cubin"`` for the real one (``sm_80``, which also assembles the PTX: the check ptxas makes).
Results are cached in the process by source, architecture and format. NVRTC runs in a worker
process (``nvrtc_worker``): a crash of it is an error, not the end of this process. The headers the kernels
include come from NVIDIA's wheels: ``cuda_fp16.h``/``cuda_bf16.h`` from
``nvidia-cuda-runtime-cu12``, libcu++'s ``cuda/std/*`` (which NVRTC's programs include for the
fixed-width integers) from ``nvidia-cuda-cccl-cu12``, and for tensor-core kernels the ``crt/``
headers behind ``mma.h`` from ``nvidia-cuda-nvcc-cu12`` (large, so a test dependency: without
it, such a kernel's compile error names it). With NVRTC of CUDA 13 they come from CUDA 13's
wheels (``nvidia/cu13``); where no wheel has one, from a CUDA toolkit (``$CUDA_HOME``,
``$CUDA_PATH`` or ``/usr/local/cuda``).

A compile error is a ``TVMSError`` listing NVRTC's diagnostics, each with the source line it
names and a caret under the column NVRTC marks.
"""
from __future__ import annotations

import hashlib
import importlib
import os
import pathlib
import re

from ...ir.errors import TVMSError
from ...ir.nvidia_wheels import package_folders
from . import nvrtc_worker

FORMATS = ("ptx", "cubin")
PROGRAM_NAME = "tvms_kernels.cu"
# The headers the kernels include: (probe file, needed by every kernel, CUDA 12's wheel module,
# its package, CUDA 13's package). Tensor-core kernels include mma.h, whose crt/ headers come with
# the nvcc wheel (CUDA 12: large, so a test dependency) or nvidia-cuda-crt (CUDA 13).
_HEADERS = (("cuda_fp16.h", True, "nvidia.cuda_runtime", "nvidia-cuda-runtime-cu12", "nvidia-cuda-runtime"),
            ("cuda/std/cstdint", True, "nvidia.cuda_cccl", "nvidia-cuda-cccl-cu12", "nvidia-cuda-cccl"),
            ("crt/mma.h", False, "nvidia.cuda_nvcc", "nvidia-cuda-nvcc-cu12", "nvidia-cuda-crt"))
# a CUDA toolkit, when the wheels lack a header: these variables, then the usual install folder
_TOOLKIT_VARIABLES = ("CUDA_HOME", "CUDA_PATH")
_TOOLKIT_DEFAULT = "/usr/local/cuda"
_cache: dict[tuple, bytes] = {}
# CUtensorMap, the by-value type of a TMA kernel's descriptor parameters, comes from the host's cuda.h,
# which the kernels do not include under NVRTC: an in-memory header with its layout (128 bytes,
# 64-byte aligned) is included before the source, so the source's lines keep their numbers
_TENSOR_MAP_HEADER = ("tvms_tensor_map.h",
                      "#pragma once\nstruct alignas(64) CUtensorMap_st {\n  unsigned long long opaque[16];\n};\n"
                      "typedef struct CUtensorMap_st CUtensorMap;\n")
# NVRTC's diagnostics: "name.cu(12): error: message"
_DIAGNOSTIC = re.compile(r"^(?P<file>[^\s()][^()]*)\((?P<line>\d+)\): (?P<kind>(?:catastrophic )?error|warning)[^:]*: (?P<text>.*)$")


def _nvrtc():
    try:
        nvrtc = importlib.import_module("cuda.bindings.nvrtc")
    except ImportError:
        raise TVMSError("compiling CUDA needs cuda-python's NVRTC bindings: pip install 'cuda-python>=12.6,<13' "
                        "nvidia-cuda-nvrtc-cu12") from None
    try:
        _check(nvrtc, nvrtc.nvrtcVersion(), "reading NVRTC's version")
    except (RuntimeError, OSError) as err:  # (the bindings load libnvrtc when first called)
        raise TVMSError(f"NVRTC's library could not be loaded ({err}): pip install nvidia-cuda-nvrtc-cu12") from None
    return nvrtc


def _check(nvrtc, result: tuple, doing: str):
    status = result[0]
    if status != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        raise TVMSError(f"NVRTC failed {doing}: {status.name}")
    return result[1:]


def _toolkit_includes(major: int) -> list[pathlib.Path]:
    """A CUDA toolkit's include folders (from CUDA 13 on, libcu++ is in include/cccl), of
    toolkits of CUDA ``major`` or of a version not known."""
    roots = [os.environ[v] for v in _TOOLKIT_VARIABLES if os.environ.get(v)] + [_TOOLKIT_DEFAULT]
    return [pathlib.Path(r) / sub for r in roots if _toolkit_major(pathlib.Path(r)) in (major, None)
            for sub in ("include", "include/cccl")]


def _toolkit_major(root: pathlib.Path) -> int | None:
    """The CUDA major version of the toolkit at ``root`` (its cuda.h's CUDA_VERSION), None if unknown."""
    try:
        found = re.search(r"#define\s+CUDA_VERSION\s+(\d+)", (root / "include" / "cuda.h").read_text(errors="replace"))
    except OSError:
        return None
    return int(found.group(1)) // 1000 if found else None


def _candidates(cu12_module: str, major: int) -> list[pathlib.Path]:
    """Include folders of NVRTC's own CUDA version, where a header may be: CUDA 12's wheels (a
    package a header set) or CUDA 13's (all under nvidia/cu13, libcu++ in include/cccl), then a
    toolkit of that version (headers of another version than NVRTC's may not compile)."""
    if major >= 13:
        wheels = [f / sub for f in package_folders("nvidia.cu13") for sub in ("include", "include/cccl")]
    else:
        wheels = [f / "include" for f in package_folders(cu12_module)]
    return wheels + _toolkit_includes(major)


def _nvrtc_major() -> int:
    nvrtc = _nvrtc()
    return int(_check(nvrtc, nvrtc.nvrtcVersion(), "reading NVRTC's version")[0])


def include_dirs(major: int | None = None) -> list[str]:
    """The include folders holding the kernels' headers for NVRTC of CUDA ``major`` (read from
    NVRTC when None): a TVMSError naming the wheel of a required header that is nowhere; the
    optional ones are left out when absent."""
    major = _nvrtc_major() if major is None else major
    dirs = []
    for probe, required, module, cu12_package, cu13_package in _HEADERS:
        found = next((str(d) for d in _candidates(module, major) if (d / probe).is_file()), None)
        if found is None and required:
            package = cu13_package if major >= 13 else cu12_package
            raise TVMSError(f"compiling CUDA needs {probe} from the {package} wheel (or a CUDA toolkit in "
                            f"$CUDA_HOME): pip install {package}")
        if found is not None and found not in dirs:
            dirs.append(found)
    return dirs


def _arch_number(arch: str) -> str:
    m = re.fullmatch(r"(?:sm_|compute_)?(\d+[a-z]?)", str(arch))
    if m is None:
        raise TVMSError(f"unknown CUDA architecture {arch!r} (expected e.g. sm_80)")
    return m.group(1)


def compile_cuda(source: str, arch: str = "sm_80", fmt: str = "cubin", options: tuple = ()) -> bytes:
    """PTX (text, as bytes) or a cubin of ``source`` for ``arch`` (``sm_80``, ``sm_90``, ...)."""
    if fmt not in FORMATS:
        raise TVMSError(f"NVRTC makes {' or '.join(FORMATS)}, not {fmt!r}")
    return _compiled(source, _arch_number(arch), fmt == "cubin", tuple(options))[fmt]


def compile_cuda_with_ptx(source: str, arch: str = "sm_80", options: tuple = ()) -> tuple[bytes, bytes]:
    """A cubin of ``source`` for ``arch`` and the PTX it was assembled from, from one compile:
    the driver loads the cubin on GPUs of that architecture and compiles the PTX for newer
    ones (what a fatbin carries)."""
    out = _compiled(source, _arch_number(arch), True, tuple(options))
    return out["cubin"], out["ptx"]


def _compiled(source: str, number: str, real: bool, options: tuple) -> dict[str, bytes]:
    """NVRTC's output by format: PTX for ``compute_<number>``, or (``real``) the cubin for
    ``sm_<number>`` and its PTX; compiled by the NVRTC worker (nvrtc_worker), cached in the process."""
    key = (hashlib.sha256(source.encode()).hexdigest(), number, real, options)
    hit = _cache.get(key)
    if hit is None:
        arch = f"{'sm' if real else 'compute'}_{number}"
        hit = _cache[key] = nvrtc_worker.run("compile_here", source, number, real, options,
                                             doing=f"compiling the CUDA source for {arch}")
    return hit


def compile_here(source: str, number: str, real: bool, options: tuple) -> dict[str, bytes]:
    """``_compiled``'s work, in this process (the NVRTC worker's)."""
    nvrtc = _nvrtc()
    gpu = f"--gpu-architecture={'sm' if real else 'compute'}_{number}"
    major = _nvrtc_major()
    flags = [gpu, "-default-device", "--std=c++17", *(f"-I{d}" for d in include_dirs(major)), *options]
    if "INFINITY" in source:  # (C's math.h, which nvcc includes and NVRTC has not: T.cuda.cta_reduce's max/min)
        flags.append("-DINFINITY=__int_as_float(0x7f800000)")
    headers = [_TENSOR_MAP_HEADER] if "CUtensorMap" in source else []
    flags += [f"--pre-include={name}" for name, _ in headers]
    (program,) = _check(nvrtc, nvrtc.nvrtcCreateProgram(source.encode(), PROGRAM_NAME.encode(), len(headers),
                                                        [text.encode() for _, text in headers],
                                                        [name.encode() for name, _ in headers]),
                        "creating a program")
    out = {}
    try:
        encoded = [f.encode() for f in flags]
        status = nvrtc.nvrtcCompileProgram(program, len(encoded), encoded)[0]
        if status != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            log = _log(nvrtc, program)
            missing = [f"\n(the header {probe} comes with the {package} wheel: pip install {package})"
                       for probe, required, _, cu12, cu13 in _HEADERS
                       if not required and f'"{probe}"' in log for package in [cu13 if major >= 13 else cu12]]
            raise TVMSError(f"NVRTC could not compile the CUDA source for {gpu[len('--gpu-architecture='):]}:\n"
                            + explain_log(log, source) + "".join(missing))
        readers = {"ptx": (nvrtc.nvrtcGetPTXSize, nvrtc.nvrtcGetPTX)}
        if real:
            readers["cubin"] = (nvrtc.nvrtcGetCUBINSize, nvrtc.nvrtcGetCUBIN)
        for fmt, (size_of, read) in readers.items():
            (size,) = _check(nvrtc, size_of(program), f"sizing the {fmt}")
            buffer = b" " * size
            _check(nvrtc, read(program, buffer), f"reading the {fmt}")
            out[fmt] = buffer.rstrip(b"\0") + b"\0" if fmt == "ptx" else buffer  # (PTX is NUL-terminated text)
    finally:
        nvrtc.nvrtcDestroyProgram(program)
    return out


def _log(nvrtc, program) -> str:
    (size,) = _check(nvrtc, nvrtc.nvrtcGetProgramLogSize(program), "sizing the log")
    log = b" " * size
    _check(nvrtc, nvrtc.nvrtcGetProgramLog(program, log), "reading the log")
    return log.rstrip(b"\0").decode(errors="replace")


def explain_log(log: str, source: str) -> str:
    """NVRTC's errors, each followed by the source line it names and a caret at its column
    (NVRTC echoes the line indented by two spaces and puts a caret under the column)."""
    lines = source.splitlines()
    log_lines = log.splitlines()
    out = []
    for k, text in enumerate(log_lines):
        m = _DIAGNOSTIC.match(text)
        if m is None or m.group("kind") == "warning":
            continue
        number = int(m.group("line"))
        out.append(f"{m.group('file')}:{number}: {m.group('kind')}: {m.group('text')}")
        if m.group("file") == PROGRAM_NAME and 1 <= number <= len(lines):  # (not a header's line)
            width = len(str(number))
            out.append(f"  {number} | {lines[number - 1]}")
            caret = next((line for line in log_lines[k + 1:k + 3] if line.strip() == "^"), None)
            if caret is not None:
                out.append(f"  {' ' * width} | {' ' * max(caret.index('^') - 2, 0)}^")
    return "\n".join(out) if out else log.strip()
