"""What the constant arguments of TVM 0.27's ``T.cuda.*`` calls must be (a string literal, the
reduction of ``T.cuda.warp_reduce`` / ``cta_reduce``, the lanes or warps it spans): the CUDA code
generator and the reference executor refuse the same calls, in the same words."""
from __future__ import annotations

from . import expr as E
from . import op as op_registry
from .errors import TVMSError

REDUCTIONS = ("sum", "max", "min")


def string_arg(call: E.Call, i: int, what: str) -> str:
    arg = call.args[i] if i < len(call.args) else None
    if not isinstance(arg, E.StringImm):
        raise TVMSError(f"T.{op_registry.info_of(call.op).script_name} needs {what} as a string literal")
    return arg.value


def reduction(call: E.Call) -> str:
    """The reduction a call names (its second argument)."""
    op = string_arg(call, 1, "its reduction (sum, max or min)")
    if op not in REDUCTIONS:
        raise TVMSError(f"T.{op_registry.info_of(call.op).script_name} reduces by sum, max or min, not {op!r}")
    return op


def power_of_two(call: E.Call, i: int, what: str, low: int, high: int) -> int:
    """Argument ``i``, a constant power of two from ``low`` to ``high`` (the lanes or warps a
    reduction spans)."""
    arg = call.args[i]
    value = getattr(arg, "value", None)
    if not isinstance(value, int) or not low <= value <= high or value & (value - 1):
        raise TVMSError(f"T.{op_registry.info_of(call.op).script_name}'s {what} is a constant power of two "
                        f"from {low} to {high}, not {arg.script()}")
    return value
