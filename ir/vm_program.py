"""The Relax VM's instruction set: what ``lowering/relax/vm_codegen.py`` compiles a Relax module to
and what ``runtime/vm.py`` interprets.

A ``VMProgram`` holds one ``VMFunction`` per Relax function (and per closure lifted out of one)
and a pool of tensor constants. A function has registers (its parameters come first), a heap
of symbolic sizes (``n`` of ``R.Tensor(("n", 784))``: one slot per size variable, bound by the
shape checks) and a list of instructions, as TVM's VM executable has them:

- ``Call(dst, kind, func, args)``: ``kind`` says what ``func`` names: a compiled PrimFunc
  (``kernel``, destination passing: it writes into its output arguments), a packed function
  of the registry (``packed``), a VM builtin (``builtin``: allocation, shape checks, tuples,
  closures, ...) or another function of the program (``function``). ``dst`` is the register
  that takes the result (None: the result is dropped).
- ``Ret(reg)``, ``Goto(offset)``, ``If(cond, false_offset)`` (offsets relative to the
  instruction itself, as in TVM).

An argument is a register (``Reg``), a constant of the pool (``Const``), an immediate value
(``Imm``: numbers, strings, dtypes, tuples and dicts of them) or a size expression (``Size``:
integers and heap slots combined by ``add``, ``floordiv``, ``min``, ...; see ``SIZE_OPS``).

``serialize(program)`` gives bytes (a magic, a version, a JSON header, then the constants' raw
bytes); ``deserialize`` reads them back and refuses anything else with a TVMSError.
``program.as_text()`` shows the program for reading.
"""
from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from typing import Any

import numpy as np

from .dtype import DataType
from .errors import TVMSError
from .expr import (EQ, GE, GT, LE, LT, NE, Add, And, Cast, Div, FloatImm, FloorDiv, FloorMod, IntImm,
                   Max, Min, Mod, Mul, Not, Or, Select, Sub)
from .node import FrozenDict
from .strings import decode_strings, encode_strings

MAGIC = b"TVMS-VM\n"
VERSION = 1

KINDS = ("kernel", "packed", "builtin", "function")
# size-expression operators and their arity; ("slot", k) reads heap slot k, ("cast", dtype, e)
# converts e to a dtype
SIZE_OPS = {"add": 2, "sub": 2, "mul": 2, "div": 2, "mod": 2, "floordiv": 2, "floormod": 2,
            "min": 2, "max": 2, "eq": 2, "ne": 2, "lt": 2, "le": 2, "gt": 2, "ge": 2,
            "and": 2, "or": 2, "not": 1, "select": 3}
PRIM_OPS = {"add": Add, "sub": Sub, "mul": Mul, "div": Div, "mod": Mod, "floordiv": FloorDiv,
             "floormod": FloorMod, "min": Min, "max": Max, "eq": EQ, "ne": NE, "lt": LT, "le": LE,
             "gt": GT, "ge": GE, "and": And, "or": Or}
_SYMBOLS = {"add": "+", "sub": "-", "mul": "*", "div": "/", "mod": "%", "floordiv": "//",
            "floormod": "%%", "eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">=",
            "and": "&&", "or": "||"}


# ---------------------------------------------------------------- arguments
@dataclass(frozen=True, slots=True)
class Reg:
    """A register of the running function."""

    index: int


@dataclass(frozen=True, slots=True)
class Const:
    """A tensor of the program's constant pool."""

    index: int


@dataclass(frozen=True, slots=True)
class Imm:
    """An immediate value: None, a bool, int, float or str, a DataType, a TIR constant, or a
    tuple, list or dict of such values."""

    value: Any


@dataclass(frozen=True, slots=True)
class Size:
    """A size expression over the heap: an int or float, ``("slot", k)``, ``(op, *operands)``
    with ``op`` in ``SIZE_OPS``, or ``("cast", dtype, operand)``."""

    expr: Any


# ---------------------------------------------------------------- instructions
@dataclass(frozen=True, slots=True)
class Call:
    """``dst = func(*args)``; ``checked`` (kernels only): False when the compiler proved that
    the arguments fit the kernel's parameters, so it runs without its per-call checks."""

    dst: int | None
    kind: str
    func: str
    args: tuple = ()
    checked: bool = True


@dataclass(frozen=True, slots=True)
class Ret:
    reg: int


@dataclass(frozen=True, slots=True)
class Goto:
    offset: int


@dataclass(frozen=True, slots=True)
class If:
    """Go on with the next instruction when register ``cond`` is true, else jump by ``false_offset``."""

    cond: int
    false_offset: int


@dataclass(frozen=True, slots=True)
class VMFunction:
    """One function: ``params`` (names, in register order 0, 1, ...), which of them take shape
    values (``shape_params``, indices), ``num_regs`` registers, ``heap`` (the names of the size
    variables, one per slot), its ``code``; ``closure``: lifted out of another function (it is
    reached through a closure value, never by name from outside). ``signature``: per parameter,
    ``(annotation, dtype, dims)``: its struct info as text, and for a tensor its dtype (else
    None) and dims as size expressions (None when unknown), for tools that make arguments
    (``tvms run``). ``upper_bounds``: ``(slot, bound)`` pairs, the largest value each size
    variable may take (the function's ``tir_var_upper_bound`` attribute): the static memory plan
    reserves that much once instead of allocating at every call."""

    name: str
    params: tuple
    num_regs: int
    heap: tuple
    code: tuple
    shape_params: tuple = ()
    closure: bool = False
    signature: tuple = ()
    upper_bounds: tuple = ()


@dataclass(frozen=True, slots=True, eq=False)
class VMProgram:
    """The functions of a compiled module and the constants they read (numpy arrays)."""

    functions: tuple
    constants: tuple = ()

    def function(self, name: str) -> VMFunction:
        for f in self.functions:
            if f.name == name:
                return f
        raise TVMSError(f"the VM program has no function {name!r}")

    def as_text(self) -> str:
        """The program, one instruction per line, for reading (as TVM's ``Executable.as_text``)."""
        lines = []
        for f in self.functions:
            head = "closure" if f.closure else "function"
            lines.append(f"{head} {f.name}({', '.join(f.params)})  # registers: {f.num_regs}, "
                         f"heap: [{', '.join(f.heap)}]")
            for pc, inst in enumerate(f.code):
                lines.append(f"  {pc:>3}: {_inst_text(inst, f.heap)}")
        if self.constants:
            lines.append("constants")
            for k, c in enumerate(self.constants):
                lines.append(f"  c{k}: {c.dtype} {tuple(c.shape)}")
        return "\n".join(lines) + "\n"

    def __repr__(self) -> str:
        return f"VMProgram({', '.join(f.name for f in self.functions)})"


def _inst_text(inst: Any, heap: tuple) -> str:
    if isinstance(inst, Call):
        dst = f"%{inst.dst} = " if inst.dst is not None else ""
        args = ", ".join(_arg_text(a, heap) for a in inst.args)
        note = "  # unchecked" if inst.kind == "kernel" and not inst.checked else ""
        return f"{dst}call {inst.kind} {inst.func}({args}){note}"
    if isinstance(inst, Ret):
        return f"ret %{inst.reg}"
    if isinstance(inst, Goto):
        return f"goto {inst.offset:+d}"
    return f"if not %{inst.cond} goto {inst.false_offset:+d}"


def _arg_text(arg: Any, heap: tuple) -> str:
    if isinstance(arg, Reg):
        return f"%{arg.index}"
    if isinstance(arg, Const):
        return f"c{arg.index}"
    if isinstance(arg, Size):
        return f"size({size_text(arg.expr, heap)})"
    value = arg.value
    return str(value) if isinstance(value, DataType) else repr(value)


def size_text(e: Any, heap: tuple = ()) -> str:
    """A size expression as text; heap slots by the name of their variable."""
    if not isinstance(e, tuple):
        return repr(e)
    op = e[0]
    if op == "slot":
        return heap[e[1]] if e[1] < len(heap) else f"h{e[1]}"
    if op == "cast":
        return f"{e[1]}({size_text(e[2], heap)})"
    if op in _SYMBOLS and len(e) == 3:
        return f"({size_text(e[1], heap)} {_SYMBOLS[op]} {size_text(e[2], heap)})"
    return f"{op}({', '.join(size_text(x, heap) for x in e[1:])})"


# ---------------------------------------------------------------- serialization
def serialize(program: VMProgram) -> bytes:
    """``program`` as bytes: ``MAGIC``, the version (u32), the header's length (u64), the
    header (JSON: the functions, and each constant's dtype, shape and place), the constants'
    raw bytes (a string tensor's: its elements in C order as a JSON list, dtype "string")."""
    constants, blobs, offset = [], [], 0
    for c in program.constants:
        arr = np.require(c, requirements="C")  # (ascontiguousarray would make a 0-d array 1-d)
        strings = arr.dtype == object and all(type(s) is str for s in arr.flat)
        if arr.dtype.hasobject and not strings:
            raise TVMSError("a VM constant of Python objects cannot be serialized")
        data = encode_strings(arr) if strings else arr.tobytes()
        constants.append({"dtype": "string" if strings else arr.dtype.str, "shape": list(arr.shape), "offset": offset, "nbytes": len(data)})
        blobs.append(data)
        offset += len(data)
    header = {"functions": [_function_json(f) for f in program.functions], "constants": constants}
    text = json.dumps(header, separators=(",", ":"), allow_nan=True).encode("utf-8")
    return MAGIC + struct.pack("<IQ", VERSION, len(text)) + text + b"".join(blobs)


def deserialize(data: bytes) -> VMProgram:
    """The program ``serialize`` wrote; a TVMSError for anything else."""
    data = bytes(data)
    fixed = len(MAGIC) + 12
    if len(data) < fixed or not data.startswith(MAGIC):
        raise TVMSError("not a serialized VM program (wrong magic)")
    version, size = struct.unpack("<IQ", data[len(MAGIC):fixed])
    if version != VERSION:
        raise TVMSError(f"a VM program of version {version}; this tvms reads version {VERSION}")
    if fixed + size > len(data):
        raise TVMSError("a malformed VM program: the header is cut short")
    try:
        header = json.loads(data[fixed:fixed + size].decode("utf-8"))
        functions = tuple(_function_of(f) for f in header["functions"])
        blob = data[fixed + size:]
        constants = tuple(_constant_of(c, blob) for c in header["constants"])
    except TVMSError as err:
        raise TVMSError(f"a malformed VM program: {err}") from None
    except (ValueError, KeyError, TypeError, IndexError, AttributeError, RecursionError) as err:
        raise TVMSError(f"a malformed VM program: {type(err).__name__}: {err}") from None
    program = VMProgram(functions, constants)
    _validate(program)
    return program


def _function_json(f: VMFunction) -> dict:
    return {"name": f.name, "params": list(f.params), "num_regs": f.num_regs, "heap": list(f.heap),
            "shape_params": list(f.shape_params), "closure": f.closure,
            "signature": [[text, dtype, None if dims is None else [_size_json(d) for d in dims]]
                          for text, dtype, dims in f.signature],
            "upper_bounds": [list(b) for b in f.upper_bounds],
            "code": [_inst_json(i) for i in f.code]}


def _function_of(d: dict) -> VMFunction:
    return VMFunction(_str(d["name"]), tuple(_str(p) for p in d["params"]), _int(d["num_regs"]),
                      tuple(_str(h) for h in d["heap"]), tuple(_inst_of(i) for i in d["code"]),
                      tuple(_int(k) for k in d["shape_params"]), bool(d["closure"]),
                      tuple(_tensor_type_of(t) for t in d["signature"]),
                      tuple((_int(k), _int(b)) for k, b in d.get("upper_bounds", ())))


def _tensor_type_of(t: Any) -> tuple:
    text, dtype, dims = t
    return (_str(text), None if dtype is None else str(DataType(_str(dtype))),
            None if dims is None else tuple(_size_of(x) for x in dims))


def _inst_json(inst: Any) -> list:
    if isinstance(inst, Call):
        return ["call", inst.dst, inst.kind, inst.func, [_arg_json(a) for a in inst.args], inst.checked]
    if isinstance(inst, Ret):
        return ["ret", inst.reg]
    if isinstance(inst, Goto):
        return ["goto", inst.offset]
    if isinstance(inst, If):
        return ["if", inst.cond, inst.false_offset]
    raise TVMSError(f"not a VM instruction: {inst!r}")


def _inst_of(d: list) -> Any:
    op = d[0]
    if op == "call" and len(d) == 6:
        kind = _str(d[2])
        if kind not in KINDS:
            raise TVMSError(f"unknown call kind {kind!r}")
        dst = None if d[1] is None else _int(d[1])
        return Call(dst, kind, _str(d[3]), tuple(_arg_of(a) for a in d[4]), bool(d[5]))
    if op == "ret" and len(d) == 2:
        return Ret(_int(d[1]))
    if op == "goto" and len(d) == 2:
        return Goto(_int(d[1]))
    if op == "if" and len(d) == 3:
        return If(_int(d[1]), _int(d[2]))
    raise TVMSError(f"unknown instruction {d!r:.80}")


def _arg_json(a: Any) -> list:
    if isinstance(a, Reg):
        return ["r", a.index]
    if isinstance(a, Const):
        return ["c", a.index]
    if isinstance(a, Size):
        return ["s", _size_json(a.expr)]
    return ["i", encode_value(a.value)]


def _arg_of(d: list) -> Any:
    tag, value = d
    if tag == "r":
        return Reg(_int(value))
    if tag == "c":
        return Const(_int(value))
    if tag == "s":
        return Size(_size_of(value))
    if tag == "i":
        return Imm(decode_value(value))
    raise TVMSError(f"unknown argument tag {tag!r}")


def _size_json(e: Any) -> Any:
    if isinstance(e, tuple):
        return [e[0], *(x if e[0] == "cast" and k == 0 else _size_json(x) for k, x in enumerate(e[1:]))]
    return e


def _size_of(d: Any) -> Any:
    if isinstance(d, bool) or not isinstance(d, (int, float, list)):
        raise TVMSError(f"not a size expression: {d!r:.80}")
    if not isinstance(d, list):
        return d
    op = d[0]
    if op == "slot" and len(d) == 2:
        return ("slot", _int(d[1]))
    if op == "cast" and len(d) == 3:
        return ("cast", str(DataType(_str(d[1]))), _size_of(d[2]))
    if SIZE_OPS.get(op) != len(d) - 1:
        raise TVMSError(f"unknown size operator {op!r}")
    return (op, *(_size_of(x) for x in d[1:]))


def encode_value(v: Any) -> Any:
    """An immediate value as JSON (tagged where JSON has no such type)."""
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, DataType):
        return {"dtype": v.name}
    if isinstance(v, (IntImm, FloatImm)):
        return {"imm": [v.dtype.name, v.value]}
    if isinstance(v, tuple):
        return {"tuple": [encode_value(x) for x in v]}
    if isinstance(v, list):
        return {"list": [encode_value(x) for x in v]}
    if isinstance(v, dict):
        return {"dict": [[k, encode_value(x)] for k, x in v.items()]}
    raise TVMSError(f"a value of type {type(v).__name__} cannot be stored in a VM program")


def decode_value(d: Any) -> Any:
    if d is None or isinstance(d, (bool, int, float, str)):
        return d
    if not isinstance(d, dict) or len(d) != 1:
        raise TVMSError(f"not an immediate value: {d!r:.80}")
    (tag, v), = d.items()
    if tag == "dtype":
        return DataType(_str(v))
    if tag == "imm":
        dtype = DataType(_str(v[0]))
        return FloatImm(dtype, float(v[1])) if dtype.is_float else IntImm(dtype, _int(v[1]))
    if tag == "tuple":
        return tuple(decode_value(x) for x in v)
    if tag == "list":
        return [decode_value(x) for x in v]
    if tag == "dict":
        return FrozenDict({_str(k): decode_value(x) for k, x in v})
    raise TVMSError(f"unknown value tag {tag!r}")


def _constant_of(d: dict, blob: bytes) -> np.ndarray:
    if _str(d["dtype"]) == "string":
        return _strings_of(d, blob)
    dtype = np.dtype(_str(d["dtype"]))
    if dtype.hasobject:
        raise TVMSError("a constant of Python objects")
    shape = tuple(_int(x) for x in d["shape"])
    offset, nbytes = _int(d["offset"]), _int(d["nbytes"])
    count = int(np.prod(shape, dtype=np.int64))
    if offset < 0 or nbytes != count * dtype.itemsize or offset + nbytes > len(blob):
        raise TVMSError("a constant's bytes do not match its dtype and shape")
    return np.frombuffer(blob, dtype, count, offset).reshape(shape)


def _strings_of(d: dict, blob: bytes) -> np.ndarray:
    offset, nbytes = _int(d["offset"]), _int(d["nbytes"])
    data = blob[offset:offset + nbytes] if offset >= 0 else b""
    return decode_strings(data, tuple(_int(x) for x in d["shape"]), "a string constant")


def _validate(program: VMProgram) -> None:
    """Registers, constants, heap slots and jumps within bounds; calls of functions that exist."""
    names = {f.name for f in program.functions}
    for f in program.functions:
        def check(ok: bool, what: str) -> None:
            if not ok:
                raise TVMSError(f"a malformed VM program: {f.name}: {what}")
        check(len(f.params) <= f.num_regs, "more parameters than registers")
        check(all(0 <= k < len(f.params) for k in f.shape_params), "a shape parameter out of range")
        check(all(0 <= k < len(f.heap) for k, _ in f.upper_bounds), "an upper bound of a heap slot out of range")
        for pc, inst in enumerate(f.code):
            if isinstance(inst, Call):
                check(inst.dst is None or 0 <= inst.dst < f.num_regs, f"instruction {pc}: register out of range")
                check(inst.kind != "function" or inst.func in names, f"instruction {pc}: no function {inst.func!r}")
                for a in inst.args:
                    if isinstance(a, Reg):
                        check(0 <= a.index < f.num_regs, f"instruction {pc}: register out of range")
                    elif isinstance(a, Const):
                        check(0 <= a.index < len(program.constants), f"instruction {pc}: constant out of range")
                    elif isinstance(a, Size):
                        check(all(0 <= s < len(f.heap) for s in _slots(a.expr)),
                              f"instruction {pc}: heap slot out of range")
            elif isinstance(inst, (Ret, If)):
                reg = inst.reg if isinstance(inst, Ret) else inst.cond
                check(0 <= reg < f.num_regs, f"instruction {pc}: register out of range")
            if isinstance(inst, (Goto, If)):
                offset = inst.offset if isinstance(inst, Goto) else inst.false_offset
                check(0 <= pc + offset < len(f.code), f"instruction {pc}: a jump out of the code")
        check(bool(f.code) and isinstance(f.code[-1], (Ret, Goto)), "the code does not end in ret or goto")


def prim_expr_of(e: Any, variables: list) -> Any:
    """A size expression as a TIR expression (int64), heap slot ``k`` read as ``variables[k]``."""
    if isinstance(e, bool) or isinstance(e, int):
        return IntImm(DataType("int64"), int(e))
    if isinstance(e, float):
        return FloatImm(DataType("float64"), e)
    op, args = e[0], e[1:]
    if op == "slot":
        return variables[args[0]]
    if op == "cast":
        return Cast(DataType(args[0]), prim_expr_of(args[1], variables))
    if op == "not":
        return Not(prim_expr_of(args[0], variables))
    if op == "select":
        return Select(*(prim_expr_of(x, variables) for x in args))
    return PRIM_OPS[op](*(prim_expr_of(x, variables) for x in args))


def _slots(e: Any) -> list:
    if not isinstance(e, tuple):
        return []
    if e[0] == "slot":
        return [e[1]]
    return [s for x in e[1:] if isinstance(x, tuple) for s in _slots(x)]


def _int(v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise TVMSError(f"expected an integer, got {v!r:.40}")
    return v


def _str(v: Any) -> str:
    if not isinstance(v, str):
        raise TVMSError(f"expected a string, got {v!r:.40}")
    return v


# ---------------------------------------------------------------- the compiled form of a function
# A function lowered to native code (``lowering/codegen/llvm_vm.py``) and run by the runtime
# (``runtime/vm_native.py``): ``i32 f(PyObject *args, PyObject *outs, i64 *ctx)``. ``ctx`` is an
# i64 array: CTX_FIELDS (the object layout of tuples, numpy arrays and tvms Tensors, which the
# runtime measures, the default thread count, the VM's reserved storage), then per kernel its
# entry and its thread-count global, per constant its data, then per output its offset in its
# byte array, its dims and its bytes.
ALIGNMENT = 64  # bytes: where a returned tensor starts in its byte array (as runtime tensors)
NEED_OUTPUTS = 1  # the return code asking for byte arrays of the sizes ctx holds
CTX_FIELDS = ("ndarray_type", "tensor_type", "tensor_array", "ob_type", "tuple_size", "tuple_items",
              "arr_data", "arr_nd", "arr_dims", "arr_descr", "arr_flags", "descr_type_num",
              "descr_byteorder", "threads", "storage")
LIFTED_CALL_WORDS = 3  # the ctx words after the fields of a lifted function's call (check_lifted)

# The prefixes of the native symbols a library defines: a kernel's, a VM function's code and a
# lifted function's call with cached weights. They keep the kinds apart (a kernel named vm_main
# would otherwise define main's code) and from C library names; load_module refuses a symbol
# without its kind's prefix.
KERNEL_PREFIX, VM_PREFIX, CALL_PREFIX = "tvms_", "tvmsvm_", "tvmsvmcall_"


def native_symbol(symbols: Any, prefix: str, name: str) -> str:
    """A native symbol for the function ``name`` of the kind ``prefix``, unique in the NameSupply
    ``symbols`` (``a.b`` and ``a_b`` are functions of one program, and one library links both)."""
    return symbols.fresh(prefix + "".join(c if c.isalnum() else "_" for c in name))


@dataclass(frozen=True)
class NativeOutput:
    """A returned allocation: its numpy dtype name, dims (ints, or None where ``ctx`` holds the
    value after a call) and ``offset_at``: the ctx index of the tensor's offset in its byte
    array, followed by its dims and its bytes."""

    dtype: str
    dims: tuple
    offset_at: int


@dataclass(frozen=True)
class NativeVMFunction:
    """A VM function as native code: ``symbol`` in ``object_code`` (for ``target``, the llvm
    code generator's); what its ctx holds after CTX_FIELDS (``kernels``: kernel names, each an
    entry then a thread-count global; ``constants``: pool indices; ``outputs``), its size,
    ``storage_bytes`` reserved once per VM, ``result`` (a tree of ``("out", j)``,
    ``("param", k)``, ``("const", k)`` and tuples), the static memory ``plan``
    (``lowering/relax/vm_memory_plan.StoragePlan``; None when loaded from a library) and its
    description ``plan_text``, ``num_cores`` (the target's, 0: all cores), and for one loaded
    from a library the entry's ``address`` in it and the ``library`` handle that keeps it mapped."""

    name: str
    symbol: str
    object_code: bytes
    llvm_ir: str
    target: Any
    num_params: int
    kernels: tuple
    constants: tuple
    outputs: tuple
    result: Any
    storage_bytes: int
    ctx_size: int
    plan: Any
    heap: tuple
    plan_text: tuple = ()
    num_cores: int = 0
    address: int = 0
    library: Any = None
    thread_pool: None = None  # (what the runtime's loader of object code asks)

    def describe_plan(self) -> list[str]:
        """The storage plan, one line per token (``StoragePlan.describe``)."""
        return list(self.plan_text)


_NATIVE_FIELDS = ("name", "symbol", "num_params", "kernels", "constants", "storage_bytes", "ctx_size",
                  "heap", "plan_text", "num_cores")
RESULT_KINDS = ("out", "param", "const")  # the leaves of a native function's ``result``


def native_ctx_size(kernels: tuple, constants: tuple, outputs: tuple) -> int:
    """The words of a native function's ctx (its lifted call's has LIFTED_CALL_WORDS more): CTX_FIELDS,
    an entry and a thread-count global per kernel, a data pointer per constant, per output its
    offset, dims and bytes."""
    return len(CTX_FIELDS) + 2 * len(kernels) + len(constants) + sum(2 + len(o.dims) for o in outputs)


def native_json(a: NativeVMFunction) -> dict:
    """What a shared library keeps of a native function besides its code."""
    d = {name: list(v) if isinstance(v := getattr(a, name), tuple) else v for name in _NATIVE_FIELDS}
    d["outputs"] = [[o.dtype, list(o.dims), o.offset_at] for o in a.outputs]
    d["result"] = encode_value(a.result)
    return d


def native_of(d: dict, address: int, library: Any, lifted_call: bool = False) -> NativeVMFunction:
    """The native function ``native_json`` described, its entry at ``address`` in ``library``
    (``lifted_call``: the call of a lifted function, LIFTED_CALL_WORDS more in its ctx).
    A library file is untrusted: every field is checked for its type and range (the runtime
    builds the call's code from ``outputs`` and ``result``), ``ctx_size`` against the size its
    fields give; a TVMSError naming the library otherwise."""
    try:
        return _native_of(d, address, library, LIFTED_CALL_WORDS if lifted_call else 0)
    except TVMSError as err:
        raise TVMSError(f"load_module: the native code description in {_where(library)} is malformed: "
                        f"{err}") from None


def _where(library: Any) -> str:
    return getattr(library, "_name", None) or "a library"


def _native_of(d: Any, address: int, library: Any, extra_words: int) -> NativeVMFunction:
    if not isinstance(d, dict) or not set(_NATIVE_FIELDS + ("outputs", "result")) <= set(d):
        raise TVMSError("not a native function's fields")
    ints = {k: _count(d[k], k) for k in ("num_params", "storage_bytes", "ctx_size", "num_cores")}
    strs = {k: _str(d[k]) for k in ("name", "symbol")}
    lists = {k: tuple(_str(x) for x in _list(d[k], k)) for k in ("kernels", "heap", "plan_text")}
    constants = tuple(_count(k, "a constant index") for k in _list(d["constants"], "constants"))
    outputs, at = [], len(CTX_FIELDS) + 2 * len(lists["kernels"]) + len(constants)
    for out in _list(d["outputs"], "outputs"):
        if not isinstance(out, list) or len(out) != 3:
            raise TVMSError(f"an output is not [dtype, dims, offset_at]: {out!r:.60}")
        dims = tuple(None if x is None else _count(x, "a dim") for x in _list(out[1], "dims"))
        if _int(out[2]) != at:
            raise TVMSError(f"an output's offset_at is {out[2]}, its place is {at}")
        outputs.append(NativeOutput(_native_dtype(out[0]), dims, at))
        at += 2 + len(dims)
    at += extra_words
    if ints["ctx_size"] != at:
        raise TVMSError(f"ctx_size is {ints['ctx_size']}, its fields take {at} words")
    result = _result_of(d["result"], {"out": len(outputs), "param": ints["num_params"], "const": None})
    return NativeVMFunction(**ints, **strs, **lists, constants=constants, object_code=b"", llvm_ir="",
                            target=None, outputs=tuple(outputs), result=result, plan=None, address=address,
                            library=library)


def _count(v: Any, what: str) -> int:
    if _int(v) < 0:
        raise TVMSError(f"{what} is negative: {v}")
    return v


def _list(v: Any, what: str) -> list:
    if not isinstance(v, list):
        raise TVMSError(f"{what} is not a list: {v!r:.40}")
    return v


def _native_dtype(name: Any) -> str:
    try:
        dtype = np.dtype(_str(name))
    except (TypeError, ValueError):
        dtype = None
    if dtype is None or dtype.hasobject or dtype.name != name:
        raise TVMSError(f"not a dtype of numbers: {name!r:.40}")
    return name


def _result_of(d: Any, ranges: dict) -> Any:
    """A ``result`` tree as ``encode_value`` stored it: tuples of subtrees, leaves ``(kind, k)``
    with ``kind`` one of RESULT_KINDS and ``k`` in its range (constants: the program's, checked
    by ``check_native``)."""
    if not isinstance(d, dict) or list(d) != ["tuple"] or not isinstance(d["tuple"], list):
        raise TVMSError(f"the result is not a tuple: {d!r:.60}")
    items = d["tuple"]
    if items and isinstance(items[0], str):
        if len(items) != 2 or items[0] not in RESULT_KINDS:
            raise TVMSError(f"a result leaf is not (kind, index): {items!r:.60}")
        kind, k = items[0], _count(items[1], "a result index")
        if ranges[kind] is not None and k >= ranges[kind]:
            raise TVMSError(f"the result's {kind} {k} is out of range ({ranges[kind]})")
        return kind, k
    return tuple(_result_of(x, ranges) for x in items)


def check_native(a: NativeVMFunction, program: VMProgram) -> None:
    """``a`` fits ``program``: a function of that name and arity, constants in its pool."""
    f = next((f for f in program.functions if f.name == a.name and not f.closure), None)
    if f is None or len(f.params) != a.num_params or not _constants_fit(a, program):
        raise TVMSError(f"the native code of {a.name} in {_where(a.library)} does not fit the program "
                        f"(a function of {a.num_params} parameters, constants in its pool)")


def _constants_fit(a: NativeVMFunction, program: VMProgram) -> bool:
    consts = list(a.constants) + [k for kind, k in _leaves(a.result) if kind == "const"]
    return all(k < len(program.constants) for k in consts)


# ---------------------------------------------------------------- functions whose weights were lifted
# ``tvms.compile`` lifts what a function ``f`` computes from its weights alone (``lift_weights``):
# its spec is (``f_lifted``, ``f_transform_params``, num_input, number of weights), and the call
# of ``f`` with a parameter set the VM's cache holds has native code of its own
# (``lower_lifted_calls``: ``f_lifted``'s code taking ``f``'s arguments, its ctx
# LIFTED_CALL_WORDS longer: the cache's entry, filled by ``NativeFunction.reuse``).
_LIFTED_FIELDS = ("name", "lifted", "transform", "num_input", "num_weights", "native")


def lifted_json(name: str, spec: tuple, call: NativeVMFunction | None) -> dict:
    """What a shared library keeps of the function ``name`` whose weights were lifted: its
    ``spec`` and what calling the native code of its call with cached weights needs (``call``,
    written beside the library's other native code; None: the call has none)."""
    runtime, transform, num_input, num_weights = spec
    return {"name": name, "lifted": runtime, "transform": transform, "num_input": num_input,
            "num_weights": num_weights, "native": None if call is None else native_json(call)}


def lifted_of(d: Any, library: Any) -> tuple:
    """``(name, spec)`` as ``lifted_json`` wrote them (its ``native``: ``native_of`` with
    ``lifted_call``); a TVMSError naming the library when a field is not what it should be.
    Fields a newer tvms added are ignored (as ``native_of`` does)."""
    try:
        if not isinstance(d, dict) or not set(_LIFTED_FIELDS) <= set(d):
            raise TVMSError("not a lifted function's fields")
        spec = (_str(d["lifted"]), _str(d["transform"]), _count(d["num_input"], "num_input"),
                _count(d["num_weights"], "num_weights"))
        return _str(d["name"]), spec
    except TVMSError as err:
        raise TVMSError(f"load_module: the lifted function description in {_where(library)} is malformed: "
                        f"{err}") from None


# what a lifted call shares with its lifted form's native code: the runtime builds the call's ctx,
# storage and results from these, so a call that differs would read or write past them
_SHARED_WITH_PLAIN = ("kernels", "constants", "outputs", "heap", "storage_bytes")


def check_lifted(lifted: dict, calls: dict, native: dict, program: VMProgram) -> None:
    """``lifted`` (name -> spec) fits ``program``: per function ``name``, its lifted form and its
    transform are three functions of it, none of them lifted itself (the VM would follow them in
    a loop); ``name`` takes num_input + number of weights arguments, the transform one (the
    tuple of weights), the lifted form at least num_input. ``calls[name]``, when it is a
    NativeVMFunction (the native code of the call with cached weights), is the lifted form's
    code: it takes ``name``'s arguments, returns none of the transformed weights, and shares
    the kernels, constants, outputs, heap and storage of the lifted form's own native code
    (``native``), its ctx LIFTED_CALL_WORDS longer."""
    functions = {f.name: f for f in program.functions if not f.closure}
    for name, spec in lifted.items():
        call = calls.get(name)
        why = _lifted_misfit(name, spec, call, lifted, native, functions, program)
        if why:
            runtime, transform, num_input, num_weights = spec
            where = _where(call.library) if isinstance(call, NativeVMFunction) else "the executable"
            raise TVMSError(f"the lifted function {name} in {where} does not fit the program (functions {name}, "
                            f"{runtime} and {transform}; {name} of {num_input} inputs and {num_weights} weights): "
                            f"{why}")


def _lifted_misfit(name: str, spec: tuple, call: Any, lifted: dict, native: dict, functions: dict,
                   program: VMProgram) -> str:
    """Why the lifted function ``name`` does not fit (``check_lifted``), or ''."""
    runtime, transform, num_input, num_weights = spec
    if len({name, runtime, transform}) != 3 or runtime in lifted or transform in lifted:
        return "its lifted form and its transform must be two other functions, neither lifted itself"
    if not (name in functions and runtime in functions and transform in functions):
        return "one of them is missing"
    if (len(functions[name].params) != num_input + num_weights or len(functions[transform].params) != 1
            or len(functions[runtime].params) < num_input):
        return "their numbers of parameters differ"
    if not isinstance(call, NativeVMFunction):
        return ""
    plain = native.get(runtime)
    if not isinstance(plain, NativeVMFunction):
        return f"its call has native code, {runtime} has none"
    if (call.name != runtime or call.num_params != num_input + num_weights or not _constants_fit(call, program)
            or any(k >= num_input for kind, k in _leaves(call.result) if kind == "param")):
        return "its call's native code takes other arguments"
    if any(getattr(call, k) != getattr(plain, k) for k in _SHARED_WITH_PLAIN) \
            or call.ctx_size != plain.ctx_size + LIFTED_CALL_WORDS:
        return f"its call's native code does not share the kernels, constants, outputs and storage of {runtime}'s"
    return ""


def _leaves(tree: Any) -> list:
    if tree and isinstance(tree[0], str):
        return [tree]
    return [leaf for t in tree for leaf in _leaves(t)]


__all__ = ["ALIGNMENT", "CTX_FIELDS", "Call", "Const", "Goto", "If", "Imm", "KINDS", "LIFTED_CALL_WORDS", "MAGIC",
           "NEED_OUTPUTS", "NativeOutput", "NativeVMFunction", "RESULT_KINDS", "Reg", "Ret", "SIZE_OPS", "Size",
           "VERSION", "VMFunction", "VMProgram", "check_lifted", "check_native", "decode_value", "deserialize",
           "encode_value", "lifted_json", "lifted_of", "native_ctx_size", "native_json", "native_of", "prim_expr_of",
           "serialize", "size_text"]
