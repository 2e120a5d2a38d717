"""Relax to the VM's instruction set: ``compile_vm(mod)`` gives the ``VMProgram`` (``ir/vm_program.py``)
that ``runtime/vm.py`` runs.

Each Relax function becomes a ``VMFunction`` (as TVM's VMShapeLower and VMCodeGen do it, in one
walk): its parameters are checked against their struct info (the VM builtins
``check_tensor_info``, ``match_shape``: symbolic sizes such as a batch ``n`` are bound into the
function's heap where they first occur and compared where they occur again); each binding gets
a register (an alias ``y = x`` or a constant gets none); ``R.call_tir`` and direct PrimFunc calls
allocate their outputs (``alloc_tensor``, pooled where ``vm_memory_plan`` says a buffer dies
inside the function, then ``release``d after its last use) and call the kernel; if/else becomes
``If``/``Goto``; nested functions are lifted out as closures over the variables and sizes they
use; the result is checked against the return struct info unless the compiler has proven it.

A kernel call whose arguments the compiler knows fit the kernel's parameters (dtype, rank,
extents, no overlap of what it writes) is marked unchecked: the VM skips the kernel's per-call
checks. Relax operators that were not legalized run the runtime's numpy references
(``vm.builtin.relax_op``) with their result shapes checked against the struct info.

What the compiler does not take is a TVMSError naming the construct, at compile time.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ...ir import expr as tir
from ...ir import relax as rx
from ...ir.analysis import written_params
from ...ir.errors import TVMSError
from ...ir.expr import Op
from ...ir.function import PrimFunc
from ...ir.module import GlobalVar, IRModule
from ...ir.struct_info import (ObjectStructInfo, PrimStructInfo, ShapeStructInfo, TensorStructInfo,
                               TupleStructInfo)
from ...ir.visitor import walk
from ...ir.vm_program import Call, Const, Goto, If, Imm, Reg, Ret, Size, VMFunction, VMProgram
from .vm_kernel_proof import SIZE, dtype_key, known_of_sinfo, plain_dims, proven, same_known
from .vm_memory_plan import ALLOC_TENSOR, plan_seq

_SIZE_OPS = {tir.Add: "add", tir.Sub: "sub", tir.Mul: "mul", tir.Div: "div", tir.Mod: "mod",
             tir.FloorDiv: "floordiv", tir.FloorMod: "floormod", tir.Min: "min", tir.Max: "max",
             tir.EQ: "eq", tir.NE: "ne", tir.LT: "lt", tir.LE: "le", tir.GT: "gt", tir.GE: "ge",
             tir.And: "and", tir.Or: "or"}
_STORAGE_OPS = ("relax.null_value", "relax.vm.alloc_storage", "relax.vm.alloc_tensor", "relax.vm.kill_object")


def compile_vm(mod: IRModule) -> VMProgram:
    """The VM program of every Relax function of ``mod`` (a lowered module: its PrimFuncs are
    the kernels the program calls by name)."""
    codegen = _Codegen(mod)
    for key in mod:
        if isinstance(mod[key], rx.Function):
            _FunctionCompiler(codegen, key, mod[key]).compile()
    return VMProgram(tuple(codegen.functions), tuple(codegen.constants))


class _Codegen:
    """What the functions of one program share: the module, the compiled functions, constants."""

    def __init__(self, mod: IRModule) -> None:
        self.mod = mod
        self.functions: list[VMFunction] = []
        self.constants: list[np.ndarray] = []
        self.const_index: dict[int, int] = {}  # id of a Constant node -> its pool index
        self.names = {key for key in mod}

    def constant(self, c: rx.Constant) -> Const:
        k = self.const_index.get(id(c))
        if k is None:
            if c.data is None:
                raise TVMSError("a constant without data (a metadata placeholder) cannot be compiled for the VM")
            k = self.const_index[id(c)] = len(self.constants)
            self.constants.append(np.asarray(c.data))
        return Const(k)

    def callee(self, op: Any) -> Any:
        """The PrimFunc or Relax function ``op`` names in the module, or None."""
        if not isinstance(op, GlobalVar) or op.name_hint not in self.mod:
            return None
        return self.mod[op]

    def is_prim_func(self, op: Any) -> bool:
        return isinstance(self.callee(op), PrimFunc)

    def fresh_name(self, base: str) -> str:
        name, k = base, 1
        while name in self.names:
            name, k = f"{base}_{k}", k + 1
        self.names.add(name)
        return name


class _FunctionCompiler:
    """One Relax function to one VMFunction. ``captured``: the outer variables a lifted closure
    reads (its first registers), ``captured_sizes``: the outer sizes it reads (one shape value
    after them, bound into its heap first); ``itself``: the variable a lifted local function is
    bound to, when it calls itself."""

    def __init__(self, cg: _Codegen, name: str, func: rx.Function, captured: tuple = (),
                 captured_sizes: tuple = (), itself: rx.Var | None = None) -> None:
        self.cg, self.name, self.func = cg, name, func
        self.captured, self.captured_sizes, self.itself = captured, captured_sizes, itself
        self.values: dict = {}  # Relax Var -> its argument (Reg, Const or Imm)
        self.slots: dict = {}  # TIR size Var -> its heap slot
        self.code: list = []
        self.num_regs = 0
        self.pooled: set = set()  # ids of the calls whose output comes from the pool
        # what the compiler knows of a tensor value for certain: (numpy dtype, dims: ints or
        # size expressions), or a list of them for a tuple of outputs
        self.known: dict = {}
        # Relax Var -> the tensor allocated here it holds (a key naming it, or a list of keys
        # for the outputs of a call_tir): it shares memory with no parameter and no other
        # allocation, so a kernel writing it needs no overlap check
        self.fresh: dict = {}

    # ---- the function
    def compile(self) -> None:
        func, params = self.func, self.func.params
        names = [v.name for v in self.captured]
        for v in self.captured:
            self.values[v] = Reg(self.reg())
        held = [self.values[v] for v in self.captured]
        if self.captured_sizes:
            names.append("(captured sizes)")
            sizes = Reg(self.reg())
            held.append(sizes)
            self.match_dims("shape", sizes, self.captured_sizes, "the captured sizes")
        first = self.num_regs
        for p in params:
            self.values[p] = Reg(self.reg())
            fact = known_of_sinfo(p.struct_info)
            if fact is not None:
                self.known[p] = fact
        self.check_params(params)
        if self.itself is not None:  # a recursive local function: the same closure again
            self.values[self.itself] = self.builtin("vm.builtin.make_closure", [Imm(self.name), *held])
        body = func.body
        if not isinstance(body, rx.SeqExpr):
            raise TVMSError(f"{self.name}: a function body that is not a SeqExpr ({type(body).__name__})")
        result = self.seq(body)
        proven = isinstance(body.body, rx.Var) and \
            same_known(self.known.get(body.body), known_of_sinfo(func.ret_struct_info))
        if not proven:
            self.match(func.ret_struct_info, result, "the result")
        self.code.append(Ret(self.in_register(result).index))
        shape_params = tuple(first + k for k, p in enumerate(params) if isinstance(p.struct_info, ShapeStructInfo))
        signature = [("", None, None)] * first + [self.tensor_type(p.struct_info) for p in params]
        self.cg.functions.append(VMFunction(
            self.name, tuple(names + [p.name for p in params]), self.num_regs,
            tuple(v.name for v in self.slots), tuple(self.code), shape_params,
            bool(self.captured or self.captured_sizes) or self.name not in self.cg.mod, tuple(signature),
            self.upper_bounds()))

    def upper_bounds(self) -> tuple:
        """``(slot, bound)`` of the size variables the ``tir_var_upper_bound`` attribute bounds."""
        bounds = self.func.attrs.get("tir_var_upper_bound") or {}
        if not hasattr(bounds, "items"):
            raise TVMSError(f"{self.name}: tir_var_upper_bound maps size names to integers, got {bounds!r}")
        slots = {v.name: k for v, k in self.slots.items()}
        out = []
        for name, b in bounds.items():
            value = getattr(b, "value", b)
            if isinstance(value, bool) or not isinstance(value, int):
                raise TVMSError(f"{self.name}: tir_var_upper_bound of {name!r} must be an integer, got {b!r}")
            if name in slots:
                out.append((slots[name], value))
        return tuple(sorted(out))

    def tensor_type(self, sinfo: Any) -> tuple:
        """A parameter as ``VMFunction.signature`` records it: (annotation, dtype, dims)."""
        text = sinfo.script() if hasattr(sinfo, "script") else str(sinfo)
        if not isinstance(sinfo, TensorStructInfo) or sinfo.dtype.is_void:
            return text, None, None
        return text, str(sinfo.dtype), None if sinfo.dims is None else tuple(self.size_expr(d) for d in sinfo.dims)

    def check_params(self, params: tuple) -> None:
        """The argument checks, as the reference executor makes them: when a dimension is an
        expression of sizes (``(n + 1) // 2``), every parameter's plain sizes are bound first."""
        dims_of = [_dims(p.struct_info) for p in params]
        if any(d is not None and any(not isinstance(x, (tir.Var, tir.IntImm, int)) for x in d) for d in dims_of):
            for p, dims in zip(params, dims_of):
                binds = tuple((i, self.slot(d)) for i, d in enumerate(dims or ()) if isinstance(d, tir.Var))
                if binds:
                    kind = "tensor" if isinstance(p.struct_info, TensorStructInfo) else "shape"
                    self.builtin("vm.builtin.bind_sizes", [self.values[p], Imm(kind), Imm(len(dims)), Imm(binds)],
                                 result=False)
        for p in params:
            self.match(p.struct_info, self.values[p], f"argument {p.name!r}")

    # ---- registers, the heap and instructions
    def reg(self) -> int:
        self.num_regs += 1
        return self.num_regs - 1

    def slot(self, var: tir.Var) -> int:
        k = self.slots.get(var)
        if k is None:
            k = self.slots[var] = len(self.slots)
        return k

    def builtin(self, name: str, args: list, dst: int | None = None, result: bool = True) -> Reg | None:
        if result and dst is None:
            dst = self.reg()
        self.code.append(Call(dst if result else None, "builtin", name, tuple(args)))
        return Reg(dst) if result else None

    def in_register(self, arg: Any, dst: int | None = None) -> Reg:
        """``arg`` in a register (``dst`` when given): a constant or immediate is copied in."""
        if isinstance(arg, Reg) and (dst is None or arg.index == dst):
            return arg
        return self.builtin("vm.builtin.copy", [arg], dst)

    def size(self, e: Any) -> Size:
        return Size(self.size_expr(e))

    def size_expr(self, e: Any) -> Any:
        if isinstance(e, bool):
            return int(e)
        if isinstance(e, (int, float)):
            return e
        if isinstance(e, tir.IntImm):
            return int(e.value)
        if isinstance(e, tir.FloatImm):
            return float(e.value)
        if isinstance(e, tir.Var):
            return ("slot", self.slot(e))
        op = _SIZE_OPS.get(type(e))
        if op is not None:
            return (op, self.size_expr(e.a), self.size_expr(e.b))
        if isinstance(e, tir.Not):
            return ("not", self.size_expr(e.a))
        if isinstance(e, tir.Select):
            return ("select", self.size_expr(e.condition), self.size_expr(e.true_value),
                    self.size_expr(e.false_value))
        if isinstance(e, tir.Call) and getattr(e.op, "name", None) == "tir.if_then_else" and len(e.args) == 3:
            # (the VM computes only the chosen branch: the other may divide by zero)
            return ("select", *(self.size_expr(a) for a in e.args))
        if isinstance(e, tir.Cast):
            return ("cast", str(e.dtype), self.size_expr(e.value))
        raise TVMSError(f"the VM compiler cannot compute the size expression {e} ({type(e).__name__})")

    # ---- struct info checks
    def match(self, sinfo: Any, arg: Any, what: str) -> None:
        """Check ``arg`` against ``sinfo``, binding the sizes it defines (``what`` names it in errors)."""
        if sinfo is None or isinstance(sinfo, ObjectStructInfo):
            return
        if isinstance(sinfo, TensorStructInfo):
            dtype = None if sinfo.dtype.is_void else str(sinfo.dtype)
            self.builtin("vm.builtin.check_tensor_info", [arg, Imm(sinfo.ndim), Imm(dtype), Imm(what)], result=False)
            if sinfo.dims:  # (a 0-d tensor: the rank check said all)
                self.match_dims("tensor", arg, sinfo.dims, what)
        elif isinstance(sinfo, ShapeStructInfo):
            self.builtin("vm.builtin.check_shape_info", [arg, Imm(what)], result=False)
            if sinfo.values is not None:
                self.match_dims("shape", arg, sinfo.values, what)
        elif isinstance(sinfo, PrimStructInfo):
            if sinfo.value is not None:
                self.match_dims("prim", arg, (sinfo.value,), what)
        elif isinstance(sinfo, TupleStructInfo):
            self.builtin("vm.builtin.check_tuple_info", [arg, Imm(len(sinfo.fields)), Imm(what)], result=False)
            for i, field in enumerate(sinfo.fields):
                if not isinstance(field, ObjectStructInfo):
                    item = self.builtin("vm.builtin.tuple_get", [arg, Imm(i)])
                    self.match(field, item, f"{what}[{i}]")

    def match_dims(self, kind: str, arg: Any, dims: tuple, what: str) -> None:
        binds = tuple((i, self.slot(d)) for i, d in enumerate(dims) if isinstance(d, tir.Var))
        labels = tuple(f"{d.name} = " if isinstance(d, tir.Var) else "" if isinstance(d, (int, tir.IntImm))
                       else f"{d} = " for d in dims)
        self.builtin("vm.builtin.match_shape", [arg, Imm(kind), Imm(what), Imm(labels), Imm(binds),
                                                *(self.size(d) for d in dims)], result=False)

    # ---- bindings
    def seq(self, seq: rx.SeqExpr) -> Any:
        plan = plan_seq(seq, self.cg.is_prim_func)
        self.pooled |= plan.pooled_calls
        for i, b in enumerate(plan.bindings):
            self.binding(b)
            for var in plan.release_after.get(i, ()):
                self.builtin("vm.builtin.release", [self.values[var]], result=False)
        return self.expr(seq.body)

    def binding(self, b: Any) -> None:
        value, var = b.value, b.var
        if isinstance(b, rx.MatchCast):
            arg = self.expr(value)
            self.match(b.struct_info, arg, f"R.match_cast of {var.name!r}")
            self.values[var] = arg
        elif isinstance(value, (rx.Var, rx.Constant)):  # an alias: no instruction
            self.values[var] = self.expr(value)
            if value in self.known:
                self.known[var] = self.known[value]
            if value in self.fresh:
                self.fresh[var] = self.fresh[value]
        elif isinstance(value, rx.Function):
            self.values[var] = self.closure(value, var.name, var)
        else:
            self.values[var] = self.expr(value, self.reg(), var)

    def lookup(self, var: rx.Var) -> Any:
        arg = self.values.get(var)
        if arg is None:
            raise TVMSError(f"{self.name}: the Relax variable {var.name!r} is used before it is bound")
        return arg

    # ---- expressions: each gives its argument (in ``dst`` when given)
    def expr(self, e: Any, dst: int | None = None, var: rx.Var | None = None) -> Any:
        if isinstance(e, rx.Var):
            arg = self.lookup(e)
        elif isinstance(e, rx.Constant):
            arg = self.cg.constant(e)
        elif isinstance(e, (rx.StringImm, rx.DataTypeImm)):
            arg = Imm(e.value)
        elif isinstance(e, rx.Tuple):
            return self.builtin("vm.builtin.make_tuple", [self.expr(f) for f in e.fields], dst)
        elif isinstance(e, rx.TupleGetItem):
            return self.tuple_get(e, dst, var)
        elif isinstance(e, rx.ShapeExpr):
            return self.builtin("vm.builtin.make_shape", [self.size(v) for v in e.values], dst)
        elif isinstance(e, rx.PrimValue):
            return self.builtin("vm.builtin.prim_value", [Imm(str(e.value.dtype)), self.size(e.value)], dst)
        elif isinstance(e, rx.ExternFunc):
            return self.builtin("vm.builtin.get_packed", [Imm(e.global_symbol)], dst)
        elif isinstance(e, GlobalVar):
            if not isinstance(self.cg.callee(e), rx.Function):
                raise TVMSError(f"{self.name}: {e.name_hint!r} is used as a value; the VM takes Relax "
                                f"functions as values, not PrimFuncs")
            return self.builtin("vm.builtin.make_closure", [Imm(e.name_hint)], dst)
        elif isinstance(e, rx.Function):
            arg = self.closure(e, "lambda")
        elif isinstance(e, rx.If):
            return self.branch(e, dst)
        elif isinstance(e, rx.SeqExpr):
            arg = self.seq(e)
        elif isinstance(e, rx.Call):
            return self.call(e, dst, var)
        else:
            raise TVMSError(f"{self.name}: the VM compiler does not support {type(e).__name__}")
        return arg if dst is None else self.in_register(arg, dst)

    def tuple_get(self, e: rx.TupleGetItem, dst: int | None, var: rx.Var | None) -> Reg:
        source = e.tuple_value
        if var is not None and isinstance(source, rx.Var):
            fact, fresh = self.known.get(source), self.fresh.get(source)
            if isinstance(fact, list) and e.index < len(fact):
                self.known[var] = fact[e.index]
            if isinstance(fresh, list) and e.index < len(fresh):
                self.fresh[var] = fresh[e.index]
        return self.builtin("vm.builtin.tuple_get", [self.expr(source), Imm(e.index)], dst)

    def branch(self, e: rx.If, dst: int | None) -> Reg:
        cond = self.in_register(self.expr(e.cond))
        out = self.reg() if dst is None else dst
        at_if = len(self.code)
        self.code.append(None)  # (the jumps are filled in once the branches' lengths are known)
        self.expr(e.true_branch, out)
        at_goto = len(self.code)
        self.code.append(None)
        self.expr(e.false_branch, out)
        self.code[at_if] = If(cond.index, at_goto + 1 - at_if)
        self.code[at_goto] = Goto(len(self.code) - at_goto)
        return Reg(out)

    def closure(self, func: rx.Function, name: str, var: rx.Var | None = None) -> Reg:
        """A nested function, lifted out as a function of the program over the variables and
        sizes it reads from here; its value is a closure holding them (``var``: the variable
        it is bound to, which it may call)."""
        nodes = list(walk(func))
        captured = tuple(dict.fromkeys(n for n in nodes if isinstance(n, rx.Var) and n in self.values))
        sizes = tuple(dict.fromkeys(n for n in nodes if isinstance(n, tir.Var) and n in self.slots))
        lifted = self.cg.fresh_name(f"{self.name}.{name}")
        itself = var if var is not None and any(n is var for n in nodes) else None
        _FunctionCompiler(self.cg, lifted, func, captured, sizes, itself).compile()
        args = [Imm(lifted), *(self.values[v] for v in captured)]
        if sizes:
            args.append(self.builtin("vm.builtin.make_shape", [self.size(v) for v in sizes]))
        return self.builtin("vm.builtin.make_closure", args)

    # ---- calls
    def call(self, e: rx.Call, dst: int | None, var: rx.Var | None) -> Reg:
        op = e.op
        if isinstance(op, Op):
            if op.name in ("relax.call_tir", "relax.call_tir_with_grad"):
                return self.call_tir(e, dst, var)
            if op.name in _CALLS:
                return getattr(self, _CALLS[op.name])(e, dst)
            if op.name == ALLOC_TENSOR:
                return self.alloc_tensor(e, dst, var)
            if op.name in _STORAGE_OPS:
                return self.storage(e, dst)
            return self.operator(e, dst)
        callee = self.cg.callee(op)
        if isinstance(callee, PrimFunc):
            return self.call_kernel(e, dst)
        args = [self.expr(a) for a in e.args]
        out = self.reg() if dst is None else dst
        if isinstance(callee, rx.Function):
            if len(args) != len(callee.params):
                raise TVMSError(f"{self.name}: {op.name_hint} takes {len(callee.params)} arguments, got {len(args)}")
            self.code.append(Call(out, "function", op.name_hint, tuple(args)))
        elif isinstance(op, rx.ExternFunc):
            self.code.append(Call(out, "packed", op.global_symbol, tuple(args)))
        elif isinstance(op, GlobalVar):
            raise TVMSError(f"{self.name}: the module has no function {op.name_hint!r}")
        else:
            self.builtin("vm.builtin.invoke_closure", [self.expr(op), *args], out)
        return Reg(out)

    def operator(self, e: rx.Call, dst: int | None) -> Reg:
        """A Relax operator left in the module: its numpy reference in the runtime, and the
        result's shapes compared with what its struct info states."""
        out = self.builtin("vm.builtin.relax_op", [Imm(e.op.name), Imm(e.attrs), *(self.expr(a) for a in e.args)], dst)
        checks, sizes = [], []
        for path, s in _tensor_infos(e.struct_info, ()):
            checks.append((path, len(s.dims)))
            sizes.extend(self.size(d) for d in s.dims)
        if checks:
            self.builtin("vm.builtin.check_result_shape", [out, Imm(e.op.name), Imm(tuple(checks)), *sizes],
                         result=False)
        return out

    def inputs(self, e: Any, what: str) -> list:
        """The arguments of a destination-passing call's input tuple."""
        if isinstance(e, rx.Tuple):
            return [self.expr(f) for f in e.fields]
        sinfo = getattr(e, "struct_info", None)
        if not isinstance(sinfo, TupleStructInfo):
            raise TVMSError(f"{self.name}: the inputs of {what} are not a tuple of known length")
        value = self.expr(e)
        return [self.builtin("vm.builtin.tuple_get", [value, Imm(i)]) for i in range(len(sinfo.fields))]

    def outputs(self, e: rx.Call, dst: int | None) -> list:
        """Registers with the allocated outputs of a destination-passing call (the one output
        goes into ``dst``), with what they are known to be."""
        outs = []
        for s in e.sinfo_args:
            if not isinstance(s, TensorStructInfo) or s.dims is None or s.dtype.is_void:
                raise TVMSError(f"{self.name}: the outputs of a destination-passing call need known "
                                f"shapes and dtypes")
            target = dst if len(e.sinfo_args) == 1 else None
            outs.append(self.alloc(s.dtype, s.dims, id(e) in self.pooled, target))
        return outs

    def alloc(self, dtype: Any, dims: tuple, pooled: bool, dst: int | None) -> Reg:
        return self.builtin("vm.builtin.alloc_tensor", [Imm(str(dtype)), Imm(pooled), *(self.size(d) for d in dims)], dst)

    def dps_result(self, e: rx.Call, outs: list, dst: int | None) -> Reg:
        return outs[0] if len(outs) == 1 else self.builtin("vm.builtin.make_tuple", outs, dst)

    def call_tir(self, e: rx.Call, dst: int | None, var: rx.Var | None) -> Reg:
        gv = e.args[0]
        func = self.cg.callee(gv)
        if not isinstance(func, PrimFunc):
            raise TVMSError(f"R.call_tir: {getattr(gv, 'name_hint', gv)!r} is not a PrimFunc")
        inputs = self.inputs(e.args[1], "R.call_tir")
        outs = self.outputs(e, dst)
        extra = []
        if len(e.args) > 2:
            if not isinstance(e.args[2], rx.ShapeExpr):
                raise TVMSError(f"{self.name}: R.call_tir's tir_vars must be an R.shape([...]) for the VM")
            extra = [self.size(v) for v in e.args[2].values]
        facts = [self.fact_of(x) for x in (e.args[1].fields if isinstance(e.args[1], rx.Tuple) else
                                           [None] * len(inputs))]
        out_facts = [(dtype_key(s.dtype), plain_dims(s.dims))
                     for s in e.sinfo_args]
        facts += out_facts + [SIZE] * len(extra)
        self.code.append(Call(None, "kernel", gv.name_hint, tuple(inputs + outs + extra),
                              checked=not proven(func, facts)))
        if var is not None:
            single = len(outs) == 1
            self.known[var] = out_facts[0] if single else out_facts
            self.fresh[var] = var if single else [(var, k) for k in range(len(outs))]
        return self.dps_result(e, outs, dst)

    def call_kernel(self, e: rx.Call, dst: int | None) -> Reg:
        """A direct PrimFunc call (after CallTIRRewrite): it writes into its arguments."""
        func = self.cg.callee(e.op)
        args = [self.expr(a) for a in e.args]
        facts = [self.fact_of(a) for a in e.args]
        checked = not (self.disjoint(func, e.args) and proven(func, facts))
        out = self.reg() if dst is None else dst
        self.code.append(Call(out, "kernel", e.op.name_hint, tuple(args), checked=checked))
        return Reg(out)

    def call_dps_packed(self, e: rx.Call, dst: int | None) -> Reg:
        callee = e.args[0]
        inputs = self.inputs(e.args[1], "R.call_dps_packed")
        outs = self.outputs(e, dst)
        if isinstance(callee, (rx.StringImm, rx.ExternFunc)):
            self.code.append(Call(None, "packed", _packed_name(callee, "R.call_dps_packed"), tuple(inputs + outs)))
        else:  # (a variable bound to an R.ExternFunc: the function its register holds)
            self.builtin("vm.builtin.invoke_closure", [self.expr(callee), *inputs, *outs], self.reg())
        return self.dps_result(e, outs, dst)

    def call_packed(self, e: rx.Call, dst: int | None) -> Reg:
        callee, args = e.args[0], [self.expr(a) for a in e.args[1:]]
        out = self.reg() if dst is None else dst
        if isinstance(callee, (rx.StringImm, rx.ExternFunc)):
            self.code.append(Call(out, "packed", _packed_name(callee, "R.call_packed"), tuple(args)))
        else:
            self.builtin("vm.builtin.invoke_closure", [self.expr(callee), *args], out)
        return Reg(out)

    def call_builtin(self, e: rx.Call, dst: int | None) -> Reg:
        """R.call_builtin_with_ctx: the packed function on the tuple's fields (tvms' runtime
        functions take no VM context)."""
        name = _packed_name(e.args[0], "R.call_builtin_with_ctx")
        out = self.reg() if dst is None else dst
        self.code.append(Call(out, "packed", name, tuple(self.inputs(e.args[1], "R.call_builtin_with_ctx"))))
        return Reg(out)

    def call_py_func(self, e: rx.Call, dst: int | None) -> Reg:
        """R.call_py_func: the runtime's vm.builtin.call_py_func on the name and the arguments'
        tuple (as TVM lowers it); the function is the one registered from Python under the name."""
        out = self.reg() if dst is None else dst
        self.code.append(Call(out, "packed", "vm.builtin.call_py_func", (Imm(e.args[0].value), self.expr(e.args[1]))))
        return Reg(out)

    def call_tir_inplace(self, e: rx.Call, dst: int | None) -> Reg:
        """The kernel writes into the inputs the in-place indices name; the outputs marked -1
        are allocated and passed after the inputs."""
        gv = e.args[0]
        if not self.cg.is_prim_func(gv):
            raise TVMSError(f"R.call_tir_inplace: {getattr(gv, 'name_hint', gv)!r} is not a PrimFunc")
        inputs = self.inputs(e.args[1], "R.call_tir_inplace")
        indices = e.attrs["inplace_indices"]
        fresh = [self.alloc(s.dtype, s.dims, False, None) for s, k in zip(e.sinfo_args, indices) if k == -1]
        extra = [self.size(v) for v in e.args[2].values] if len(e.args) > 2 else []
        self.code.append(Call(None, "kernel", gv.name_hint, tuple(inputs + fresh + extra)))
        it = iter(fresh)
        outs = [self.in_register(inputs[k]) if k != -1 else next(it) for k in indices]
        if len(outs) == 1:
            return self.in_register(outs[0], dst)
        return self.builtin("vm.builtin.make_tuple", outs, dst)

    def call_tir_dyn(self, e: rx.Call, dst: int | None) -> Reg:
        """R.vm.call_tir_dyn(f, (tensors..., R.shape([sizes]))): the kernel on the tensors and sizes."""
        *tensors, sizes = e.args[1].fields
        if not isinstance(sizes, rx.ShapeExpr):
            raise TVMSError(f"{self.name}: R.vm.call_tir_dyn takes its sizes as an R.shape([...]) last")
        args = [self.expr(t) for t in tensors] + [self.size(v) for v in sizes.values]
        callee = e.args[0]
        if isinstance(callee, (rx.StringImm, rx.ExternFunc)):  # (a packed function, by name)
            self.code.append(Call(None, "packed", _packed_name(callee, "R.vm.call_tir_dyn"), tuple(args)))
        elif self.cg.is_prim_func(callee):
            self.code.append(Call(None, "kernel", callee.name_hint, tuple(args)))
        else:
            raise TVMSError(f"{self.name}: R.vm.call_tir_dyn calls a PrimFunc of the module or a packed "
                            f"function by name, not {callee!r}")
        return self.builtin("vm.builtin.make_tuple", [], dst)

    def make_closure(self, e: rx.Call, dst: int | None) -> Reg:
        func = e.args[0]
        if not isinstance(self.cg.callee(func), rx.Function):
            raise TVMSError(f"{self.name}: R.make_closure takes a Relax function of the module")
        captured = self.inputs(e.args[1], "R.make_closure")
        return self.builtin("vm.builtin.make_closure", [Imm(func.name_hint), *captured], dst)

    def invoke_closure(self, e: rx.Call, dst: int | None) -> Reg:
        args = self.inputs(e.args[1], "R.invoke_closure")
        return self.builtin("vm.builtin.invoke_closure", [self.expr(e.args[0]), *args], dst)

    def alloc_tensor(self, e: rx.Call, dst: int | None, var: rx.Var | None) -> Reg:
        shape, dtype = e.args[0], e.args[1]
        if not isinstance(shape, rx.ShapeExpr) or not isinstance(dtype, rx.DataTypeImm):
            raise TVMSError(f"{self.name}: R.builtin.alloc_tensor takes an R.shape([...]) and a dtype for the VM")
        if var is not None:
            self.known[var] = (dtype_key(dtype.value), plain_dims(shape.values))
            self.fresh[var] = var
        return self.alloc(dtype.value, shape.values, id(e) in self.pooled, dst)

    def storage(self, e: rx.Call, dst: int | None) -> Reg:
        """The operators of VM-lowered Relax (TVM's memory planning made them): storage of a
        size, a tensor at an offset in it, an object's end, the null value."""
        name, args = e.op.name, e.args
        if name == "relax.null_value":
            return self.builtin("vm.builtin.copy", [Imm(None)], dst)
        if name == "relax.vm.kill_object":
            return self.builtin("vm.builtin.kill_object", [self.expr(args[0])], dst)
        # (alloc_storage: size, device index, dtype, scope; alloc_tensor: storage, offset, shape, dtype, ...)
        shape, dtype = (args[0], args[2]) if name == "relax.vm.alloc_storage" else (args[2], args[3])
        if not isinstance(shape, rx.ShapeExpr) or not isinstance(dtype, rx.DataTypeImm):
            raise TVMSError(f"{self.name}: R.{name[len('relax.'):]} takes an R.shape([...]) and a dtype for the VM")
        sizes = [self.size(d) for d in shape.values]
        if name == "relax.vm.alloc_storage":
            return self.builtin("vm.builtin.alloc_storage", [Imm(str(dtype.value)), *sizes], dst)
        if not isinstance(args[1], (rx.PrimValue, rx.Constant)) and not isinstance(args[1], rx.Var):
            raise TVMSError(f"{self.name}: R.vm.alloc_tensor takes its offset as a number")
        offset = self.size(args[1].value) if isinstance(args[1], rx.PrimValue) else self.expr(args[1])
        return self.builtin("vm.builtin.alloc_tensor_in_storage",
                            [Imm(str(dtype.value)), self.expr(args[0]), offset, *sizes], dst)

    # ---- what is known of arguments
    def fact_of(self, x: Any) -> Any:
        if isinstance(x, rx.Constant) and x.data is not None:
            arr = np.asarray(x.data)
            return arr.dtype, tuple(int(d) for d in arr.shape)
        return self.known.get(x) if isinstance(x, rx.Var) else None

    def disjoint(self, func: PrimFunc, args: tuple) -> bool:
        """Whether the buffers of a direct call of ``func`` cannot overlap: each one it writes is
        a tensor allocated here and passed once, and every other argument is a parameter or such
        a tensor (else the kernel's own checks look at the arrays)."""
        held = [self.fresh.get(a) if isinstance(a, rx.Var) else None for a in args]
        if any(h is None and a not in self.func.params for a, h in zip(args, held)):
            return False
        written = [held[k] for k in written_params(func)]
        return all(h is not None and not isinstance(h, list) and held.count(h) == 1 for h in written)


# ---- struct info and facts
def _dims(sinfo: Any) -> tuple | None:
    if isinstance(sinfo, TensorStructInfo):
        return sinfo.dims
    if isinstance(sinfo, ShapeStructInfo):
        return sinfo.values
    return None


def _tensor_infos(sinfo: Any, path: tuple) -> list:
    """The tensor struct infos with known dims in ``sinfo``, each with its index path in tuples."""
    if isinstance(sinfo, TensorStructInfo) and sinfo.dims is not None:
        return [(path, sinfo)]
    if isinstance(sinfo, TupleStructInfo):
        return [x for i, f in enumerate(sinfo.fields) for x in _tensor_infos(f, path + (i,))]
    return []


# the operators that call functions (besides R.call_tir), and the method that compiles each
_CALLS = {"relax.call_dps_packed": "call_dps_packed", "relax.call_packed": "call_packed",
          "relax.call_pure_packed": "call_packed", "relax.call_inplace_packed": "call_packed",
          "relax.call_builtin_with_ctx": "call_builtin", "relax.call_tir_inplace": "call_tir_inplace",
          "relax.call_py_func": "call_py_func",
          "relax.vm.call_tir_dyn": "call_tir_dyn", "relax.make_closure": "make_closure",
          "relax.invoke_closure": "invoke_closure", "relax.invoke_pure_closure": "invoke_closure"}


def _packed_name(callee: Any, what: str) -> str:
    if isinstance(callee, rx.StringImm):
        return callee.value
    if isinstance(callee, rx.ExternFunc):
        return callee.global_symbol
    raise TVMSError(f"{what}: the VM calls packed functions by name, not {type(callee).__name__}")


__all__ = ["compile_vm"]
