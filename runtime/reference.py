"""The TensorIR reference executor: runs a PrimFunc on numpy arrays, slowly and obviously.

``run_prim_func(func, A, B, C)`` writes into the arrays in place. It exists to check
transformations: run a program before and after a pass and compare.

How it works: a tiny compiler turns the body, once per function, into the source of one Python
function (``prim_func_source(func)`` shows it): loops become ``for`` loops, TensorIR variables
Python locals, buffer accesses flat-index arithmetic on numpy arrays, intrinsics calls of the
numpy functions in ``INTRINSICS``. This is about five times faster than walking closures per
element (a 128x128x128 matmul in about 3 s). ``compile_expr`` compiles one expression into a
closure over an environment dict (the Relax executor evaluates symbolic sizes with it).
No text of the program reaches that source: a variable becomes a local named ``v_`` and the
letters and digits of its name, and strings (buffer names, messages, string constants) and
non-integer constants are passed in the namespace, by reference.
Semantics follow TVM:

* every loop kind but thread binding runs serially (parallel, vectorized, unrolled);
* a GPU launch (``T.launch_thread``, ``thread_extent``, ``T.thread_binding`` loops) runs with GPU
  semantics: block after block, the threads of a block concurrently up to their barriers, warp
  shuffles lane by lane in lock-step, ``shared`` memory per block and ``local`` per thread, data
  races on shared memory and divergent barriers reported (``reference_kernel`` compiles a kernel,
  ``reference_gpu`` runs it, ``reference_ptx_dialect`` its ``T.ptx.*`` instructions); outside a launch ``tvm_storage_sync`` has nothing to wait for. An
  IRModule runs its ``main``, whose ``T.call_ffi_kernel`` (SplitHostDevice) runs its kernels;
* storage is flat: each data pointer owns a 1-D numpy array and every buffer is a view onto it
  (``T.decl_buffer(data=A.data)``, ``A.view(...)``, ``match_buffer`` alias the same memory; a
  buffer of another type than its memory views the bytes, as over merged shared memory);
* a block's ``init`` runs when every reduction iterator is at the start of its domain;
* integers are Python ints, wrapped to the dtype's width at casts and stores; floats are numpy
  scalars of the dtype (float32 arithmetic in float32);
* fresh allocations are zero-filled, but for a GPU block's shared memory, which starts undefined:
  NaN where the type has one, so that reading it before writing shows in the result.
"""
from __future__ import annotations

import math

from typing import Any, Callable

import numpy as np

from tvms.ir import expr as E
from tvms.ir import ptx, stmt as S
from tvms.ir.buffer import Buffer
from tvms.ir.dtype import DataType
from tvms.ir.deep import deep_recursion
from tvms.ir.errors import TVMSError
from tvms.ir.analysis import collect_statements, entry_vars
from tvms.ir.visitor import collect
from tvms.ir.function import PrimFunc
from tvms.ir.module import IRModule
from tvms.ir.narrow_float import legalize_narrow
from tvms.ir.scope_ids import resolve_scope_ids
from tvms.ir.tile_layout import refuse_tile_layouts
from tvms.ir.tile_primitive import refuse_tile_primitives
from tvms.ir.expr import PrimType
from tvms.ir import op as op_registry
from tvms.ir.op import loop_control

from . import reference_dma, reference_tma
from .reference_positions import negative_index, vector_element, vector_positions
from .reference_kernel import KernelCodegen
from .reference_ptx_dialect import PtxDialectCodegen
from .tir_values import INTRINSICS, cast_value, count_leading_zeros, numpy_dtype, reinterpret_bits, trunc_div, trunc_mod

__all__ = ["run_prim_func", "compile_prim_func", "prim_func_source", "compile_expr", "numpy_dtype",
           "cast_value", "INTRINSICS"]

Env = dict
Fn = Callable[[Env], Any]


def _storage_extents(buffer: Buffer) -> tuple:
    """The extents a block's buffer is allocated with: the span of its strides where it has
    constant ones (rows padded against bank conflicts), else its shape."""
    dims = (*buffer.shape, *buffer.strides)
    if buffer.uses_strides and all(isinstance(d, E.IntImm) for d in dims):
        span = 1 + sum((d.value - 1) * s.value for d, s in zip(buffer.shape, buffer.strides))
        return (E.IntImm(buffer.shape[0].dtype, span),)
    return buffer.shape


def compact_strides(shape: tuple) -> tuple:
    """Row-major element strides of ``shape``."""
    strides, acc = [], 1
    for extent in reversed(shape):
        strides.append(acc)
        acc *= extent
    return tuple(reversed(strides))


# Operators whose left operand needs no parentheses when it is one of these (same precedence,
# left-associative in Python as in TensorIR), so that a long sum is not deeply parenthesized.
_LEFT_CHAINS = {E.Add: (E.Add, E.Sub), E.Sub: (E.Add, E.Sub), E.Mul: (E.Mul,)}


class _Compiler:
    """Compiles expressions into Python source; ``expr`` wraps one in ``lambda env: ...`` where
    variables are looked up in the dict ``env`` (``_Codegen`` makes them locals instead)."""

    def __init__(self) -> None:
        self.ns: dict = {"np": np, "_cast": cast_value, "_tdiv": trunc_div, "_tmod": trunc_mod,
                         "_min": min, "_max": max}
        self.counter = 0

    def name(self, obj: Any, prefix: str = "_c") -> str:
        self.counter += 1
        key = f"{prefix}{self.counter}"
        self.ns[key] = obj
        return key

    def expr(self, e: Any) -> Fn:
        source = self.src(e)
        return eval(f"lambda env: {source}", self.ns)  # noqa: S307  (our own generated code)

    def src(self, e: Any) -> str:
        method = getattr(self, "e_" + type(e).__name__, None)
        if method is None:
            raise TVMSError(f"the reference executor cannot evaluate {type(e).__name__}")
        if getattr(e, "dtype", None) is not None and e.dtype.scalable:  # (vscale: known on the machine only)
            raise TVMSError(f"the reference executor has no scalable vectors ({e.dtype})")
        return method(e)

    def e_IntImm(self, e: E.IntImm) -> str:
        return repr(bool(e.value)) if e.dtype.is_bool else repr(int(e.value))

    def e_FloatImm(self, e: E.FloatImm) -> str:
        return self.name(cast_value(e.value, e.dtype))

    def e_StringImm(self, e: E.StringImm) -> str:
        return self.name(str(e.value), "_s")  # a program's text stays data, never source

    def e_Var(self, e: E.Var) -> str:
        return f"env[{self.name(e, '_x')}]"

    e_SizeVar = e_Var

    def _bin(self, e: E.BinaryOp, op: str) -> str:
        lhs = self.src(e.a)
        if type(e.a) in _LEFT_CHAINS.get(type(e), ()):
            lhs = lhs[1:-1]  # `(a + b) + c` as `a + b + c`: Python allows 200 nested parentheses
        return f"({lhs} {op} {self.src(e.b)})"

    def _call(self, fn: Callable, *parts: str) -> str:
        return f"{self.name(fn, '_f')}({', '.join(parts)})"

    def e_Add(self, e): return self._bin(e, "+")
    def e_Sub(self, e): return self._bin(e, "-")
    def e_Mul(self, e): return self._bin(e, "*")

    def e_Div(self, e):
        if e.dtype.is_float:
            return self._bin(e, "/")
        return self._call(trunc_div, self.src(e.a), self.src(e.b))

    def e_Mod(self, e):
        if e.dtype.is_float:
            return self._call(np.fmod, self.src(e.a), self.src(e.b))
        return self._call(trunc_mod, self.src(e.a), self.src(e.b))

    def e_FloorDiv(self, e):
        if e.dtype.is_float:
            return self._call(lambda x, y: np.floor(x / y), self.src(e.a), self.src(e.b))
        return self._bin(e, "//")

    def e_FloorMod(self, e):
        if e.dtype.is_float:
            return self._call(lambda x, y: x - np.floor(x / y) * y, self.src(e.a), self.src(e.b))
        return self._bin(e, "%")

    def e_Min(self, e):
        vec = e.dtype.lanes > 1
        return f"{'np.minimum' if vec else '_min'}({self.src(e.a)}, {self.src(e.b)})"

    def e_Max(self, e):
        vec = e.dtype.lanes > 1
        return f"{'np.maximum' if vec else '_max'}({self.src(e.a)}, {self.src(e.b)})"

    def e_EQ(self, e): return self._bin(e, "==")
    def e_NE(self, e): return self._bin(e, "!=")
    def e_LT(self, e): return self._bin(e, "<")
    def e_LE(self, e): return self._bin(e, "<=")
    def e_GT(self, e): return self._bin(e, ">")
    def e_GE(self, e): return self._bin(e, ">=")

    def e_And(self, e):
        if e.dtype.lanes > 1:
            return f"np.logical_and({self.src(e.a)}, {self.src(e.b)})"
        return f"bool({self.src(e.a)} and {self.src(e.b)})"

    def e_Or(self, e):
        if e.dtype.lanes > 1:
            return f"np.logical_or({self.src(e.a)}, {self.src(e.b)})"
        return f"bool({self.src(e.a)} or {self.src(e.b)})"

    def e_Not(self, e):
        if e.dtype.lanes > 1:
            return f"np.logical_not({self.src(e.a)})"
        return f"(not {self.src(e.a)})"

    def e_Select(self, e: E.Select) -> str:
        c, t, f = self.src(e.condition), self.src(e.true_value), self.src(e.false_value)
        if e.dtype.lanes > 1:
            return f"np.where({c}, {t}, {f})"
        return f"({t}, {f})[0 if {c} else 1]"  # both branches are evaluated, as in TVM

    def e_Cast(self, e: E.Cast) -> str:
        return f"_cast({self.src(e.value)}, {self.name(e.dtype, '_t')})"

    def e_Ramp(self, e: E.Ramp) -> str:
        lanes = self.name(np.arange(e.lanes, dtype=np.int64))
        return f"({self.src(e.base)} + ({self.src(e.stride)}) * {lanes})"

    def e_Broadcast(self, e: E.Broadcast) -> str:
        return f"np.full({int(e.lanes)}, {self.src(e.value)}, dtype={self.name(numpy_dtype(e.dtype))})"

    def e_Shuffle(self, e: E.Shuffle) -> str:
        picked = [i.value for i in e.indices]  # (one lane: a scalar, as the Shuffle's type says)
        lanes = self.name(np.array(picked, dtype=np.int64)) if len(picked) != 1 else str(picked[0])
        parts = ", ".join(f"np.atleast_1d({self.src(v)})" for v in e.vectors)
        return f"np.concatenate(({parts},))[{lanes}]"

    def e_Let(self, e: E.Let) -> str:
        return f"(env.__setitem__({self.name(e.var, '_x')}, {self.src(e.value)}), {self.src(e.body)})[1]"

    def e_BufferLoad(self, e: E.BufferLoad) -> str:
        raise TVMSError("compile_expr evaluates scalar expressions; a buffer load needs run_prim_func")

    def e_Call(self, e: E.Call) -> str:
        op = e.op
        name = getattr(op, "name", None)
        if not isinstance(op, E.Op):  # Module.f(...): the executor runs one PrimFunc at a time
            raise TVMSError(f"the reference executor runs one PrimFunc and cannot call the module's "
                            f"function {getattr(op, 'name_hint', op)!r}")
        refused = ptx.not_compiled(e, "the reference executor does not run",
                                   "the reference executor runs PTX instructions in GPU kernels only")
        if refused is not None:
            raise refused
        if name == "tir.if_then_else":  # lazy: only the chosen branch is evaluated
            c, t, f = (self.src(a) for a in e.args)
            if e.args[0].dtype.lanes > 1:  # (lane by lane, both sides only when the lanes disagree)
                return self._call(select_lanes, c, f"lambda: {t}", f"lambda: {f}")
            return f"({t} if {c} else {f})"
        if name == "tir.clz":  # (the count depends on the argument's width, not the result's)
            return self._call(count_leading_zeros, str(e.args[0].dtype.bits), self.src(e.args[0]))
        if name == "tir.reinterpret" and not (e.dtype.is_handle or e.args[0].dtype.is_handle):
            # (the bits of the argument's own type: a constant arrives as a plain Python number)
            return self._call(reinterpret_bits, self.name(e.dtype, "_t"), self.name(e.args[0].dtype, "_t"),
                              self.src(e.args[0]))
        if name == "tir.tvm_stack_alloca" and all(isinstance(a, (E.StringImm, E.IntImm)) for a in e.args[:2]):
            reference_tma.check_slot(e.args[0].value, e.args[1].value)  # (refused before the function runs)
        fn = INTRINSICS.get(name) or reference_tma.HOST_INTRINSICS.get(name)
        if fn is None:
            shown = f" (T.{op_registry.info_of(op).script_name})" if isinstance(op, E.Op) else ""
            raise TVMSError(f"the reference executor does not implement the intrinsic {name!r}{shown}")
        return self._call(fn, self.name(e.dtype, "_t"), *(self.src(a) for a in e.args))


class _SerialCodegen(_Compiler):
    """Compiles a PrimFunc body into the source of one Python function: TensorIR variables
    become Python locals, loops become ``for`` loops, buffers become (flat array, strides,
    offset) locals. Bound values come in through ``env`` (parameters, sizes, data pointers).
    GPU kernels are ``KernelCodegen``'s (``_Codegen`` below)."""

    def __init__(self) -> None:
        super().__init__()
        self.vars: dict = {}  # Var -> local name
        self.bufs: dict = {}  # Buffer -> (flat name, stride sources, offset source)
        self.lines: list[str] = []
        self.depth = 1
        self.loops = 0  # how many loops enclose the statement being compiled
        self.func_name = "prim_func"
        self.data_dtypes: dict = {}  # data Var -> the numpy dtype of the memory it points at

    def emit(self, line: str) -> None:
        self.lines.append("    " * self.depth + line)

    def block(self, body: Any) -> None:
        self.depth += 1
        before = len(self.lines)
        self.stmt(body)
        if len(self.lines) == before:
            self.emit("pass")
        self.depth -= 1

    def local(self, var: E.Var) -> str:
        name = self.vars.get(var)
        if name is None:
            self.counter += 1
            safe = "v_" + "".join(c if c.isalnum() and c.isascii() else "_" for c in var.name)
            name = self.vars[var] = f"{safe}_{self.counter}"
        return name

    def fresh(self, prefix: str) -> str:
        self.counter += 1
        return f"_{prefix}{self.counter}"

    # ---- expressions over locals
    def e_Var(self, e: E.Var) -> str:
        name = self.vars.get(e)
        if name is None:
            raise TVMSError(f"variable {e.name!r} is used before it is bound")
        return name

    e_SizeVar = e_Var

    def e_Let(self, e: E.Let) -> str:
        value = self.src(e.value)
        return f"(({self.local(e.var)} := {value}), {self.src(e.body)})[1]"

    def flat_index(self, buffer: Buffer, indices: tuple) -> tuple[str, str]:
        """(the flat array's local, the source of the flat index) of ``buffer[indices]``."""
        info = self.bufs.get(buffer)
        if info is None:
            if buffer.data in self.vars:  # a buffer over known data without a declaration
                self.bind_buffer(buffer)
                info = self.bufs[buffer]
            else:
                raise TVMSError(f"buffer {buffer.name!r} is used outside its declaration")
        flat, strides, offset = info
        terms = [] if offset == "0" else [offset]
        for index, stride in zip(indices, strides):
            src = self.src(index)
            terms.append(src if stride == "1" else f"({src}) * {stride}")
        return flat, " + ".join(terms) or "0"

    def access(self, buffer: Buffer, indices: tuple) -> str:
        """The source of ``buffer[indices]`` (an element or, with vector indices, a slice)."""
        flat, index = self.flat_index(buffer, indices)
        flat = self.array(buffer, flat)
        lanes = buffer.dtype.lanes
        if any(i.dtype.lanes > 1 for i in indices):
            positions = f"{self.name(vector_positions, '_f')}(%s, {lanes}, len({flat}), {self.name(buffer.name, '_s')})"
            if lanes > 1 or not all(isinstance(i, (E.Ramp, E.Broadcast)) or i.dtype.lanes == 1 for i in indices):
                return f"{flat}[{positions % index}]"
            # (numpy would wrap a negative lane around silently; an index of ramps is affine in the
            # lane, its ends are its extremes: two lanes are checked, every lane when one end is negative)
            ix = self.fresh("ix")
            return f"{flat}[{ix} if ({ix} := {index})[0] >= 0 <= {ix}[-1] else {positions % ix}]"
        if lanes > 1:  # (a buffer of vectors, `v: T.uint8x4`: element i is the lanes from i * lanes)
            return (f"{flat}[{self.name(vector_element, '_f')}({index}, {lanes}, len({flat}), "
                    f"{self.name(buffer.name, '_s')})]")
        # numpy would wrap a negative index around silently; past the end it raises IndexError
        i = self.fresh("i")
        return (f"{flat}[{i} if ({i} := {index}) >= 0 else "
                f"{self.name(negative_index, '_f')}({i}, {self.name(buffer.name, '_s')})]")

    def array(self, buffer: Buffer, flat: str) -> str:
        """The source of the numpy array behind ``buffer`` (bound to the local ``flat``)."""
        return flat

    def load(self, e: E.BufferLoad) -> str:
        return self.access(e.buffer, e.indices)

    def e_BufferLoad(self, e: E.BufferLoad) -> str:
        load = self.load(e)
        if e.dtype.lanes == 1 and e.buffer.dtype.is_integer:
            return f"int({load})"
        if e.dtype.lanes == 1 and e.buffer.dtype.is_bool:
            return f"bool({load})"
        return load

    def e_Call(self, e: E.Call) -> str:
        if getattr(e.op, "name", None) == "tir.call_ffi_kernel":  # a lowered host function's launch
            tags = self.name(tuple(str(t) for t in e.attrs.get("launch_params", ())))
            return self._call(_call_kernel, "env", tags, *(self.src(a) for a in e.args))
        if getattr(e.op, "name", None) in reference_dma.BUILTINS:
            return reference_dma.compile_call(self, e)
        return super().e_Call(e)

    # ---- buffers
    def value_src(self, e: Any) -> str:
        """Source for a size: a literal when constant, else a fresh local assigned now."""
        if isinstance(e, E.IntImm):
            return repr(int(e.value))
        name = self.fresh("n")
        self.emit(f"{name} = {self.src(e)}")
        return name

    def bind_buffer(self, buffer: Buffer, strides: list | None = None, offset: str | None = None) -> None:
        flat = self.local(buffer.data)
        mine = numpy_dtype(buffer.dtype)
        if self.data_dtypes.get(buffer.data, mine) != mine:  # memory of another type (merged shared memory)
            flat, view = self.fresh("view"), flat
            self.emit(f"{flat} = {view}.view({self.name(mine)})")
        if strides is None:
            if buffer.uses_strides:
                strides = [self.value_src(s) for s in buffer.strides]
            else:
                strides, acc = [], "1"
                for extent in reversed(buffer.shape):
                    strides.append(acc)
                    ext = self.value_src(extent)
                    if acc.isdigit() and ext.isdigit():
                        acc = str(int(acc) * int(ext))
                    else:
                        name = self.fresh("n")
                        self.emit(f"{name} = {acc} * {ext}")
                        acc = name
                strides.reverse()
        if offset is None:
            eo = buffer.elem_offset
            if eo is None:
                offset = "0"
            elif isinstance(eo, E.Var) and eo not in self.vars:
                self.emit(f"{self.local(eo)} = 0")
                offset = self.local(eo)
            else:
                offset = self.value_src(eo)
        self.bufs[buffer] = (flat, strides, offset)

    def alloc(self, data: E.Var, dtype: DataType, extents: tuple) -> None:
        self.data_dtypes[data] = numpy_dtype(dtype)
        self.emit(f"{self.local(data)} = np.zeros({self.alloc_size(dtype, extents)}, "
                  f"dtype={self.name(numpy_dtype(dtype))})")

    def alloc_size(self, dtype: DataType, extents: tuple) -> str:
        return self._call(_elements, *(self.src(x) for x in extents), str(dtype.lanes))

    # ---- statements
    def stmt(self, s: Any) -> None:
        method = getattr(self, "s_" + type(s).__name__, None)
        if method is None:
            raise TVMSError(f"the reference executor cannot run {type(s).__name__}")
        method(s)

    def s_SeqStmt(self, s: S.SeqStmt) -> None:
        for x in s.seq:
            self.stmt(x)

    def s_Evaluate(self, s: S.Evaluate) -> None:
        if isinstance(s.value, E.Call) and getattr(s.value.op, "name", None) == "tir.ret":  # `return v`
            self.emit(f"return {self.src(s.value.args[0])}")
            return
        control = loop_control(s.value)
        if control is not None:  # T.break_loop() / T.continue_loop(): Python's own statements
            if not self.loops:
                raise TVMSError(f"T.{control}_loop() outside a loop")
            self.emit(control)
        elif not isinstance(s.value, (E.IntImm, E.FloatImm)):
            self.emit(self.src(s.value))

    def s_BufferStore(self, s: S.BufferStore) -> None:
        value = self.src(s.value)
        if s.buffer.dtype.is_integer and s.value.dtype.lanes == 1:
            value = f"_cast({value}, {self.name(s.buffer.dtype, '_t')})"
        self.emit(self.store(s, value))

    def store(self, s: S.BufferStore, value: str) -> str:
        """The source of a statement storing ``value`` (source) as ``s`` says."""
        return f"{self.access(s.buffer, s.indices)} = {value}"

    def s_For(self, s: S.For) -> None:
        lo, ext = self.src(s.min), self.src(s.extent)
        rng = f"range({ext})" if lo == "0" else f"range({lo}, ({lo}) + ({ext}))"
        if not s.has_trivial_step:  # (TVM's loop: i < min + extent, i += step; one not positive never ends)
            rng = f"range({lo}, ({lo}) + ({ext}), {self._call(_loop_step, self.src(s.step))})"
        self.emit(f"for {self.local(s.loop_var)} in {rng}:")  # every kind runs serially
        self.loop_body(s.body)

    def s_While(self, s: S.While) -> None:
        self.emit(f"while {self.src(s.condition)}:")
        self.loop_body(s.body)

    def loop_body(self, body: Any) -> None:
        self.loops += 1
        try:
            self.block(body)
        finally:
            self.loops -= 1

    def s_IfThenElse(self, s: S.IfThenElse) -> None:
        condition = self.src(s.condition)
        if s.condition.dtype.lanes > 1:
            condition = self._call(lanes_agree, condition)
        self.emit(f"if {condition}:")
        self.block(s.then_case)
        if s.else_case is not None:
            self.emit("else:")
            self.block(s.else_case)

    def s_LetStmt(self, s: S.LetStmt) -> None:
        value = self.src(s.value)
        self.emit(f"{self.local(s.var)} = {value}")
        self.stmt(s.body)

    def s_AssertStmt(self, s: S.AssertStmt) -> None:
        message = f"assertion failed ({s.error_kind}): " + "".join(str(m) for m in s.message)
        self.emit(f"if not ({self.src(s.condition)}):")
        self.depth += 1
        self.emit(f"raise {self.name(TVMSError, '_E')}({self.name(message, '_s')})")
        self.depth -= 1
        self.stmt(s.body)

    def s_AttrStmt(self, s: S.AttrStmt) -> None:
        self.stmt(s.body)

    def s_Allocate(self, s: S.Allocate) -> None:
        self.alloc(s.buffer_var, s.dtype, s.extents)
        self.stmt(s.body)

    def s_AllocBuffer(self, s: S.AllocBuffer) -> None:
        self.alloc(s.buffer.data, s.buffer.dtype, s.buffer.shape)
        self.bind_buffer(s.buffer)
        self.stmt(s.body)

    def s_DeclBuffer(self, s: S.DeclBuffer) -> None:
        if s.buffer.data not in self.vars:
            raise TVMSError(f"T.decl_buffer {s.buffer.name!r}: its data {s.buffer.data.name!r} "
                            f"is not allocated")
        self.bind_buffer(s.buffer)
        self.stmt(s.body)

    def s_Block(self, s: S.Block) -> None:  # a block outside a realize (a root block)
        self.s_BlockRealize(S.BlockRealize((), E.IntImm(DataType("bool"), 1), s))

    def s_BlockRealize(self, s: S.BlockRealize) -> None:
        block = s.block
        pred = s.predicate
        guarded = not (isinstance(pred, E.IntImm) and pred.value)
        if guarded:
            self.emit(f"if {self.src(pred)}:")
            self.depth += 1
        values = [self.src(v) for v in s.iter_values]
        for iv, value in zip(block.iter_vars, values):
            self.emit(f"{self.local(iv.var)} = {value}")
        for b in block.alloc_buffers:
            self.alloc(b.data, b.dtype, _storage_extents(b))
            self.bind_buffer(b)
        for m in block.match_buffers:
            self.match_buffer(m)
        if block.init is not None:
            checks = [f"{self.local(iv.var)} == {self.src(iv.dom.min) if iv.dom is not None else '0'}"
                      for iv in block.iter_vars if iv.iter_type == E.COMM_REDUCE]
            if checks:
                self.emit(f"if {' and '.join(checks)}:")
                self.block(block.init)
            else:
                self.stmt(block.init)
        before = len(self.lines)
        self.stmt(block.body)
        if len(self.lines) == before:
            self.emit("pass")
        if guarded:
            self.depth -= 1

    def match_buffer(self, m: Any) -> None:
        """``T.match_buffer(A[region], shape)``: a view of the source region with A's strides."""
        buf, src = m.buffer, m.source
        if src.buffer not in self.bufs:
            raise TVMSError(f"match_buffer {buf.name!r}: the source buffer {src.buffer.name!r} is unknown")
        flat, strides, offset = self.bufs[src.buffer]
        terms = [offset] + [f"({self.src(r.min)}) * {st}" for r, st in zip(src.region, strides)]
        off = self.fresh("off")
        self.emit(f"{off} = {' + '.join(terms)}")
        ndim = len(buf.shape)
        mine = list(strides[len(strides) - ndim:]) if ndim else []
        for declared, actual in zip(buf.strides, mine):
            if isinstance(declared, E.Var):
                self.emit(f"{self.local(declared)} = {actual}")
        for declared, region in zip(buf.shape, src.region[len(src.region) - ndim:]):
            if isinstance(declared, E.Var) and declared not in self.vars:
                self.emit(f"{self.local(declared)} = {self.src(region.extent)}")
        if isinstance(buf.elem_offset, E.Var):
            self.emit(f"{self.local(buf.elem_offset)} = {off}")
        self.emit(f"{self.local(buf.data)} = {flat}")
        self.bufs[buf] = (self.local(buf.data), mine, off)

    # ---- the function
    def function(self, func: PrimFunc) -> tuple[Callable, str]:
        self.func_name = str(func.attrs.get("global_symbol", "prim_func"))
        # (the handles of buffer parameters too: a body may read one)
        for var in dict.fromkeys([*func.params, *entry_vars(func)]):
            self.emit(f"{self.local(var)} = env.get({self.name(var, '_x')})")
        for p in func.params:
            buf = func.buffer_map.get(p)
            if buf is not None:
                self.data_dtypes[buf.data] = numpy_dtype(buf.dtype)
                self.bind_buffer(buf, offset="0")
        self.stmt(func.body)
        source = "def _prim_func(env):\n" + "\n".join(self.lines) + "\n    return None\n"
        scope: dict = {}
        name = self.func_name
        try:
            code = compile(source, f"<tvms reference {name}>", "exec")
        except (SyntaxError, RecursionError, MemoryError) as e:  # Python's own nesting limits
            raise TVMSError(f"the reference executor cannot run {name!r}: it nests too deeply for "
                            f"the Python function it becomes ({getattr(e, 'msg', e)}; Python allows "
                            f"20 nested loops and 100 levels of indentation)") from None
        exec(code, self.ns, scope)  # noqa: S102  (our own generated code)
        return scope["_prim_func"], source


class _Codegen(PtxDialectCodegen, KernelCodegen, _SerialCodegen):
    """The code generator: serial code with GPU kernels (``reference_kernel``) and their PTX
    instructions (``reference_ptx_dialect``)."""


_MODULE = object()  # the key of the module being run in a function's env


def select_lanes(condition: Any, then: Callable, otherwise: Callable) -> Any:
    """A vector ``T.if_then_else``: one side when every lane picks it (the other may read out of
    bounds, as the compiled code's masked-off loads do not), else each lane's pick."""
    lanes = np.asarray(condition, dtype=bool)
    if lanes.all():
        return then()
    if not lanes.any():
        return otherwise()
    return np.where(lanes, then(), otherwise())


def lanes_agree(condition: Any) -> bool:
    """The one truth value of a vector condition of an if statement, whose lanes must agree here
    (the compiled code guards each lane's stores; the executor runs whole statements)."""
    lanes = np.asarray(condition, dtype=bool)
    if lanes.all() or not lanes.any():
        return bool(lanes.all())
    raise TVMSError("the reference executor runs an if statement whose vector condition differs "
                    "between lanes only as a whole: write the guard per element")


def _call_kernel(env: Env, tags: tuple, name: str, *args: Any) -> int:
    """``T.call_ffi_kernel(name, *args, *launch_extents, launch_params=tags)``: run the module's
    kernel ``name`` on the arguments, once the host's extents are checked against the kernel's."""
    module = env.get(_MODULE)
    if module is None or name not in module:
        raise TVMSError(f"T.call_ffi_kernel: no kernel {name!r} "
                        + ("in the module" if module is not None else "(run the module: run_prim_func(mod, ...))"))
    kernel = module[name]
    if not isinstance(kernel, PrimFunc) or kernel.buffer_map or len(args) < len(kernel.params):
        raise TVMSError(f"T.call_ffi_kernel: {name!r} is not a device kernel of {len(args)} handles or scalars "
                        f"(SplitHostDevice's form)")
    kenv: Env = {_MODULE: module}
    for p, value in zip(kernel.params, args):
        kenv[p] = value if p.dtype.is_handle else cast_value(value, p.dtype)
    launched = dict(zip(tags, args[len(kernel.params):]))
    for attr in collect_statements(kernel.body, S.AttrStmt):
        given = launched.get(getattr(attr.node, "thread_tag", None)) if attr.attr_key == "thread_extent" else None
        if given is not None:
            try:
                extent = compile_expr(attr.value)(kenv)
            except KeyError:  # (an extent of a variable the kernel binds)
                continue
            if extent != given:
                raise TVMSError(f"T.call_ffi_kernel: the host launches {name!r} with {attr.node.thread_tag} "
                                f"{given}, the kernel runs {extent}")
    compile_prim_func(kernel)(kenv)
    return 0


def _loop_step(step: int) -> int:
    if step < 1:
        raise TVMSError(f"a loop step of {step} never reaches the loop's end")
    return step


def _check_array(buf: Buffer, arr: np.ndarray) -> None:
    """``arr`` has as many dimensions as ``buf``'s array (``Buffer.array_shape``) and its element type."""
    shape = buf.array_shape
    if arr.ndim != len(shape):
        raise TVMSError(f"buffer {buf.name!r}: expected {len(shape)} dimensions, got shape {arr.shape}")
    if arr.dtype != numpy_dtype(buf.dtype):
        raise TVMSError(f"buffer {buf.name!r}: expected {buf.dtype}, got {arr.dtype}")


_EXPR_CACHE: dict[int, tuple[E.PrimExpr, Fn]] = {}


@deep_recursion
def compile_expr(e: E.PrimExpr) -> Fn:
    """A closure ``env -> value`` evaluating ``e`` (env maps Vars to values); cached per
    expression object, since the runtime checks the same declared shapes at every call."""
    hit = _EXPR_CACHE.get(id(e))
    if hit is not None and hit[0] is e:
        return hit[1]
    fn = _Compiler().expr(e)
    if len(_EXPR_CACHE) > 4096:  # the cache holds the expressions alive: keep it bounded
        _EXPR_CACHE.clear()
    _EXPR_CACHE[id(e)] = (e, fn)
    return fn


_CACHE: dict[int, tuple[PrimFunc, Fn, str]] = {}


@deep_recursion
def compile_prim_func(func: PrimFunc) -> Fn:
    """``func`` compiled into one Python function of ``env`` (cached per function object)."""
    hit = _CACHE.get(id(func))
    if hit is not None and hit[0] is func:
        return hit[1]
    refuse_tile_layouts(func, "the reference executor")
    refuse_tile_primitives(func, "the reference executor")
    # (narrow floats computed in float32, as compiled code computes them: numpy would round
    # each operation's result to the narrow type)
    fn, source = _Codegen().function(legalize_narrow(func))
    if len(_CACHE) > 512:  # the cache holds the functions alive: keep it bounded
        _CACHE.clear()
    _CACHE[id(func)] = (func, fn, source)
    return fn


def prim_func_source(func: PrimFunc) -> str:
    """The Python source the executor runs for ``func`` (for debugging)."""
    compile_prim_func(func)
    return _CACHE[id(func)][2]


def _elements(*extents: int) -> int:
    """An allocation's elements: the product of its extents (and lanes), none of them negative."""
    if any(int(x) < 0 for x in extents):
        raise TVMSError(f"an allocation of extents {', '.join(str(int(x)) for x in extents[:-1])}: a negative extent")
    return math.prod(int(x) for x in extents)


def _bind_dim(env: Env, declared: Any, actual: int, what: str) -> None:
    if isinstance(declared, E.Var) and declared not in env:
        env[declared] = actual
        return
    unknown = [v.name for v in dict.fromkeys(collect(declared, E.Var)) if v not in env]
    if unknown:  # (an extent like n * 32 - 1: n is not read from it)
        raise TVMSError(f"{what} is {declared.script()}: the reference executor binds a size from a dimension "
                        f"that is the size itself, and {', '.join(unknown)} is bound by none")
    expected = compile_expr(declared)(env)
    if expected != actual:
        raise TVMSError(f"{what}: expected {expected}, got {actual}")


def run_prim_func(func: PrimFunc | IRModule, *args: Any, **scalars: Any) -> Any:
    """Run ``func`` on numpy arrays, in place; the value it returns (``return v``) or None.
    An IRModule runs its ``main``, whose ``T.call_ffi_kernel``s (SplitHostDevice's host
    function) run the module's kernels.

    Positional arguments fill the parameters in order: an array for each buffer parameter, a
    number for each scalar parameter; scalars may also be given by name. Symbolic sizes (``n``)
    are bound from the arrays' shapes.

    >>> run_prim_func(matmul, A, B, C)   # C = A @ B
    """
    module = None
    if isinstance(func, IRModule):  # (its main; T.call_ffi_kernel runs its kernels)
        module, func = func, func["main"] if "main" in func else None
    if not isinstance(func, PrimFunc):
        raise TVMSError(f"run_prim_func takes a PrimFunc or an IRModule with a PrimFunc 'main', "
                        f"got {type(func).__name__}")
    func = resolve_scope_ids(func)  # (a tirx kernel's scope ids: its thread launches)
    params = list(func.params)
    if len(args) > len(params):
        raise TVMSError(f"{len(params)} parameters, got {len(args)} arguments")
    values: dict = dict(zip(params, args))
    by_name = {p.name: p for p in params}
    for name, value in scalars.items():
        if name not in by_name:
            raise TVMSError(f"no parameter named {name!r}")
        values[by_name[name]] = value
    env: Env = {_MODULE: module}
    copy_back = []
    # bind the buffers in two passes: sizes defined by plain Vars first, then the checks
    for p in params:
        if p not in values:
            raise TVMSError(f"no value for the parameter {p.name!r}")
        buf = func.buffer_map.get(p)
        if buf is None:
            env[p] = cast_value(values[p], p.dtype) if not p.dtype.is_handle else values[p]
            continue
        arr = values[p]
        if not isinstance(arr, np.ndarray):
            raise TVMSError(f"parameter {p.name!r} ({buf.name}) needs a numpy array")
        _check_array(buf, arr)
        for declared, actual in zip(buf.shape, arr.shape):
            if isinstance(declared, E.Var) and declared not in env:
                env[declared] = actual
    for p in params:
        buf = func.buffer_map.get(p)
        if buf is None:
            continue
        arr = values[p]
        for axis, (declared, actual) in enumerate(zip(buf.array_shape, arr.shape)):
            _bind_dim(env, declared, actual, f"buffer {buf.name!r} dimension {axis}")
        flat = arr.reshape(-1) if arr.flags.c_contiguous else None
        if flat is None or not np.shares_memory(flat, arr):
            flat = np.ascontiguousarray(arr).reshape(-1)
            copy_back.append((arr, flat))
        env[p] = flat
        env[buf.data] = flat
        strides = compact_strides(arr.shape[:len(buf.shape)])
        for declared, actual in zip(buf.strides, strides):
            _bind_dim(env, declared, actual, f"buffer {buf.name!r} strides")
        if isinstance(buf.elem_offset, E.Var):
            env[buf.elem_offset] = 0
    body = compile_prim_func(func)
    with np.errstate(all="ignore"):
        try:
            result = body(env)
            reference_dma.finish(env)
        except KeyError as err:
            if err.args and isinstance(err.args[0], E.Var):
                raise TVMSError(f"variable {err.args[0].name!r} is used before it is bound") from None
            raise
        except IndexError as err:
            raise TVMSError(f"out-of-bounds access: {err}") from None
        except ZeroDivisionError:  # (integer division or modulo by zero: undefined in TVM too)
            raise TVMSError("integer division by zero") from None
    for arr, flat in copy_back:
        arr[...] = flat.reshape(arr.shape)
    if result is not None and isinstance(func.ret_type, PrimType):
        return cast_value(result, func.ret_type.dtype)
    return result
