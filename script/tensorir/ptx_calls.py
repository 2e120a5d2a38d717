"""TVM 0.27's table-driven PTX dialect in the script: ``T.ptx.<family>(operands..., tokens...,
marker)`` as TVM prints it, the spellings users type (``T.ptx.ld.global_.b32(d, p, pred=c)``,
``T.ptx["ld.global.b32"](d, p)``, with ``T.ptx.pred(x)``), and ``T.ptx.addr(base, offset)``. Which
instruction a call is, ir/ptx.py decides; every call prints in the flat form, through the
operator table, as TVM prints it. The cp.async groups read as the instructions tvms compiles."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from ...ir import op as op_registry, ptx
from ...ir.errors import TVMSError
from ...ir.expr import BufferLoad, IntImm, const
from .evaluator import Builtin
from .rules import EXPR_BUILTINS


def _ptx_instruction(family: str) -> Callable:
    """``T.ptx.<family>(operands..., tokens..., marker)`` as TVM 0.27 prints it: a void call of the
    entry its tokens and operands choose (ir/ptx.py), or of its family where they do not."""
    def read(ev: Any, args: list, kwargs: dict, syn: Any) -> Any:
        n = len(args)
        while n and isinstance(args[n - 1], str):
            n -= 1
        # no marker, or pred=: TVM reads the attribute-chain form with no tokens (elect_sync, st_bulk)
        if n == len(args) or kwargs:
            if n < len(args):
                raise ev.error(syn, f"T.ptx.{family}(...) takes no keyword arguments in the form TVM prints "
                               f"(the predicate is the last operand, marked \"pred\")")
            return read_ptx_chain(ev, f"ptx.{family}", args, kwargs, syn)
        if any(isinstance(a, str) for a in args[:n]):
            raise ev.error(syn, f"the operands of T.ptx.{family} come before its modifier tokens")
        strings = tuple(args[n:])
        try:
            entries = ptx.resolve(family, [_chained(ev, a, False, syn) for a in args[:n]], strings)
            # (an address operand as TVM's reading coerces it: a uint64 handle such as
            # T.address_of(A_map) reinterpreted as a pointer, a pointer in a shared state space
            # converted to its shared window address)
            spaces = {tuple(ptx.argument_spaces(e, strings)) for e in entries}
            if len(spaces) == 1:
                args = [ptx.address(space, ev.call_arg(a, syn), f"T.ptx.{family}'s operand {i + 1}")
                        if space in ("shared", "generic") and not isinstance(a, (int, float)) else a
                        for i, (a, space) in enumerate(zip(args[:n], spaces.pop()))] + list(args[n:])
        except TVMSError as e:
            raise ev.error(syn, str(e)) from None
        return _call(ev, family, entries[0] if len(entries) == 1 else None, args, syn)
    return read


@dataclass(frozen=True)
class PtxPred:
    """``T.ptx.pred(x)``: the operand ``x`` of an attribute-chain PTX call is a .pred register."""
    value: Any


def read_ptx_chain(ev: Any, path: str, args: list, kwargs: dict, syn: Any) -> Any:
    """TVM's other spellings, ``T.ptx.ld.global_.b32(d, p, pred=c, preserve_dst=True)`` and
    ``T.ptx["ld.global.b32"](d, p)`` (``path``: ``ptx.ld.global_.b32``): the same call as the
    printed form (ir/ptx.py resolve_chain), and printed so."""
    family, *words = path.split(".")[1:]
    if set(kwargs) - {"pred", "preserve_dst"} or not isinstance(kwargs.get("preserve_dst", False), bool):
        raise ev.error(syn, f"T.{path}(...) takes the operands, pred= and preserve_dst=True|False")
    if any(isinstance(a, str) for a in args):
        raise ev.error(syn, f"T.{path}(...) takes operands only; its modifiers are in its name")
    # (which lanes may sink is not among the table's facts tvms keeps)
    if any(isinstance(a, Builtin) and a.path == "ptx.SINK" for a in args):
        raise ev.error(syn, "tvms reads the sink T.ptx.SINK in the printed form only: the operand left out, "
                            "its place in the marker (\"s<i>\")")
    values = [a.value if isinstance(a, PtxPred) else a for a in args]
    operands = [_chained(ev, v, isinstance(a, PtxPred), syn) for a, v in zip(args, values)]
    pred = kwargs.get("pred")
    try:
        reading = ptx.resolve_chain(family, tuple(ptx.unescape(w) for w in words), operands,
                                    pred is not None, kwargs.get("preserve_dst", False))
        # (a literal number, or a Python bool, takes the dtype TVM's coercion gives it; an address
        # the form TVM's coercion passes)
        values = [const(v, reading.literal[i]) if isinstance(v, (int, float)) else v for i, v in enumerate(values)]
        values = [ptx.address(space, ev.call_arg(v, syn), f"T.{path}'s operand {i + 1}") if space else v
                  for i, (v, space) in enumerate(zip(values, reading.spaces))]
    except TVMSError as e:
        raise ev.error(syn, str(e)) from None
    return _call(ev, family, reading.entry,
                 [*values, *([pred] if pred is not None else []), *reading.tokens, reading.marker], syn)


def _chained(ev: Any, value: Any, tagged: bool, syn: Any) -> ptx.Chained:
    """What ir/ptx.py chooses an entry by, of an argument: its dtype (a literal number names none,
    TVM types it by its operand; a Python bool is a bool), its value where it is a constant integer
    (a literal, or ``T.int32(4)``), whether it can be written."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return ptx.Chained(None, tagged, value if isinstance(value, int) else None)
    expr = ev.call_arg(value, syn)
    integer = expr.value if isinstance(expr, IntImm) and not expr.dtype.is_bool else None
    return ptx.Chained(str(expr.dtype), tagged, integer, isinstance(expr, BufferLoad))


def _call(ev: Any, family: str, entry: ptx.Entry | None, args: list, syn: Any) -> Any:
    """The void call of ``entry`` (None: of the family) on the printed form's arguments; the
    cp.async groups as the instructions tvms compiles (ir/op.py PTX_CP)."""
    strings = tuple(a for a in args if isinstance(a, str))
    name = op_registry.PTX_CP.get(strings) if family == "cp" else None
    if name is None:
        name = entry.op_name if entry is not None else ptx.family_op_name(family)
    return ev.intrinsic(op_registry.info_of(op_registry.get_op(name)), args, {}, syn)


def _ptx_pred(ev: Any, args: list, kwargs: dict, syn: Any) -> PtxPred:
    if len(args) != 1 or kwargs:
        raise ev.error(syn, "T.ptx.pred takes one operand")
    return PtxPred(args[0])


def _ptx_addr(ev: Any, args: list, kwargs: dict, syn: Any) -> Any:
    """``T.ptx.addr(base, byte_offset)``: the address ``[base+byte_offset]`` of a PTX operand."""
    if len(args) != 2 or kwargs or any(isinstance(a, str) for a in args):
        raise ev.error(syn, "T.ptx.addr takes a base address and a byte offset")
    return ev.intrinsic(op_registry.info_of(op_registry.get_op(ptx.ADDR_OP)), args, {}, syn)


EXPR_BUILTINS.update({
    **{f"ptx.{family}": _ptx_instruction(family) for family in ptx.FAMILIES},
    "ptx.addr": _ptx_addr,
    "ptx.pred": _ptx_pred,
})
