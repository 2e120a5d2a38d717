"""CUDA C for the kernels of a lowered module, as TVM 0.27's CUDA code generator writes it, and the
cuda target's code generator ``codegen_cuda`` (CUDA C compiled by NVRTC).

The input is the module the cuda row's ``lower`` returns (``lower_for_cuda``: TVM's
``SplitHostDevice`` stage with the device passes run on its kernels, ``finalize_kernels``), rendered
as it is: the kernels (``calling_conv`` 2) become ``extern "C" __global__`` functions with
``__launch_bounds__`` of their block size (and the launch bounds they set, or ``__maxnreg__``:
``tir/gpu/kernel_launch_bounds.py``); ``T.launch_thread`` variables read ``blockIdx.x`` and
``threadIdx.x``; ``shared``/``shared.dyn``/``local`` allocations become ``__shared__``/``extern
__shared__``/register arrays; vectors use CUDA's vector types (``float4``, ``half2``,
``nv_bfloat162``), lane by lane where CUDA has no operator for them; the calls LowerIntrin made
(``T.call_pure_extern("float32", "expf", x)``, ``T.cuda.__shfl_down_sync(...)``) are C calls.
A floor division or an intrinsic that LowerIntrin did not lower is refused. The source starts
with TVM's preamble for the features it uses (``cuda_preamble``). CUDA's type names are in
``cuda_types``, the tensor-core (WMMA) fragments and calls in ``cuda_wmma``, the PTX tensor-core
instructions (``mma.sync``, ``ldmatrix``) in ``cuda_ptx``, TVM 0.27's PTX dialect (``T.ptx.*``) in
``cuda_ptx_dialect``, the asynchronous copies (``cp.async``) in
``cuda_async``, the ``T.cuda.*`` device intrinsics in ``cuda_intrinsics``. A ``T.TensorMap()``
parameter (a TMA descriptor the host encodes) is ``const __grid_constant__ CUtensorMap``, passed by
value; a thread block cluster (``clusterCtaIdx``) is refused: tvms's runtime does not launch one.
"""
from __future__ import annotations

from typing import Any

from ...ir import expr as E
from ...ir import op as op_registry
from ...ir import stmt as S
from ...ir.dtype import DataType
from ...ir.errors import TVMSError
from ...ir.function import PrimFunc
from ...ir import ptx
from ...ir.ptx import not_compiled
from ...ir.tile_primitive import refuse_tile_primitives
from ...ir.registry import get_global_func
from ...ir.visitor import collect, walk
from ..tir.gpu.kernel_launch_bounds import launch_bounds_text
from .c_source import CSource
from .cuda_artifact import CudaArtifact, CudaKernel
from .cuda_async import CP_ASYNC, AsyncCopies
from .cuda_intrinsics import CudaIntrinsics
from .cuda_preamble import preamble
from .cuda_ptx import PTX_CALLS, PtxTensorCore
from .cuda_ptx_dialect import PtxDialect
from .cuda_types import CudaTypes, components
from .cuda_wmma import WMMA_CALLS, TensorCoreFragments

KERNEL_LAUNCH = 2  # calling_conv of a kernel (TVM's kDeviceKernelLaunch)
DEFAULT_ARCH = "sm_80"
UINT32 = DataType("uint32")

_THREAD_AXES = ("threadIdx.x", "threadIdx.y", "threadIdx.z")
_LAUNCH_AXES = (*_THREAD_AXES, "blockIdx.x", "blockIdx.y", "blockIdx.z")


class CudaSource(CudaTypes, TensorCoreFragments, PtxTensorCore, PtxDialect, AsyncCopies, CudaIntrinsics, CSource):
    """Renders kernels into one CUDA source; ``tags`` collects the preamble sections it needs."""

    restrict = "__restrict__"
    target_name = "cuda"

    def __init__(self) -> None:
        super().__init__()
        self.tags: set[str] = set()
        self.helpers: dict[str, str] = {}  # (cp.async's and T.cuda.*'s, by name: cuda_async)

    def storage_scope(self, scope: str) -> str:
        if scope == "global":
            raise TVMSError("a kernel cannot allocate global memory: pass every global array to the "
                            "function as a parameter")
        # (a "warp" buffer LowerWarpMemory leaves, a PTX fragment only T.ptx_legacy calls touch,
        # is each thread's registers: an array of its own, as TVM prints it; s_AllocBuffer refuses
        # one read or written element by element, whose lanes would not see each other's values)
        return {"shared": "__shared__ ", "shared.dyn": "extern __shared__ "}.get(scope, "")

    def gathered(self, dtype: DataType, values: list[str]) -> str:
        if dtype.bits == 8 and dtype.is_integer and dtype.lanes not in (2, 3):
            return "|".join(f"((0x000000ff << {i * 8}) & ({v} << {i * 8}))" for i, v in enumerate(values))
        if dtype.lanes > 4:  # (make_uint4 of 8 halves would not compile: TVM never reaches this)
            return self.lanewise(dtype, lambda: values)
        return f"{self.vector_constructor(dtype)}({','.join(values)})"

    def lanewise(self, dtype: DataType, lane_value) -> str:
        """A vector temporary whose lane i is ``lane_value(i)``, set in a scope of its own."""
        result = self.names.fresh("_")
        self.line(f"{self.c_type(dtype)} {result};")
        scope = self.begin_scope()
        values = lane_value()
        for i, text in enumerate(values):
            self.store_lane(result, dtype, i, text)
        self.end_scope(scope)
        return result

    def vector_binary(self, op: str, dtype: DataType, a: Any, b: Any) -> str:
        def lanes() -> list[str]:
            va, vb = self.ssa_id(self.expr(a), a.dtype), self.ssa_id(self.expr(b), b.dtype)
            pairs = [(self.lane(va, a.dtype, i), self.lane(vb, b.dtype, i)) for i in range(dtype.lanes)]
            if op[0].isalpha():
                return [f"{op}({x}, {y})" for x, y in pairs]
            return [f"({x}{op}{y})" for x, y in pairs]
        return self.lanewise(dtype, lanes)

    def e_Cast(self, e: E.Cast) -> str:
        src, dst = e.value.dtype, e.dtype
        if src.lanes == 1:
            return super().e_Cast(e)
        result = self.names.fresh("_")  # (TVM writes vector casts lane by lane, without a scope)
        self.line(f"{self.c_type(dst)} {result};")
        value = self.ssa_id(self.expr(e.value), src)
        elem = self.c_type(dst.element_of)
        for i in range(src.lanes):
            self.store_lane(result, dst, i, f"({elem})({self.lane(value, src, i)})")
        return result

    def e_Ramp(self, e: E.Ramp) -> str:
        if e.lanes <= 4:
            return "make_" + super().e_Ramp(e)

        def lanes() -> list[str]:
            base = self.ssa_id(self.expr(e.base), e.base.dtype)
            stride = self.ssa_id(self.expr(e.stride), e.stride.dtype)
            return [f"({base})+({stride}*{i})" for i in range(e.lanes)]
        return self.lanewise(e.dtype, lanes)

    def e_Broadcast(self, e: E.Broadcast) -> str:
        dt, lanes = e.dtype, e.lanes
        if dt.bits == 8 and dt.is_integer and lanes == 4 and isinstance(e.value, E.IntImm):
            byte = e.value.value & 0xFF
            return f"({'uint' if dt.is_uint else 'int'}){byte << 24 | byte << 16 | byte << 8 | byte}"
        half = dt.code == "float" and dt.bits == 16
        if (half or dt.code == "bfloat") and lanes > 4:
            v = self.expr(e.value)
            pack = "__pack_half2" if half else "__pack_nv_bfloat162"
            return f"{self.vector_constructor(dt)}({', '.join([f'{pack}({v}, {v})'] * (lanes // 2))})"
        if components(self.c_type(dt)) != lanes:
            # (a type holding two or four lanes per component, int32x8 as longlong4, int8x8 as
            # int2: its constructor takes the components, so the lanes are set one by one)
            return self.lanewise(dt, lambda: [self.ssa_id(self.expr(e.value), e.value.dtype)] * lanes)
        v = self.expr(e.value)
        return f"{self.vector_constructor(dt)}({', '.join([v] * lanes)})"

    def e_Select(self, e: E.Select) -> str:
        if e.dtype.lanes == 1:
            return super().e_Select(e)
        result = self.names.fresh("_")
        self.line(f"{self.c_type(e.dtype)} {result};")
        cond = self.ssa_id(self.expr(e.condition), e.dtype)
        true = self.ssa_id(self.expr(e.true_value), e.dtype)
        false = self.ssa_id(self.expr(e.false_value), e.dtype)
        mask = DataType(f"uint16x{e.dtype.lanes}")  # (a bool vector is held as ushort lanes)
        for i in range(e.dtype.lanes):
            item = f"(bool({self.lane(cond, mask, i)})?{self.lane(true, e.dtype, i)}:{self.lane(false, e.dtype, i)})"
            self.store_lane(result, e.dtype, i, item)
        return result

    def volatile_load(self, ref: str, e: E.BufferLoad) -> str:
        elem = e.dtype.element_of
        if e.buffer.data in self.volatile and (elem.code == "bfloat" or (elem.code == "float" and elem.bits == 16)):
            return f"({self.c_type(e.dtype)})({ref})"
        return ref

    # ------------------------------------------------------------ calls
    def call_extern(self, dtype: DataType, name: str, args: tuple) -> str:
        if dtype.lanes == 1:
            return super().call_extern(dtype, name, args)
        result = self.names.fresh("_")  # (one scalar call per lane)
        self.line(f"{self.c_type(dtype)} {result};")
        values = [self.ssa_id(self.expr(a), a.dtype) for a in args]
        for i in range(dtype.lanes):
            lane_args = ", ".join(self.lane(v, a.dtype, i) for v, a in zip(values, args))
            self.store_lane(result, dtype, i, f"{name}({lane_args})")
        return result

    def intrinsic(self, e: E.Call) -> str | None:
        name = e.op.name if isinstance(e.op, E.Op) else ""
        if name.startswith("tir.cuda.__"):  # (the CUDA builtins LowerIntrin names: __shfl_down_sync...)
            if "shfl" in name:
                self.tags.add("warp_shuffle")
            return self.call_extern(e.dtype, name[len("tir.cuda."):], e.args)
        short = name[4:] if name.startswith("tir.") else name
        if short in WMMA_CALLS:
            return self.wmma(short, e.args)
        if name == CP_ASYNC:
            return self.cp_async(e)
        group = self.group_call(e)
        if group is not None:
            return group
        if name in PTX_CALLS:
            return PTX_CALLS[name](self, e.args)
        if ptx.family_of(name) is not None:
            return self.ptx_instruction(e)
        if op_registry.info_of(e.op).script_name.startswith("cuda."):
            return self.cuda_intrinsic(e)
        return None

    def storage_sync(self, call: E.Call) -> None:
        scope = call.args[0].value
        if scope in ("shared", "shared.dyn"):
            self.line("__syncthreads();")
        elif scope != "warp":
            raise TVMSError(f"the cuda code generator has no T.tvm_storage_sync({scope!r})")

    # ------------------------------------------------------------ statements
    def s_AttrStmt(self, s: S.AttrStmt) -> None:
        if s.attr_key == "thread_extent":
            iv = s.node
            if iv.thread_tag not in _LAUNCH_AXES and not iv.thread_tag.startswith(("vthread", "cthread")):
                raise TVMSError(f"the cuda code generator launches grids of blocks of threads (blockIdx, threadIdx), "
                                f"not {iv.thread_tag} (thread block clusters: their launch is not in tvms's CUDA "
                                f"runtime, nor are multicast copies)")
            if iv.var not in self.ids:  # blockIdx.x is an unsigned register: cast it to the index type
                self.ids[iv.var] = self.cast_text(iv.thread_tag, UINT32, iv.var.dtype)
        elif s.attr_key in ("fragment_shape", "fragment_layout"):
            self.fragment_info(s.node)[s.attr_key] = s.value.value
        elif s.attr_key == "async_commit_queue_scope":
            S.async_queue(s, "the cuda code generator")
            self.stmt(s.body)
            return self.line(self.commit_group() + ";")
        elif s.attr_key == "async_wait_queue_scope":
            count, body = S.async_wait(s, "the cuda code generator")
            self.line(self.wait_group(count) + ";")
            return self.stmt(body)
        elif s.attr_key in ("pragma_unroll", "disable_unroll"):
            count = s.value.value if isinstance(s.value, E.IntImm) else 1
            unroll_one = s.attr_key == "disable_unroll"
            self.line("#pragma unroll 1" if unroll_one else "#pragma unroll" + (f" {count}" if count != 1 else ""))
        self.stmt(s.body)

    def loop_pragma(self, s: S.For) -> None:
        if "disable_unroll" in s.annotations:
            self.line("#pragma unroll 1")
        elif s.kind == "unroll":
            self.line("#pragma unroll")
        elif "pragma_unroll" in s.annotations:
            count = s.annotations["pragma_unroll"]
            count = getattr(count, "value", count)
            self.line("#pragma unroll" + (f" {count}" if isinstance(count, int) and not isinstance(count, bool) else ""))

    def s_AllocBuffer(self, s: S.AllocBuffer) -> None:
        buf = s.buffer
        scope = buf.scope
        if scope == "warp" and any(isinstance(n, (E.BufferLoad, S.BufferStore)) and n.buffer.data is buf.data
                                   for n in walk(s.body)):
            raise TVMSError(f"the warp buffer {buf.name!r} is accessed element by element in CUDA code: "
                            f"LowerWarpMemory lowers such a buffer to registers and shuffles only where no other "
                            f"warp buffer's scope encloses it (as TVM 0.27)")
        vid = self.new_id(buf.data, self.allocation_name(buf.name) + "_ptr")
        align = buf.data_alignment
        align_ann = s.annotations.get("tir.buffer_data_alignment")
        if isinstance(align_ann, (int, E.IntImm)):
            align = getattr(align_ann, "value", align_ann)
        if scope.startswith("wmma."):
            prefix, elem_type = "", self.fragment_type(buf, scope)
        else:
            prefix, elem_type = self.storage_scope(scope), self.c_type(buf.dtype)
            if align > 0:
                prefix += f"__align__({align}) " if scope == "shared.dyn" else f"alignas({align}) "
        if scope == "shared.dyn":
            self.line(f"{prefix}{elem_type} {vid}[];")
        else:
            size = 1
            for dim in buf.shape:
                if not isinstance(dim, E.IntImm):
                    raise TVMSError(f"allocation {buf.name!r} has a size that is not a constant ({dim}); "
                                    "a kernel's arrays have constant sizes (use shared.dyn for dynamic shared memory)")
                size *= dim.value
            if scope.startswith("wmma."):  # (one fragment holds a whole tile)
                rows, cols = self.fragment_tile(buf, scope)
                size //= rows * cols
            if size <= 0:
                raise TVMSError(f"allocation {buf.name!r} has no elements")
            self.line(f"{prefix}{elem_type} {vid}[{size}];")
        self.handle_type[buf.data] = buf.dtype
        if s.annotations.get("tir.volatile"):
            self.volatile.add(buf.data)
        self.stmt(s.body)

    def allocation_name(self, name: str) -> str:
        """The name TVM gave an array that TVM's printer showed as ``name``: the printer tells
        two arrays named t0 apart as t0 and t0_1, where TVM's code names them t0_ptr, t0_ptr_1."""
        stem, _, number = name.rpartition("_")
        original = stem if number.isdigit() and stem in self.allocated else name
        self.allocated.add(original)
        return original

    # ------------------------------------------------------------ functions
    def signature(self, name: str, func: PrimFunc) -> str:
        self.begin_function()
        self.allocated: set[str] = set()  # the names of the function's arrays
        self.fragments: dict = {}  # data Var or name -> {"fragment_shape": "16, 16, 16", ...}
        params = []
        noalias = bool(func.attrs.get("tir.noalias"))
        for var in func.params:
            ann = var.type_annotation
            tensor_map = E.is_tensor_map(var)  # (passed by value, not a pointer)
            pointer = var.dtype.is_handle and not tensor_map
            text = self.pointer_type(var) + (f" {self.restrict}" if noalias and pointer else "")
            params.append(f"{text} {self.new_id(var)}")
            if isinstance(ann, E.PointerType) and not tensor_map:
                self.handle_type[var] = ann.element
        attrs = launch_bounds_text(launch_bounds(func), func.attrs, name)
        return f'extern "C" __global__ void{attrs} {name}({", ".join(params)})'

    def tensor_map_parameter(self, var: E.Var) -> str:
        # (the host encodes the 128-byte descriptor; the kernel takes it by value in its parameter space,
        # where cp.async.bulk.tensor reads it through a generic address)
        return "const __grid_constant__ CUtensorMap"

    def function(self, name: str, func: PrimFunc) -> None:
        self.forward.append(self.signature(name, func) + ";\n")
        self.out.append(self.signature(name, func) + " {\n")
        scope = self.begin_scope()
        self.stmt(func.body)
        self.end_scope(scope)
        self.out.append("}\n\n")

    def source(self) -> str:
        return preamble(self.tags) + self.async_helpers() + "".join(self.forward) + "".join(self.out)


def launch_bounds(func: PrimFunc) -> int | None:
    """Threads per block of a kernel (the product of its threadIdx extents, taken as the host's
    launch takes them: ``launch_extents``), None if not constant."""
    from ..tir.gpu.split_host_device import launch_extents

    threads = 1
    for tag, extent in zip(*launch_extents(func.body)):
        if tag in _THREAD_AXES:
            if not isinstance(extent, E.IntImm):
                return None
            threads *= extent.value
    return threads


def kernel_name(gvar: Any, func: PrimFunc) -> str:
    return func.attrs.get("global_symbol", gvar.name_hint)


def kernels_of(mod: Any) -> list[tuple[str, PrimFunc]]:
    """(symbol, function) of every kernel of ``mod``, in the module's order."""
    return [(kernel_name(gv, f), f) for gv, f in mod.functions.items()
            if isinstance(f, PrimFunc) and f.attrs.get("calling_conv") == KERNEL_LAUNCH]


def cuda_source(kernels: list[tuple[str, PrimFunc]]) -> str:
    """The CUDA C of the kernels (``(symbol, function)``, lowered by ``finalize_kernels``), as one
    source with TVM's preamble."""
    writer = CudaSource()
    for name, func in kernels:
        writer.function(name, func)
    return writer.source()


def target_arch(target: Any) -> str | None:
    """The target's ``-arch``, else the GPU's this process sees (a cubin for it loads on any
    driver of its CUDA major version, where PTX needs a driver as new as NVRTC), else None."""
    arch = getattr(target, "attrs", {}).get("arch")
    if arch:
        return str(arch)
    detect = get_global_func("runtime.cuda_driver.detected_arch", allow_missing=True)
    return detect() if detect is not None else None


def codegen_cuda(mod: Any, target: Any, symbol: str) -> CudaArtifact:
    """The cuda row's code generator: the kernels of ``mod`` (the lowered module) as CUDA C,
    compiled by NVRTC for the target's ``-arch`` or the GPU present (a cubin; with neither, PTX
    for ``sm_80`` that a driver compiles for its GPU), and its host function as it is."""
    from .nvrtc import compile_cuda, compile_cuda_with_ptx  # (imports cuda-python only when code is generated)

    kernels = kernels_of(mod)
    for _, func in kernels:
        refuse_tile_primitives(func, "the cuda code generator")
    hosts = [(gv, f) for gv, f in mod.functions.items()
             if isinstance(f, PrimFunc) and f.attrs.get("calling_conv") != KERNEL_LAUNCH]
    if len(hosts) > 1:
        hosts = [(gv, f) for gv, f in hosts if gv.name_hint in (symbol, "main")] or hosts
    if len(hosts) != 1:
        names = ", ".join(gv.name_hint for gv, _ in hosts) or "none"
        raise TVMSError(f"the cuda code generator expects one host function beside the kernels, found {names}")
    for call in collect(hosts[0][1].body, E.Call):  # (the host runner would fail at the first call)
        refused = not_compiled(call, "the cuda code generator does not compile (in the host function)")
        if refused is not None:
            raise refused
    source = cuda_source(kernels)
    arch = target_arch(target)
    fmt = "cubin" if arch else "ptx"
    arch = arch or DEFAULT_ARCH
    if fmt == "cubin":
        binary, ptx = compile_cuda_with_ptx(source, arch=arch)
        if arch.endswith("a"):  # (PTX for sm_90a's own features compiles for that architecture alone)
            ptx = b""
    else:
        binary = ptx = compile_cuda(source, arch=arch, fmt=fmt)
    launched = tuple(CudaKernel(name, func, tuple(func.attrs.get("tir.kernel_launch_params", ())))
                     for name, func in kernels)
    return CudaArtifact(symbol, hosts[0][1], launched, source, arch, binary, fmt, ptx)
