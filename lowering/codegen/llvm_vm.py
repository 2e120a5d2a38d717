"""The compiled VM (TVM's ``exec_mode="compiled"``): a function of the VM program
(``ir/vm_program.py``) lowered to ONE native function that checks its arguments, binds the
symbolic sizes, lays out memory by the static plan (``relax/vm_memory_plan.plan_storage``) and
calls the kernels' entries directly.

``lower_vm_function(f, program, artifacts, target, symbol)`` gives a ``NativeVMFunction`` (object
code and what the runtime needs to call it, ``runtime/vm_native.py``), or the reason the function
stays interpreted (a string): what the native code takes is a straight-line function of tensor
parameters, shape checks, allocations, kernel calls and a returned tensor or tuple; packed
functions, numpy references of operators, closures, branches and calls of other functions stay
with the interpreter.

The native function is ``i32 f(PyObject *args, PyObject *outs, i64 *ctx)``: ``args`` the call's
tuple of arguments, ``outs`` a tuple of fresh byte arrays, one per returned allocation (each
``ALIGNMENT`` bytes larger than the tensor: the tensor starts at the first aligned address),
``ctx`` the VM's context (``CTX_FIELDS``, then the kernels' entries and thread-count globals, the
constants' data, then per output its offset in its byte array, dims and bytes). The runtime
supplies the object layout of ``tuple``/``ndarray`` in ``ctx``, so this code assumes none. It
returns 0 after running the kernels; ``NEED_OUTPUTS`` when an output's byte array has not the
size the arguments give (its bytes are in ``ctx``: the caller allocates again and calls again);
any other code before a kernel ran: the arguments are not what the fast path takes (a wrong
dtype or shape, a list, a strided array, a size above its upper bound), and the caller runs the
interpreter, whose checks say what is wrong in the interpreter's words.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import numpy as np
from llvmlite import ir

from ...ir.analysis import written_params
from ...ir.dtype import ML_DTYPES, DataType, ml_dtype
from ...ir.errors import TVMSError
from ...ir.expr import IntImm, Var
from ...ir.name_supply import NameSupply
from ...ir.vm_program import (ALIGNMENT, CALL_PREFIX, CTX_FIELDS, LIFTED_CALL_WORDS, NEED_OUTPUTS, VM_PREFIX, Call,
                               Const, Imm, NativeOutput, NativeVMFunction, Reg, Ret, Size, VMFunction, VMProgram,
                               native_symbol)
from ..relax.vm_memory_plan import plan_storage
from . import llvm_types as T
from . import object_cache
from .compile import KernelArtifact
from .llvm_intrinsics import declare
from .llvm_target import LLVMTarget, parse_llvm_target, require_llvm, target_machine

_CTX = {name: k for k, name in enumerate(CTX_FIELDS)}
# numpy's array flags: what the kernels read (C-contiguous, aligned), and what they write
_NPY_READ = 0x0001 | 0x0100
_NPY_WRITEABLE = 0x0400


@dataclass(frozen=True)
class NativeArtifact(NativeVMFunction):
    """A native function as the code generator makes it: it can also give its code as
    position-independent object code, for a shared library (``Executable.export_library``)."""

    def shared_object(self) -> bytes:
        return _object_code(self.llvm_ir, self.target, "pic")


def _object_code(text: str, target: LLVMTarget, reloc: str = "default") -> bytes:
    """The glue function's object code, unoptimized: it is checks, stores of slots and calls
    around the kernels, run once per inference, and LLVM's fast instruction selector emits it in
    milliseconds where its optimizing pipeline takes tens."""
    module = require_llvm().parse_assembly(text)
    module.verify()
    machine = target_machine(target, reloc=reloc, opt=0)
    module.triple, module.data_layout = target.triple, str(machine.target_data)
    return machine.emit_object(module)


class _Unsupported(Exception):
    """Why a function stays with the interpreter."""


def lower_vm_program(program: VMProgram, artifacts: dict, target: Any) -> dict:
    """Each function of ``program`` that is called by name (closures are reached through the
    interpreter) as a ``NativeVMFunction``, or the reason it stays interpreted."""
    symbols = NameSupply("_")
    return {f.name: lower_vm_function(f, program, artifacts, target, native_symbol(symbols, VM_PREFIX, f.name))
            for f in program.functions if not f.closure}


def lower_lifted_calls(program: VMProgram, native: dict, artifacts: dict, target: Any, lifted: dict) -> dict:
    """Per function ``f`` whose weights ``tvms.compile`` lifted (``lifted``: ``f`` -> (``f_lifted``,
    transform, num_input, number of weights)), the native code of the call ``f(*inputs, *weights)``
    with the weights of a parameter set the VM's cache holds: ``f_lifted``'s code (``native``) but
    that it takes ``f``'s arguments, checks that its weights are the cached set's and that nothing
    the cache made read-only was made writable again, and reads the transformed weights from the
    cache's entry (``_Lowering.lifted_prologue``); a reason where ``f_lifted`` has no native code."""
    functions = {f.name: f for f in program.functions}
    symbols = NameSupply("_")
    out = {}
    for name, (runtime, _, num_input, num_weights) in lifted.items():
        plain = native.get(runtime)
        if not isinstance(plain, NativeVMFunction):
            out[name] = f"{runtime} has no native code"
            continue
        symbol = native_symbol(symbols, CALL_PREFIX, runtime)
        out[name] = lower_vm_function(functions[runtime], program, artifacts, target, symbol,
                                      (num_input, num_weights, plain.ctx_size))
    return out


def lower_vm_function(f: VMFunction, program: VMProgram, artifacts: dict, target: Any, symbol: str,
                      lifted: tuple | None = None) -> NativeVMFunction | str:
    """``f`` as one native function ``symbol`` calling the kernels of ``artifacts`` (name -> the
    code generator's artifact), or the reason it stays interpreted; ``lifted`` (num_input, number
    of weights, ``f``'s own ctx size) makes the call of a lifted function (``lower_lifted_calls``)."""
    called = {i.func for i in f.code if isinstance(i, Call) and i.kind == "kernel"}
    foreign = sorted(k for k in called if not isinstance(artifacts.get(k), KernelArtifact))
    if foreign:
        return f"the kernel {foreign[0]} is not LLVM code for the host"
    try:
        llvm_target = artifacts[min(called)].target if called else parse_llvm_target(target)
        return _Lowering(f, program, artifacts, llvm_target, symbol, lifted).run()
    except _Unsupported as why:
        return str(why)
    except TVMSError as err:  # (a target other than llvm: the VM runs on the device)
        return f"no native VM for this target: {err}"


@dataclass
class _Tensor:
    """A tensor value of the function: dtype name, dims (LLVM i64 values), data (LLVM pointer,
    known once storage is laid out) and where it comes from."""

    dtype: str
    dims: list
    origin: tuple  # ("param", k) | ("alloc", register) | ("const", pool index)
    data: Any = None
    flags: Any = None  # a parameter's numpy flags (LLVM i32)


class _Lowering:
    def __init__(self, f: VMFunction, program: VMProgram, artifacts: dict, target: LLVMTarget, symbol: str,
                 lifted: tuple | None = None) -> None:
        self.f, self.program, self.artifacts, self.target = f, program, artifacts, target
        self.symbol, self.lifted = symbol, lifted
        self.module = ir.Module(name=self.symbol)
        self.fn = ir.Function(self.module, ir.FunctionType(T.I32, [T.PTR, T.PTR, T.PTR]), self.symbol)
        self.args, self.outs, self.ctx = self.fn.args
        self.b = ir.IRBuilder(self.fn.append_basic_block("entry"))
        # the object layout, read once in the entry block (it dominates every use)
        self.layout = {name: self.ctx_at(k) for k, name in enumerate(CTX_FIELDS[:_CTX["threads"]])}
        self.bail = self.fn.append_basic_block("bail")
        self.bails: list = []  # (code, block) into the bail block
        self.regs: dict = {}  # register -> _Tensor, or a tuple of registers/constants (make_tuple)
        self.heap: dict = {}  # slot -> LLVM i64 value
        self.kernels: list = []  # names, in ctx order
        self.constants: list = []  # pool indices, in ctx order
        self.calls: list = []  # deferred kernel calls: (kernel name, [arg values])
        self.const_tensors: dict = {}  # pool index -> _Tensor
        self.threads = None

    # ---- ctx and object fields
    def ctx_at(self, k: Any, typ: ir.Type = T.I64) -> ir.Value:
        index = k if isinstance(k, ir.Value) else ir.Constant(T.I64, k)
        return self.b.load(self.b.gep(self.ctx, [index], source_etype=T.I64), typ=typ)

    def field(self, obj: ir.Value, name: str, typ: ir.Type, index: Any = None) -> ir.Value:
        """The ``typ`` at byte ``ctx[name]`` (+ 8 * index) of the object ``obj``."""
        offset = self.layout[name]
        if index is not None:
            offset = self.b.add(offset, ir.Constant(T.I64, 8 * index))
        return self.b.load(self.b.gep(obj, [offset], source_etype=T.I8), typ=typ)

    def is_ndarray(self, obj: ir.Value) -> ir.Value:
        kind = self.b.ptrtoint(self.field(obj, "ob_type", T.PTR), T.I64)
        return self.b.icmp_unsigned("==", kind, self.layout["ndarray_type"])

    def guard(self, ok: ir.Value, code: int) -> None:
        """Go on when ``ok``, else leave with ``code`` (the caller runs the interpreter)."""
        go = self.fn.append_basic_block()
        self.bails.append((code, self.b.block))
        self.b.cbranch(ok, go, self.bail)
        self.b.position_at_end(go)

    def const(self, v: int) -> ir.Value:
        return ir.Constant(T.I64, v)

    # ---- the function
    def run(self) -> NativeVMFunction:
        f = self.f
        if f.closure:
            raise _Unsupported("a closure (it is reached through a closure value)")
        if f.shape_params:
            raise _Unsupported("it takes a shape parameter")
        if not f.code or not isinstance(f.code[-1], Ret) or not all(isinstance(i, Call) for i in f.code[:-1]):
            raise _Unsupported("it branches (If/Goto)")
        self.plan = plan_storage(f)
        count = self.field(self.args, "tuple_size", T.I64)
        num_args = len(f.params) if self.lifted is None else self.lifted[0] + self.lifted[1]
        self.guard(self.b.icmp_signed("==", count, self.const(num_args)), 2)
        if self.lifted is not None:
            self.lifted_prologue(*self.lifted)
        for pc, inst in enumerate(f.code[:-1]):
            self.instruction(pc, inst)
        result = self.result_tree(f.code[-1].reg)
        outputs = self.lay_out_storage()
        if self.lifted is not None:
            if self.ctx_size != self.lifted[2]:  # (the runtime fills ctx as for f itself)
                raise _Unsupported(f"its ctx differs from {f.name}'s")
            if _params_in(result, self.lifted[0]):
                raise _Unsupported("it returns a transformed weight")
            self.ctx_size += LIFTED_CALL_WORDS
        for name, values in self.calls:
            self.emit_kernel_call(name, values)
        if self.per_call is not None:
            self.b.call(declare(self.module, "free", ir.VoidType(), [T.PTR]), [self.per_call])
        self.b.ret(ir.Constant(T.I32, 0))
        self.b.position_at_end(self.bail)
        phi = self.b.phi(T.I32)
        for code, block in self.bails:
            phi.add_incoming(ir.Constant(T.I32, code), block)
        self.b.ret(phi)
        text = str(self.module)
        return NativeArtifact(f.name, self.symbol, self.compile(text), text, self.target, num_args,
                              tuple(self.kernels), tuple(self.constants), outputs, result,
                              self.storage_bytes, self.ctx_size, self.plan, f.heap,
                              tuple(self.plan.describe(f.heap)), self.target.num_cores)

    def compile(self, text: str) -> bytes:
        """The function's object code for the JIT, from the on-disk cache when it was made before."""
        key = object_cache.disk_key(hashlib.sha256(f"{self.target}\n{text}".encode()).hexdigest(), self.symbol)
        cached = object_cache.load(key)
        if cached is None:
            cached = object_cache.CachedKernel(text, text, _object_code(text, self.target))
            object_cache.store(key, cached)
        return cached.object_code

    # ---- instructions
    def instruction(self, pc: int, inst: Call) -> None:
        if inst.kind == "kernel":
            self.kernel_call(pc, inst)
            return
        if inst.kind != "builtin":
            raise _Unsupported(f"it calls a {'packed function' if inst.kind == 'packed' else 'Relax function'} "
                               f"({inst.func})")
        method = getattr(self, "b_" + inst.func.rpartition(".")[2], None)
        if method is None:
            raise _Unsupported(f"the builtin {inst.func} needs the interpreter")
        method(pc, inst)

    def tensor(self, arg: Any) -> _Tensor:
        """The tensor an argument names (a parameter is read from ``args`` at its first use)."""
        if isinstance(arg, Const):
            return self.constant(arg.index)
        if not isinstance(arg, Reg):
            raise _Unsupported(f"a tensor argument that is not a register ({arg!r})")
        value = self.regs.get(arg.index)
        if value is None and arg.index < len(self.f.params):
            value = self.regs[arg.index] = self.parameter(arg.index)
        if not isinstance(value, _Tensor):
            raise _Unsupported(f"register %{arg.index} is not a tensor here")
        return value

    def constant(self, index: int) -> _Tensor:
        """A constant of the pool (its data is read from ``ctx`` once the layout is known)."""
        t = self.const_tensors.get(index)
        if t is None:
            c = self.program.constants[index]
            if c.dtype.hasobject or c.dtype.byteorder == ">":
                raise _Unsupported("a constant of Python objects")
            self.constants.append(index)
            t = self.const_tensors[index] = _Tensor(_dtype_name(c.dtype), [self.const(int(d)) for d in c.shape],
                                                    ("const", index))
        return t

    def lifted_prologue(self, num_input: int, num_weights: int, at: int) -> None:
        """The checks of a lifted call: ``ctx[at:at + 3]`` hold the cache's entry for the last
        parameter set (``runtime/vm_native.py``: the weights as passed, their transformed
        values, the arrays made read-only, each a tuple; 0 when there is none). The weights
        given must be that set's, by identity, and none of those arrays writable (else an
        array was made writable again: it may hold other values); any other case returns
        without running anything, and the caller goes through the cache."""
        b, null = self.b, ir.Constant(T.PTR, None)
        weights, self.transformed, arrays = (b.inttoptr(self.ctx_at(at + i), T.PTR) for i in range(3))
        self.guard(b.icmp_unsigned("!=", weights, null), 2)
        self.guard(b.icmp_signed("==", self.field(weights, "tuple_size", T.I64), self.const(num_weights)), 2)
        for j in range(num_weights):
            given = self.field(self.args, "tuple_items", T.PTR, index=num_input + j)
            self.guard(b.icmp_unsigned("==", given, self.field(weights, "tuple_items", T.PTR, index=j)), 2)
        count = len(self.f.params) - num_input
        self.guard(b.icmp_signed("==", self.field(self.transformed, "tuple_size", T.I64), self.const(count)), 2)
        # for each array of the tuple: its numpy flags without WRITEABLE
        items = b.gep(arrays, [self.layout["tuple_items"]], source_etype=T.I8)
        start, head, body, done = b.block, *(self.fn.append_basic_block() for _ in range(3))
        b.branch(head)
        b.position_at_end(head)
        i = b.phi(T.I64)
        i.add_incoming(self.const(0), start)
        b.cbranch(b.icmp_signed("<", i, self.field(arrays, "tuple_size", T.I64)), body, done)
        b.position_at_end(body)
        arr = b.load(b.gep(items, [i], source_etype=T.PTR), typ=T.PTR)
        writable = b.and_(self.field(arr, "arr_flags", T.I32), ir.Constant(T.I32, _NPY_WRITEABLE))
        self.guard(b.icmp_unsigned("==", writable, ir.Constant(T.I32, 0)), 2)
        i.add_incoming(b.add(i, self.const(1)), b.block)
        b.branch(head)
        b.position_at_end(done)

    def parameter(self, k: int) -> _Tensor:
        """Parameter ``k`` from the argument tuple: a tvms Tensor's array or a numpy array,
        C-contiguous and aligned, of the dtype and rank of its annotation (writable where a
        kernel writes it: ``kernel_call``)."""
        _, dtype, dims = self.f.signature[k] if k < len(self.f.signature) else ("", None, None)
        if dtype is None or dims is None:
            raise _Unsupported(f"parameter {self.f.params[k]!r} is not a tensor of known dtype and rank")
        b = self.b
        if self.lifted is not None and k >= self.lifted[0]:  # (a transformed weight, from the cache)
            obj = self.field(self.transformed, "tuple_items", T.PTR, index=k - self.lifted[0])
        else:
            obj = self.field(self.args, "tuple_items", T.PTR, index=k)
        is_tensor = b.icmp_unsigned("==", b.ptrtoint(self.field(obj, "ob_type", T.PTR), T.I64),
                                    self.layout["tensor_type"])
        start = b.block
        with b.if_then(is_tensor):
            inner = self.field(obj, "tensor_array", T.PTR)
            inner_block = b.block
        arr = b.phi(T.PTR)
        arr.add_incoming(obj, start)
        arr.add_incoming(inner, inner_block)
        self.guard(b.icmp_unsigned("!=", arr, ir.Constant(T.PTR, None)), 3)
        self.guard(self.is_ndarray(arr), 3)
        flags = self.field(arr, "arr_flags", T.I32)
        self.guard(self.has_flags(flags, _NPY_READ), 4)
        self.guard(b.icmp_signed("==", self.field(arr, "arr_nd", T.I32), ir.Constant(T.I32, len(dims))), 5)
        descr = self.field(arr, "arr_descr", T.PTR)
        num = self.field(descr, "descr_type_num", T.I32)
        ok = None
        for n in _type_nums(dtype):
            same = b.icmp_signed("==", num, ir.Constant(T.I32, n))
            ok = same if ok is None else b.or_(ok, same)
        self.guard(ok, 6)
        order = self.field(descr, "descr_byteorder", T.I8)
        self.guard(b.icmp_unsigned("!=", order, ir.Constant(T.I8, ord(">"))), 6)
        shape = self.field(arr, "arr_dims", T.PTR)
        values = [b.load(b.gep(shape, [self.const(i)], source_etype=T.I64), typ=T.I64) for i in range(len(dims))]
        return _Tensor(dtype, values, ("param", k), self.field(arr, "arr_data", T.PTR), flags)

    def has_flags(self, flags: ir.Value, wanted: int) -> ir.Value:
        mask = ir.Constant(T.I32, wanted)
        return self.b.icmp_unsigned("==", self.b.and_(flags, mask), mask)

    def size(self, e: Any) -> ir.Value:
        """A size expression over the heap as an i64 value (integers only)."""
        b = self.b
        if isinstance(e, bool) or isinstance(e, int):
            return self.const(int(e))
        if not isinstance(e, tuple):
            raise _Unsupported(f"a size that is not an integer ({e!r})")
        op, args = e[0], e[1:]
        if op == "slot":
            if args[0] not in self.heap:
                raise _Unsupported(f"the size {self.f.heap[args[0]]!r} is read before it is bound")
            return self.heap[args[0]]
        if op == "cast":
            if not DataType(args[0]).is_integer:
                raise _Unsupported(f"a size cast to {args[0]}")
            return self.size(args[1])  # (sizes are i64 here; a narrower cast of a size is exact)
        x = [self.size(a) for a in args]
        if op in ("add", "sub", "mul"):
            return getattr(b, op)(*x)
        if op in ("min", "max"):
            return b.select(b.icmp_signed("<" if op == "min" else ">", x[0], x[1]), x[0], x[1])
        if op in ("div", "mod", "floordiv", "floormod"):
            self.guard(b.icmp_signed("!=", x[1], self.const(0)), 7)
            q, r = b.sdiv(x[0], x[1]), b.srem(x[0], x[1])
            if op in ("div", "mod"):
                return q if op == "div" else r
            # floor: the truncated result moves down (the remainder up) when the signs differ
            adjust = b.and_(b.icmp_signed("!=", r, self.const(0)),
                            b.icmp_signed("<", b.xor(r, x[1]), self.const(0)))
            if op == "floordiv":
                return b.sub(q, b.zext(adjust, T.I64))
            return b.select(adjust, b.add(r, x[1]), r)
        compare = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
        if op in compare:
            return b.zext(b.icmp_signed(compare[op], x[0], x[1]), T.I64)
        truth = [b.icmp_signed("!=", v, self.const(0)) for v in x]
        if op in ("and", "or"):
            return b.zext(getattr(b, op + "_")(*truth), T.I64)
        if op == "not":
            return b.zext(b.not_(truth[0]), T.I64)
        if op == "select":
            return b.select(truth[0], x[1], x[2])
        raise _Unsupported(f"the size operator {op!r}")

    # ---- builtins (b_<name>)
    def b_check_tensor_info(self, pc: int, inst: Call) -> None:
        t = self.tensor(inst.args[0])
        ndim, dtype = inst.args[1].value, inst.args[2].value
        if (dtype is not None and str(DataType(dtype)) != t.dtype) or (ndim >= 0 and ndim != len(t.dims)):
            raise _Unsupported(f"a check that fails for every argument ({inst.args[3].value})")

    def b_match_shape(self, pc: int, inst: Call) -> None:
        kind, _, _, binds = (a.value for a in inst.args[1:5])
        if kind != "tensor":
            raise _Unsupported(f"a check of a {kind} value")
        t = self.tensor(inst.args[0])
        declared = inst.args[5:]
        if len(declared) != len(t.dims):
            raise _Unsupported(f"a check that fails for every argument ({inst.args[2].value})")
        for axis, slot in binds:
            self.heap.setdefault(slot, t.dims[axis])
        for actual, d in zip(t.dims, declared):
            if actual is not self.heap.get(d.expr[1]) if _is_slot(d.expr) else True:
                self.guard(self.b.icmp_signed("==", actual, self.size(d.expr)), 8 + pc)

    def b_bind_sizes(self, pc: int, inst: Call) -> None:
        kind, n, binds = (a.value for a in inst.args[1:4])
        t = self.tensor(inst.args[0]) if kind == "tensor" else None
        if t is None or len(t.dims) != n:
            raise _Unsupported(f"sizes bound from a {kind} value")
        for axis, slot in binds:
            self.heap.setdefault(slot, t.dims[axis])

    def b_alloc_tensor(self, pc: int, inst: Call) -> None:
        dtype = str(DataType(inst.args[0].value))
        _numpy_dtype(dtype)
        dims = [self.size(a.expr if isinstance(a, Size) else a.value) for a in inst.args[2:]]
        for d in dims:
            self.guard(self.b.icmp_signed(">=", d, self.const(0)), 8 + pc)
        self.regs[inst.dst] = _Tensor(dtype, dims, ("alloc", inst.dst))

    def b_release(self, pc: int, inst: Call) -> None:
        pass  # (the static plan decided where storage is shared)

    def value(self, arg: Any) -> Any:
        """What an argument holds: a tuple of arguments (make_tuple's) or a tensor."""
        if isinstance(arg, Imm):
            raise _Unsupported("an immediate value in a register")
        held = self.regs.get(arg.index) if isinstance(arg, Reg) else None
        return held if isinstance(held, tuple) else self.tensor(arg)

    def b_copy(self, pc: int, inst: Call) -> None:
        self.regs[inst.dst] = self.value(inst.args[0])

    def b_make_tuple(self, pc: int, inst: Call) -> None:
        for a in inst.args:
            self.value(a)
        self.regs[inst.dst] = tuple(inst.args)

    def b_check_tuple_info(self, pc: int, inst: Call) -> None:
        held = self.value(inst.args[0])
        if not isinstance(held, tuple) or len(held) != inst.args[1].value:
            raise _Unsupported(f"a check that fails for every argument ({inst.args[2].value})")

    def b_tuple_get(self, pc: int, inst: Call) -> None:
        held = self.value(inst.args[0])
        if not isinstance(held, tuple):
            raise _Unsupported("a tuple item of a value that is not a tuple")
        self.regs[inst.dst] = self.value(held[inst.args[1].value])

    # ---- kernels
    def kernel_call(self, pc: int, inst: Call) -> None:
        func = self.artifacts[inst.func].func
        if len(inst.args) != len(func.params):
            raise _Unsupported(f"{inst.func} called with {len(inst.args)} arguments")
        values = []
        for p, a in zip(func.params, inst.args):
            buf = func.buffer_map.get(p)
            if buf is not None:
                values.append(self.tensor(a))
            elif isinstance(a, (Size, Imm)):
                v = a.expr if isinstance(a, Size) else getattr(a.value, "value", a.value)
                if p.dtype.is_float and isinstance(v, (int, float)) and not isinstance(v, bool):
                    values.append(ir.Constant(ir.DoubleType(), float(v)))  # (its slot holds a double's bits)
                elif p.dtype.is_float or isinstance(v, float):
                    raise _Unsupported(f"a scalar argument of {inst.func} of another type than its parameter")
                else:
                    values.append(self.size(v))
            else:
                raise _Unsupported(f"a scalar argument of {inst.func} held in a register")
        for k in written_params(func):  # (read-only weights are fine; a written parameter is not)
            if values[k].flags is not None:
                self.guard(self.has_flags(values[k].flags, _NPY_WRITEABLE), 4)
        if inst.checked:
            self.kernel_checks(pc, inst.func, func, inst.args, values)
        self.calls.append((inst.func, values))
        if inst.dst is not None:
            self.regs[inst.dst] = ()  # (a direct call's value: the empty tuple)

    def kernel_checks(self, pc: int, name: str, func: Any, args: tuple, values: list) -> None:
        """What a checked call of the kernel checks: dtype, rank and extents of each buffer, and
        that no buffer it writes overlaps another argument."""
        sizes: dict = {}
        for p, value in zip(func.params, values):
            buf = func.buffer_map.get(p)
            if buf is None:
                continue
            if str(buf.dtype) != value.dtype or len(buf.shape) != len(value.dims):
                raise _Unsupported(f"{name} is called with a tensor its parameter {buf.name} does not take")
            for d, actual in zip(buf.shape, value.dims):
                if isinstance(d, IntImm):
                    expected = self.const(d.value)
                elif isinstance(d, Var):
                    expected = sizes.setdefault(id(d), actual)
                else:
                    raise _Unsupported(f"{name}: a buffer extent computed from others")
                if isinstance(actual, ir.Constant) and isinstance(expected, ir.Constant) \
                        and actual.constant != expected.constant:
                    raise _Unsupported(f"{name}'s buffer {buf.name} never fits its argument (the "
                                       f"kernel's check refuses every call)")
                if expected is not actual:
                    self.guard(self.b.icmp_signed("==", actual, expected), 8 + pc)
        tensors = [(k, v) for k, v in enumerate(values) if isinstance(v, _Tensor)]
        for k in written_params(func):
            for j, other in tensors:
                if j == k:
                    continue
                mine = values[k]
                if other is mine or (other.origin == mine.origin):
                    raise _Unsupported(f"{name} writes an argument that another argument shares")
                if mine.origin[0] == other.origin[0] == "param":
                    self.guard(self.disjoint(mine, other), 8 + pc)

    def disjoint(self, a: _Tensor, b: _Tensor) -> ir.Value:
        bld = self.b
        ends = []
        for t in (a, b):
            start = bld.ptrtoint(t.data, T.I64)
            ends.append((start, bld.add(start, self.nbytes(t))))
        (a0, a1), (b0, b1) = ends
        return bld.or_(bld.icmp_unsigned("<=", a1, b0), bld.icmp_unsigned("<=", b1, a0))

    def nbytes(self, t: _Tensor) -> ir.Value:
        n = self.const(_numpy_dtype(t.dtype).itemsize)
        for d in t.dims:
            n = self.b.mul(n, d)
        return n

    def emit_kernel_call(self, name: str, values: list) -> None:
        b = self.b
        artifact = self.artifacts[name]
        k = self.kernels.index(name)
        entry_at = len(CTX_FIELDS) + 2 * k
        slots = []
        for var in artifact.slots:
            slots.append(self.slot_value(var, artifact.func, values, name))
        array = b.alloca(T.I64, size=self.const(max(1, len(slots))))
        for i, v in enumerate(slots):
            place = b.gep(array, [self.const(i)], source_etype=T.I64)
            if isinstance(v.type, ir.PointerType):
                v = b.ptrtoint(v, T.I64)
            elif isinstance(v.type, ir.DoubleType):
                v = b.bitcast(v, T.I64)
            b.store(v, place)
        if artifact.thread_pool:
            b.store(self.threads, self.ctx_at(entry_at + 1, T.PTR))
        entry = b.inttoptr(self.ctx_at(entry_at), ir.FunctionType(ir.VoidType(), [T.PTR]).as_pointer())
        b.call(entry, [array])

    def slot_value(self, var: Var, func: Any, values: list, name: str) -> ir.Value:
        """What the kernel's slot for ``var`` holds, as ``runtime/module.py`` fills it: a buffer's
        data, a scalar, or a size read off the first buffer that states it."""
        for p, v in zip(func.params, values):
            buf = func.buffer_map.get(p)
            if buf is None and p is var:
                return v
            if buf is not None and buf.data is var:
                return v.data
        for p, v in zip(func.params, values):
            buf = func.buffer_map.get(p)
            if buf is None:
                continue
            for axis, d in enumerate(buf.shape):
                if d is var:
                    return v.dims[axis]
            for axis, d in enumerate(buf.strides):
                if d is var:
                    stride = self.const(1)
                    for e in v.dims[axis + 1:]:
                        stride = self.b.mul(stride, e)
                    return stride
            if buf.elem_offset is var:
                return self.const(0)
        raise _Unsupported(f"{name} reads {var.name}, which no parameter defines")

    def thread_count(self) -> ir.Value:
        """TVM_NUM_THREADS when it is a positive number (read once per call, as the kernels'
        own calls read it), else ``ctx``'s (the target's ``-num-cores`` or all cores)."""
        b = self.b
        env = b.call(declare(self.module, "getenv", T.PTR, [T.PTR]), [self.string("TVM_NUM_THREADS")])
        default = b.trunc(self.ctx_at(_CTX["threads"]), T.I32)
        start = b.block
        with b.if_then(b.icmp_unsigned("!=", env, ir.Constant(T.PTR, None))):
            parsed = b.call(declare(self.module, "atoi", T.I32, [T.PTR]), [env])
            parsed = b.select(b.icmp_signed(">", parsed, ir.Constant(T.I32, 0)), parsed, default)
            parsed_block = b.block
        value = b.phi(T.I32)
        value.add_incoming(default, start)
        value.add_incoming(parsed, parsed_block)
        return value

    def string(self, text: str) -> ir.Value:
        data = bytearray(text.encode() + b"\0")
        g = ir.GlobalVariable(self.module, ir.ArrayType(T.I8, len(data)), f".str.{len(self.module.globals)}")
        g.global_constant, g.linkage = True, "internal"
        g.initializer = ir.Constant(ir.ArrayType(T.I8, len(data)), data)
        return self.b.gep(g, [self.const(0), self.const(0)], source_etype=ir.ArrayType(T.I8, len(data)))

    # ---- storage and the result
    def result_tree(self, reg: int) -> Any:
        value = self.regs.get(reg)
        if value is None and reg < len(self.f.params):
            value = self.tensor(Reg(reg))
        if isinstance(value, tuple):
            return tuple(self.result_tree(a.index) if isinstance(a, Reg) else ("const", self.tensor(a).origin[1])
                         for a in value)
        if not isinstance(value, _Tensor):
            raise _Unsupported("it returns a value that is not a tensor or a tuple of them")
        kind, where = value.origin
        if kind == "alloc":
            if where not in self.plan.outputs:
                raise _Unsupported("it returns storage the plan shares")
            return ("out", self.plan.outputs.index(where))
        return (kind, where)

    def lay_out_storage(self) -> tuple:
        """Data pointers for every allocation: the outputs' in the caller's byte arrays (or
        NEED_OUTPUTS), the tokens reserved per VM at their offsets in ``ctx``'s storage, the
        others in one block allocated for this call."""
        b, plan = self.b, self.plan
        allocated = {reg: t for reg, t in self.regs.items() if isinstance(t, _Tensor) and t.origin[0] == "alloc"}
        missing = [r for r in plan.outputs if r not in allocated]
        if missing:
            raise _Unsupported(f"register %{missing[0]} is returned but not allocated here")
        base = len(CTX_FIELDS) + 2 * len(self._all_kernels()) + len(self.constants)
        outputs, at = [], base
        need = ir.Constant(T.I1, 0)
        outs_count = self.field(self.outs, "tuple_size", T.I64)
        self.guard(b.icmp_signed("==", outs_count, self.const(len(plan.outputs))), 2)
        for j, reg in enumerate(plan.outputs):
            t = allocated[reg]
            nbytes = self.nbytes(t)
            raw = self.field(self.outs, "tuple_items", T.PTR, index=j)
            self.guard(self.is_ndarray(raw), 2)
            length = b.load(self.field(raw, "arr_dims", T.PTR), typ=T.I64)
            b.store(nbytes, b.gep(self.ctx, [self.const(at + 1 + len(t.dims))], source_etype=T.I64))
            need = b.or_(need, b.icmp_signed("!=", length, b.add(nbytes, self.const(ALIGNMENT))))
            data = b.ptrtoint(self.field(raw, "arr_data", T.PTR), T.I64)
            aligned = b.and_(b.add(data, self.const(ALIGNMENT - 1)), self.const(-ALIGNMENT))
            b.store(b.sub(aligned, data), b.gep(self.ctx, [self.const(at)], source_etype=T.I64))
            for i, d in enumerate(t.dims):
                b.store(d, b.gep(self.ctx, [self.const(at + 1 + i)], source_etype=T.I64))
            t.data = b.inttoptr(aligned, T.PTR)
            outputs.append(NativeOutput(_numpy_dtype(t.dtype).name,
                                        tuple(d.constant if isinstance(d, ir.Constant) else None for d in t.dims), at))
            at += 2 + len(t.dims)
        self.ctx_size = at
        with b.if_then(need, likely=False):
            b.ret(ir.Constant(T.I32, NEED_OUTPUTS))
        # tokens: reserved (constant offsets in the VM's storage) or for this call (running offsets)
        offset, per_call_size = 0, self.const(0)
        placement = []
        for token in plan.tokens:
            if token.bound is not None:
                size = self.size(token.size)
                if not isinstance(size, ir.Constant):
                    self.guard(b.icmp_signed("<=", size, self.const(token.bound)), 7)
                placement.append(("reserved", offset))
                offset += _round_up(token.bound)
            else:
                placement.append(("call", per_call_size))
                size = self.size(token.size)
                per_call_size = b.add(per_call_size, b.and_(b.add(size, self.const(ALIGNMENT - 1)),
                                                            self.const(-ALIGNMENT)))
        self.storage_bytes = offset
        self.per_call = None
        if any(kind == "call" for kind, _ in placement):
            malloc = declare(self.module, "malloc", T.PTR, [T.I64])
            self.per_call = b.call(malloc, [b.add(per_call_size, self.const(ALIGNMENT))])
            self.guard(b.icmp_unsigned("!=", self.per_call, ir.Constant(T.PTR, None)), 7)
            start = b.ptrtoint(self.per_call, T.I64)
            per_call_base = b.and_(b.add(start, self.const(ALIGNMENT - 1)), self.const(-ALIGNMENT))
        storage = self.ctx_at(_CTX["storage"])
        for reg, k in plan.token_of.items():
            kind, where = placement[k]
            origin = storage if kind == "reserved" else per_call_base
            allocated[reg].data = b.inttoptr(b.add(origin, where if kind == "call" else self.const(where)), T.PTR)
        self.kernels = self._all_kernels()
        for i, index in enumerate(self.constants):
            self.const_tensors[index].data = self.ctx_at(len(CTX_FIELDS) + 2 * len(self.kernels) + i, T.PTR)
        if any(self.artifacts[name].thread_pool for name in self.kernels):
            self.threads = self.thread_count()
        return tuple(outputs)

    def _all_kernels(self) -> list:
        return list(dict.fromkeys(name for name, _ in self.calls))


def _params_in(tree: Any, first: int) -> bool:
    """Whether a result tree returns a parameter numbered ``first`` or above."""
    if isinstance(tree, tuple) and tree and isinstance(tree[0], str):
        return tree[0] == "param" and tree[1] >= first
    return any(_params_in(t, first) for t in tree)


def _is_slot(e: Any) -> bool:
    return isinstance(e, tuple) and e[0] == "slot"


def _round_up(n: int) -> int:
    return -(-n // ALIGNMENT) * ALIGNMENT


def _numpy_dtype(name: str) -> np.dtype:
    if name in ML_DTYPES:
        return ml_dtype(name)
    try:
        return np.dtype("bool" if name == "bool" else name)
    except TypeError:
        raise _Unsupported(f"tensors of {name} (numpy has no such dtype)") from None


def _dtype_name(dtype: np.dtype) -> str:
    return "bool" if dtype.kind == "b" else dtype.name


def _type_nums(name: str) -> list:
    """numpy's type numbers of the arrays whose dtype equals ``name``'s (int64 is both ``long``
    and ``long long`` on some platforms)."""
    dtype = _numpy_dtype(name)
    builtin = {np.dtype(c).num for c in np.typecodes["All"] if c not in "OSUVMm" and np.dtype(c) == dtype}
    return sorted(builtin) or [dtype.num]  # (ml_dtypes' types: the number numpy registered)


__all__ = ["lower_lifted_calls", "lower_vm_function", "lower_vm_program"]
