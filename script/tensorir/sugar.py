"""``T.*`` helpers that TVM's script namespace offers for writing TensorIR and that build other
nodes (TVM's printer never writes them back): ``T.abs``, ``T.ceildiv``, ``T.cast``, ``T.ramp``,
``T.broadcast``, ``T.print_buffer``, ``T.ptr_byte_offset`` (the dtype shorthands ``T.f32``, ``T.i32``, ... are ir.dtype.SHORTHANDS).

Each builds what TVM's function builds (tvm/tirx/op.py), so a text written with them prints as
TVM prints it: ``T.abs(x)`` on an int is ``T.Select(x >= 0, x, 0 - x)``, ``T.ceildiv(a, b)`` is
``(a + b - 1) // b``.
"""
from __future__ import annotations

from typing import Any, Callable

from ...ir import arith, op as op_registry
from ...ir.dtype import DataType
from ...ir.expr import Add, Call, FloatImm, FloorDiv, GE, IntImm, Select, StringImm, Sub, const
from ...ir.op import get_op
from . import buffers  # noqa: F401  (T.Buffer, which T.buffer spells too)
from .evaluator import NewVar
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



def _print_buffer(ev: Any, args: list, kwargs: dict, syn: Any) -> Any:
    """``T.print_buffer(data, "int32", is_string, is_scalar, ndim, *shape)``: the flags as
    booleans and the rank as a uint32, as TVM's function converts them."""
    if len(args) < 5:
        raise ev.error(syn, "T.print_buffer takes data, a dtype, is_string, is_scalar, the rank and the shape")
    data, dtype, is_string, is_scalar, ndim, *shape = args
    flags = [const(bool(f), "bool") if isinstance(f, (bool, int)) else ev.call_arg(f, syn)
             for f in (is_string, is_scalar)]
    rank = const(ndim, "uint32") if isinstance(ndim, int) else ev.call_arg(ndim, syn)
    call_args = (ev.call_arg(data, syn), StringImm(str(ev.dtype_of(dtype, syn))), *flags, rank,
                 *(ev.call_arg(s, syn) for s in shape))
    return Call(DataType("void"), get_op("tir.print_buffer"), call_args)


def _ptr_byte_offset(ev: Any, args: list, kwargs: dict, syn: Any) -> Any:
    """``T.ptr_byte_offset(data, byte_offset, "int32")``: the pointee type as a type annotation."""
    data, offset, dtype = args
    if isinstance(dtype, str):
        dtype = Call(ev.dtype_of(dtype, syn), get_op("tir.type_annotation"), ())
    return Call(DataType("handle"), get_op("tir.ptr_byte_offset"),
                tuple(ev.call_arg(a, syn) for a in (data, offset, dtype)))


EXPR_BUILTINS.update({
    "print_buffer": _print_buffer,
    "ptr_byte_offset": _fixed(3, "ptr_byte_offset", _ptr_byte_offset),
})


def _dp4a(ev: Any, args: list, kwargs: dict, syn: Any) -> Any:
    """``T.dp4a(a, b, acc)`` (TVM's function: an int32) or ``T.dp4a("int32", a, b, acc)`` (how
    TVM prints it)."""
    if not args or not isinstance(args[0], str):
        args = ["int32", *args]
    return ev.intrinsic(op_registry.lookup_script_name("dp4a"), args, kwargs, syn)


EXPR_BUILTINS["dp4a"] = _dp4a


def _reduction(kind: str, op: str) -> Callable:
    """TVM's ``T.cuda.warp_sum(v, width=32)`` / ``T.cuda.cta_max(v, num_warps, scratch)``: the warp
    and block reductions by name, which it builds (and prints) as ``T.cuda.warp_reduce(v, "sum", 32)``
    / ``T.cuda.cta_reduce(v, "max", num_warps, scratch)``."""
    names = ("value", "width") if kind == "warp" else ("value", "num_warps", "scratch")
    defaults = {"width": 32} if kind == "warp" else {}

    def read(ev: Any, args: list, kwargs: dict, syn: Any) -> Any:
        unknown = sorted(set(kwargs) - set(names[len(args):]))
        if unknown or len(args) > len(names):
            raise ev.error(syn, f"T.cuda.{kind}_{op} takes ({', '.join(names)})")
        given = {**defaults, **dict(zip(names, args)), **kwargs}
        if len(given) != len(names):
            raise ev.error(syn, f"T.cuda.{kind}_{op} takes ({', '.join(names)}), without "
                                f"{', '.join(n for n in names if n not in given)}")
        values = [given[n] for n in names]
        info = op_registry.lookup_script_name(f"cuda.{kind}_reduce")
        return ev.intrinsic(info, [values[0], op, *values[1:]], {}, syn)
    return read


for _kind in ("warp", "cta"):
    for _op in ("sum", "max", "min"):
        EXPR_BUILTINS[f"cuda.{_kind}_{_op}"] = _reduction(_kind, _op)


EXPR_BUILTINS["buffer"] = EXPR_BUILTINS["buffer_decl"] = EXPR_BUILTINS["Buffer"]  # (older spellings)
EXPR_BUILTINS["var"] = _fixed(1, "var", lambda ev, args, kwargs, syn: NewVar(ev.dtype_of(args[0], syn)))


def _func_call(ev: Any, args: list, kwargs: dict, syn: Any) -> Any:
    """``T.cuda.func_call(name, args..., source_code=..., return_type=..., lazy_args=...)`` with
    the attributes TVM's function keeps, in its order: the lazy arguments' indices sorted, once
    each, and no empty ``lazy_args`` nor ``return_type="void"`` (its default)."""
    unknown = sorted(set(kwargs) - {"source_code", "return_type", "lazy_args"})
    if unknown:
        raise ev.error(syn, f"T.cuda.func_call takes source_code=, return_type= and lazy_args=, not {unknown[0]}=")
    lazy = kwargs.get("lazy_args", ())
    if not isinstance(lazy, (tuple, list)) or any(isinstance(i, bool) or not isinstance(i, int) for i in lazy):
        raise ev.error(syn, "T.cuda.func_call's lazy_args are the indices of its arguments (integers)")
    count = len(args) - 1  # (the function's arguments, after its name)
    outside = [i for i in lazy if not 0 <= i < count]
    if outside:
        raise ev.error(syn, f"T.cuda.func_call's lazy_args index {outside[0]} is out of range "
                            f"(it passes {count} argument{'s' if count != 1 else ''})")
    attrs = {"source_code": kwargs["source_code"]} if "source_code" in kwargs else {}
    if lazy:
        attrs["lazy_args"] = tuple(sorted(set(lazy)))
    if "return_type" in kwargs and not ev.dtype_of(kwargs["return_type"], syn).is_void:
        attrs["return_type"] = kwargs["return_type"]
    return ev.intrinsic(op_registry.lookup_script_name("cuda.func_call"), args, attrs, syn)


EXPR_BUILTINS["cuda.func_call"] = _func_call
