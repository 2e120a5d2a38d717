"""A CUDA build's host side as JSON data: what an exported library keeps to launch its kernels.

The host function of a CUDA artifact (``lowering/codegen/cuda_artifact.py``) binds its
arguments and launches kernels (``T.call_ffi_kernel``); the runtime evaluates it statement by
statement (``runtime/cuda_host.py``). A library cannot keep it as TVMScript (the runtime never
parses), so it keeps this: the signature (``signature.py``'s form, sizes as nested lists) and
the body as nested lists of the statements a host function has::

    ["seq", [s, ...]]              ["let", var, value, body]       ["assert", cond, [msg], body]
    ["if", cond, then, else|None]  ["for", var, min, extent, body]  ["alloc", var, dtype, [n], body]
    ["launch", kernel, [args], [launch params]]                     ["nop"]

(a ``T.decl_buffer`` or attribute adds nothing the launches read: its body stands for it).
A kernel is kept as its name, parameters and launch parameters: its code is the binary.
"""
from __future__ import annotations

from typing import Any

from .dtype import DataType
from .errors import TVMSError
from .expr import Call, FloatImm, IntImm, Op, StringImm, Var
from .function import PrimFunc
from .node import FrozenDict
from .op import get_op
from .signature import _expr_json, _expr_of, _var, signature_json, signature_of
from .stmt import Allocate, AllocBuffer, AssertStmt, AttrStmt, DeclBuffer, Evaluate, For, IfThenElse, LetStmt, \
    SeqStmt

_LAUNCH = "tir.call_ffi_kernel"
DYNAMIC_SHARED = "tirx.use_dyn_shared_memory"  # the launch parameter of dynamic shared memory bytes


def host_json(func: PrimFunc) -> dict:
    """``func`` (a host function of a CUDA build) as JSON data; a statement a host function
    does not hold is a TVMSError."""
    return {**signature_json(func), "body": _stmt_json(func.body)}


def host_of(data: Any, name: str) -> PrimFunc:
    """The host function ``data`` describes (a TVMSError names what is malformed)."""
    sig = signature_of(data, name)
    variables = {b.data.name: b.data for b in sig.buffer_map.values()}
    variables.update({p.name: p for p in sig.params if p not in sig.buffer_map})
    for buf in sig.buffer_map.values():
        for d in (*buf.shape, *buf.strides):
            if isinstance(d, Var):
                variables.setdefault(d.name, d)
    try:
        body = _stmt_of(data["body"], variables)
    except (KeyError, TypeError, ValueError, IndexError) as err:
        raise TVMSError(f"the host function of {name} is malformed: {type(err).__name__}: {err}") from None
    return PrimFunc(sig.params, sig.buffer_map, body)


def kernel_json(name: str, func: PrimFunc, launch_params: tuple) -> dict:
    return {"name": name, "params": [[p.name, str(p.dtype)] for p in func.params],
            "launch_params": list(launch_params)}


def kernel_of(data: dict) -> tuple[str, PrimFunc, tuple]:
    """(name, a body-less PrimFunc of the kernel's parameters, launch parameters)."""
    params = tuple(Var(str(n), DataType(str(d))) for n, d in data["params"])
    return str(data["name"]), PrimFunc(params, FrozenDict(), Evaluate(IntImm(DataType("int32"), 0))), \
        tuple(str(t) for t in data["launch_params"])


def _stmt_json(s: Any) -> list:
    if isinstance(s, SeqStmt):
        return ["seq", [_stmt_json(x) for x in s.seq]]
    if isinstance(s, LetStmt):
        return ["let", _expr_json(s.var), _expr_json(s.value), _stmt_json(s.body)]
    if isinstance(s, AssertStmt):
        body = ["nop"] if s.body is None else _stmt_json(s.body)
        return ["assert", _expr_json(s.condition), [str(m) for m in s.message], body]
    if isinstance(s, IfThenElse):
        return ["if", _expr_json(s.condition), _stmt_json(s.then_case),
                None if s.else_case is None else _stmt_json(s.else_case)]
    if isinstance(s, For):
        if s.step is not None:
            raise TVMSError("a host loop with a step cannot be exported")
        return ["for", _expr_json(s.loop_var), _expr_json(s.min), _expr_json(s.extent), _stmt_json(s.body)]
    if isinstance(s, (DeclBuffer, AttrStmt)):
        return _stmt_json(s.body)
    if isinstance(s, Allocate):
        return ["alloc", _expr_json(s.buffer_var), str(s.dtype), [_expr_json(e) for e in s.extents],
                _stmt_json(s.body)]
    if isinstance(s, AllocBuffer):
        return ["alloc", _expr_json(s.buffer.data), str(s.buffer.dtype), [_expr_json(e) for e in s.buffer.shape],
                _stmt_json(s.body)]
    if isinstance(s, Evaluate):
        call = s.value
        if isinstance(call, (IntImm, FloatImm)):
            return ["nop"]
        if isinstance(call, Call) and isinstance(call.op, Op) and call.op.name == _LAUNCH:
            return ["launch", str(call.args[0].value), [_expr_json(a) for a in call.args[1:]],
                    list(call.attrs.get("launch_params", ()))]
    raise TVMSError(f"a host function holding {type(s).__name__} cannot be exported")


def _stmt_of(d: list, variables: dict) -> Any:
    tag = d[0]
    if tag == "seq":
        return SeqStmt(tuple(_stmt_of(x, variables) for x in d[1]))
    if tag in ("let", "for", "alloc"):
        var = _var(variables, d[1][1], d[1][2], fresh=True)  # (a binding: a new variable)
        if tag == "let":
            return LetStmt(var, _expr_of(d[2], variables), _stmt_of(d[3], variables))
        if tag == "for":
            return For(var, _expr_of(d[2], variables), _expr_of(d[3], variables), "serial", _stmt_of(d[4], variables))
        return Allocate(var, DataType(d[2]), tuple(_expr_of(e, variables) for e in d[3]),
                        IntImm(DataType("bool"), 1), _stmt_of(d[4], variables))
    if tag == "assert":
        return AssertStmt(_expr_of(d[1], variables), tuple(str(m) for m in d[2]), _stmt_of(d[3], variables))
    if tag == "if":
        return IfThenElse(_expr_of(d[1], variables), _stmt_of(d[2], variables),
                          None if d[3] is None else _stmt_of(d[3], variables))
    if tag == "launch":
        args = (StringImm(str(d[1])), *(_expr_of(a, variables) for a in d[2]))
        attrs = FrozenDict({"launch_params": tuple(str(t) for t in d[3]), "ret_ty": "int32"})
        return Evaluate(Call(DataType("int32"), get_op(_LAUNCH), args, attrs))
    if tag == "nop":
        return Evaluate(IntImm(DataType("int32"), 0))
    raise ValueError(f"unknown host statement {tag!r}")


__all__ = ["host_json", "host_of", "kernel_json", "kernel_of"]
