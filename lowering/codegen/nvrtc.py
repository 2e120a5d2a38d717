"""CUDA C to PTX or a cubin with NVRTC (cuda-python's ``cuda.bindings.nvrtc``), no GPU needed.

``compile_cuda(source, arch="sm_80", fmt="cubin")`` compiles for one architecture: ``"ptx"`` for
the virtual architecture (``compute_80``: text the driver compiles for the GPU it runs on),
``"cubin"`` for the real one (``sm_80``, which also assembles the PTX: the check ptxas makes).
Results are cached in the process by source, architecture and format. The headers the kernels
include come from NVIDIA's wheels: ``cuda_fp16.h``/``cuda_bf16.h`` from
``nvidia-cuda-runtime-cu12``, libcu++'s ``cuda/std/*`` (which NVRTC's programs include for the
fixed-width integers) from ``nvidia-cuda-cccl-cu12``, and for tensor-core kernels the ``crt/``
headers behind ``mma.h`` from ``nvidia-cuda-nvcc-cu12`` (large, so a test dependency: without
it, such a kernel's compile error names it).

A compile error is a ``TVMSError`` listing NVRTC's diagnostics, each with the source line it
names and a caret under the column NVRTC marks.
"""
from __future__ import annotations

import hashlib
import importlib
import importlib.util
import pathlib
import re

from ...ir.errors import TVMSError

FORMATS = ("ptx", "cubin")
PROGRAM_NAME = "tvms_kernels.cu"
_HEADER_PACKAGES = (("nvidia.cuda_runtime", "nvidia-cuda-runtime-cu12", "cuda_fp16.h"),
                    ("nvidia.cuda_cccl", "nvidia-cuda-cccl-cu12", "cuda/std/cstdint"))
# tensor-core kernels include mma.h, whose crt/ headers only the nvcc wheel has (a test dependency)
_OPTIONAL_HEADERS = (("nvidia.cuda_nvcc", "nvidia-cuda-nvcc-cu12", "crt/mma.h"),)
_cache: dict[tuple, bytes] = {}
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


def _include_dir(module: str, probe: str) -> str | None:
    spec = importlib.util.find_spec(module)
    roots = list(spec.submodule_search_locations or []) if spec is not None else []
    found = [pathlib.Path(r) / "include" for r in roots if (pathlib.Path(r) / "include" / probe).is_file()]
    return str(found[0]) if found else None


def include_dirs() -> list[str]:
    """The include folders of the header wheels (a TVMSError naming the wheel that is missing;
    the optional ones are left out when absent)."""
    dirs = []
    for module, package, probe in _HEADER_PACKAGES:
        found = _include_dir(module, probe)
        if found is None:
            raise TVMSError(f"compiling CUDA needs {probe} from the {package} wheel: pip install {package}")
        dirs.append(found)
    return dirs + [d for m, _, probe in _OPTIONAL_HEADERS if (d := _include_dir(m, probe)) is not None]


def _arch_number(arch: str) -> str:
    m = re.fullmatch(r"(?:sm_|compute_)?(\d+[a-z]?)", str(arch))
    if m is None:
        raise TVMSError(f"unknown CUDA architecture {arch!r} (expected e.g. sm_80)")
    return m.group(1)


def compile_cuda(source: str, arch: str = "sm_80", fmt: str = "cubin", options: tuple = ()) -> bytes:
    """PTX (text, as bytes) or a cubin of ``source`` for ``arch`` (``sm_80``, ``sm_90``, ...)."""
    if fmt not in FORMATS:
        raise TVMSError(f"NVRTC makes {' or '.join(FORMATS)}, not {fmt!r}")
    number = _arch_number(arch)
    key = (hashlib.sha256(source.encode()).hexdigest(), number, fmt, tuple(options))
    hit = _cache.get(key)
    if hit is not None:
        return hit
    nvrtc = _nvrtc()
    gpu = f"--gpu-architecture={'sm' if fmt == 'cubin' else 'compute'}_{number}"
    flags = [gpu, "-default-device", "--std=c++17", *(f"-I{d}" for d in include_dirs()), *options]
    (program,) = _check(nvrtc, nvrtc.nvrtcCreateProgram(source.encode(), PROGRAM_NAME.encode(), 0, [], []),
                        "creating a program")
    try:
        encoded = [f.encode() for f in flags]
        status = nvrtc.nvrtcCompileProgram(program, len(encoded), encoded)[0]
        if status != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            log = _log(nvrtc, program)
            missing = [f"\n(the header {probe} comes with the {package} wheel: pip install {package})"
                       for _, package, probe in _OPTIONAL_HEADERS if f'"{probe}"' in log]
            raise TVMSError(f"NVRTC could not compile the CUDA source for {gpu[len('--gpu-architecture='):]}:\n"
                            + explain_log(log, source) + "".join(missing))
        size_of, read = ((nvrtc.nvrtcGetCUBINSize, nvrtc.nvrtcGetCUBIN) if fmt == "cubin"
                         else (nvrtc.nvrtcGetPTXSize, nvrtc.nvrtcGetPTX))
        (size,) = _check(nvrtc, size_of(program), f"sizing the {fmt}")
        buffer = b" " * size
        _check(nvrtc, read(program, buffer), f"reading the {fmt}")
    finally:
        nvrtc.nvrtcDestroyProgram(program)
    binary = buffer.rstrip(b"\0") + b"\0" if fmt == "ptx" else buffer  # (PTX is NUL-terminated text)
    _cache[key] = binary
    return binary


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
