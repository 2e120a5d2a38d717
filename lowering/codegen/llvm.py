"""LLVM IR for a lowered (flattened) PrimFunc, with llvmlite.

``codegen_llvm(func, name)`` returns the LLVM IR text of a module with one entry function
``void name(i64* slots)``: slot k holds the value of ``entry_slots(func)[k]`` (a data pointer, a
scalar parameter or a symbolic size; floats as double bits). The entry unpacks the slots and calls
the body, whose pointer parameters are ``noalias`` as TensorIR buffers are.

Loops: ``T.vectorized`` loops with a constant extent become vector instructions (the loop variable
is a vector ``min + <0, 1, ...>``; unit-stride accesses are vector loads/stores, others gather
lane by lane), falling back to a scalar loop LLVM may vectorize when the body does not fit;
``T.unroll`` loops (those UnrollLoop left: the pragma ``pragma_unroll_explicit`` 0 asked for LLVM's
unroller) carry ``llvm.loop.unroll.full`` metadata asking LLVM to unroll them (TVM's codegen
ignores the hint; one of unknown extent is refused, as TVM's UnrollLoop refuses it);
``T.parallel`` loops are outlined into a task function run by the thread pool (``llvm_parallel``).
"""
from __future__ import annotations

from typing import Any

from llvmlite import ir

from ...ir import expr as E
from ...ir import ptx, stmt as S
from ...ir.buffer import Buffer
from ...ir.dtype import DataType
from ...ir.errors import TVMSError
from ...ir.analysis import controls_loop, entry_vars
from ...ir.function import PrimFunc
from ...ir.op import loop_control
from ...ir.tile_primitive import refuse_tile_primitives
from ...ir.visitor import collect, walk
from . import llvm_parallel
from .module_calls import refuse_module_call
from . import llvm_types as T
from .llvm_intrinsics import _suffix, call_llvm_intrinsic, declare, emit_intrinsic
from .vector_stride import lane_stride
from ..tir.legalize_fixed_point import LEGALIZE as FIXED_POINT
from ..tir.unroll_loop import refuse_unknown_unroll

# calls a vector guard may hold: no memory, no side effect, lane by lane (``if T.likely(j < n)``)
PURE_CALLS = frozenset(f"tir.{name}" for name in ("likely", "bitwise_and", "bitwise_or", "bitwise_xor",
                                                  "bitwise_not", "shift_left", "shift_right"))
MAX_STACK_BYTES = 64 * 1024  # larger (or dynamic) allocations go to the heap
ALLOC_ALIGNMENT = 64  # of every buffer a kernel allocates, as of the tensors it is given
MAX_SPAN_STRIDE = 4  # lanes at most this far apart load as one span and a shuffle (span_load)
BOOL = DataType("bool")


def lane_uniform(e: Any, vector_vars: dict) -> bool:
    """Whether a vector condition is the same in every lane by its form (a broadcast of a scalar
    that no variable of a vectorized loop reaches, or logic and comparisons of such), so one
    branch may take its first lane. Why: as a mask, an all-false one, each side's loads are still
    issued, masked off, at addresses the side would read; past a buffer's start or end those can
    be unmapped pages, and a masked load there costs a microcode assist: a concatenation's copy
    ran about 20 times slower (DenseNet-121's)."""
    if isinstance(e, E.Broadcast):
        return e.value.dtype.lanes == 1 and all(vector_vars.get(v, 0) == 0 for v in collect(e.value, E.Var))
    if isinstance(e, (E.CmpOp, E.And, E.Or)):
        return lane_uniform(e.a, vector_vars) and lane_uniform(e.b, vector_vars)
    if isinstance(e, E.Not):
        return lane_uniform(e.a, vector_vars)
    return False


# slot k of an entry holds the value of entry_slots(func)[k]
entry_slots = entry_vars


def codegen_llvm(func: PrimFunc, name: str = "main") -> str:
    """The LLVM IR (text) of ``func`` as a module with the entry function ``name``."""
    refuse_tile_primitives(func, "the llvm code generator")
    return _FunctionCodegen(ir.Module(name=name)).function(func, name)


class _FunctionCodegen:
    """Emits one PrimFunc. ``env`` maps TensorIR variables to LLVM values (vectors inside a
    vectorized loop, with their lane strides in ``vector_vars``)."""

    def __init__(self, module: ir.Module) -> None:
        self.module = module
        self.builder: ir.IRBuilder = None  # type: ignore[assignment]
        self.env: dict = {}
        self.vector_vars: dict = {}
        self.mask: ir.Value | None = None  # the lanes a guarded vector store writes (and reads)
        self.in_parallel = False
        self.counter = 0
        # the enclosing loops of the current function, innermost last: (continue target, break target)
        self.loop_targets: list[tuple[ir.Block, ir.Block]] = []

    def fresh(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}.{self.counter}"

    # ------------------------------------------------------------ functions
    def function(self, func: PrimFunc, name: str) -> str:
        slots = entry_slots(func)
        body_fn = self.kernel(f"{name}.body", slots, lambda: self.stmt(func.body))
        entry = ir.Function(self.module, ir.FunctionType(ir.VoidType(), [T.PTR]), name)
        builder = ir.IRBuilder(entry.append_basic_block("entry"))
        values = [self.load_slot(builder, entry.args[0], k, var) for k, var in enumerate(slots)]
        builder.call(body_fn, values)
        builder.ret_void()
        return str(self.module)

    @staticmethod
    def load_slot(builder: ir.IRBuilder, slots: ir.Value, k: int, var: E.Var) -> ir.Value:
        slot = builder.gep(slots, [ir.Constant(T.I64, k)], source_etype=T.I64)
        if var.dtype.is_handle:
            return builder.load(slot, typ=T.PTR)
        if var.dtype.is_float:
            wide = builder.load(slot, typ=ir.DoubleType())
            return T.cast(builder, wide, DataType("float64"), var.dtype)
        raw = builder.load(slot, typ=T.I64)
        return T.cast(builder, raw, DataType("int64"), var.dtype)

    def kernel(self, name: str, params: list, emit_body, leading: tuple = ()) -> ir.Function:
        """An internal function of ``leading`` LLVM arguments then one argument per variable of
        ``params`` (pointers noalias), whose body ``emit_body`` emits with those bound."""
        types = [*(t for t, _ in leading), *(T.scalar_type(v.dtype) for v in params)]
        fn = ir.Function(self.module, ir.FunctionType(ir.VoidType(), types), name)
        fn.linkage = "internal"
        saved = (self.builder, self.env, self.vector_vars, self.loop_targets)
        self.builder = ir.IRBuilder(fn.append_basic_block("entry"))
        self.env, self.vector_vars, self.loop_targets = {}, {}, []
        args = list(fn.args)
        for (_, arg_name), arg in zip(leading, args):
            arg.name = arg_name
        for var, arg in zip(params, args[len(leading):]):
            arg.name = var.name
            if var.dtype.is_handle:
                arg.add_attribute("noalias")
            self.env[var] = arg
        emit_body(*args[:len(leading)])
        self.builder.ret_void()
        self.builder, self.env, self.vector_vars, self.loop_targets = saved
        return fn

    def entry_alloca(self, typ: ir.Type, count: int, name: str) -> ir.Value:
        """Stack memory in the function's entry block, so loops do not grow the stack."""
        entry = self.builder.function.entry_basic_block
        with self.builder.goto_block(entry):
            if entry.instructions:
                self.builder.position_before(entry.instructions[0])
            slot = self.builder.alloca(typ, size=ir.Constant(T.I64, count), name=name)
            slot.align = ALLOC_ALIGNMENT
        slot.type = T.PTR  # an opaque pointer, as everything else here (llvmlite types it)
        return slot

    # ------------------------------------------------------------ expressions
    def expr(self, e: Any) -> ir.Value:
        method = getattr(self, "e_" + type(e).__name__, None)
        if method is None:
            raise TVMSError(f"the llvm target cannot generate code for {type(e).__name__}")
        if getattr(e, "dtype", None) is not None and e.dtype.scalable:
            raise TVMSError(f"the llvm target of tvms has no scalable vectors ({e.dtype}, T.vscale())")
        return method(e)

    def e_IntImm(self, e: E.IntImm) -> ir.Value:
        return T.constant(e.dtype, e.value)

    def e_FloatImm(self, e: E.FloatImm) -> ir.Value:
        return T.constant(e.dtype, e.value)

    def e_StringImm(self, e: E.StringImm) -> ir.Value:
        raise TVMSError(f"the llvm target cannot use the string {e.value!r} as a value")

    def e_Var(self, e: E.Var) -> ir.Value:
        value = self.env.get(e)
        if value is None:
            raise TVMSError(f"variable {e.name!r} is used before it is bound")
        return value

    e_SizeVar = e_Var

    def operands(self, e: E.BinaryOp) -> tuple:
        a, b = self.expr(e.a), self.expr(e.b)
        dt = e.a.dtype.element_of
        if T.element_type(a) != T.element_type(b):
            b = T.cast(self.builder, b, e.b.dtype, dt)
        a, b = T.unify(self.builder, a, b)
        return a, b, dt

    def division_operands(self, e: E.BinaryOp) -> tuple:
        """The operands of an integer division, a divisor that may be zero replaced by one:
        the quotient is undefined in TensorIR, but a hardware trap would kill the process."""
        a, b, dt = self.operands(e)
        if not dt.is_float and not isinstance(b, ir.Constant):
            zero, one = ir.Constant(b.type, None), T.broadcast(self.builder, ir.Constant(T.element_type(b), 1), T.lanes_of(b))
            b = self.builder.select(self.builder.icmp_signed("==", b, zero), one, b)
        return a, b, dt

    def _arith(self, e: E.BinaryOp, int_op: str, float_op: str) -> ir.Value:
        a, b, dt = self.operands(e)
        if dt.is_float:  # "contract" lets a*b+c become one fused multiply-add, as TVM allows
            return getattr(self.builder, float_op)(a, b, flags=("contract",))
        # TensorIR's signed arithmetic does not wrap (as TVM emits it): "nsw" lets LLVM tell that
        # C[x] and C[x + 1152] never overlap, so a register tile's accumulators leave memory
        flags = ("nsw",) if dt.is_int else ()
        return getattr(self.builder, int_op)(a, b, flags=flags)

    def e_Add(self, e): return self._arith(e, "add", "fadd")
    def e_Sub(self, e): return self._arith(e, "sub", "fsub")
    def e_Mul(self, e): return self._arith(e, "mul", "fmul")

    def e_Div(self, e):
        a, b, dt = self.division_operands(e)
        if dt.is_float:
            return self.builder.fdiv(a, b)
        return self.builder.udiv(a, b) if dt.is_uint else self.builder.sdiv(a, b)

    def e_Mod(self, e):
        a, b, dt = self.division_operands(e)
        if dt.is_float:
            return self.builder.frem(a, b)
        return self.builder.urem(a, b) if dt.is_uint else self.builder.srem(a, b)

    def _floor_parts(self, e: E.BinaryOp) -> tuple:
        """(a, b, truncated quotient, remainder, whether to adjust) of an integer floordiv/mod:
        the truncated result is off by one when the remainder is non-zero and its sign differs
        from the divisor's."""
        a, b, dt = self.division_operands(e)
        bld = self.builder
        q, r = bld.sdiv(a, b), bld.srem(a, b)
        zero = ir.Constant(a.type, None)
        adjust = bld.and_(bld.icmp_signed("!=", r, zero),
                          bld.icmp_signed("!=", bld.icmp_signed("<", r, zero), bld.icmp_signed("<", b, zero)))
        return a, b, q, r, adjust

    def _float_floor_div(self, e: E.BinaryOp) -> tuple:
        a, b, _ = self.operands(e)
        return a, b, self._intrinsic("floor", self.builder.fdiv(a, b))

    def _intrinsic(self, name: str, x: ir.Value) -> ir.Value:
        return call_llvm_intrinsic(self.builder, name, [x])

    def e_FloorDiv(self, e):
        dt = e.a.dtype.element_of
        if dt.is_float:
            return self._float_floor_div(e)[2]
        if dt.is_uint:
            return self.builder.udiv(*self.division_operands(e)[:2])
        a, b, q, r, adjust = self._floor_parts(e)
        return self.builder.sub(q, self.builder.zext(adjust, q.type))

    def e_FloorMod(self, e):
        dt = e.a.dtype.element_of
        if dt.is_float:
            a, b, f = self._float_floor_div(e)
            return self.builder.fsub(a, self.builder.fmul(f, b))
        if dt.is_uint:
            return self.builder.urem(*self.division_operands(e)[:2])
        a, b, q, r, adjust = self._floor_parts(e)
        return self.builder.select(adjust, self.builder.add(r, b), r)

    def _compare(self, e: E.BinaryOp, symbol: str) -> ir.Value:
        return self.compare_values(*self.operands(e), symbol)

    def compare_values(self, a: ir.Value, b: ir.Value, dt: DataType, symbol: str) -> ir.Value:
        if dt.is_float:  # NaN compares unequal to everything, as in C and numpy
            if symbol == "!=":
                return self.builder.fcmp_unordered(symbol, a, b)
            return self.builder.fcmp_ordered(symbol, a, b)
        if dt.is_uint or dt.is_bool:
            return self.builder.icmp_unsigned(symbol, a, b)
        return self.builder.icmp_signed(symbol, a, b)

    def e_EQ(self, e): return self._compare(e, "==")
    def e_NE(self, e): return self._compare(e, "!=")
    def e_LT(self, e): return self._compare(e, "<")
    def e_LE(self, e): return self._compare(e, "<=")
    def e_GT(self, e): return self._compare(e, ">")
    def e_GE(self, e): return self._compare(e, ">=")

    def e_Min(self, e):  # a unless b < a, as Python's min (and the reference executor)
        a, b, dt = self.operands(e)
        return self.builder.select(self.compare_values(b, a, dt, "<"), b, a)

    def e_Max(self, e):
        a, b, dt = self.operands(e)
        return self.builder.select(self.compare_values(b, a, dt, ">"), b, a)

    def e_And(self, e): return self.builder.and_(*self.operands(e)[:2])
    def e_Or(self, e): return self.builder.or_(*self.operands(e)[:2])

    def e_Not(self, e):
        return self.builder.not_(self.expr(e.a))

    def e_Select(self, e: E.Select) -> ir.Value:
        c, t, f = self.truth(e.condition), self.expr(e.true_value), self.expr(e.false_value)
        t, f = T.unify(self.builder, t, f)
        if T.lanes_of(c) > 1:
            t, f = T.unify(self.builder, t, f, c)[:2]
        return self.builder.select(c, t, f)

    def e_Cast(self, e: E.Cast) -> ir.Value:
        return T.cast(self.builder, self.expr(e.value), e.value.dtype, e.dtype)

    def e_Ramp(self, e: E.Ramp) -> ir.Value:
        base = T.broadcast(self.builder, self.expr(e.base), e.lanes)
        stride = T.broadcast(self.builder, self.expr(e.stride), e.lanes)
        element = T.element_type(base)
        lanes = ir.Constant(base.type, [ir.Constant(element, k) for k in range(e.lanes)])
        return self.builder.add(base, self.builder.mul(stride, lanes))

    def e_Broadcast(self, e: E.Broadcast) -> ir.Value:
        return T.broadcast(self.builder, self.expr(e.value), e.lanes)

    def e_Shuffle(self, e: E.Shuffle) -> ir.Value:
        """Each lane of the result taken from its vector (extract, then insert, element by
        element: LLVM folds that into one shufflevector)."""
        bld = self.builder
        sources = []
        for v in e.vectors:
            value = self.expr(v)
            sources += [(value, k) for k in range(T.lanes_of(value))] if T.lanes_of(value) > 1 else [(value, None)]
        lanes = [sources[i.value] for i in e.indices]
        if len(lanes) == 1:
            value, k = lanes[0]
            return value if k is None else bld.extract_element(value, ir.Constant(T.I32, k))
        element = T.element_type(lanes[0][0])
        result = ir.Constant(ir.VectorType(element, len(lanes)), ir.Undefined)
        for out, (value, k) in enumerate(lanes):
            scalar = value if k is None else bld.extract_element(value, ir.Constant(T.I32, k))
            result = bld.insert_element(result, scalar, ir.Constant(T.I32, out))
        return result

    def e_Let(self, e: E.Let) -> ir.Value:
        self.bind(e.var, e.value)
        return self.expr(e.body)

    def e_Call(self, e: E.Call) -> ir.Value:
        refuse_module_call(e, "llvm")
        refused = ptx.not_compiled(e, "the llvm code generator does not compile")
        if refused is not None:
            raise refused
        if e.op.name == "tir.if_then_else":
            return self.if_then_else(e)
        if e.op.name == "tir.ret":  # (the entry's slots carry arguments in, no value out)
            raise TVMSError("the llvm target does not compile a PrimFunc that returns a value (return x, T.ret): "
                            "write the result into a buffer parameter (the reference executor, "
                            "tvms.runtime.reference.run_prim_func, runs it and returns the value)")
        if e.op.name in FIXED_POINT:  # T.q_multiply_shift: integer arithmetic
            return self.expr(FIXED_POINT[e.op.name](e))
        args = [None if isinstance(a, E.StringImm) else self.expr(a) for a in e.args]
        return emit_intrinsic(self.builder, e, args)

    def truth(self, e: Any) -> ir.Value:
        """A condition as i1 (lanes of i1): a number is true when it is not zero, as in C and
        Python (TVM's parser takes ``if i:`` with an int32 ``i``; LLVM branches on i1 only)."""
        value = self.expr(e)
        return value if e.dtype.is_bool else T.cast(self.builder, value, e.dtype, BOOL)

    def condition(self, e: Any) -> ir.Value:
        """A branch's condition: a vector one the same in every lane (``lane_uniform``) is its first lane."""
        cond = self.truth(e)
        if T.lanes_of(cond) > 1 and lane_uniform(e, self.vector_vars):
            return self.builder.extract_element(cond, ir.Constant(T.I32, 0))
        return cond

    def if_then_else(self, e: E.Call) -> ir.Value:
        """Only the chosen branch runs (it may load out of bounds otherwise, as padding does)."""
        cond = self.condition(e.args[0])
        if T.lanes_of(cond) > 1:  # a vector condition selects lane by lane; each side's loads
            outer = self.mask  # are masked to its lanes, so the others read no memory
            sides = []
            for lanes, arm in ((cond, e.args[1]), (self.builder.not_(cond), e.args[2])):
                self.mask = lanes if outer is None else self.builder.and_(outer, lanes)
                try:
                    sides.append(self.expr(arm))
                finally:
                    self.mask = outer
            t, f = T.unify(self.builder, *sides, cond)[:2]
            return self.builder.select(cond, t, f)
        bld = self.builder
        then_bb, else_bb, done = (bld.append_basic_block(self.fresh(n)) for n in ("then", "else", "endif"))
        bld.cbranch(cond, then_bb, else_bb)
        results = []
        for bb, arm in ((then_bb, e.args[1]), (else_bb, e.args[2])):
            bld.position_at_end(bb)
            results.append((self.expr(arm), bld.block))
        lanes = max(T.lanes_of(v) for v, _ in results)
        for k, (value, block) in enumerate(results):  # (a scalar side of a vector one: repeated)
            bld.position_at_end(block)
            results[k] = (T.broadcast(bld, value, lanes), bld.block)
            bld.branch(done)
        bld.position_at_end(done)
        phi = bld.phi(results[0][0].type)
        for value, block in results:
            phi.add_incoming(value, block)
        return phi

    def e_BufferLoad(self, e: E.BufferLoad) -> ir.Value:
        if e.buffer.dtype.lanes > 1:
            vtype = T.with_lanes(T.memory_type(e.buffer.dtype), e.buffer.dtype.lanes)
            value = self.builder.load(self.vector_element(e.buffer, e.indices), typ=vtype,
                                      align=_element_bytes(e.buffer.dtype))
            return T.from_memory(self.builder, value, e.buffer.dtype)
        index, stride = self.flat_index(e.buffer, e.indices)
        bld = self.builder
        elem = T.memory_type(e.buffer.dtype)
        lanes = T.lanes_of(index)
        if stride == 0 and self.mask is not None:
            return T.from_memory(bld, self.guarded_scalar_load(e.buffer, index, elem), e.buffer.dtype)
        if stride != 1 and self.mask is not None:  # a gather of the guarded lanes only
            lanes = T.lanes_of(self.mask)
            vtype = ir.VectorType(elem, lanes)
            index = T.broadcast(bld, index, lanes) if T.lanes_of(index) == 1 else index
            pointers = self.address(e.buffer, index)
            pointers.type = ir.VectorType(T.PTR, lanes)  # (a vector of addresses: llvmlite types it scalar)
            vec = self.masked("gather", vtype, [pointers, self.align(e.buffer), self.mask, ir.Constant(vtype, None)],
                              vtype, f"v{lanes}p0")
            return T.from_memory(bld, vec, e.buffer.dtype)
        if lanes == 1 or stride == 0:
            if lanes > 1:
                index = bld.extract_element(index, ir.Constant(T.I32, 0))
            value = bld.load(self.address(e.buffer, index), typ=elem)
            return T.broadcast(bld, T.from_memory(bld, value, e.buffer.dtype), lanes)
        if stride == 1:
            base = bld.extract_element(index, ir.Constant(T.I32, 0))
            address, vtype = self.address(e.buffer, base), ir.VectorType(elem, lanes)
            if self.mask is not None:  # lanes past a guard may be past the buffer
                zero = ir.Constant(vtype, None)
                vec = self.masked("load", vtype, [address, self.align(e.buffer), self.mask, zero], vtype)
            else:
                # (buffers promise element alignment only)
                vec = bld.load(address, typ=vtype, align=_element_bytes(e.buffer.dtype))
            return T.from_memory(bld, vec, e.buffer.dtype)
        if stride is not None and 1 < stride <= MAX_SPAN_STRIDE and lanes >= 4 and not e.buffer.dtype.is_handle:
            return T.from_memory(bld, self.span_load(e.buffer, index, elem, lanes, stride), e.buffer.dtype)
        out = ir.Constant(ir.VectorType(elem, lanes), ir.Undefined)  # a gather, lane by lane
        for lane in range(lanes):
            k = ir.Constant(T.I32, lane)
            value = bld.load(self.address(e.buffer, bld.extract_element(index, k)), typ=elem)
            out = bld.insert_element(out, value, k)
        return T.from_memory(bld, out, e.buffer.dtype)

    def span_load(self, buffer: Buffer, index: ir.Value, elem: ir.Type, lanes: int, stride: int) -> ir.Value:
        """Lanes ``stride`` apart (a strided conv's or pooling's inputs): the span from the first
        to the last, one masked load (the mask stops at the last lane: nothing past it is read,
        however close the end of the buffer), then a shuffle of every ``stride``-th element. A
        gather lane by lane is ``lanes`` loads and inserts."""
        bld = self.builder
        span = ir.VectorType(elem, lanes * stride)
        used = (lanes - 1) * stride + 1
        mask = ir.Constant(ir.VectorType(T.I1, lanes * stride),
                           [ir.Constant(T.I1, int(k < used)) for k in range(lanes * stride)])
        base = self.address(buffer, bld.extract_element(index, ir.Constant(T.I32, 0)))
        whole = self.masked("load", span, [base, self.align(buffer), mask, ir.Constant(span, None)], span)
        picks = ir.Constant(ir.VectorType(T.I32, lanes), [ir.Constant(T.I32, k * stride) for k in range(lanes)])
        return bld.shuffle_vector(whole, ir.Constant(span, ir.Undefined), picks)

    def guarded_scalar_load(self, buffer: Buffer, index: ir.Value, elem: ir.Type) -> ir.Value:
        """One element for every lane of a guarded vector (a bias or a scale per row): a scalar
        load, masked by whether any lane is in the guard (with none, the address may be past the
        buffer), broadcast. A gather would load the same address once per lane."""
        bld = self.builder
        lanes = T.lanes_of(self.mask)
        any_fn = declare(self.module, f"llvm.vector.reduce.or.v{lanes}i1", T.I1, [self.mask.type])
        wanted = ir.VectorType(T.I1, 1)
        one_lane = bld.insert_element(ir.Constant(wanted, None), bld.call(any_fn, [self.mask]), ir.Constant(T.I32, 0))
        if T.lanes_of(index) > 1:
            index = bld.extract_element(index, ir.Constant(T.I32, 0))
        single = ir.VectorType(elem, 1)
        value = self.masked("load", single, [self.address(buffer, index), self.align(buffer), one_lane,
                                             ir.Constant(single, None)], single)
        return T.broadcast(bld, bld.extract_element(value, ir.Constant(T.I32, 0)), lanes)

    # ------------------------------------------------------------ buffers
    def address(self, buffer: Buffer, index: ir.Value) -> ir.Value:
        data = self.env.get(buffer.data)
        if data is None:
            raise TVMSError(f"buffer {buffer.name!r} is used outside its declaration "
                            f"(its data {buffer.data.name!r} is not allocated)")
        return self.builder.gep(data, [index], source_etype=T.memory_type(buffer.dtype))

    def vector_element(self, buffer: Buffer, indices: tuple) -> ir.Value:
        """The address of element ``indices`` of a buffer of K-lane vectors (``float32x2``): its
        K lanes lie from element K * index of the scalars in memory."""
        index, _ = self.flat_index(buffer, indices)
        if T.lanes_of(index) > 1 or self.mask is not None:
            raise TVMSError(f"the llvm target does not compile a vector access of {buffer.name!r}, a buffer "
                            f"of {buffer.dtype} vectors; index it by one element at a time")
        lanes = ir.Constant(index.type, buffer.dtype.lanes)
        return self.address(buffer, self.builder.mul(index, lanes))

    def flat_index(self, buffer: Buffer, indices: tuple) -> tuple:
        """The element offset of ``buffer[indices]`` (row-major unless the buffer has strides),
        and its lane stride (None: not affine in the vector lanes)."""
        if buffer.strides:
            strides = list(buffer.strides)
        else:
            strides, acc = [], None
            for extent in reversed(buffer.shape):
                strides.append(acc if acc is not None else E.IntImm(extent.dtype, 1))
                acc = extent if acc is None else E.Mul(acc, extent)
            strides.reverse()
        terms = [idx if E.is_const_int(st, 1) else E.Mul(idx, _as_type(st, idx.dtype))
                 for idx, st in zip(indices, strides)] if len(indices) > 1 else list(indices)
        if not terms:  # (a zero-dimensional buffer, B[()]: its one element)
            terms = [E.IntImm(DataType("int32"), 0)]
        if buffer.elem_offset is not None and not E.is_const_int(buffer.elem_offset, 0):
            terms.append(_as_type(buffer.elem_offset, terms[0].dtype))
        flat = terms[0]
        for t in terms[1:]:
            flat = E.Add(flat, _as_type(t, flat.dtype))
        return self.expr(flat), lane_stride(flat, self.vector_vars)

    # ------------------------------------------------------------ statements
    def stmt(self, s: Any) -> None:
        method = getattr(self, "s_" + type(s).__name__, None)
        if method is None and isinstance(s, S.ScopeIdDef):  # (no lowering makes CPU code of it)
            raise TVMSError(f"the llvm target cannot run T.{s.kind}(...): a kernel with scope ids is GPU "
                            f"code (TVM 0.27's tirx language); build it for a cuda target")
        if method is None:
            raise TVMSError(f"the llvm target cannot generate code for {type(s).__name__}; "
                            f"lower the function first (tvms.lowering.tir.lower_for_codegen)")
        method(s)

    def s_SeqStmt(self, s: S.SeqStmt) -> None:
        for x in s.seq:
            self.stmt(x)

    def s_Evaluate(self, s: S.Evaluate) -> None:
        control = loop_control(s.value)
        if control is not None:
            self.jump_out(control)
        elif not isinstance(s.value, (E.IntImm, E.FloatImm)):
            self.expr(s.value)

    def jump_out(self, control: str) -> None:
        """``T.break_loop()`` / ``T.continue_loop()``: a branch to the innermost loop's exit or
        latch; what follows in the same body is unreachable and goes to a block of its own."""
        if not self.loop_targets:
            raise TVMSError(f"T.{control}_loop() outside a serial or while loop")
        latch, exit_ = self.loop_targets[-1]
        self.builder.branch(exit_ if control == "break" else latch)
        self.builder.position_at_end(self.builder.append_basic_block(self.fresh(f"after.{control}")))

    def in_loop(self, latch: ir.Block, exit_: ir.Block, body: Any) -> None:
        """Emits ``body`` with ``latch`` / ``exit_`` as the targets of its continue / break."""
        self.loop_targets.append((latch, exit_))
        try:
            self.stmt(body)
        finally:
            self.loop_targets.pop()

    def s_BufferStore(self, s: S.BufferStore) -> None:
        bld = self.builder
        if s.buffer.dtype.lanes > 1:
            value = T.to_memory(bld, T.cast(bld, self.expr(s.value), s.value.dtype, s.buffer.dtype), s.buffer.dtype)
            bld.store(value, self.vector_element(s.buffer, s.indices), align=_element_bytes(s.buffer.dtype))
            return
        index, stride = self.flat_index(s.buffer, s.indices)
        value = T.cast(bld, self.expr(s.value), s.value.dtype, s.buffer.dtype)
        value, index = T.unify(bld, value, index)
        value = T.to_memory(bld, value, s.buffer.dtype)
        lanes = T.lanes_of(index)
        if self.mask is not None and (lanes == 1 or stride != 1):  # only the guarded lanes write
            self.masked_scatter(s.buffer, value, index)
        elif lanes == 1:
            bld.store(value, self.address(s.buffer, index))
        elif stride == 1:
            address = self.address(s.buffer, bld.extract_element(index, ir.Constant(T.I32, 0)))
            if self.mask is not None:
                self.masked("store", value.type, [value, address, self.align(s.buffer), self.mask], ir.VoidType())
            else:
                bld.store(value, address, align=_element_bytes(s.buffer.dtype))
        else:  # a scatter, lane by lane in order (the last lane wins where they meet)
            for lane in range(lanes):
                k = ir.Constant(T.I32, lane)
                bld.store(bld.extract_element(value, k), self.address(s.buffer, bld.extract_element(index, k)))

    def masked_scatter(self, buffer: Buffer, value: ir.Value, index: ir.Value) -> None:
        """``buffer[index] = value`` in the lanes of ``self.mask`` (``llvm.masked.scatter``: where
        lanes meet, the last one wins); a scalar store is one address in every lane."""
        lanes = T.lanes_of(self.mask)
        if T.lanes_of(index) not in (1, lanes):
            raise TVMSError(f"a store of {T.lanes_of(index)} lanes under a guard of {lanes} lanes")
        value, index = (x if T.lanes_of(x) == lanes else T.broadcast(self.builder, x, lanes) for x in (value, index))
        pointers = self.address(buffer, index)
        pointers.type = ir.VectorType(T.PTR, lanes)  # (a vector of addresses: llvmlite types it scalar)
        self.masked("scatter", value.type, [value, pointers, self.align(buffer), self.mask], ir.VoidType(),
                    f"v{lanes}p0")

    def bind(self, var: E.Var, value_expr: Any) -> None:
        value = self.expr(value_expr)
        self.env[var] = value
        if T.lanes_of(value) > 1:
            self.vector_vars[var] = lane_stride(value_expr, self.vector_vars)

    def s_LetStmt(self, s: S.LetStmt) -> None:
        self.bind(s.var, s.value)
        self.stmt(s.body)

    def s_AttrStmt(self, s: S.AttrStmt) -> None:
        if s.attr_key in ("thread_extent", "virtual_thread"):
            raise TVMSError("the llvm target runs on the CPU: thread-bound loops need a GPU target")
        self.stmt(s.body)

    def s_AssertStmt(self, s: S.AssertStmt) -> None:
        self.stmt(s.body)  # the runtime checks arguments before the call

    def s_DeclBuffer(self, s: S.DeclBuffer) -> None:
        if s.buffer.data not in self.env:
            raise TVMSError(f"T.decl_buffer {s.buffer.name!r}: its data {s.buffer.data.name!r} is not allocated")
        self.stmt(s.body)

    def s_Allocate(self, s: S.Allocate) -> None:
        self.allocate(s.buffer_var, s.dtype, s.extents, s.body)

    def s_AllocBuffer(self, s: S.AllocBuffer) -> None:
        self.allocate(s.buffer.data, s.buffer.dtype, s.buffer.shape, s.body)

    def allocate(self, data: E.Var, dtype: DataType, extents: tuple, body: Any) -> None:
        elem = T.memory_type(dtype)
        count = dtype.lanes
        for x in extents:
            count = count * x.value if isinstance(x, E.IntImm) and isinstance(count, int) else None
            if count is None:
                break
        nbytes = count * _element_bytes(dtype) if count is not None else None
        if nbytes is not None and nbytes <= MAX_STACK_BYTES:
            self.env[data] = self.entry_alloca(elem, max(count, 1), data.name)
            self.stmt(body)
            return
        bld = self.builder
        size = ir.Constant(T.I64, _element_bytes(dtype) * dtype.lanes)
        for x in extents:
            size = bld.mul(size, T.cast(bld, self.expr(x), x.dtype, DataType("int64")))
        alloc = declare(self.module, "aligned_alloc", T.PTR, [T.I64, T.I64])
        if "noalias" not in alloc.return_value.attributes:  # (fresh memory: loads and stores of
            alloc.return_value.add_attribute("noalias")  # other buffers keep their registers)
        free = declare(self.module, "free", ir.VoidType(), [T.PTR])
        align = ir.Constant(T.I64, ALLOC_ALIGNMENT)  # (aligned_alloc wants a multiple of it)
        size = bld.and_(bld.add(size, ir.Constant(T.I64, ALLOC_ALIGNMENT - 1)), ir.Constant(T.I64, -ALLOC_ALIGNMENT))
        self.env[data] = bld.call(alloc, [align, size])
        self.stmt(body)
        self.builder.call(free, [self.env[data]])

    def s_IfThenElse(self, s: S.IfThenElse) -> None:
        bld = self.builder
        cond = self.condition(s.condition)
        if T.lanes_of(cond) > 1 and s.else_case is None and self.vector_vars:  # (vectorizable said so)
            outer = self.mask
            self.mask = cond if outer is None else bld.and_(outer, cond)
            try:
                self.stmt(s.then_case)
            finally:
                self.mask = outer
            return
        if T.lanes_of(cond) > 1:
            raise TVMSError("an if statement needs a scalar condition")
        then_bb, done = bld.append_basic_block(self.fresh("then")), bld.append_basic_block(self.fresh("endif"))
        else_bb = bld.append_basic_block(self.fresh("else")) if s.else_case is not None else done
        bld.cbranch(cond, then_bb, else_bb)
        for bb, arm in ((then_bb, s.then_case), (else_bb, s.else_case)):
            if arm is None:
                continue
            bld.position_at_end(bb)
            self.stmt(arm)
            bld.branch(done)
        bld.position_at_end(done)

    def masked(self, op: str, vtype: ir.VectorType, args: list, ret: ir.Type, pointers: str = "p0") -> ir.Value:
        """``llvm.masked.load`` / ``store`` / ``gather`` of ``vtype`` (a tail: AVX-512 and AVX2
        have such instructions; elsewhere LLVM expands them lane by lane)."""
        fn = declare(self.module, f"llvm.masked.{op}.{_suffix(vtype)}.{pointers}", ret, [a.type for a in args])
        return self.builder.call(fn, args)

    def align(self, buffer: Buffer) -> ir.Constant:
        return ir.Constant(T.I32, _element_bytes(buffer.dtype))

    def s_While(self, s: S.While) -> None:
        bld = self.builder
        head, body, done = (bld.append_basic_block(self.fresh(n)) for n in ("while", "body", "endwhile"))
        bld.branch(head)
        bld.position_at_end(head)
        bld.cbranch(self.condition(s.condition), body, done)
        bld.position_at_end(body)
        self.in_loop(head, done, s.body)
        bld.branch(head)
        bld.position_at_end(done)

    def s_For(self, s: S.For) -> None:
        extent = s.extent.value if isinstance(s.extent, E.IntImm) else None
        if s.kind == S.VECTORIZED and extent is not None and 1 < extent <= 64 and self.vectorizable(s):
            return self.vector_loop(s, extent)
        if s.kind == S.PARALLEL and not self.in_parallel and not self.vector_vars:
            if controls_loop(s.body, nested=False):
                raise TVMSError("T.break_loop() / T.continue_loop() cannot leave a parallel loop")
            return llvm_parallel.parallel_loop(self, s)
        if s.kind == S.THREAD_BINDING:
            raise TVMSError("the llvm target runs on the CPU: thread-bound loops need a GPU target")
        lo = self.loop_start(s)
        hi = self.builder.add(lo, T.cast(self.builder, self.expr(s.extent), s.extent.dtype, s.loop_var.dtype))
        refuse_unknown_unroll(s)  # (loop-level input skips UnrollLoop)
        unroll = "full" if s.kind == S.UNROLLED else None
        self.serial_loop(s.loop_var, lo, hi, s.body, unroll)
        return None

    def loop_start(self, s: S.For) -> ir.Value:
        return T.cast(self.builder, self.expr(s.min), s.min.dtype, s.loop_var.dtype)

    def serial_loop(self, var: E.Var, lo: ir.Value, hi: ir.Value, body: Any,
                    unroll: str | None = None) -> None:
        """``for var in [lo, hi): body`` with a phi for ``var``; ``unroll`` ("full") marks the loop
        for LLVM's unroller."""
        bld = self.builder
        pre = bld.block
        head, loop, latch, done = (bld.append_basic_block(self.fresh(n))
                                   for n in ("for", "body", "latch", "endfor"))
        bld.branch(head)
        bld.position_at_end(head)
        i = bld.phi(lo.type, name=var.name)
        i.add_incoming(lo, pre)
        bld.cbranch(bld.icmp_signed("<", i, hi), loop, done)
        bld.position_at_end(loop)
        self.env[var] = i
        self.in_loop(latch, done, body)
        bld.branch(latch)
        bld.position_at_end(latch)
        i.add_incoming(bld.add(i, ir.Constant(lo.type, 1)), latch)
        back_edge = bld.branch(head)
        if unroll is not None:
            back_edge.set_metadata("llvm.loop", self.loop_id(f"llvm.loop.unroll.{unroll}"))
        bld.position_at_end(done)

    def loop_id(self, hint: str) -> ir.MDValue:
        """A new loop's ``!{self, !{!"hint"}}`` (LLVM tells loops apart by their self-reference)."""
        unique = ir.MetaDataString(self.module, f"tvms.loop.{len(self.module.metadata)}")
        node = self.module.add_metadata([unique])  # (add_metadata shares equal nodes: a unique stand-in)
        node.operands = (node, self.module.add_metadata([ir.MetaDataString(self.module, hint)]))
        return node

    def vectorizable(self, loop: S.For) -> bool:
        """Whether the body is straight-line stores whose addresses step by one element per
        lane, of scalars only: then each lane is an iteration and vector code is exact (a vector
        expression inside would need lanes of lanes)."""
        if any(isinstance(e, E.PrimExpr) and e.dtype.lanes > 1 for e in walk(loop.body)):
            return False
        strides = dict(self.vector_vars)
        strides[loop.loop_var] = 1
        stack = [loop.body]
        while stack:
            s = stack.pop()
            if isinstance(s, S.SeqStmt):
                stack.extend(s.seq)
            elif isinstance(s, S.LetStmt):
                strides[s.var] = lane_stride(s.value, strides)
                stack.append(s.body)
            elif isinstance(s, S.BufferStore):  # (a T.if_then_else masks each side's loads)
                if _access_stride(s.buffer, s.indices, strides) != 1:
                    return False
            elif isinstance(s, S.IfThenElse) and s.else_case is None and isinstance(s.then_case, S.BufferStore):
                # a guarded store (a tail): masked, its loads masked too (gathers where not contiguous)
                if collect(s.condition, E.BufferLoad) or any(
                        getattr(c.op, "name", None) not in PURE_CALLS for c in collect(s.condition, E.Call)):
                    return False
                stack.append(s.then_case)
            else:
                return False
        return True

    def vector_loop(self, s: S.For, lanes: int) -> None:
        lo = T.broadcast(self.builder, self.loop_start(s), lanes)
        element = T.element_type(lo)
        steps = ir.Constant(lo.type, [ir.Constant(element, k) for k in range(lanes)])
        self.env[s.loop_var] = self.builder.add(lo, steps)
        self.vector_vars[s.loop_var] = 1
        try:
            self.stmt(s.body)
        finally:
            self.vector_vars.pop(s.loop_var, None)


def _element_bytes(dtype: DataType) -> int:
    return max(1, DataType(dtype).element_of.bits // 8)


def _as_type(e: Any, dtype: DataType) -> Any:
    """``e`` converted to the element type of ``dtype`` when the element types differ."""
    if e.dtype.element_of == dtype.element_of:
        return e
    return E.Cast(dtype.element_of.with_lanes(e.dtype.lanes), e)


def _access_stride(buffer: Buffer, indices: tuple, strides: dict) -> int | None:
    """The lane stride of a row-major access: that of the last index when the others are the
    same in every lane."""
    if buffer.strides and len(indices) > 1:
        return None
    if any(lane_stride(i, strides) != 0 for i in indices[:-1]):
        return None
    return lane_stride(indices[-1], strides)
