"""CUDA's names for TIR types, constants and vector lanes, as TVM 0.27's CUDA code generator
writes them: ``half2``, ``nv_bfloat162``, ``float4``; 5..8-lane vectors as pairs of 2-lane ones
(``uint4`` for ``float16x8``, lane 5 as ``((half2*)(&(v.z)))->y``); four ``int8`` lanes in one
``int``; float constants in hexadecimal with their decimal value in a comment.
"""
from __future__ import annotations

import math

from ...ir import expr as E
from ...ir.dtype import DataType
from ...ir.errors import TVMSError

_XYZW = "xyzw"


def hexfloat(value: float) -> str:
    """C++'s ``std::hexfloat`` text of a double: ``0x1.8p+1`` (no trailing zero digits)."""
    text = float.hex(value)
    sign = "-" if text.startswith("-") else ""
    mantissa, exponent = text.lstrip("-")[2:].split("p")
    lead, _, fraction = mantissa.partition(".")
    fraction = fraction.rstrip("0")
    return f"{sign}0x{lead}{'.' + fraction if fraction else ''}p{exponent}"


def components(c_type: str) -> int:
    """How many components a CUDA vector type has: 4 for ``longlong4``, 1 for a scalar type."""
    name = c_type.removeprefix("nv_bfloat16")  # (the 16 of the scalar's name counts nothing)
    count = name[len(name.rstrip("0123456789")):]
    return int(count) if count else 1


class CudaTypes:
    """The type side of ``CudaSource`` (it records in ``tags`` the preamble sections they need)."""

    def c_type(self, dtype: DataType) -> str:  # noqa: C901  (one branch per CUDA type family)
        lanes, bits, code = dtype.lanes, dtype.bits, dtype.code
        if dtype.scalable:
            raise TVMSError(f"CUDA has no scalable vectors ({dtype})")
        if code == "void":
            return "void"
        if code == "handle":
            return "void*"
        if code == "float" and bits == 16:
            self.tags.add("fp16")
            if lanes == 1:
                return "half"
            if lanes % 2 == 0 and lanes <= 8:
                return f"half{lanes}" if lanes <= 4 else f"uint{lanes // 2}"
        elif code == "bfloat":
            self.tags.add("bf16")
            if lanes == 1:
                return "nv_bfloat16"
            if lanes % 2 == 0 and lanes <= 8:
                return f"nv_bfloat16{lanes}" if lanes <= 4 else f"uint{lanes // 2}"
        elif code == "float" and bits == 32:
            if lanes == 1:
                return "float"
            if lanes <= 4:
                return f"float{lanes}"
            if lanes <= 8 and lanes % 2 == 0:
                return f"ulonglong{lanes // 2}"
        elif code == "float" and bits == 64:
            if lanes == 1:
                return "double"
            if lanes <= 4:
                return f"double{lanes}"
        elif code == "bool":
            if lanes == 1:
                return "bool"
            if lanes <= 4:
                return f"ushort{lanes}"
        elif code in ("int", "uint"):
            base = self.integer_type(dtype)
            if base is not None:
                return ("u" if code == "uint" else "") + base
        raise TVMSError(f"CUDA has no type for {dtype} (tvms's cuda target renders 16/32/64-bit floats, "
                        "bfloat16, bool and 8/16/32/64-bit integers)")

    def integer_type(self, dtype: DataType) -> str | None:
        """The C type of an integer dtype, less the ``u`` of an unsigned one (None: CUDA has none)."""
        lanes, bits = dtype.lanes, dtype.bits
        if bits == 8:
            if lanes in (4, 8, 16):  # (int8x4 is one int: no packing instructions)
                self.tags.add("int8")
                return {4: "int", 8: "int2", 16: "int4"}[lanes]
            if lanes == 1:
                return "signed char" if dtype.is_int else "char"
            return f"char{lanes}" if lanes <= 4 else None
        wide = {16: ("short", "int"), 32: ("int", "longlong")}
        if bits in wide:
            one, pair = wide[bits]
            if lanes == 1:
                return one
            if lanes <= 4:
                return f"{one}{lanes}"
            return f"{pair}{lanes // 2}" if lanes <= 8 and lanes % 2 == 0 else None
        if bits == 64:
            return "int64_t" if lanes == 1 else f"longlong{lanes}" if lanes <= 4 else None
        return None

    def float_constant(self, e: E.FloatImm) -> str:
        v, dt = e.value, e.dtype
        if dt.code == "bfloat":
            return f"__float2bfloat16_rn({hexfloat(v)}f/*{v:e}*/)"
        if dt.bits == 16:
            return f"__float2half_rn({self.float_constant(E.FloatImm(DataType('float32'), v))})"
        if dt.bits not in (32, 64):
            raise TVMSError(f"the cuda code generator has no constants of {dt}")
        suffix = "_F" if dt.bits == 32 else ""
        if math.isinf(v) or math.isnan(v):
            self.tags.add("math_constants")
            text = ("-" if v < 0 else "") + ("CUDART_INF" if math.isinf(v) else "CUDART_NAN") + suffix
        elif dt.bits == 64:
            text = f"{v:.15f}"
        else:
            text = f"{hexfloat(v)}f/*{v:e}*/"
        self.mark_const(text)
        return text

    def cast_text(self, value: str, src: DataType, dst: DataType) -> str:
        if src == dst:
            return value
        # (a half goes to an 8-bit integer through int: there is no direct conversion)
        via = f"({'u' if dst.is_uint else ''}int)" if src.bits == 16 and src.is_float and dst.is_integer and dst.bits == 8 else ""
        return f"(({self.c_type(dst)}){via}{value})"

    def vector_constructor(self, dtype: DataType) -> str:
        return "make_" + self.c_type(dtype)

    # ------------------------------------------------------------ vector lanes
    def lane(self, vec: str, dtype: DataType, i: int) -> str:
        lanes = dtype.lanes
        if lanes == 1:
            return vec
        if dtype.bits == 8 and dtype.is_integer:
            if lanes in (2, 3):
                return f"{vec}.{_XYZW[i % lanes]}"
            word = vec if lanes == 4 else f"{vec}.{_XYZW[i // 4]}"
            kind = "signed char" if dtype.is_int else "unsigned char"
            return f"(reinterpret_cast<const {kind}*>(&({word}))[{i % 4}])"
        pair = self.lane_pair(dtype)
        if pair is not None:
            return f"(({pair}*)(&({vec}.{_XYZW[i // 2]})))->{_XYZW[i % 2]}"
        return f"{vec}.{_XYZW[i]}"

    def lane_pair(self, dtype: DataType) -> str | None:
        """The 2-lane type through which lane i of a 5..8-lane vector is reached (None: direct)."""
        if dtype.lanes <= 4:
            return None
        if dtype.code == "bfloat":
            return "nv_bfloat162"
        if dtype.bits == 16 and dtype.code == "float":
            return "half2"
        names = {(16, "int"): "short", (16, "uint"): "ushort", (32, "int"): "int", (32, "uint"): "uint",
                 (32, "float"): "float"}
        name = names.get((dtype.bits, dtype.code))
        if name is None:
            raise TVMSError(f"CUDA cannot reach the lanes of {dtype}")
        return name + "2"

    def store_lane(self, vec: str, dtype: DataType, i: int, value: str) -> None:
        if dtype.bits == 8 and dtype.is_integer:
            if dtype.lanes in (2, 3):
                self.line(f"{vec}.{_XYZW[i % dtype.lanes]}=({value});")
                return
            word = vec if dtype.lanes == 4 else f"{vec}.{_XYZW[i // 4]}"
            kind = "signed char" if dtype.is_int else "unsigned char"
            self.line(f"reinterpret_cast<{kind}*>(&({word}))[{i % 4}] = ({kind})({value});")
            return
        self.line(f"{self.lane(vec, dtype, i)} = {value};")
