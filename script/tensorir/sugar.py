"""``T.*`` helpers that TVM's script namespace offers for writing TensorIR and that build other
nodes (TVM's printer never writes them back): ``T.abs``, ``T.ceildiv``, ``T.cast``, ``T.ramp``,
``T.broadcast`` (the dtype shorthands ``T.f32``, ``T.i32``, ... are ir.dtype.SHORTHANDS).

Each builds what TVM's function builds (tvm/tirx/op.py), so a text written with them prints as
TVM prints it: ``T.abs(x)`` on an int is ``T.Select(x >= 0, x, 0 - x)``, ``T.ceildiv(a, b)`` is
``(a + b - 1) // b``.
"""
from __future__ import annotations

from typing import Any

from ...ir import arith
from ...ir.expr import Add, Call, FloatImm, FloorDiv, GE, IntImm, Select, Sub, const
from ...ir.op import get_op
from .exprs import EXPR_BUILTINS, _broadcast, _fixed, _ramp


def _abs(ev: Any, args: list, kwargs: dict, syn: Any) -> Any:
    x = ev.call_arg(args[0], syn)
    if x.dtype.is_uint or x.dtype.is_bool:
        return x
    if x.dtype.is_float:
        if isinstance(x, FloatImm):
            return FloatImm(x.dtype, abs(x.value))
        return Call(x.dtype, get_op("tir.fabs"), (x,))
    if isinstance(x, IntImm):
        return IntImm(x.dtype, abs(x.value))
    zero = IntImm(x.dtype, 0)
    return Select(GE(x, zero), x, Sub(zero, x))


def _ceildiv(ev: Any, args: list, kwargs: dict, syn: Any) -> Any:
    a, b = arith.match_types(*(a if isinstance(a, int) else ev.call_arg(a, syn) for a in args))
    return arith.binary(FloorDiv, arith.binary(Sub, arith.binary(Add, a, b), const(1, a.dtype)), b)


def _cast(ev: Any, args: list, kwargs: dict, syn: Any) -> Any:
    """``T.cast(x, "int32")``: the value first (TVM's ``tirx.cast``), folded like ``x.astype``."""
    dtype = ev.dtype_of(kwargs.get("dtype", args[1] if len(args) > 1 else None), syn)
    value = ev.call_arg(args[0], syn)
    if isinstance(value, (IntImm, FloatImm)) and dtype.lanes == 1 and value.dtype != dtype:
        number = value.value if not dtype.is_integer else int(value.value)  # (truncating)
        return FloatImm(dtype, float(number)) if dtype.is_float else const(number, dtype)
    return arith.cast(dtype, value)


EXPR_BUILTINS.update({
    "abs": _fixed(1, "abs", _abs),
    "ceildiv": _fixed(2, "ceildiv", _ceildiv),
    "cast": _cast,
    "ramp": _fixed(3, "ramp", _ramp),
    "broadcast": _fixed(2, "broadcast", _broadcast),
})

