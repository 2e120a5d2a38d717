"""A PrimFunc's signature as JSON data: what a caller of its compiled code needs (parameters,
their dtypes, and the buffers bound to them with shapes, strides and offsets), without its body.

An exported library keeps each kernel's signature in this form, so that loading it checks the
arguments as a freshly built module does without parsing TVMScript (the runtime never parses).
Size expressions are written as nested lists (``["var", "n", "int64"]``, ``["int", 4, "int64"]``,
``["mul", a, b]``, ``["cast", "int32", a]``); the operator names are the VM program's.
"""
from __future__ import annotations

from typing import Any

from .buffer import decl_buffer
from .dtype import DataType
from .errors import TVMSError
from .expr import Cast, FloatImm, IntImm, PointerType, PrimExpr, Var
from .function import PrimFunc
from .node import FrozenDict
from .stmt import Evaluate
from .vm_program import PRIM_OPS

_NAMES = {cls: name for name, cls in PRIM_OPS.items()}


def signature_json(func: PrimFunc) -> dict:
    """``func``'s parameters and buffers as JSON data."""
    params = []
    for p in func.params:
        buf = func.buffer_map.get(p)
        entry: dict = {"name": p.name, "dtype": str(p.dtype)}
        if buf is not None:
            entry["buffer"] = {
                "name": buf.name, "data": buf.data.name, "dtype": str(buf.dtype), "scope": buf.scope,
                "shape": [_expr_json(d) for d in buf.shape],
                "strides": [_expr_json(d) for d in buf.strides],
                "elem_offset": None if buf.elem_offset is None else _expr_json(buf.elem_offset),
                "align": buf.data_alignment, "offset_factor": buf.offset_factor,
                "buffer_type": buf.buffer_type, "axis_separators": list(buf.axis_separators)}
        params.append(entry)
    return {"params": params}


def signature_of(data: Any, name: str) -> PrimFunc:
    """The body-less PrimFunc ``data`` describes (a TVMSError names what is malformed); variables
    of one name are one variable, as they are in the printed signature."""
    variables: dict = {}
    try:
        # every parameter before any buffer: a scalar parameter may be a buffer's size (main(a, n)
        # with A = match_buffer(a, (n,))), and A's shape must take that n rather than make its own
        params = [_var(variables, entry["name"], entry["dtype"], fresh=True) for entry in data["params"]]
        buffer_map = {}
        for param, entry in zip(params, data["params"]):
            b = entry.get("buffer")
            if b is not None:
                buffer_map[param] = decl_buffer(
                    tuple(_expr_of(d, variables) for d in b["shape"]), b["dtype"], b["name"],
                    data=_data_var(variables, b), scope=b["scope"],
                    strides=tuple(_expr_of(d, variables) for d in b["strides"]),
                    elem_offset=None if b["elem_offset"] is None else _expr_of(b["elem_offset"], variables),
                    data_alignment=int(b["align"]), offset_factor=int(b["offset_factor"]),
                    buffer_type=str(b["buffer_type"]), axis_separators=tuple(int(a) for a in b["axis_separators"]))
    except (KeyError, TypeError, ValueError, IndexError) as err:
        raise TVMSError(f"the signature of {name} is malformed: {type(err).__name__}: {err}") from None
    return PrimFunc(tuple(params), FrozenDict(buffer_map), Evaluate(IntImm(DataType("int32"), 0)))


def _expr_json(e: PrimExpr) -> Any:
    if isinstance(e, Var):
        return ["var", e.name, str(e.dtype)]
    if isinstance(e, IntImm):
        return ["int", e.value, str(e.dtype)]
    if isinstance(e, FloatImm):
        return ["float", e.value, str(e.dtype)]
    if isinstance(e, Cast):
        return ["cast", str(e.dtype), _expr_json(e.value)]
    op = _NAMES.get(type(e))
    if op is None:
        raise TVMSError(f"a signature size cannot hold {type(e).__name__} ({e.script()})")
    return [op, _expr_json(e.a), _expr_json(e.b)]


def _expr_of(d: list, variables: dict) -> PrimExpr:
    tag = d[0]
    if tag == "var":
        return _var(variables, d[1], d[2])
    if tag == "int":
        return IntImm(DataType(d[2]), int(d[1]))
    if tag == "float":
        return FloatImm(DataType(d[2]), float(d[1]))
    if tag == "cast":
        return Cast(DataType(d[1]), _expr_of(d[2], variables))
    if tag not in PRIM_OPS or len(d) != 3:
        raise ValueError(f"unknown size operator {tag!r}")
    return PRIM_OPS[tag](_expr_of(d[1], variables), _expr_of(d[2], variables))


def _var(variables: dict, name: str, dtype: str, fresh: bool = False) -> Var:
    if not isinstance(name, str):
        raise TypeError(f"a variable name must be a string, not {name!r:.40}")
    var = variables.get(name)
    if var is None or fresh:
        var = variables[name] = Var(name, DataType(dtype))
    elif str(var.dtype) != dtype:
        raise ValueError(f"{name} is used as {var.dtype} and as {dtype}")
    return var


def _data_var(variables: dict, b: dict) -> Var:
    var = Var(b["data"], DataType("handle"), PointerType(DataType(b["dtype"]), b["scope"]))
    variables[b["data"]] = var
    return var


__all__ = ["signature_json", "signature_of"]
