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
    strings: tuple[int, ...] = ()  # the positions of the arguments that must be string literals
    params: tuple[str, ...] = ()  # the names of TVM's function's parameters, to bind keywords by


_OPS: dict[str, OpInfo] = {}
_BY_SCRIPT_NAME: dict[str, OpInfo] = {}
_INTERNED: dict[str, Op] = {}


def register(script_name: str, result: str, arity: tuple[int, int | None], name: str | None = None,
             aliases: tuple = (), defaults: tuple = (), strings: tuple = (), params: tuple = ()) -> None:
    """``aliases``: other names the script reads as this operator (it prints ``script_name``)."""
    info = OpInfo(name or f"tir.{script_name}", script_name, result, arity, defaults, strings, params)
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
# then the values of the last arguments a call may leave out (TVM's function fills them in; "" is
# the empty string); ``strings=1,2``: the arguments that must be string literals; ``name=``: TVM's
# operator name where it is not "tir." and the script name
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
# TVM 0.27's CUDA device intrinsics (T.cuda.*, its tvm/backend/cuda/op.py), as it prints them: the
# IKET annotations (a name, then an optional payload); a call of CUDA source given as text
# (func_call(name, args..., source_code=..., return_type=...)); warp and block collectives
cuda.iket.mark                 void       1 2  strings=0 name=tir.cuda.iket_mark
cuda.iket.range_start          uint32     1 2  strings=0 name=tir.cuda.iket_range_start
cuda.iket.range_end            void       1 2  name=tir.cuda.iket_range_end
cuda.iket.range_push           void       1 2  strings=0 name=tir.cuda.iket_range_push
cuda.iket.range_pop            void       0 0  name=tir.cuda.iket_range_pop
cuda.iket.sentinel_token       uint32     1 1  strings=0 name=tir.cuda.iket_sentinel_token
cuda.iket.official_event       uint32     2 3  strings=1 name=tir.cuda.iket_official_event
cuda.func_call                 return_type 1 -  strings=0
cuda.warp_reduce               arg0       3 3  strings=1  # (value, "sum"/"max"/"min", width)
cuda.cta_reduce                arg0       4 4  strings=1  # (value, op, num_warps, scratch)
cuda.warp_sync                 void       0 0
cuda.cta_sync                  void       0 0
cuda.grid_sync                 void       0 0
cuda.cluster_sync              void       0 0
cuda.warpgroup_sync            void       1 1
cuda.thread_fence              void       0 0
cuda.syncthreads_and           int64      1 1
cuda.syncthreads_or            int64      1 1
cuda.any_sync                  int32      2 2
cuda.ballot_sync               uint32     2 2
cuda.reduce_add_sync_u32       uint32     2 2
cuda.reduce_min_sync_u32       uint32     2 2
cuda.elect_sync                uint32     0 0
cuda.thread_rank               int32      0 0
cuda.mov_sreg                  int_arg0   2 2  strings=1  # (32 or 64 bits, "clusterid.x")
cuda.clock64                   uint64     0 0
cuda.nano_sleep                void       1 1
cuda.printf                    void       1 -  strings=0
cuda.trap_when_assert_failed   void       1 1
# waits: wait_until(dst, ptr, predicate, scope, space, ptx_type, backoff_ns); on an mbarrier (bar, phase)
cuda.wait_until                void       3 7  gpu global "" 0  strings=3,4,5
cuda.mbarrier_wait             void       2 2
cuda.mbarrier_wait_acquire_cluster void   2 2
# memory: atomics (pointer, values...), __ldg (addr, "dtype") or (dsts..., addr, dtype, "v2"/"v4", count)
cuda.atomic_add                arg1       2 2
cuda.atomic_cas                arg1       3 3
cuda.ldg                       arg1_names 2 -
cuda.cvta_generic_to_shared    uint32     1 1
cuda.smem_addr_from_uint64     uint32     1 1
cuda.sm100_2sm_leader_smem_addr uint32    1 1
cuda.get_tmem_addr             uint32     3 3
# conversions and packed float2 / bfloat162 / fp8 arithmetic (packed values travel as integers)
cuda.half2float                float32    1 1
cuda.bfloat162float            float32    1 1
cuda.float22half2              void       2 2
cuda.half8tofloat8             void       2 2
cuda.float8tohalf8             void       2 2
cuda.fdividef                  float32    2 2
cuda.uint_as_float             float32    1 1
cuda.float_as_uint             uint32     1 1
cuda.ffs_u32                   int32      1 1
cuda.make_float2               uint64     2 2
cuda.float2_x                  float32    1 1
cuda.float2_y                  float32    1 1
cuda.fmul2_rn                  uint64     2 2
cuda.fadd2_rn                  uint64     2 2
cuda.float22bfloat162_rn       uint32     2 2
cuda.float22bfloat162_rn_from_float2 uint32 1 1
cuda.bfloat1622float2          uint64     1 1
cuda.hmin2                     uint32     2 2
cuda.hmax2                     uint32     2 2
cuda.fp8x4_e4m3_from_float4    uint32     4 4
# tensor-core descriptors (as TVM prints them: its functions take most of these by keyword)
cuda.runtime_instr_desc        void       2 2
cuda.wgmma.noop_barrier        void       1 1  name=tir.cuda.wgmma_noop_barrier
cuda.wgmma.encode_matrix_descriptor void  5 5  name=tir.cuda.wgmma_encode_matrix_descriptor
cuda.tcgen05.encode_matrix_descriptor void 5 5  name=tir.cuda.tcgen05_encode_matrix_descriptor
cuda.tcgen05.encode_instr_descriptor void 14 14  strings=1,2,3 name=tir.cuda.tcgen05_encode_instr_descriptor
cuda.tcgen05.encode_instr_descriptor_block_scaled void 17 17  strings=1,2,3,4,5 name=tir.cuda.tcgen05_encode_instr_descriptor_block_scaled
cuda.mma_fill                  dtype      3 3  name=tir.mma_fill  # (local_size, local_ptr, offset)
# the profiler's timers: init(buffer, tag, write_offset, num_groups, group_id), start/end(event,
# buffer, tag, write_offset, write_stride, leader_cond), finalize(buffer, tag, offset, stride, leader)
cuda.timer_init                void       5 5  name=tir.timer_init_cuda
cuda.timer_start               void       6 6  name=tir.timer_start_cuda
cuda.timer_end                 void       6 6  name=tir.timer_end_cuda
cuda.timer_finalize            void       5 5  name=tir.timer_finalize_cuda
# TVM 0.27's Trainium (NKI) instructions (tvm/backend/trn/op.py), on buffer elements: an instruction's
# result and operands, its opcodes as strings ("add"), its flags (accumulate, reverse the operands);
# params= names the parameters of TVM's functions (a keyword argument goes where its name is)
nki.load                       void       2 2  name=tirx.nki.load params=res,data
nki.store                      void       2 2  name=tirx.nki.store params=res,data
nki.tensor_copy                void       2 2  name=tirx.nki.tensor_copy params=res,data
nki.matmul                     void       3 4  True name=tirx.nki.matmul params=res,lhs,rhs,accum
nki.activation                 void       3 5  0.0 1.0 name=tirx.nki.activation params=result,data,opcode,bias,scale
nki.activation_reduce          void       5 7  0.0 1.0 name=tirx.nki.activation_reduce params=reduce_res,act_res,data,opcode,reduce_opcode,bias,scale
nki.reciprocal                 void       2 2  name=tirx.nki.reciprocal params=result,data
nki.tensorreduce               void       4 -  name=tirx.nki.tensorreduce params=result,data,opcode,negate  # (..., axes...)
nki.tensortensor               void       4 4  name=tirx.nki.tensortensor params=result,operand0,operand1,opcode
nki.tensorscalar               void       4 5  False name=tirx.nki.tensorscalar params=result,operand0,operand1,opcode,reverse
nki.tensorscalar_reduce        void       6 7  False name=tirx.nki.tensorscalar_reduce params=reduce_res,tensorscalar_res,operand0,operand1,opcode,reduce_opcode,reverse
nki.scalar_tensor_tensor       void       6 8  False False name=tirx.nki.scalar_tensor_tensor params=result,data,operand0,operand1,opcode0,opcode1,reverse0,reverse1
nki.scalar_tensor_scalar       void       6 8  False False name=tirx.nki.scalar_tensor_scalar params=result,data,operand0,operand1,opcode0,opcode1,reverse0,reverse1
nki.memset                     void       2 2  name=tirx.nki.memset params=result,value
nki.identity                   void       2 2  name=tirx.nki.identity params=result,size
nki.affine_select              void       4 4  name=tirx.nki.affine_select params=result,pred,true_value,false_value
"""


def _table_value(field: str) -> object:
    if field in ("True", "False"):
        return field == "True"
    if field.replace(".", "", 1).isdigit():
        return float(field) if "." in field else int(field)
    return "" if field == '""' else field


for _row in _BUILTINS.splitlines():
    _fields = _row.split("#")[0].split()
    if _fields:
        _n, _result, _lo, _hi, *_rest = _fields
        _keys = dict(_f.split("=", 1) for _f in _rest if "=" in _f)
        register(_n, _result, (int(_lo), None if _hi == "-" else int(_hi)), name=_keys.get("name"),
                 defaults=tuple(_table_value(_f) for _f in _rest if "=" not in _f),
                 strings=tuple(int(i) for i in _keys["strings"].split(",")) if "strings" in _keys else (),
                 params=tuple(_keys["params"].split(",")) if "params" in _keys else ())

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
    if rule == "return_type":  # (T.cuda.func_call's return_type=, else void)
        return explicit or DataType("void")
    if rule == "int_arg0":  # T.cuda.mov_sreg(64, ...) is an int64
        bits = getattr(args[0], "value", None)
        if bits not in (32, 64):
            raise TVMSError(f"T.{info.script_name} reads a 32- or 64-bit register, not {bits}")
        return DataType(f"int{bits}")
    if rule == "arg1_names":  # T.cuda.ldg(addr, "float32") loads a float32; its vector form stores
        name = getattr(args[1], "value", None) if len(args) == 2 else None
        return DataType(name) if isinstance(name, str) else DataType("void")
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
