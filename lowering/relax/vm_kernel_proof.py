"""What the VM compiler knows of tensor values, and proving a kernel call safe without checks.

A fact is ``(dtype, dims)``: the dtype's name and the dims as ints or size expressions (TIR),
known for certain of a value: a checked parameter, an allocation, a constant. ``proven(func,
facts)`` says whether arguments with these facts fit the kernel's parameters for every value of
the sizes; the compiler then marks the call unchecked, and the VM runs the kernel without its
per-call checks.
"""
from __future__ import annotations

from typing import Any

from ...ir import expr as tir
from ...ir.function import PrimFunc
from ...ir.struct_info import TensorStructInfo
from ...ir.structural import structural_equal

SIZE = "size"  # the fact of an integer from a shape expression (a kernel's scalar size parameter)


def dtype_key(dtype: Any) -> str:
    """A dtype as facts compare it (a numpy dtype equals its name)."""
    return str(dtype)


def plain_dims(dims: tuple) -> tuple:
    return tuple(d.value if isinstance(d, tir.IntImm) else d for d in dims)


def known_of_sinfo(sinfo: Any) -> tuple | None:
    if isinstance(sinfo, TensorStructInfo) and sinfo.dims is not None and not sinfo.dtype.is_void:
        return dtype_key(sinfo.dtype), plain_dims(sinfo.dims)
    return None


def _same_dim(a: Any, b: Any) -> bool:
    if isinstance(a, int) or isinstance(b, int):
        return a == b
    return a is b or structural_equal(a, b)


def same_known(a: Any, b: Any) -> bool:
    return (isinstance(a, tuple) and isinstance(b, tuple) and a[0] == b[0] and len(a[1]) == len(b[1])
            and all(_same_dim(x, y) for x, y in zip(a[1], b[1])))


def proven(func: PrimFunc, facts: list) -> bool:
    """Whether arguments with these known dtypes and dims fit ``func``'s parameters for every
    value of the sizes: each buffer's dtype and rank match, a constant extent meets the same
    constant, and each symbolic extent of the kernel stands for one and the same Relax
    dimension wherever it occurs. Then the kernel may run without its per-call checks."""
    if len(facts) != len(func.params):
        return False
    scalars = {p for p in func.params if p not in func.buffer_map}
    extents = {d for b in func.buffer_map.values() for d in b.shape if isinstance(d, tir.Var)}
    meaning: dict = {}  # kernel size Var -> the Relax dimension it takes
    for param, fact in zip(func.params, facts):  # (facts: known, SIZE, or None: unknown)
        buf = func.buffer_map.get(param)
        if buf is None:
            if fact != SIZE or not param.dtype.is_integer:
                return False
            continue
        if not isinstance(fact, tuple) or fact[0] != dtype_key(buf.dtype) or len(fact[1]) != len(buf.shape):
            return False
        # (a contiguous layout: no strides stated, an offset of 0 or of its own variable)
        offset = buf.elem_offset
        if buf.strides or not (_is_zero(offset) or (isinstance(offset, tir.Var) and offset not in extents)):
            return False
        for declared, dim in zip(buf.shape, fact[1]):
            if isinstance(declared, tir.IntImm):
                if dim != declared.value:
                    return False
            elif isinstance(declared, tir.Var) and declared not in scalars:  # (a scalar's value
                # comes from the call, not from the array: the kernel's check compares them)
                if declared in meaning and not _same_dim(meaning[declared], dim):
                    return False
                meaning.setdefault(declared, dim)
            else:
                return False
    return True


def _is_zero(e: Any) -> bool:
    return e is None or (isinstance(e, tir.IntImm) and e.value == 0)


__all__ = ["SIZE", "dtype_key", "known_of_sinfo", "plain_dims", "proven", "same_known"]
