"""TVM 0.27's CUDA device intrinsics (``T.cuda.*``) as its CUDA code generator writes them: each call
is a call of a ``__forceinline__ __device__`` helper, ``tvm_builtin_<name>``, that wraps the CUDA
builtin (``__syncthreads()``, ``atomicCAS``, ``__cvta_generic_to_shared``, ...); the helpers are
defined after the preamble, with the cp.async ones (``cuda_async``).

* ``T.cuda.mov_sreg(bits, "reg")`` reads the special register with ``mov.u<bits>`` in inline asm,
  one helper per register (the register's name is part of the asm text);
* ``T.cuda.printf(fmt, args...)`` calls a ``__noinline__`` helper named by the number of its
  arguments and the SHA-1 of the format and the arguments' types;
* ``T.cuda.func_call(name, args..., source_code=...)`` calls ``name``, defined by ``source_code``.

``T.cuda.mbarrier_wait(bar, phase)`` (and ``..._acquire_cluster``) spin on ``mbarrier.try_wait.parity``
in an asm loop until the phase flips (a ``uint32`` barrier is already a shared-window address: the
``_raw_u32`` helper takes it as it is).

The intrinsics without a direct CUDA form here (the IKET annotations, the profiler's timers, the
tcgen05 descriptors, those needing fp8 headers, ...) are refused by name.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from ...ir import expr as E
from ...ir import op as op_registry
from ...ir.cuda_args import power_of_two, reduction, string_arg
from ...ir.errors import TVMSError


@dataclass(frozen=True)
class Helper:
    name: str
    params: str  # the C parameter list, "(float x, float y)"
    returns: str  # the C result type
    body: str  # (indented by four spaces)
    template: bool = False  # ``template <typename T>``: the pointer's element type is T
    tag: str | None = None  # the preamble section the body needs
    inline: bool = True

    def definition(self) -> str:
        prefix = "template <typename T>\n" if self.template else ""
        inline = "__forceinline__" if self.inline else "__noinline__"
        return f"\n{prefix}{inline} __device__ {self.returns} {self.name}{self.params} {{\n{self.body}\n}}\n"


def _row(op: str, params: str, returns: str, body: str, name: str | None = None, template: bool = False,
         tag: str | None = None) -> tuple[str, Helper]:
    # (TVM names a helper after its operator unless it says otherwise)
    return f"tir.cuda.{op}", Helper(name or f"tvm_builtin_cuda_{op}", params, returns, "    " + body, template, tag)


_PACK2 = "    return *reinterpret_cast<unsigned long long*>(&result);"
_UNPACK_BF2 = "    return *reinterpret_cast<unsigned int*>(&{});"
HELPERS: dict[str, Helper] = dict([
    _row("cta_sync", "()", "void", "__syncthreads();"),
    _row("warp_sync", "()", "void", "__syncwarp();"),
    _row("thread_fence", "()", "void", "__threadfence();"),
    _row("syncthreads_and", "(int predicate)", "int", "return __syncthreads_and(predicate);"),
    _row("syncthreads_or", "(int predicate)", "int", "return __syncthreads_or(predicate);"),
    _row("any_sync", "(unsigned mask, int pred)", "int", "return __any_sync(mask, pred);"),
    _row("ballot_sync", "(unsigned int mask, int pred)", "unsigned int", "return __ballot_sync(mask, pred);",
         "tvm_builtin_ballot_sync"),
    _row("reduce_add_sync_u32", "(unsigned int mask, unsigned int value)", "unsigned int",
         "return __reduce_add_sync(mask, value);", "tvm_builtin_reduce_add_sync_u32"),
    _row("reduce_min_sync_u32", "(unsigned int mask, unsigned int value)", "unsigned int",
         "return __reduce_min_sync(mask, value);", "tvm_builtin_reduce_min_sync_u32"),
    _row("elect_sync", "()", "uint32_t", "return tvm_builtin_elect_one_sync();", "tvm_builtin_elect_one_sync_op",
         tag="elect_one_sync"),
    _row("cluster_sync", "()", "void",
         'asm("barrier.cluster.arrive.aligned;");\n    asm("barrier.cluster.wait.aligned;");'),
    _row("warpgroup_sync", "(int name_bar_id)", "void", 'asm volatile("bar.sync %0, 128;" : : "r"(name_bar_id));'),
    _row("thread_rank", "()", "int",
         "namespace cg = cooperative_groups;\n    return cg::this_thread_block().thread_rank();",
         tag="cooperative_groups"),
    _row("grid_sync", "()", "void", "namespace cg = cooperative_groups;\n    cg::this_grid().sync();",
         tag="cooperative_groups"),
    _row("clock64", "()", "unsigned long long", "return clock64();", "tvm_builtin_clock64"),
    _row("nano_sleep", "(uint64_t time)", "void", "__nanosleep(time);"),
    _row("trap_when_assert_failed", "(bool cond)", "void",
         'do {\n        if (not (cond))\n            asm("trap;");\n    } while (0);'),
    _row("atomic_add", "(T* addr, T value)", "T", "return atomicAdd(addr, value);", template=True),
    _row("atomic_cas", "(T* address, T compare, T val)", "T", "return atomicCAS(address, compare, val);",
         template=True),
    _row("cvta_generic_to_shared", "(void* p)", "unsigned int", "return __cvta_generic_to_shared(p);"),
    _row("smem_addr_from_uint64", "(uint64_t cluster_addr)", "unsigned int",
         "return static_cast<unsigned int>(cluster_addr);"),
    _row("fdividef", "(float x, float y)", "float", "return __fdividef(x, y);"),
    _row("uint_as_float", "(unsigned int bits)", "float", "return __uint_as_float(bits);", "tvm_builtin_uint_as_float"),
    _row("float_as_uint", "(float x)", "unsigned int", "return __float_as_uint(x);", "tvm_builtin_float_as_uint"),
    _row("ffs_u32", "(unsigned int value)", "int", "return __ffs(value);", "tvm_builtin_ffs_u32"),
    _row("make_float2", "(float x, float y)", "unsigned long long",
         "float2 value = make_float2(x, y);\n    return *reinterpret_cast<unsigned long long*>(&value);",
         "tvm_builtin_make_float2"),
    _row("float2_x", "(unsigned long long packed)", "float",
         "float2 value = *reinterpret_cast<float2*>(&packed);\n    return value.x;", "tvm_builtin_float2_x"),
    _row("float2_y", "(unsigned long long packed)", "float",
         "float2 value = *reinterpret_cast<float2*>(&packed);\n    return value.y;", "tvm_builtin_float2_y"),
    _row("fmul2_rn", "(unsigned long long a, unsigned long long b)", "unsigned long long",
         "float2 lhs = *reinterpret_cast<float2*>(&a);\n    float2 rhs = *reinterpret_cast<float2*>(&b);\n"
         "    float2 result = __fmul2_rn(lhs, rhs);\n" + _PACK2, "tvm_builtin_fmul2_rn"),
    _row("fadd2_rn", "(unsigned long long a, unsigned long long b)", "unsigned long long",
         "float2 lhs = *reinterpret_cast<float2*>(&a);\n    float2 rhs = *reinterpret_cast<float2*>(&b);\n"
         "    float2 result = __fadd2_rn(lhs, rhs);\n" + _PACK2, "tvm_builtin_fadd2_rn"),
    _row("float22bfloat162_rn", "(float x, float y)", "unsigned int",
         "__nv_bfloat162 value = __float22bfloat162_rn(make_float2(x, y));\n" + _UNPACK_BF2.format("value"),
         "tvm_builtin_float22bfloat162_rn", tag="bf16"),
    _row("float22bfloat162_rn_from_float2", "(unsigned long long packed)", "unsigned int",
         "float2 value = *reinterpret_cast<float2*>(&packed);\n"
         "    __nv_bfloat162 result = __float22bfloat162_rn(value);\n"
         + _UNPACK_BF2.format("result"), "tvm_builtin_float22bfloat162_rn_from_float2", tag="bf16"),
    _row("bfloat1622float2", "(unsigned int packed)", "unsigned long long",
         "__nv_bfloat162 value;\n    *reinterpret_cast<unsigned int*>(&value) = packed;\n"
         "    float2 result = __bfloat1622float2(value);\n" + _PACK2, "tvm_builtin_bfloat1622float2", tag="bf16"),
    *(_row(f"h{which}2", "(unsigned int a, unsigned int b)", "unsigned int",
           "__nv_bfloat162 lhs;\n    __nv_bfloat162 rhs;\n    *reinterpret_cast<unsigned int*>(&lhs) = a;\n"
           f"    *reinterpret_cast<unsigned int*>(&rhs) = b;\n    __nv_bfloat162 result = __h{which}2(lhs, rhs);\n"
           + _UNPACK_BF2.format("result"), f"tvm_builtin_h{which}2", tag="bf16") for which in ("min", "max")),
    _row("half2float", "(half src)", "float", "return __half2float(src);", tag="fp16"),
    _row("bfloat162float", "(nv_bfloat16 src)", "float", "return __bfloat162float(src);", tag="bf16"),
    _row("float22half2", "(void* dst, void* src)", "void",
         "half2* dst_p = (half2*) dst;\n    float2* src_p = (float2*) src;\n    *dst_p = __float22half2_rn(*src_p);",
         tag="fp16"),
    _row("half8tofloat8", "(void* src_addr, void* dst_addr)", "void",
         "half2* source = (half2*) src_addr;\n    float2* dest = (float2*) dst_addr;\n"
         "    for (int i = 0; i < 4; i++) {\n        dest[i] = __half22float2(source[i]);\n    }", tag="fp16"),
    _row("float8tohalf8", "(void* src_addr, void* dst_addr)", "void",
         "float2* source = (float2*) src_addr;\n    half2* dest = (half2*) dst_addr;\n"
         "    for (int i = 0; i < 4; i++) {\n        dest[i] = __float22half2_rn(source[i]);\n    }", tag="fp16"),
    # (a wgmma shared-memory matrix descriptor: the 14-bit fields (each in 16-byte units) start
    # address at bit 0, leading byte offset at 16, stride byte offset at 32, base offset 0 at 49, and
    # the layout type at 62 of swizzle 0-3 (none, 32B, 64B, 128B); TVM fills the same bits through a
    # bitfield union, tvms with shifts)
    _row("wgmma_encode_matrix_descriptor", "(uint64_t* desc, void* addr, int ldo, int sdo, int swizzle)", "void",
         "const uint64_t layout_type = swizzle == 1 ? 3 : swizzle == 2 ? 2 : swizzle == 3 ? 1 : 0;\n"
         "    const uint64_t start = (__cvta_generic_to_shared(addr) >> 4) & 0x3FFF;\n"
         "    *desc = start | (uint64_t)(ldo & 0x3FFF) << 16 | (uint64_t)(sdo & 0x3FFF) << 32 | layout_type << 62;",
         "ptx_wgmma_encode_matrix_descriptor"),
])



def _parity_wait(scope: str, label: str, ticks: bool) -> str:
    """The asm of a loop polling ``mbarrier.try_wait.parity`` at ``scope`` (TVM's text: ``ticks`` is
    its per-try time hint of 10 ms)."""
    hint, passed = (", %2", ', "r"(ticks)') if ticks else ("", "")
    return ((f"    unsigned int ticks = 0x989680;\n" if ticks else "")
            + '    asm volatile(\n        "{\\n"\n        ".reg .pred                P1;\\n"\n'
            f'        "LAB_WAIT{label}:\\n"\n'
            f'        "mbarrier.try_wait.parity.acquire.{scope}.shared::cta.b64 P1, [%0], %1{hint};\\n"\n'
            f'        "@P1                       bra.uni DONE{label};\\n"\n'
            f'        "bra.uni                   LAB_WAIT{label};\\n"\n'
            f'        "DONE{label}:\\n"\n        "}}\\n"\n'
            f'        :: "r"(barrier_addr_int), "r"(phase){passed} : "memory");')


_TO_SHARED = "unsigned int barrier_addr_int = __cvta_generic_to_shared(barrier);\n"
HELPERS.update([
    _row("mbarrier_wait_acquire_cluster", "(void* barrier, int phase)", "void",
         _TO_SHARED + _parity_wait("cluster", "_AC", ticks=False)),
])
_MBARRIER_WAIT = {  # (by the barrier operand: a generic pointer, or a uint32 shared-window address)
    False: Helper("tvm_builtin_cuda_mbarrier_wait", "(void* barrier, int phase)", "void",
                  "    " + _TO_SHARED + _parity_wait("cta", "", ticks=True)),
    True: Helper("tvm_builtin_cuda_mbarrier_wait_raw_u32", "(unsigned int barrier, int phase)", "void",
                 "    unsigned int barrier_addr_int = barrier;\n" + _parity_wait("cta", "", ticks=True)),
}

# warp_reduce / cta_reduce: how a partial result takes in another, and the identity that pads the
# partial results of the warps beyond the block's
_REDUCTIONS = {"sum": ("val += shuffled;", "T(0)"), "max": ("val = max(val, shuffled);", "-INFINITY"),
               "min": ("val = min(val, shuffled);", "INFINITY")}

# T.cuda.ldg's C types (a scalar load through the read-only cache), and their suffixes in its name
_LDG_TYPES = {"int8": "signed char", "uint8": "unsigned char", "int16": "short", "uint16": "unsigned short",
              "int32": "int", "uint32": "unsigned int", "int64": "long long", "uint64": "unsigned long long",
              "float16": "half", "bfloat16": "nv_bfloat16", "float32": "float", "float64": "double"}


def _warp_reduce(name: str, width: int, step: str) -> str:
    """A butterfly of XOR shuffles over ``width`` lanes (every lane ends with the whole result)."""
    return (f"\ntemplate <typename T>\n__forceinline__ __device__ T {name}(T val) {{\n    #pragma unroll\n"
            f"    for (int mask = {width} >> 1; mask > 0; mask >>= 1) {{\n"
            "        T shuffled = __shfl_xor_sync(0xFFFFFFFF, val, mask);\n"
            f"        {step}\n    }}\n    return val;\n}}\n")


def _cta_reduce(name: str, warp: str, num_warps: int, identity: str) -> str:
    """Each warp reduces, lane 0 of each writes to ``scratch``, warp 0 reduces those; all read it."""
    return ("template <typename T>\n"
            f"__forceinline__ __device__ T {name}(T val, void* scratch_raw) {{\n"
            "    T* scratch = reinterpret_cast<T*>(scratch_raw);\n"
            f"    val = {warp}(val);\n"
            "    int tid = threadIdx.x + threadIdx.y * blockDim.x + threadIdx.z * blockDim.x * blockDim.y;\n"
            "    int warp_id = tid / 32;\n    int lane_id = tid % 32;\n"
            "    if (lane_id == 0) scratch[warp_id] = val;\n    __syncthreads();\n    if (warp_id == 0) {\n"
            f"        T partial = (lane_id < {num_warps}) ? scratch[lane_id] : {identity};\n"
            f"        partial = {warp}(partial);\n"
            "        if (lane_id == 0) scratch[0] = partial;\n    }\n    __syncthreads();\n    return scratch[0];\n}\n")


# the C types of printf's arguments, by data type (narrow integers and bools promote to int)
_PRINTF_TYPES = {"float32": "float", "float64": "double", "int8": "int", "int16": "int", "int32": "int",
                 "int64": "long long", "uint8": "unsigned int", "uint16": "unsigned int",
                 "uint32": "unsigned int", "uint64": "unsigned long long", "bool": "int", "handle": "void*"}


class CudaIntrinsics:
    """The ``T.cuda.*`` side of ``CudaSource``: a call becomes a call of its helper."""

    def cuda_intrinsic(self, call: E.Call) -> str:
        written = _WRITTEN.get(call.op.name)
        if written is not None:  # (the ones whose helper depends on their arguments)
            function, args = written(self, call)
        elif call.op.name in HELPERS:
            function, args = self.use_helper(HELPERS[call.op.name]), call.args
        else:
            raise TVMSError(f"the cuda code generator does not compile T.{op_registry.info_of(call.op).script_name}")
        return f"{function}({', '.join(self.expr(a) for a in args)})"

    def use_helper(self, helper: Helper) -> str:
        """The helper's name, its definition and preamble section noted for the source."""
        if helper.tag:
            self.tags.add(helper.tag)
        self.helpers.setdefault(helper.name, helper.definition())
        return helper.name

    def _mov_sreg(self, call: E.Call) -> tuple[str, tuple]:
        bits, register = call.dtype.bits, string_arg(call, 1, "the special register's name")
        constraint = "l" if bits == 64 else "r"
        body = (f"    uint{bits}_t x;\n"
                f'    asm volatile("mov.u{bits} %0, %{register};" : "={constraint}"(x));\n'
                f"    return (int{bits}_t)x;")
        name = "tvm_builtin_ptx_fetch_register_" + register.replace("::", "_").replace(".", "_")
        return self.use_helper(Helper(name, "()", f"int{bits}_t", body)), ()

    def _printf(self, call: E.Call) -> tuple[str, tuple]:
        fmt = string_arg(call, 0, "its format")
        types = [str(a.dtype) for a in call.args[1:]]
        unknown = [t for t in types if t not in _PRINTF_TYPES]
        if unknown:
            raise TVMSError(f"T.cuda.printf cannot print a {unknown[0]}")
        name = f"tvm_builtin_cuda_printf_{len(types)}_{hashlib.sha1('|'.join([fmt, *types]).encode()).hexdigest()}"
        params = ", ".join(f"{_PRINTF_TYPES[t]} arg{i}" for i, t in enumerate(types))
        passed = "".join(f", arg{i}" for i in range(len(types)))
        body = f"    printf({json.dumps(fmt)}{passed});"
        # (not inlined, as TVM writes it: printf's stack frame stays out of the kernel)
        return self.use_helper(Helper(name, f"({params})", "void", body, inline=False)), call.args[1:]

    def _reduction(self, call: E.Call) -> tuple[str, str, str]:
        op = reduction(call)
        return op, *_REDUCTIONS[op]

    def _warp_reduce(self, call: E.Call) -> tuple[str, tuple]:
        op, step, _ = self._reduction(call)
        width = power_of_two(call, 2, "width", 2, 32)
        name = f"tvm_builtin_cuda_warp_reduce_{op}_{width}"
        self.helpers.setdefault(name, _warp_reduce(name, width, step))
        return name, call.args[:1]

    def _cta_reduce(self, call: E.Call) -> tuple[str, tuple]:
        op, step, identity = self._reduction(call)
        num_warps = power_of_two(call, 2, "number of warps", 1, 32)
        warp, name = f"tvm_builtin_cuda_warp_reduce_{op}_32", f"tvm_builtin_cuda_cta_reduce_{op}_{num_warps}"
        # (TVM writes the warp's reduction into the block's helper, without a line between them)
        self.helpers.setdefault(name, _warp_reduce(warp, 32, step) + _cta_reduce(name, warp, num_warps, identity))
        return name, (call.args[0], call.args[3])

    def _ldg(self, call: E.Call) -> tuple[str, tuple]:
        if len(call.args) != 2:
            raise TVMSError("the cuda code generator does not compile T.cuda.ldg's vector form")
        dtype = string_arg(call, 1, "the loaded data type")
        if dtype not in _LDG_TYPES:
            raise TVMSError(f"T.cuda.ldg cannot load a {dtype}")
        suffix = dtype.replace("float", "f").replace("uint", "u").replace("int", "i")
        c_type = _LDG_TYPES[dtype]
        tag = {"float16": "fp16", "bfloat16": "bf16"}.get(dtype)
        body = f"    return __ldg(reinterpret_cast<const {c_type}*>(src));"
        helper = Helper(f"tvm_builtin_cuda_ldg_{suffix}", "(void* src)", c_type, body, tag=tag)
        return self.use_helper(helper), call.args[:1]

    def _mbarrier_wait(self, call: E.Call) -> tuple[str, tuple]:
        return self.use_helper(_MBARRIER_WAIT[str(call.args[0].dtype) == "uint32"]), call.args

    def _func_call(self, call: E.Call) -> tuple[str, tuple]:
        name = string_arg(call, 0, "the function's name")
        source = call.attrs.get("source_code")
        if not isinstance(source, (str, E.StringImm)):
            raise TVMSError(f"T.cuda.func_call({name!r}, ...) needs its source_code= as a string")
        self.helpers.setdefault(name, getattr(source, "value", source))
        return name, call.args[1:]


_WRITTEN = {"tir.cuda.mov_sreg": CudaIntrinsics._mov_sreg, "tir.cuda.printf": CudaIntrinsics._printf,
            "tir.cuda.func_call": CudaIntrinsics._func_call, "tir.cuda.warp_reduce": CudaIntrinsics._warp_reduce,
            "tir.cuda.cta_reduce": CudaIntrinsics._cta_reduce, "tir.cuda.ldg": CudaIntrinsics._ldg,
            "tir.cuda.mbarrier_wait": CudaIntrinsics._mbarrier_wait}

