"""The registry of TensorIR intrinsics (``T.exp``, ``T.if_then_else``, ``T.call_extern``, ...).

Each entry says how the script spells the intrinsic and how the result type follows from the
arguments, so that the parser and the printer share one table.
"""
from __future__ import annotations

from dataclasses import dataclass

from .dtype import DataType
from .errors import TVMSError
from .expr import Op


@dataclass(frozen=True)
class OpInfo:
    name: str  # TVM's operator name, "tir.exp"
    script_name: str  # how TVMScript spells it after "T.", "exp"
    result: str  # "arg0"/"arg1": the type of that argument; "dtype": given as first argument,
    #              "dtype_last": as last argument; otherwise a fixed data type ("bool", "int32")
    arity: tuple[int, int | None]  # (min, max) number of arguments, the dtype excluded
    defaults: tuple = ()  # the values of the last arguments when a call leaves them out


_OPS: dict[str, OpInfo] = {}
_BY_SCRIPT_NAME: dict[str, OpInfo] = {}
_INTERNED: dict[str, Op] = {}


def register(script_name: str, result: str, arity: tuple[int, int | None], name: str | None = None,
             aliases: tuple = (), defaults: tuple = ()) -> None:
    """``aliases``: other names the script reads as this operator (it prints ``script_name``)."""
    info = OpInfo(name or f"tir.{script_name}", script_name, result, arity, defaults)
    _OPS[info.name] = info
    for spelling in (script_name, *aliases):
        _BY_SCRIPT_NAME[spelling] = info


_UNARY_MATH = ("exp exp2 exp10 log log2 log10 log1p expm1 sqrt rsqrt sin cos tan sinh cosh tanh asin "
               "acos atan asinh acosh atanh erf sigmoid fabs floor ceil round trunc nearbyint "
               "popcount bitwise_not").split()
for _n in _UNARY_MATH:
    register(_n, "arg0", (1, 1))
# the math calls (``tir.<name>``) the LLVM code generator expands on float32 / float16 vectors
# (lowering/codegen/llvm_vector_math.py); DLight's CPU rules ask it without loading llvmlite
VECTOR_MATH = frozenset(("exp", "log", "tanh", "erf", "sigmoid"))
for _n in "pow fmod atan2 hypot copysign nextafter ldexp bitwise_and bitwise_or bitwise_xor shift_left shift_right".split():
    register(_n, "arg0", (2, 2))
register("clz", "int32", (1, 1))  # (leading zeros of any integer, counted in an int32, as in TVM)
for _n in "isnan isinf isfinite".split():
    register(_n, "bool", (1, 1))
register("if_then_else", "arg1", (3, 3))
register("likely", "arg0", (1, 1))
register("reinterpret", "dtype", (1, 1))
register("call_extern", "dtype", (1, None))
register("call_pure_extern", "dtype", (1, None))
register("call_intrin", "dtype", (1, None))
register("call_llvm_intrin", "dtype", (1, None))
register("call_llvm_pure_intrin", "dtype", (1, None))
register("call_packed", "int32", (1, None), name="tir.tvm_call_packed", aliases=("tvm_call_packed",))
register("call_cpacked", "int32", (1, None), name="tir.tvm_call_cpacked", aliases=("tvm_call_cpacked",))
# the packed-call ABI after LowerTVMBuiltin: (name, stack of arguments, begin, end)
register("call_packed_lowered", "int32", (4, 5), name="tir.tvm_call_packed_lowered",
         aliases=("tvm_call_packed_lowered",))
register("call_cpacked_lowered", "int32", (4, 5), name="tir.tvm_call_cpacked_lowered",
         aliases=("tvm_call_cpacked_lowered",))

# TVM 0.27's builtins and intrinsics: script name, result, fewest and most arguments (- for any),
# then the values of the last arguments a call may leave out (TVM's function fills them in)
_BUILTINS = """
fma                            arg0       3 3
# fixed-point multiplication of TFLite-style quantized kernels (see runtime/tir_values.py)
q_multiply_shift               arg0       4 4
q_multiply_shift_per_axis      arg0       7 7
# the packed-call ABI: stacks and structs of arguments
tvm_stack_alloca               handle     2 2
tvm_stack_make_shape           handle     0 -
tvm_stack_make_array           handle     6 6
tvm_struct_get                 dtype_last 3 3
tvm_struct_set                 int32      4 4
tvm_throw_last_error           void       0 0
tvm_tuple                      void       0 -
tvm_thread_invariant           arg0       1 1
lookup_param                   handle     1 1
# tensor-core fragments (wmma) and GPU synchronisation, as CUDA code generators read them
tvm_fill_fragment              handle     6 6
tvm_load_matrix_sync           handle     8 8
tvm_store_matrix_sync          handle     8 8
tvm_mma_sync                   handle     8 8
tvm_bmma_sync                  handle     8 8
tvm_warp_shuffle_xor           arg1       5 5
tvm_global_barrier_kinit       void       0 0
thread_return                  void       0 0
tvm_kernel_replace_point       void       0 0
# vectors: the scalable-vector factor of the target (SVE, RVV), predicated accesses
vscale                         int32      0 0
get_active_lane_mask           dtype      2 2
masked_load                    dtype      3 -  # (buffer, indices..., mask)
masked_store                   void       4 -  # (buffer, value, indices..., mask)
vectorcombine                  dtype      2 2
dp4a                           dtype      2 3  # (printed with its dtype first; read with or without)
# runtime services: workspaces, printing, pointer arithmetic, the Relax VM's lists
TVMBackendAllocWorkspace       handle     5 5
TVMBackendFreeWorkspace        int32      3 3
print_buffer                   void       5 -
handle_add_byte_offset         handle     2 2
ptr_byte_offset                handle     3 3
ignore_loop_partition          bool       1 1
anylist_getitem                handle     2 2
anylist_resetitem              int32      2 2
anylist_setitem_call_packed    int32      3 -
anylist_setitem_call_cpacked   int32      3 -
# TVM 0.27's Apache-compatible spellings of two PTX instructions (its s_tir passes write them):
# ldmatrix(trans, num, type, local_ptr, local_offset, smem_ptr, smem_offset) and
# mma(shape, a_layout, b_layout, a_type, b_type, c_type, a, a_off, b, b_off, c, c_off, saturate)
ptx_legacy.ldmatrix            void       7 7
ptx_legacy.mma                 void       13 14
# what TVM's s_tir passes InjectPTXAsyncCopy / InjectPTXLDG32 write: a raw cp.async of elements of
# the call's dtype (dst, dst_offset, src, src_offset, bytes[, predicate: else zeros]) and a guarded
# 32-bit global load
s_tir.cp_async_raw             dtype      5 6
s_tir.ldg32                    arg0       4 4
# TVM's asynchronous DMA builtins (LowerAsyncDMA writes them): dma_copy(queue, dst, src, bytes,
# bypass_cache), dma_wait(queue, in_flight), dma_start_group(queue), dma_end_group(queue)
dma_copy                       int32      5 5
dma_wait                       int32      2 2
dma_start_group                int32      1 1
dma_end_group                  int32      1 1
# backends: the Metal and WebGPU namespaces, and the thread-set annotations of TVM's analyses
metal.make_filled_simdgroup_matrix void   5 5  8 8
metal.simdgroup_load           void       7 7  8 8 False
metal.simdgroup_store          void       7 7  8 8 False
metal.simdgroup_multiply_accumulate void  8 8
metal.simd_shuffle             arg0       2 2
metal.simd_shuffle_up          arg0       2 2
metal.simd_shuffle_down        arg0       2 2
webgpu.subgroup_shuffle        arg0       2 2
webgpu.subgroup_shuffle_up     arg0       2 2
webgpu.subgroup_shuffle_down   arg0       2 2
filter                         bool       2 2
# NVSHMEM: one-sided copies between the GPUs of a job, signals and barriers
nvshmem.my_pe                  int32      0 0
nvshmem.n_pes                  int32      0 0
nvshmem.getmem_nbi             void       4 4
nvshmem.getmem_nbi.warp        void       4 4
nvshmem.getmem_nbi.block       void       4 4
nvshmem.putmem_nbi             void       4 4
nvshmem.putmem_nbi.warp        void       4 4
nvshmem.putmem_nbi.block       void       4 4
nvshmem.putmem_signal_nbi      void       7 7
nvshmem.putmem_signal_nbi.warp void       7 7
nvshmem.putmem_signal_nbi.block void      7 7
nvshmem.signal_op              void       4 4
nvshmem.wait_until             void       4 4  uint64_t
nvshmem.quiet                  void       0 0
nvshmem.fence                  void       0 0
nvshmem.barrier_all            void       0 0
selector                       arg0       2 2
# Metal's cooperative tensors: load/store (d, index, ptr, stride, rows, cols, transpose, M, N, K,
# role), multiply_accumulate (d, index, a, index, b, index, c, index, M, N, K, transpose_a/b)
cooperative_tensor_fill        void       5 5
cooperative_tensor_load        void       11 11  False 0 0 0 0
cooperative_tensor_store       void       11 11  False 0 0 0 0
cooperative_tensor_multiply_accumulate void 13 13  False False
"""
for _row in _BUILTINS.splitlines():
    _fields = _row.split("#")[0].split()
    if _fields:
        _n, _result, _lo, _hi, *_defaults = _fields
        register(_n, _result, (int(_lo), None if _hi == "-" else int(_hi)),
                 defaults=tuple(_d == "True" if _d in ("True", "False") else int(_d) if _d.isdigit() else _d
                                for _d in _defaults))

register("call_ffi_kernel", "int32", (1, None))
register("tvm_storage_sync", "int32", (1, 3))
register("tvm_warp_activemask", "uint32", (0, 0))
register("tvm_warp_shuffle", "arg1", (5, 5))
register("tvm_warp_shuffle_up", "arg1", (5, 5))
register("tvm_warp_shuffle_down", "arg1", (5, 5))
register("tvm_thread_allreduce", "handle", (1, None))
register("address_of", "handle", (1, 1))
register("ret", "arg0", (1, 1))
register("max_value", "dtype", (0, 0))
register("min_value", "dtype", (0, 0))
register("infinity", "dtype", (0, 0))
register("assume", "bool", (1, 1))
register("undef", "int32", (0, 0))  # an arbitrary int32, TVM's ``T.undef()``
register("isnullptr", "bool", (1, 1))
# loop control: the statements ``T.break_loop()`` / ``T.continue_loop()`` (Python's ``break`` /
# ``continue`` read as them); TVM 0.27 prints them as these calls
register("break_loop", "void", (0, 0))
register("continue_loop", "void", (0, 0))
register("type_annotation", "dtype", (0, 0))
register("tvm_access_ptr", "handle", (5, 5))
register("ptx_ldmatrix", "void", (7, 7))
register("mma_store", "void", (6, 6))
register("vectorlow", "dtype", (1, 1))
register("vectorhigh", "dtype", (1, 1))
# TVM 0.27's cp.async groups, printed as T.ptx.cp with the instruction's modifiers as strings:
# T.ptx.cp("async", "commit_group", "") and T.ptx.cp(n, "async", "wait_group", "")
PTX_CP = {("async", "commit_group", ""): "tir.ptx.cp_async_commit_group",
          ("async", "wait_group", ""): "tir.ptx.cp_async_wait_group"}
register("ptx.cp", "void", (3, 3), name="tir.ptx.cp_async_commit_group")
register("ptx.cp", "void", (4, 4), name="tir.ptx.cp_async_wait_group")
# CUDA's warp intrinsics, what LowerIntrin makes of the tvm_warp_* builtins for a cuda target
for _n in ("shfl_sync", "shfl_up_sync", "shfl_down_sync", "shfl_xor_sync"):
    register(f"cuda.__{_n}", "arg1", (4, 4))
register("cuda.__activemask", "uint32", (0, 0))
# the warp-fragment fill and store of TVM's PTX tensor intrinsics (T.ptx_legacy.mma's accumulators):
# mma_fill_legacy(local_size, local_ptr, offset), mma_store_legacy(m, n, dst_ptr, local_ptr, offset, stride)
register("cuda.mma_fill_legacy", "void", (3, 3), name="tir.mma_fill_legacy")
register("cuda.mma_store_legacy", "void", (6, 6), name="tir.mma_store_legacy")
register("start_profile_intrinsic", "void", (1, 1))
register("end_profile_intrinsic", "void", (1, 1))


LOOP_CONTROL = {"tir.break_loop": "break", "tir.continue_loop": "continue"}


def loop_control(e: object) -> str | None:
    """``"break"`` / ``"continue"`` when ``e`` is a call of ``tir.break_loop`` /
    ``tir.continue_loop``, else None."""
    op = getattr(e, "op", None)
    return LOOP_CONTROL.get(op.name) if isinstance(op, Op) else None


def lookup_script_name(script_name: str) -> OpInfo | None:
    return _BY_SCRIPT_NAME.get(script_name)


def is_namespace(script_name: str) -> bool:
    """Whether ``T.<script_name>`` holds operators (``T.ptx_legacy`` of ``T.ptx_legacy.mma``)."""
    return any(name.startswith(script_name + ".") for name in _BY_SCRIPT_NAME)


def info_of(op: Op) -> OpInfo:
    info = _OPS.get(op.name)
    if info is None:  # an operator we do not know prints under its own short name
        short = op.name.split(".", 1)[-1]
        info = OpInfo(op.name, short, "dtype", (0, None))
    return info


def get_op(name: str) -> Op:
    """The one ``Op`` object for an operator name (``"tir.exp"``)."""
    op = _INTERNED.get(name)
    if op is None:
        op = _INTERNED[name] = Op(name)
    return op


def script_names() -> list[str]:
    return sorted(_BY_SCRIPT_NAME)


def result_dtype(info: OpInfo, args: tuple, explicit: DataType | None) -> DataType:
    """The result type of a call of ``info`` on ``args`` (``explicit``: the dtype argument)."""
    rule = info.result
    if rule in ("dtype", "dtype_last"):
        if explicit is None:
            raise TVMSError(f"T.{info.script_name} needs the result data type as its first argument")
        return explicit
    if rule in ("arg0", "arg1"):
        return args[int(rule[3])].dtype
    return DataType(rule)


# tir op name -> LLVM intrinsic, for float arguments: what LowerIntrin writes for the llvm target
# (lowering/tir/lower_intrin.py) and what the reference executor reads back (runtime/tir_values.py)
LLVM_INTRINSICS = {
    "tir.exp": "llvm.exp", "tir.exp2": "llvm.exp2", "tir.log": "llvm.log", "tir.log2": "llvm.log2",
    "tir.log10": "llvm.log10", "tir.sqrt": "llvm.sqrt", "tir.floor": "llvm.floor",
    "tir.ceil": "llvm.ceil", "tir.trunc": "llvm.trunc", "tir.fabs": "llvm.fabs",
    "tir.round": "llvm.nearbyint", "tir.nearbyint": "llvm.nearbyint", "tir.pow": "llvm.pow",
    "tir.sin": "llvm.sin", "tir.cos": "llvm.cos", "tir.copysign": "llvm.copysign",
    "tir.fma": "llvm.fmuladd",
}
