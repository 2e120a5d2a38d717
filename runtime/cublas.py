"""The runtime of the ``cublas`` backend: packed functions that multiply device tensors with
cuBLASLt, loaded with ctypes from NVIDIA's cuBLAS wheel (``pip install tvms[cublas]``, the
``nvidia-cublas-cu12`` package) or from a system CUDA install.

When the library loads, importing this module registers ``runtime.cublas.gemm``: given a
``GemmCall`` (``lowering/relax/backend_cuda_cublas.py``: which inputs are the operands, the
transpose, the epilogue, alpha) it returns the packed function ``f(*inputs, out)`` that
RunCodegen's ``R.call_dps_packed`` names. The backend's codegen ``relax.ext.cublas`` is
registered from it (``enable_codegen``); without the library neither exists and ``REASON``
says why.

A tensor reaches cuBLAS as an ``Operand`` (a device pointer, shape, dtype): any object with
``__cuda_array_interface__`` (tvms' CUDA tensors, cupy, torch) in row-major order.

The layout logic is TVM's (``CallCublasLt``): row-major ``out = lhs @ op(rhs)`` is computed
as the column-major ``out^T = op(rhs)^T @ lhs^T``, so cuBLAS's first operand is ``rhs``.
``plan_gemm`` decides the sizes, leading dimensions and batch strides; ``cublaslt_gemm`` hands
them to cuBLASLt and ``host_gemm`` to numpy (the same layouts read with strides from flat
buffers), so the plan is checked on machines without a GPU.
"""
from __future__ import annotations

import ctypes
import math
import os
import threading
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ..ir.errors import TVMSError
from ..ir.nvidia_wheels import package_folders
from ..ir.registry import register_func
from .cuda_tensor import CudaTensor


@dataclass(frozen=True)
class Operand:
    """A tensor as the GEMM sees it: ``data`` is a device pointer (an int), or a numpy array
    for the host reference; row-major ``shape``; ``dtype`` by name."""

    data: Any
    shape: tuple
    dtype: str


def device_operand(arg: Any) -> Operand:
    """The Operand of a device tensor (``__cuda_array_interface__``, row-major)."""
    if isinstance(arg, CudaTensor):  # (read on tvms's stream: not lent, so a VM reuses its block)
        return Operand(arg.ptr, arg.shape, arg.dtype)
    face = getattr(arg, "__cuda_array_interface__", None)
    if face is None:
        raise TVMSError(f"cuBLAS multiplies device tensors; got a {type(arg).__name__} "
                        f"(copy it to the GPU first, e.g. tvms.nd.array(x, device=tvms.cuda(0)))")
    shape = tuple(int(d) for d in face["shape"])
    # the tensor's own dtype names what typestr cannot (bfloat16, float8); torch's does not
    dtype = str(getattr(arg, "dtype", ""))
    dtype = dtype if dtype in _CUDA_TYPES else np.dtype(face["typestr"]).name
    strides = face.get("strides")
    if strides is not None and tuple(strides) != _row_major_strides(shape, face["typestr"]):
        raise TVMSError(f"cuBLAS takes row-major tensors; got strides {tuple(strides)} for shape "
                        f"{shape}")
    return Operand(int(face["data"][0]), shape, dtype)


def host_operand(arg: Any) -> Operand:
    """The Operand of a numpy array (the host reference)."""
    array = np.asarray(arg)
    if not array.flags.c_contiguous:
        raise TVMSError("the cuBLAS reference takes row-major (C-contiguous) arrays")
    return Operand(array, array.shape, array.dtype.name)


def _row_major_strides(shape: tuple, typestr: str) -> tuple:
    size, strides = np.dtype(typestr).itemsize, []
    for d in reversed(shape):
        strides.append(size)
        size *= d
    return tuple(reversed(strides))


# --------------------------------------------------------------------------- the plan


@dataclass(frozen=True)
class GemmPlan:
    """A cuBLAS GEMM in column-major terms: ``C (m x n) = op(A) (m x k) @ B (k x n)`` where A
    is ``rhs``'s buffer (``a_rows x a_cols``, leading dimension ``lda``, transposed when
    ``trans_a``), B is ``lhs``'s (``k x n``, ``ldb``) and C the output's (``ldc``); ``batch``
    GEMMs (1: one) at the given element strides."""

    m: int
    n: int
    k: int
    trans_a: bool
    a_rows: int
    a_cols: int
    lda: int
    ldb: int
    ldc: int
    batch: int = 1
    stride_a: int = 0
    stride_b: int = 0
    stride_c: int = 0


def plan_gemm(lhs: tuple, rhs: tuple, out: tuple, transposed_rhs: bool) -> GemmPlan:
    """The plan of ``out = lhs @ rhs`` (``rhs`` given transposed when ``transposed_rhs``), all
    row-major, with shapes ``(..., N, K)``, ``(..., K, M)`` or ``(..., M, K)``, ``(..., N, M)``."""
    if len(lhs) < 2 or len(rhs) < 2:
        raise TVMSError(f"cuBLAS multiplies matrices; got shapes {lhs} and {rhs}")
    lhs_batch, rhs_batch = math.prod(lhs[:-2]), math.prod(rhs[:-2])
    m = rhs[-2] if transposed_rhs else rhs[-1]
    k_rhs = rhs[-1] if transposed_rhs else rhs[-2]
    n, k = lhs[-2], lhs[-1]
    if k != k_rhs:
        raise TVMSError(f"cuBLAS: the reduction lengths differ: {lhs} @ {rhs}"
                        + (" (transposed)" if transposed_rhs else ""))
    batch = 1
    if rhs_batch == 1:
        n *= lhs_batch  # one right matrix: the left side's batches are more rows of one GEMM
    elif lhs_batch == rhs_batch:
        batch = lhs_batch  # strided batches (the output check below rules out broadcasting)
    else:
        raise TVMSError(f"cuBLAS batches both sides alike or only the left one; got shapes "
                        f"{lhs} and {rhs}")
    if math.prod(out) != batch * m * n or (out and out[-1] != m):
        raise TVMSError(f"cuBLAS: the output of shape {out} does not hold {lhs} @ {rhs}")
    a_rows, a_cols = (k, m) if transposed_rhs else (m, k)
    return GemmPlan(m, n, k, transposed_rhs, a_rows, a_cols, lda=a_rows, ldb=k, ldc=m,
                    batch=batch, stride_a=m * k if batch > 1 else 0,
                    stride_b=k * n if batch > 1 else 0, stride_c=m * n if batch > 1 else 0)


def gemm_function(call: Any, gemm: Callable, as_operand: Callable = device_operand) -> Callable:
    """The packed function ``f(*inputs, out)`` of a GemmCall: it picks the operands, plans
    the GEMM and runs it with ``gemm(plan, lhs, rhs, out, bias, scale_a, scale_b, epilogue,
    alpha)`` (``cublaslt_gemm`` on the device, ``host_gemm`` for the reference)."""

    def packed(*args: Any) -> None:
        if len(args) != call.num_inputs + 1:
            raise TVMSError(f"{call.symbol}: takes {call.num_inputs} inputs and 1 output, got "
                            f"{len(args)} arguments")
        ops = [as_operand(a) for a in args]
        lhs, rhs, out = ops[call.lhs], ops[call.rhs], ops[-1]
        if lhs.dtype != rhs.dtype:
            raise TVMSError(f"{call.symbol}: the operands are {lhs.dtype} and {rhs.dtype}")
        bias, scale_a, scale_b = (None if i is None else ops[i]
                                  for i in (call.bias, call.scale_a, call.scale_b))
        plan = plan_gemm(lhs.shape, rhs.shape, out.shape, call.transposed_rhs)
        if bias is not None and math.prod(bias.shape) != plan.m:
            raise TVMSError(f"{call.symbol}: the bias of shape {bias.shape} is not one value "
                            f"per output column")
        gemm(plan, lhs, rhs, out, bias, scale_a, scale_b, call.epilogue, call.alpha)

    packed.__name__ = call.symbol
    return packed


# --------------------------------------------------------------------------- the host reference


def host_gemm(plan: GemmPlan, lhs: Operand, rhs: Operand, out: Operand, bias: Operand | None,
              scale_a: Operand | None, scale_b: Operand | None, epilogue: str,
              alpha: float) -> None:
    """The plan run with numpy on flat host buffers, read and written through the plan's
    column-major layouts as cuBLASLt would; the epilogues as cuBLASLt computes them (its GELU
    is the tanh approximation)."""
    a = _column_major(rhs.data, plan.a_rows, plan.a_cols, plan.lda, plan.batch, plan.stride_a)
    b = _column_major(lhs.data, plan.k, plan.n, plan.ldb, plan.batch, plan.stride_b)
    c = _column_major(out.data, plan.m, plan.n, plan.ldc, plan.batch, plan.stride_c)
    acc = np.int32 if np.dtype(out.dtype).kind in "iu" else np.float32
    value = np.matmul((a.transpose(0, 2, 1) if plan.trans_a else a).astype(acc), b.astype(acc))
    if alpha != 1.0 and acc is np.float32:  # an int32 result is scaled by 1, as on the device
        value = value * np.float32(alpha)
    if scale_a is not None:
        value = value * np.float32(scale_a.data.reshape(-1)[0] * scale_b.data.reshape(-1)[0])
    if bias is not None:
        value = value + bias.data.reshape(-1)[:, None].astype(acc)  # one value per row of C
    if epilogue == "relu_bias":
        value = np.maximum(value, 0)
    elif epilogue == "gelu_bias":
        value = 0.5 * value * (1 + np.tanh(np.float32(math.sqrt(2 / math.pi))
                                           * (value + np.float32(0.044715) * value ** 3)))
    c[...] = value.astype(c.dtype)


def _column_major(array: np.ndarray, rows: int, cols: int, ld: int, batch: int,
                  stride: int) -> np.ndarray:
    flat = array.reshape(-1)
    size = flat.itemsize
    return np.lib.stride_tricks.as_strided(flat, (batch, rows, cols),
                                           (stride * size, size, ld * size))


# --------------------------------------------------------------------------- cuBLASLt


# cudaDataType_t values (library_types.h) by dtype name
_CUDA_TYPES = {"float32": 0, "float16": 2, "int8": 3, "int32": 10, "bfloat16": 14,
               "float8_e4m3fn": 28, "float8_e5m2": 29}
_COMPUTE_32F, _COMPUTE_32I = 68, 72  # cublasComputeType_t
# cublasLtMatmulDescAttributes_t, cublasLtMatrixLayoutAttribute_t, cublasLtEpilogue_t
DESC_TRANSA, DESC_TRANSB, DESC_EPILOGUE, DESC_BIAS_POINTER = 3, 4, 7, 8
DESC_A_SCALE_POINTER, DESC_B_SCALE_POINTER = 17, 18
LAYOUT_TYPE, LAYOUT_ROWS, LAYOUT_COLS, LAYOUT_LD = 0, 2, 3, 4
LAYOUT_BATCH_COUNT, LAYOUT_STRIDED_BATCH_OFFSET = 5, 6
EPILOGUES = {"default": 1, "bias": 4, "relu_bias": 6, "gelu_bias": 36}
_PREF_MAX_WORKSPACE_BYTES = 1
# scratch memory offered to cuBLASLt's algorithms: with none, its heuristic may pick only those
# that need none (on an H200, a 4096^3 fp16 matmul then ran 2.6x behind cupy's cuBLAS call)
WORKSPACE_BYTES = 32 << 20
_STATUS = {1: "NOT_INITIALIZED", 3: "ALLOC_FAILED", 7: "INVALID_VALUE", 8: "ARCH_MISMATCH",
           11: "MAPPING_ERROR", 13: "EXECUTION_FAILED", 14: "INTERNAL_ERROR", 15: "NOT_SUPPORTED"}


class _HeuristicResult(ctypes.Structure):
    """cublasLtMatmulHeuristicResult_t."""

    _fields_ = [("algo", ctypes.c_uint64 * 8), ("workspaceSize", ctypes.c_size_t),
                ("state", ctypes.c_int), ("wavesCount", ctypes.c_float),
                ("reserved", ctypes.c_int * 4)]


def _library_candidates() -> list[str]:
    """Where libcublasLt may be: NVIDIA's CUDA 12 wheel (the ``nvidia.cublas`` package), CUDA 13's
    (``nvidia/cu13``), then the system's loader path (a toolkit's, 12 before 13)."""
    found = [os.path.join(folder, "lib", "libcublasLt.so.12") for folder in package_folders("nvidia.cublas")]
    found += [os.path.join(folder, "lib", "libcublasLt.so.13") for folder in package_folders("nvidia.cu13")]
    return [p for p in found if os.path.exists(p)] + ["libcublasLt.so.12", "libcublasLt.so.13", "libcublasLt.so"]


_P, _I, _SIZE = ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t
# the signatures called here (every one returns a cublasStatus_t), so that ctypes passes
# 64-bit sizes and pointers whole
_SIGNATURES = {
    "cublasLtCreate": [_P], "cublasLtMatmulPreferenceCreate": [_P],
    "cublasLtMatmulPreferenceSetAttribute": [_P, _I, _P, _SIZE],
    "cublasLtMatmulDescCreate": [_P, _I, _I], "cublasLtMatmulDescDestroy": [_P],
    "cublasLtMatmulDescSetAttribute": [_P, _I, _P, _SIZE],
    "cublasLtMatmulDescGetAttribute": [_P, _I, _P, _SIZE, _P],
    "cublasLtMatrixLayoutCreate": [_P, _I, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_int64],
    "cublasLtMatrixLayoutDestroy": [_P],
    "cublasLtMatrixLayoutSetAttribute": [_P, _I, _P, _SIZE],
    "cublasLtMatrixLayoutGetAttribute": [_P, _I, _P, _SIZE, _P],
    "cublasLtMatmulAlgoGetHeuristic": [_P, _P, _P, _P, _P, _P, _P, _I, _P, _P],
    "cublasLtMatmul": [_P, _P, _P, _P, _P, _P, _P, _P, _P, _P, _P, _P, _P, _P, _SIZE, _P],
}


def load_library() -> tuple[Any, str]:
    """``(the loaded libcublasLt, "")``, or ``(None, why not)``."""
    errors = []
    for candidate in _library_candidates():
        try:
            lib = ctypes.CDLL(candidate)
            for name, argtypes in _SIGNATURES.items():
                fn = getattr(lib, name)
                fn.argtypes, fn.restype = argtypes, ctypes.c_int
            return lib, ""
        except (OSError, AttributeError) as e:
            errors.append(str(e))
    return None, ("the cuBLAS library (libcublasLt.so.12) was not found: install it with "
                  "`pip install tvms[cublas]` (the nvidia-cublas-cu12 wheel)"
                  + (f" ({errors[0]})" if errors else ""))


LIBRARY, REASON = load_library()


def _check(status: int, what: str) -> None:
    if status:
        raise TVMSError(f"cuBLASLt: {what} failed: CUBLAS_STATUS_{_STATUS.get(status, status)}")


def _set(setter: Callable, obj: Any, attr: int, value: Any, what: str) -> None:
    _check(setter(obj, attr, ctypes.byref(value), ctypes.sizeof(value)), what)


class Descriptors:
    """cuBLASLt's matmul descriptor and the three matrix layouts of one plan (destroyed by
    ``close``). Creating them needs the library, not a GPU."""

    def __init__(self, plan: GemmPlan, ab_dtype: str, c_dtype: str, epilogue: str,
                 bias: int | None = None, scale_a: int | None = None,
                 scale_b: int | None = None) -> None:
        lib = LIBRARY
        if ab_dtype not in _CUDA_TYPES or c_dtype not in _CUDA_TYPES:
            raise TVMSError(f"cuBLASLt multiplies {', '.join(_CUDA_TYPES)}; got {ab_dtype} "
                            f"into {c_dtype}")
        integer = c_dtype == "int32"
        self.desc, self.layouts = ctypes.c_void_p(), []
        _check(lib.cublasLtMatmulDescCreate(ctypes.byref(self.desc),
                                            _COMPUTE_32I if integer else _COMPUTE_32F,
                                            _CUDA_TYPES["int32" if integer else "float32"]),
               "cublasLtMatmulDescCreate")
        setter = lib.cublasLtMatmulDescSetAttribute
        _set(setter, self.desc, DESC_TRANSA, ctypes.c_int32(int(plan.trans_a)), "TRANSA")
        _set(setter, self.desc, DESC_TRANSB, ctypes.c_int32(0), "TRANSB")
        for attr, pointer in ((DESC_BIAS_POINTER, bias), (DESC_A_SCALE_POINTER, scale_a),
                              (DESC_B_SCALE_POINTER, scale_b)):
            if pointer is not None:
                _set(setter, self.desc, attr, ctypes.c_void_p(pointer), "a pointer attribute")
        if epilogue != "default":
            _set(setter, self.desc, DESC_EPILOGUE, ctypes.c_uint32(EPILOGUES[epilogue]),
                 "EPILOGUE")
        for dtype, rows, cols, ld, stride in (
                (ab_dtype, plan.a_rows, plan.a_cols, plan.lda, plan.stride_a),
                (ab_dtype, plan.k, plan.n, plan.ldb, plan.stride_b),
                (c_dtype, plan.m, plan.n, plan.ldc, plan.stride_c)):
            layout = ctypes.c_void_p()
            _check(lib.cublasLtMatrixLayoutCreate(ctypes.byref(layout), _CUDA_TYPES[dtype],
                                                  ctypes.c_uint64(rows), ctypes.c_uint64(cols),
                                                  ctypes.c_int64(ld)), "cublasLtMatrixLayoutCreate")
            self.layouts.append(layout)
            if plan.batch > 1:
                set_layout = lib.cublasLtMatrixLayoutSetAttribute
                _set(set_layout, layout, LAYOUT_BATCH_COUNT, ctypes.c_int32(plan.batch),
                     "BATCH_COUNT")
                _set(set_layout, layout, LAYOUT_STRIDED_BATCH_OFFSET, ctypes.c_int64(stride),
                     "STRIDED_BATCH_OFFSET")

    def close(self) -> None:
        for layout in self.layouts:
            LIBRARY.cublasLtMatrixLayoutDestroy(layout)
        LIBRARY.cublasLtMatmulDescDestroy(self.desc)


_STATE = threading.local()  # one cuBLASLt handle and heuristic preference per thread


def _handle() -> tuple[ctypes.c_void_p, ctypes.c_void_p]:
    if getattr(_STATE, "handle", None) is None:
        handle, pref = ctypes.c_void_p(), ctypes.c_void_p()
        _check(LIBRARY.cublasLtCreate(ctypes.byref(handle)),
               "cublasLtCreate (is a CUDA device present?)")
        _check(LIBRARY.cublasLtMatmulPreferenceCreate(ctypes.byref(pref)),
               "cublasLtMatmulPreferenceCreate")
        _set(LIBRARY.cublasLtMatmulPreferenceSetAttribute, pref, _PREF_MAX_WORKSPACE_BYTES,
             ctypes.c_size_t(WORKSPACE_BYTES), "MAX_WORKSPACE_BYTES")
        _STATE.handle, _STATE.pref, _STATE.workspaces = handle, pref, {}
    return _STATE.handle, _STATE.pref


def _workspace(index: int, stream: int) -> int:
    """The address of cuBLASLt's scratch memory on ``cuda(index)`` for ``stream``: one block a
    stream, since work queued on two streams may run at once and must not share it."""
    from . import cuda_driver

    block = _STATE.workspaces.get((index, stream))
    if block is None:
        block = _STATE.workspaces[(index, stream)] = cuda_driver.DeviceMemory(index, WORKSPACE_BYTES)
    return block.ptr


def cublaslt_gemm(plan: GemmPlan, lhs: Operand, rhs: Operand, out: Operand,
                  bias: Operand | None, scale_a: Operand | None, scale_b: Operand | None,
                  epilogue: str, alpha: float, stream: int = 0, device_index: int = 0) -> None:
    """The plan run by cuBLASLt on device pointers of ``cuda(device_index)``, on ``stream`` (0:
    the default stream)."""
    handle, pref = _handle()
    workspace = _workspace(device_index, stream)
    d = Descriptors(plan, lhs.dtype, out.dtype, epilogue, *(
        None if x is None else x.data for x in (bias, scale_a, scale_b)))
    try:
        result, count = _HeuristicResult(), ctypes.c_int(0)
        a_desc, b_desc, c_desc = d.layouts
        _check(LIBRARY.cublasLtMatmulAlgoGetHeuristic(handle, d.desc, a_desc, b_desc, c_desc,
                                                      c_desc, pref, 1, ctypes.byref(result),
                                                      ctypes.byref(count)),
               "cublasLtMatmulAlgoGetHeuristic")
        if count.value == 0:
            _check(15, "choosing an algorithm")
        one, zero = ((ctypes.c_int32(1), ctypes.c_int32(0)) if out.dtype == "int32"
                     else (ctypes.c_float(alpha), ctypes.c_float(0.0)))
        c_data = ctypes.c_void_p(out.data)
        _check(LIBRARY.cublasLtMatmul(handle, d.desc, ctypes.byref(one),
                                      ctypes.c_void_p(rhs.data), a_desc,
                                      ctypes.c_void_p(lhs.data), b_desc, ctypes.byref(zero),
                                      c_data, c_desc, c_data, c_desc, ctypes.byref(result.algo),
                                      ctypes.c_void_p(workspace), ctypes.c_size_t(WORKSPACE_BYTES),
                                      ctypes.c_void_p(stream)),
               "cublasLtMatmul")
    finally:
        d.close()


def device_gemm_function(call: Any) -> Callable:
    """``gemm_function`` with cuBLASLt on the output tensor's device, on that device's current
    stream (where tvms's kernels are queued: a result is ready for the next kernel)."""
    from . import cuda_driver

    def packed(*args: Any) -> None:
        index = getattr(getattr(args[-1] if args else None, "device", None), "device_id", 0)
        cuda_driver.use_device(index)
        stream = int(cuda_driver.current_stream(index).handle)
        gemm_function(call, lambda *plan_args: cublaslt_gemm(*plan_args, stream=stream,
                                                             device_index=index))(*args)

    packed.__name__ = call.symbol
    return packed


if LIBRARY is not None:
    register_func("runtime.cublas.gemm", device_gemm_function, override=True, internal=True)

__all__ = ["Descriptors", "GemmPlan", "LIBRARY", "Operand", "REASON", "cublaslt_gemm",
           "device_gemm_function", "device_operand", "gemm_function", "host_gemm", "host_operand", "load_library",
           "plan_gemm"]
