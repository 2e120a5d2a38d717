"""C-family source for lowered (flat) TIR, as TVM 0.27's C code generator (``CodeGenC``) writes it.

``CSource`` holds what every C-like target shares: one name supply per function (``x``, ``x_1``;
C keywords reserved), statements with two-space indentation, expressions in full parentheses,
values that must be computed once (a vector operand, a gathered index) assigned to ``v_``
temporaries that are reused while the scope that made them is open, buffers as pointers indexed
by element (cast when the access type is not the pointer's), ``T.if_then_else`` as a
``condval`` set by an ``if``, ``T.Let`` as a declaration before the statement that uses it. A
subclass (``cuda.CudaSource``) supplies the target's types, constants, vector lanes, storage
scopes, thread indices and intrinsics (``c_type``, ``float_constant``, ...).

The input is lowered TIR as TVM's device passes leave it (floor division already C's ``/`` and
``%``, shifts and masks; let-bound indices already substituted): it is rendered as it is.
"""
from __future__ import annotations

import math
from typing import Any

from ...ir import expr as E
from ...ir import ptx, stmt as S
from ...ir.arith.analyzer import Analyzer
from ...ir.dtype import DataType
from ...ir.errors import TVMSError
from ...ir.name_supply import NameSupply
from ...ir.structural import structural_equal
from .module_calls import refuse_module_call

_KEYWORDS = ("_", "extern", "void", "int", "float", "double", "char", "unsigned", "short", "long",
             "if", "else", "switch", "case", "default", "for", "do", "while", "goto", "register",
             "continue", "break", "typedef", "struct", "enum", "union", "return")

_BINARY = {E.Add: "+", E.Sub: "-", E.Mul: "*", E.Div: "/", E.Min: "min", E.Max: "max",
           E.EQ: "==", E.NE: "!=", E.LT: "<", E.LE: "<=", E.GT: ">", E.GE: ">=",
           E.And: "&&", E.Or: "||"}
_BITWISE = {"tir.bitwise_and": " & ", "tir.bitwise_or": " | ", "tir.bitwise_xor": " ^ ",
            "tir.shift_left": " << ", "tir.shift_right": " >> "}
INT32 = DataType("int32")


_UNIFORM_OPS = (E.EQ, E.NE, E.LT, E.LE, E.GT, E.GE, E.And, E.Or)


def uniform_scalar(e: Any) -> Any:
    """The scalar of a vector that is the same in every lane by its form (a broadcast, or
    comparisons and logic of such), else None."""
    if isinstance(e, E.Broadcast):
        return e.value
    if isinstance(e, E.Not):
        a = uniform_scalar(e.a)
        return None if a is None else E.Not(a)
    if isinstance(e, _UNIFORM_OPS):
        a, b = uniform_scalar(e.a), uniform_scalar(e.b)
        return None if a is None or b is None else type(e)(a, b)
    return None


def outer_parens_match(s: str) -> bool:
    """Whether ``s`` is one parenthesised group: ``(a + b)`` but not ``(a) + (b)``."""
    if not (s.startswith("(") and s.endswith(")")):
        return False
    depth = 0
    for i, ch in enumerate(s):
        depth += ch == "("
        depth -= ch == ")"
        if depth == 0:
            return i == len(s) - 1
    return False


def modular_set(e: Any) -> tuple[int, int]:
    """(coeff, base) with ``e == coeff * k + base`` for some integer k (coeff 0: the constant base);
    variables can be anything."""
    if isinstance(e, E.IntImm):
        return 0, e.value
    if isinstance(e, (E.Add, E.Sub)):
        (c1, b1), (c2, b2) = modular_set(e.a), modular_set(e.b)
        coeff, base = math.gcd(c1, c2), b1 + b2 if isinstance(e, E.Add) else b1 - b2
    elif isinstance(e, E.Mul):
        (c1, b1), (c2, b2) = modular_set(e.a), modular_set(e.b)
        coeff, base = math.gcd(c1 * c2, math.gcd(c1 * b2, c2 * b1)), b1 * b2
    else:
        return 1, 0
    return coeff, base % coeff if coeff else base


class CSource:
    """Writes the functions of one source file; ``restrict`` marks non-aliasing pointers."""

    restrict = ""

    def __init__(self) -> None:
        self.out: list[str] = []  # function bodies (TVM's stream)
        self.forward: list[str] = []  # declarations of the functions (fwd_decl_stream)

    # ------------------------------------------------------------ per-function state
    def begin_function(self) -> None:
        self.names = NameSupply(separator="_")
        for word in _KEYWORDS:
            self.names.reserve(word)
        self.ids: dict = {}  # Var -> its C text
        self.handle_type: dict = {}  # pointer Var -> the element type it is declared with
        self.volatile: set = set()
        self.ssa: dict[str, tuple[str, int]] = {}  # expression text -> (temporary, scope)
        self.open_scopes: list[bool] = []
        self.indent = 0

    def begin_scope(self) -> int:
        self.open_scopes.append(True)
        self.indent += 2
        return len(self.open_scopes) - 1

    def end_scope(self, scope: int) -> None:
        self.open_scopes[scope] = False
        self.indent -= 2

    def line(self, text: str) -> None:
        self.out.append(" " * self.indent + text + "\n")

    def new_id(self, var: E.Var, hint: str | None = None) -> str:
        if var in self.ids:
            raise TVMSError(f"variable {var.name!r} is defined twice in one function")
        name = self.names.fresh(hint if hint is not None else var.name)
        name = name.replace(":", "_").replace("-", "_").replace(".", "_")
        self.ids[var] = name
        return name

    def var_id(self, var: E.Var) -> str:
        name = self.ids.get(var)
        if name is None:
            raise TVMSError(f"variable {var.name!r} is used where it is not defined")
        return name

    def mark_const(self, text: str) -> None:
        self.ssa.setdefault(text, (text, 0))

    def ssa_id(self, text: str, dtype: DataType) -> str:
        """A temporary holding ``text`` (computed once), or ``text`` itself when it is a name."""
        if text in self.names:
            return text
        hit = self.ssa.get(text)
        if hit is not None and self.open_scopes[hit[1]]:
            return hit[0]
        vid = self.names.fresh("v_")
        self.ssa[text] = (vid, len(self.open_scopes) - 1)
        value = text[1:-1] if outer_parens_match(text) else text
        self.line(f"{self.c_type(dtype)} {vid} = {value};")
        return vid

    # ------------------------------------------------------------ target hooks
    def c_type(self, dtype: DataType) -> str:
        """The C type of values of ``dtype``."""
        raise NotImplementedError

    def pointer_type(self, var: E.Var) -> str:
        ann = var.type_annotation
        if E.is_tensor_map(var):
            return self.tensor_map_parameter(var)
        if isinstance(ann, E.PointerType):
            return self.c_type(ann.element) + "*"
        return self.c_type(var.dtype)

    def tensor_map_parameter(self, var: E.Var) -> str:
        """The parameter type of a ``T.TensorMap()`` (a CUDA tensor-map descriptor passed by value)."""
        raise TVMSError(f"the {self.target_name} code generator: {var.name} is a T.TensorMap(), a CUDA tensor map "
                        "that only the cuda target compiles")

    def storage_scope(self, scope: str) -> str:
        """The qualifier of an allocation in ``scope`` (``__shared__ ``), with its space."""
        raise NotImplementedError

    def int_constant(self, e: E.IntImm) -> str:
        if e.dtype == INT32:
            self.mark_const(str(e.value))
            return str(e.value)
        suffix = "ULL" if e.dtype.is_uint and e.dtype.bits == 64 and e.dtype.lanes == 1 else ""  # (as TVM writes it)
        return f"({self.c_type(e.dtype)}){e.value}{suffix}"

    def float_constant(self, e: E.FloatImm) -> str:
        raise NotImplementedError

    def cast_text(self, value: str, src: DataType, dst: DataType) -> str:
        return value if src == dst else f"(({self.c_type(dst)}){value})"

    def lane(self, vec: str, dtype: DataType, i: int) -> str:
        """Lane ``i`` of the vector ``vec``."""
        raise NotImplementedError

    def gathered(self, dtype: DataType, values: list[str]) -> str:
        """A vector of ``dtype`` made of the lane values ``values``."""
        raise NotImplementedError

    def vector_binary(self, op: str, dtype: DataType, a: Any, b: Any) -> str:
        """``a op b`` on vectors (``op`` an operator or a function name such as ``min``)."""
        raise NotImplementedError

    def vector_constructor(self, dtype: DataType) -> str:
        raise NotImplementedError

    def call_extern(self, dtype: DataType, name: str, args: tuple) -> str:
        return f"{name}({', '.join(self.expr(a) for a in args)})"

    def storage_sync(self, call: E.Call) -> None:
        raise NotImplementedError

    def intrinsic(self, e: E.Call) -> str | None:
        """The target's rendering of the call ``e`` (a CUDA builtin, a tensor-core call), or None."""
        return None

    def volatile_load(self, ref: str, e: E.BufferLoad) -> str:
        return ref

    def loop_pragma(self, s: S.For) -> None:
        """Lines before the loop ``s`` (an unroll pragma)."""

    # ------------------------------------------------------------ buffers
    def buffer_ref(self, dtype: DataType, buffer: Any, index: Any) -> str:
        """An lvalue of type ``dtype`` at element ``index`` of ``buffer``."""
        return self.element_ref(dtype, buffer.data, buffer.dtype, index)

    def element_ref(self, dtype: DataType, data: E.Var, elem: DataType, index: Any) -> str:
        """An lvalue of type ``dtype`` at element ``index`` of the ``elem`` array at ``data``."""
        vid = self.var_id(data)
        vol = data in self.volatile

        def pointer_cast(t: DataType) -> str:
            return f"({'volatile ' if vol else ''}{self.c_type(t)}*)"

        base = vid
        if self.handle_type.get(data) != elem or vol:
            base = f"({pointer_cast(elem)}{vid})"
        index_text = self.expr(index)
        if dtype == elem:
            return f"{base}[{index_text}]"
        return f"*{pointer_cast(dtype)}({base} + {index_text})"

    def flat_index(self, node: Any) -> Any:
        if len(node.indices) != 1:
            raise TVMSError(f"buffer {node.buffer.name!r} is accessed with {len(node.indices)} indices: "
                            "code generation needs flattened buffers (FlattenBuffer)")
        return self.vector_index(node.indices[0])

    @staticmethod
    def vector_index(index: Any) -> Any:
        """``ramp(b, s, n) + broadcast(c, n)`` as ``ramp(b + c, s, n)`` (TVM's simplifier folds
        it so before rendering: the access is then one vector load or store when aligned)."""
        if isinstance(index, (E.Add, E.Sub)):
            ramp, other = index.a, index.b
            if isinstance(ramp, E.Broadcast) and isinstance(other, E.Ramp) and isinstance(index, E.Add):
                ramp, other = other, ramp
            if isinstance(ramp, E.Ramp) and isinstance(other, E.Broadcast):
                if isinstance(other.value, E.IntImm) and other.value.value == 0:
                    return ramp
                return E.Ramp(type(index)(ramp.base, other.value), ramp.stride, ramp.lanes)
        return index

    @staticmethod
    def unit_ramp_base(index: Any, lanes: int) -> Any:
        if (isinstance(index, E.Ramp) and isinstance(index.stride, E.IntImm) and index.stride.value == 1
                and index.lanes == lanes):
            return index.base
        return None

    def refuse_vector_access(self, buffer: Any) -> None:
        """A vector index into a buffer of vectors (``A[i:i + 2]`` of float32x2) has lanes of lanes,
        which the element-wise forms here do not write."""
        if buffer.dtype.lanes > 1:
            raise TVMSError(f"the {self.target_name} target does not compile a vector access of {buffer.name!r}, a "
                            f"buffer of {buffer.dtype} vectors; index it by one element at a time")

    def element_pointer(self, data: E.Var, elem: DataType) -> str:
        vid = self.var_id(data)
        if self.handle_type.get(data) == elem:
            return vid
        # (TVM writes the storage scope into this cast too, which CUDA does not compile)
        return f"(({self.c_type(elem)}*){vid})"

    def e_BufferLoad(self, e: E.BufferLoad) -> str:
        index, dtype, buffer = self.flat_index(e), e.dtype, e.buffer
        if dtype.lanes == buffer.dtype.lanes:
            return self.volatile_load(self.buffer_ref(dtype, buffer, index), e)
        self.refuse_vector_access(buffer)
        base = self.unit_ramp_base(index, dtype.lanes)
        if base is not None:
            coeff, rest = modular_set(base)
            if coeff % dtype.lanes == 0 and rest % dtype.lanes == 0:
                return self.volatile_load(self.buffer_ref(dtype, buffer, base), e)
        sindex = self.ssa_id(self.expr(index), index.dtype)
        pointer = self.element_pointer(buffer.data, dtype.element_of)
        return self.gathered(dtype, [f"{pointer}[{self.lane(sindex, index.dtype, i)}]" for i in range(dtype.lanes)])

    def s_BufferStore(self, s: S.BufferStore) -> None:
        value = s.value
        if (isinstance(value, E.BufferLoad) and value.buffer.data is s.buffer.data
                and structural_equal(value.indices, s.indices)):
            return  # (storing what is there: TVM's simplifier drops it)
        index, dtype, buffer = self.flat_index(s), s.value.dtype, s.buffer
        if dtype.lanes == buffer.dtype.lanes:
            value = self.expr(s.value)
            self.line(f"{self.buffer_ref(dtype, buffer, index)} = {value};")
            return
        self.refuse_vector_access(buffer)
        base = self.unit_ramp_base(index, dtype.lanes)
        if base is not None:
            value = self.expr(s.value)
            self.line(f"{self.buffer_ref(dtype, buffer, base)} = {value};")
            return
        scope = self.begin_scope()  # (the lane stores must not reuse temporaries made here)
        sindex = self.ssa_id(self.expr(index), index.dtype)
        svalue = self.ssa_id(self.expr(s.value), dtype)
        pointer = self.element_pointer(buffer.data, dtype.element_of)
        for i in range(dtype.lanes):
            self.line(f"{pointer}[{self.lane(sindex, index.dtype, i)}] = {self.lane(svalue, dtype, i)};")
        self.end_scope(scope)

    # ------------------------------------------------------------ expressions
    def expr(self, e: Any) -> str:
        method = getattr(self, "e_" + type(e).__name__, None)
        if method is not None:
            return method(e)
        op = _BINARY.get(type(e))
        if op is None:
            raise TVMSError(f"the {self.target_name} code generator cannot render {type(e).__name__}")
        return self.binary(e, op)

    target_name = "C"

    def e_IntImm(self, e: E.IntImm) -> str:
        return self.int_constant(e)

    def e_FloatImm(self, e: E.FloatImm) -> str:
        return self.float_constant(e)

    def e_StringImm(self, e: E.StringImm) -> str:
        return f'"{e.value}"'

    def e_Var(self, e: E.Var) -> str:
        return self.var_id(e)

    e_SizeVar = e_Var

    def binary(self, e: E.BinaryOp, op: str) -> str:
        if e.dtype.lanes != 1:
            return self.vector_binary(op, e.dtype, e.a, e.b)
        if op[0].isalpha():
            return f"{op}({self.expr(e.a)}, {self.expr(e.b)})"
        return f"({self.expr(e.a)} {op} {self.expr(e.b)})"

    def e_Mod(self, e: E.Mod) -> str:
        dt = e.dtype
        if dt.is_integer:
            return self.binary(e, "%")
        if dt.code == "float" and dt.bits in (32, 64):
            return self.binary(e, "fmodf" if dt.bits == 32 else "fmod")
        raise TVMSError(f"no C remainder for {dt}")

    def e_GT(self, e: E.GT) -> str:
        return self.binary(e, ">")

    def e_GE(self, e: E.GE) -> str:
        return self.binary(e, ">=")

    def e_EQ(self, e: E.EQ) -> str:
        return self.binary(e, "==")

    def e_NE(self, e: E.NE) -> str:
        return self.binary(e, "!=")

    def e_Not(self, e: E.Not) -> str:
        return "!" + self.expr(e.a)

    def e_Select(self, e: E.Select) -> str:
        return f"({self.expr(e.condition)} ? {self.expr(e.true_value)} : {self.expr(e.false_value)})"

    def e_Cast(self, e: E.Cast) -> str:
        return self.cast_text(self.expr(e.value), e.value.dtype, e.dtype)

    def e_Let(self, e: E.Let) -> str:
        value = self.expr(e.value)
        self.declare(e.var, value)
        body = self.expr(e.body)
        del self.ids[e.var]  # (the name stays taken: a later Let of the same variable gets x_1)
        return body

    def declare(self, var: E.Var, value: str) -> None:
        elem = self.handle_type.get(var)
        if var.dtype.is_handle and elem is not None:
            t = self.c_type(elem)
            self.line(f"{t}* {self.new_id(var)} = ({t}*){value};")
        else:
            self.line(f"{self.c_type(var.dtype)} {self.new_id(var)} = {value};")

    def e_Ramp(self, e: E.Ramp) -> str:
        base, stride = self.expr(e.base), self.expr(e.stride)
        parts = ", ".join(f"({base})+({stride}*{i})" for i in range(e.lanes))
        return f"{self.c_type(e.dtype)}({parts})"

    def e_Shuffle(self, e: E.Shuffle) -> str:
        lanes: list[str] = []
        if len(e.vectors) > 1:
            for vec in e.vectors:
                text = self.expr(vec)
                lanes += [text] if vec.dtype.lanes == 1 else [f"{text}[{i}]" for i in range(vec.dtype.lanes)]
        else:
            vec = e.vectors[0]
            text = f"({self.expr(vec)})"
            lanes += [text] if vec.dtype.lanes == 1 else [self.lane(text, vec.dtype, i) for i in range(vec.dtype.lanes)]
        picked = [lanes[int(i.value)] for i in e.indices]
        if len(picked) == 1:
            return picked[0]
        return f"{self.vector_constructor(e.dtype)}({', '.join(picked)})"

    def e_Call(self, e: E.Call) -> str:
        refuse_module_call(e, self.target_name)
        name = e.op.name
        if name in ("tir.call_extern", "tir.call_pure_extern"):
            return self.call_extern(e.dtype, e.args[0].value, e.args[1:])
        if name in _BITWISE:
            if e.dtype.lanes != 1:
                return self.vector_binary(_BITWISE[name].strip(), e.dtype, *e.args)
            return f"({self.expr(e.args[0])}{_BITWISE[name]}{self.expr(e.args[1])})"
        if name == "tir.bitwise_not":
            return f"(~{self.expr(e.args[0])})"
        if name == "tir.if_then_else":
            return self.if_then_else(e)
        if name == "tir.address_of":
            return self.address_of(e.args[0])
        if name == "tir.tvm_access_ptr":  # (type_annotation(dtype), data, offset, extent, rw_mask)
            return f"(&({self.element_ref(e.args[0].dtype, e.args[1], e.args[0].dtype, e.args[2])}))"
        if name == "tir.isnan":
            x = self.expr(e.args[0])
            return f"({x} != {x})"
        if name == "tir.tvm_thread_invariant":
            return f"({self.expr(e.args[0])})"
        if name == "tir.reinterpret":
            return self.reinterpret(e)
        if name == "tir.large_uint_imm":
            value = (e.args[1].value << 32) | e.args[0].value
            return f"{value}U" if e.dtype == DataType("uint32") else f"({self.c_type(e.dtype)}){value}"
        rendered = self.intrinsic(e)
        refused = ptx.not_compiled(e, f"the {self.target_name} code generator does not compile")
        if rendered is None and refused is not None:  # (the PTX dialect: only what a target renders)
            raise refused
        if rendered is None:
            shown = name[4:] if name and name.startswith("tir.") else name or type(e.op).__name__
            raise TVMSError(f"the {self.target_name} code generator has no rendering for T.{shown}")
        return rendered

    def if_then_else(self, e: E.Call) -> str:
        condition = e.args[0]
        if condition.dtype.lanes > 1:  # (the same for every lane: one branch, on its scalar)
            condition = uniform_scalar(condition)
        if condition is None:  # (C branches on a scalar; VectorizeLoop leaves such loops serial)
            raise TVMSError(f"the {self.target_name} code generator takes a T.if_then_else whose condition "
                            f"is the same for every lane (broadcasts, compared), not a vector of "
                            f"{e.args[0].dtype.lanes} conditions that may differ: write T.Select (it reads both "
                            f"sides) or a loop over the lanes")
        result = self.names.fresh("condval")
        cond = self.expr(condition)
        self.line(f"{self.c_type(e.dtype)} {result};")
        self.if_line(cond)
        for k, value in ((1, "} else {"), (2, "}")):
            scope = self.begin_scope()
            text = self.expr(e.args[k])
            self.line(f"{result} = {text};")
            self.end_scope(scope)
            self.line(value)
        return result

    def address_of(self, arg: Any) -> str:
        if E.is_tensor_map(arg):  # (a descriptor parameter: its generic address, as a 64-bit integer)
            return f"((unsigned long long)(&({self.expr(arg)})))"
        if isinstance(arg, E.BufferLoad):
            index = self.flat_index(arg)
            if isinstance(index, E.Ramp):
                index = index.base
            return f"(&({self.buffer_ref(arg.dtype, arg.buffer, index)}))"
        return f"(&({self.expr(arg)}))"

    def pointee(self, e: E.Call) -> str:
        """The C type a handle-valued call points at: its typed pointer's element
        (``T.handle("float16").ty``), else void."""
        ann = e.type_annotation
        return self.c_type(ann.element) if isinstance(ann, E.PointerType) and not ann.is_tensor_map else "void"

    def reinterpret(self, e: E.Call) -> str:
        src = e.args[0]
        if src.dtype.bits * src.dtype.lanes != e.dtype.bits * e.dtype.lanes:
            raise TVMSError(f"T.reinterpret from {src.dtype} to {e.dtype} changes the number of bits")
        if e.dtype.is_handle:  # (a pointer is not an lvalue one can take the address of in general: TVM casts it)
            t = self.pointee(e)
            if isinstance(src, E.IntImm):  # (a constant address, as TVM's CUDA generator writes it)
                return f"reinterpret_cast<{t}*>({self.expr(src)})"
            return f"(({t}*){self.expr(src)})"
        scope = self.begin_scope()
        rhs = self.ssa_id(self.expr(src), src.dtype)
        self.end_scope(scope)
        if src.dtype.is_handle:
            return f"reinterpret_cast<{self.c_type(e.dtype)}>({rhs})"
        return f"(*({self.c_type(e.dtype)} *)(&({rhs})))"

    # ------------------------------------------------------------ statements
    def stmt(self, s: Any) -> None:
        method = getattr(self, "s_" + type(s).__name__, None)
        if method is None:
            raise TVMSError(f"the {self.target_name} code generator cannot render {type(s).__name__} statements")
        method(s)

    def s_SeqStmt(self, s: S.SeqStmt) -> None:
        for item in s.seq:
            self.stmt(item)

    def s_Evaluate(self, s: S.Evaluate) -> None:
        value = s.value
        if isinstance(value, E.IntImm):
            return
        if isinstance(value, E.Call) and isinstance(value.op, E.Op) and value.op.name == "tir.tvm_storage_sync":
            self.storage_sync(value)
            return
        text = self.expr(value)
        if text:
            self.line(text + ";")

    def s_LetStmt(self, s: S.LetStmt) -> None:
        if s.var.dtype.is_handle and isinstance(s.value, E.Var) and s.value in self.handle_type:
            self.handle_type[s.var] = self.handle_type[s.value]
        if s.var.dtype.is_handle and _is_reinterpret(s.value):  # (TVM types the variable as what it points at)
            ann = s.value.type_annotation
            if isinstance(ann, E.PointerType) and not ann.is_tensor_map:
                self.handle_type[s.var] = ann.element
            else:
                self.line(f"void* {self.new_id(s.var)} = (void*){self.expr(s.value)};")
                self.stmt(s.body)
                return
        self.declare(s.var, self.expr(s.value))
        self.stmt(s.body)

    def s_IfThenElse(self, s: S.IfThenElse) -> None:
        self.if_line(self.expr(s.condition))
        scope = self.begin_scope()
        self.stmt(s.then_case)
        self.end_scope(scope)
        if s.else_case is not None:
            self.line("} else {")
            scope = self.begin_scope()
            self.stmt(s.else_case)
            self.end_scope(scope)
        self.line("}")

    def if_line(self, cond: str) -> None:
        self.line(f"if {cond} {{" if cond[0] == "(" and cond[-1] == ")" else f"if ({cond}) {{")

    def s_For(self, s: S.For) -> None:
        if s.kind == "thread_binding":
            raise TVMSError(f"loop {s.loop_var.name!r} is still bound to a thread: lower the function "
                            "for the GPU first (thread bindings become T.launch_thread)")
        begin = self.expr(s.min)
        zero = isinstance(s.min, E.IntImm) and s.min.value == 0
        end = self.expr(s.extent if zero else Analyzer().simplify(E.Add(s.min, s.extent)))
        step = self.expr(s.step) if s.step is not None else ""
        self.loop_pragma(s)
        vid = self.new_id(s.loop_var)
        advance = f"{vid} += {step}" if step else f"++{vid}"
        self.line(f"for ({self.c_type(s.loop_var.dtype)} {vid} = {begin}; {vid} < {end}; {advance}) {{")
        scope = self.begin_scope()
        self.stmt(s.body)
        self.end_scope(scope)
        self.line("}")

    def s_While(self, s: S.While) -> None:
        self.line("#pragma unroll 1")
        self.line("while (1) {")
        scope = self.begin_scope()
        self.line(f"if (!({self.expr(s.condition)})) {{ break; }}")
        self.stmt(s.body)
        self.end_scope(scope)
        self.line("}")

    def s_DeclBuffer(self, s: S.DeclBuffer) -> None:
        data = s.buffer.data
        self.var_id(data)  # (its pointer is a parameter or an allocation made before)
        self.stmt(s.body)


def _is_reinterpret(e: Any) -> bool:
    return isinstance(e, E.Call) and getattr(e.op, "name", "") == "tir.reinterpret"
