"""What the scalar PTX instructions of TVM 0.27's table compute, for the reference executor.

``ARITHMETIC`` maps an entry of the table (``add_int``, ``setp_bool``, ...) to a function of its
modifiers (slot -> token, "" where omitted) and its source registers in operand order (ints: see
``ptx_values``; a ``.pred`` input a bool), returning its destination registers in operand order.
The semantics are the PTX ISA manual's: integers wrap (``.sat`` clamps), ``.hi``/``.wide`` take
the upper half or the whole product, floats are rounded once from the exact result by the
instruction's rounding mode, ``.ftz`` flushes subnormal inputs and results to zero, ``.sat`` clamps
a float to [0, 1]. The ``.approx`` instructions (ex2, lg2, sin, cos, tanh, rcp/sqrt/div .approx,
rsqrt) are computed exactly in float64 and rounded to the type: the hardware's approximation
differs from that in the last bits, which a test comparing with a GPU has to allow for.
"""
from __future__ import annotations

import math
import operator
from fractions import Fraction
from typing import Any, Callable

import numpy as np

from tvms.ir.errors import TVMSError

from .ptx_values import (as_float, as_int, element, exact, float_bits, float_dtype, flush, is_float, is_signed,
                         join, lanewise, largest, rounded, split, width)


def _clamp(x: int, ptx_type: str) -> int:
    w = width(ptx_type)
    lo, hi = (-(1 << (w - 1)), (1 << (w - 1)) - 1) if is_signed(ptx_type) else (0, (1 << w) - 1)
    return min(max(x, lo), hi)


def _int_op(fn: Callable) -> Callable:
    """An integer instruction on its ``type`` (elements of a packed one): wraps, or clamps with .sat."""
    def run(m: dict, *xs: int) -> int:
        t = m["type"]

        def one(e: str, *parts: int) -> int:
            r = fn(*(as_int(p, e) for p in parts))
            return _clamp(r, e) if m.get("sat") else as_int(r, e)
        return lanewise(t, one, *xs)
    return run


# ---------------------------------------------------------------- floats
def _float_op(fn: Callable, arity: int = 2, terms: Callable | None = None) -> Callable:
    """A float instruction: ``fn`` of the exact operands (Fractions) is the exact result, rounded
    by ``rnd`` (rn where omitted); ``srctype`` (add.f32.bf16: operands of another type) read.
    ``terms``: a sum's two terms of the operands (a zero sum's sign is theirs: ``_compute``)."""
    def run(m: dict, *xs: int) -> int:
        t, src = m["type"], m.get("srctype", "")
        rnd = m.get("rnd") or "rn"

        def one(e: str, *parts: int) -> int:  # (srctype: the operands but the last, add.f32.bf16's a)
            types = [src or e] * (arity - 1) + [e]
            values = [as_float(p, pt) for p, pt in zip(parts[:arity], types)]
            if m.get("ftz"):
                values = [flush(v, pt) for v, pt in zip(values, types)]
            return _finish(m, e, _compute(fn, values, rnd, terms), rnd)
        return lanewise(t, one, *xs) if not src else one(t, *xs)
    return run


def _sum(terms: Callable, arity: int = 2) -> Callable:
    """add, sub, fma, mad: the sum of the two ``terms`` of the operands."""
    return _float_op(lambda *xs: operator.add(*terms(*xs)), arity, terms)


def _compute(fn: Callable, values: list, rnd: str, terms: Callable | None) -> Fraction | float:
    """The exact result; float64's where an operand is not finite, there is no exact value
    (x / 0) or it is zero, whose sign IEEE 754 gives: a product's or quotient's by the operands'
    signs (-1 * 0 is -0), float64's round-to-nearest sum's (+0 but for -0 + -0), and toward
    minus infinity (rm) a sum's -0 unless both its terms are +0."""
    exacts = [exact(v) for v in values]
    if all(q is not None for q in exacts):
        try:
            q = fn(*exacts)
            if q != 0:
                return q
        except ZeroDivisionError:
            pass
    with np.errstate(all="ignore"):
        floats = [np.float64(v) for v in values]
        r = float(fn(*floats))
        if r == 0 and rnd == "rm" and terms is not None:
            both_plus = all(x == 0 and not np.signbit(x) for x in terms(*floats))
            r = 0.0 if both_plus else -0.0
    return r


def _finish(m: dict, t: str, q: Fraction | float, rnd: str) -> int:
    """Round ``q`` to ``t``, then .ftz, .sat, .relu, .satfinite (a float ``q``: an infinity, NaN or
    signed zero, or an .approx value)."""
    if isinstance(q, float) and math.isfinite(q) and q != 0:
        q = Fraction(q)
    bits = rounded(q, t, rnd)
    v = as_float(bits, t)
    if m.get("ftz"):
        v = flush(v, t)
    if m.get("sat"):
        v = float_dtype(t).type(0.0 if math.isnan(float(v)) else min(max(float(v), 0.0), 1.0))
    if m.get("relu") and float(v) < 0:  # (NaN stays NaN)
        v = float_dtype(t).type(0.0)
    if m.get("satfinite") and math.isinf(float(v)):  # (the largest finite value of its sign; NaN stays NaN)
        return largest(t, float(v) < 0)
    return float_bits(v, t)


def _approx(fn: Callable) -> Callable:
    """An .approx function: float64's value, rounded to the type (module docstring)."""
    def run(m: dict, a: int) -> int:
        def one(e: str, x: int) -> int:
            v = as_float(x, e)
            if m.get("ftz"):
                v = flush(v, e)
            with np.errstate(all="ignore"):
                r = float(fn(np.float64(v)))
            return _finish(m, e, r, "rn")
        return lanewise(m["type"], one, a)
    return run


def _sqrt(m: dict, a: int) -> int:
    t, mode = m["type"], m["mode"]
    v = as_float(a, t)
    if m.get("ftz"):
        v = flush(v, t)
    q = exact(v)
    if mode == "approx" or q is None or q <= 0:
        with np.errstate(all="ignore"):
            return _finish(m, t, float(np.sqrt(np.float64(v))), "rn")
    c = as_float(rounded(Fraction(math.sqrt(float(v))), t), t)  # (float64's root, then bracketed exactly)
    while Fraction(float(c)) ** 2 > q:
        c = as_float(float_bits(c, t) - 1, t)
    while Fraction(float(as_float(float_bits(c, t) + 1, t))) ** 2 <= q:
        c = as_float(float_bits(c, t) + 1, t)
    lo, hi = c, as_float(float_bits(c, t) + 1, t)  # (lo**2 <= q < hi**2)
    if Fraction(float(lo)) ** 2 == q or mode in ("rz", "rm"):
        return _finish(m, t, Fraction(float(lo)), "rn")
    if mode == "rp":
        return _finish(m, t, Fraction(float(hi)), "rn")
    mid = (Fraction(float(lo)) + Fraction(float(hi))) / 2  # (never a root: ties cannot happen)
    return _finish(m, t, Fraction(float(lo if mid ** 2 > q else hi)), "rn")


def _div_f(m: dict, a: int, b: int) -> int:
    if m["mode"] in ("approx", "full"):
        return _approx_binary(lambda x, y: x / y)(m, a, b)
    return _float_op(operator.truediv)({**m, "rnd": m["mode"]}, a, b)


def _approx_binary(fn: Callable) -> Callable:
    def run(m: dict, a: int, b: int) -> int:
        t = m["type"]
        x, y = as_float(a, t), as_float(b, t)
        if m.get("ftz"):
            x, y = flush(x, t), flush(y, t)
        with np.errstate(all="ignore"):
            return _finish(m, t, float(fn(np.float64(x), np.float64(y))), "rn")
    return run


def _min_max(pick: Callable) -> Callable:
    def run(m: dict, *xs: int) -> int:
        if m.get("xorsign"):
            raise TVMSError("the reference executor does not run min/max .xorsign")

        def one(e: str, *parts: int) -> int:
            if not is_float(e):  # (.relu: a negative result is 0, element by element)
                r = pick(as_int(p, e) for p in parts)
                return as_int(max(r, 0) if m.get("relu") else r, e)
            values = [float(as_float(p, e)) for p in parts]
            if m.get("abs"):
                values = [abs(v) for v in values]
            numbers = [v for v in values if not math.isnan(v)]
            if m.get("nan") and len(numbers) < len(values) or not numbers:
                return float_bits(np.nan, e)
            r = pick(numbers)
            if r == 0 and len({math.copysign(1, v) for v in numbers if v == 0}) > 1:  # (-0 < +0)
                r = math.copysign(0.0, -1 if pick is min else 1)
            v = flush(float_dtype(e).type(r), e) if m.get("ftz") else float_dtype(e).type(r)
            return float_bits(float_dtype(e).type(0.0) if m.get("relu") and r < 0 else v, e)
        return lanewise(m["type"], one, *xs)
    return run


# ---------------------------------------------------------------- integers
def _mul_int(m: dict, a: int, b: int) -> int:
    t = m["type"]
    p = as_int(a, t) * as_int(b, t)
    return as_int(p >> width(t), t) if m["mode"] == "hi" else as_int(p, t)


def _wide(t: str) -> str:
    return f"{t[0]}{2 * width(t)}"


def _mad_wide(m: dict, a: int, b: int, c: int = 0) -> int:
    """mul.wide and mad.wide: the whole product (plus c, of twice the width)."""
    t = m["type"]
    return as_int(as_int(a, t) * as_int(b, t) + as_int(c, _wide(t)), _wide(t))


def _mad_int(m: dict, a: int, b: int, c: int) -> int:
    t = m["type"]
    p = as_int(a, t) * as_int(b, t)
    r = (p >> width(t) if m["mode"] == "hi" else p) + as_int(c, t)
    return _clamp(r, t) if m.get("sat") else as_int(r, t)


def _div_int(pick: Callable) -> Callable:
    def run(m: dict, a: int, b: int) -> int:
        t = m["type"]
        x, y = as_int(a, t), as_int(b, t)
        if y == 0:
            raise TVMSError(f"PTX's div/rem.{t} by zero is undefined (the reference executor refuses it)")
        q = abs(x) // abs(y) * (1 if (x < 0) == (y < 0) else -1)  # (toward zero, as C)
        return as_int(pick(x, y, q), t)
    return run


def _shift(m: dict, a: int, b: int, left: bool) -> int:
    t = m["type"]
    n = min(as_int(b, "u32"), width(t))  # (PTX clamps the amount to the width)
    x = as_int(a, t)
    return as_int(x << n if left else x >> n, t)


def _shf(m: dict, a: int, b: int, c: int) -> int:
    n = as_int(c, "u32")
    n = min(n, 32) if m["mode"] == "clamp" else n & 31
    pair = as_int(b, "u32") << 32 | as_int(a, "u32")  # (b the high word)
    return (pair << n >> 32) & 0xFFFFFFFF if m["dir"] == "l" else (pair >> n) & 0xFFFFFFFF


def _bfe(m: dict, a: int, b: int, c: int) -> int:
    t = m["type"]
    w, pos, length = width(t), as_int(b, "u32") & 0xFF, as_int(c, "u32") & 0xFF
    x = as_int(a, t)
    if length == 0:
        return 0
    field = (as_int(x, f"u{w}") >> pos) & ((1 << length) - 1) if pos < w else 0
    top = min(pos + length - 1, w - 1)
    sign = is_signed(t) and (x >> top) & 1  # (PTX: the sign is the field's last bit, or the msb)
    if sign:  # (every bit past the field, and past the msb, is the sign)
        field |= ~((1 << max(0, min(length, w - pos))) - 1)
    return as_int(field, t)


def _bfi(m: dict, a: int, b: int, c: int, d: int) -> int:
    t = m["type"]
    w, pos, length = width(t), as_int(c, "u32") & 0xFF, as_int(d, "u32") & 0xFF
    x, y = as_int(a, t), as_int(b, t)
    for i in range(length):
        if pos + i < w:
            y = y & ~(1 << (pos + i)) | ((x >> i) & 1) << (pos + i)
    return as_int(y, t)


def _prmt(m: dict, a: int, b: int, c: int) -> int:
    data = as_int(b, "u32") << 32 | as_int(a, "u32")
    raw = [data >> (8 * i) & 0xFF for i in range(8)]
    sel = as_int(c, "u32")
    mode = m.get("mode") or ""
    if mode == "":
        out = []
        for i in range(4):
            s = sel >> (4 * i) & 0xF
            byte = raw[s & 7]
            out.append((0xFF if byte & 0x80 else 0) if s & 8 else byte)
    else:
        n = sel & 3
        out = [raw[j & 7] for j in {
            "f4e": [n, n + 1, n + 2, n + 3], "b4e": [n, n - 1, n - 2, n - 3],
            "rc8": [n] * 4, "ecl": [n, n if n > 1 else 1, n if n > 2 else 2, 3],
            "ecr": [0, 1 if n > 0 else 0, 2 if n > 1 else n, n], "rc16": [2 * (n & 1), 2 * (n & 1) + 1] * 2}[mode]]
    return sum(byte << (8 * i) for i, byte in enumerate(out))


def _lop3_bool(m: dict, a: int, b: int, c: int, lut: int, q: bool, sunk: bool = False) -> tuple:
    """lop3.or/.and: d = the function, p = (d != 0) or/and q."""
    d = _lop3(a, b, c, lut)
    p = int(_BOOL[m["boolop"]](d != 0, bool(q)))
    return (p,) if sunk else (d, p)


def _lop3(*xs: int) -> int:
    a, b, c = (as_int(x, "u32") for x in xs[:3])
    lut = int(xs[3]) & 0xFF
    r = 0
    for i in range(32):
        index = (a >> i & 1) << 2 | (b >> i & 1) << 1 | (c >> i & 1)  # (0xF0: a, 0xCC: b, 0xAA: c)
        r |= (lut >> index & 1) << i
    return r


def _dp(m: dict, a: int, b: int, c: int, pairs: int) -> int:
    """dp4a: four bytes of a times four of b; dp2a: two halves of a times two bytes of b (its
    low or high pair); plus c (each element signed where its type is)."""
    at, bt = m["atype"], m["btype"]
    ys = [as_int(x, f"{bt[0]}8") for x in split(as_int(b, "u32"), "u8x4")]
    if pairs == 4:
        xs = [as_int(x, f"{at[0]}8") for x in split(as_int(a, "u32"), "u8x4")]
    else:
        xs = [as_int(x, f"{at[0]}16") for x in split(as_int(a, "u32"), "u16x2")]
        ys = ys[2:] if m["mode"] == "hi" else ys[:2]
    acc_type = "s32" if "s" in (at[0], bt[0]) else "u32"
    return as_int(as_int(c, acc_type) + sum(x * y for x, y in zip(xs, ys)), acc_type)


def _bfind(m: dict, a: int) -> int:
    t = m["type"]
    x = as_int(a, t)
    w = width(t)
    if is_signed(t) and x < 0:
        x = ~x
    if x == 0:
        return 0xFFFFFFFF
    msb = x.bit_length() - 1
    return w - 1 - msb if m.get("shiftamt") else msb


# ---------------------------------------------------------------- comparisons and selection
_ORDERED = {"eq": operator.eq, "ne": operator.ne, "lt": operator.lt, "le": operator.le, "gt": operator.gt,
            "ge": operator.ge, "lo": operator.lt, "ls": operator.le, "hi": operator.gt, "hs": operator.ge}


def compare(cmp: str, t: str, a: int, b: int, ftz: bool = False) -> bool:
    """setp's comparison of ``a`` and ``b`` as ``t`` (``equ``, ...: true where either is NaN)."""
    if not is_float(t):
        unsigned = cmp in ("lo", "ls", "hi", "hs") or t.startswith("b")
        return _ORDERED[cmp](as_int(a, "u" + t[1:] if unsigned else t), as_int(b, "u" + t[1:] if unsigned else t))
    x, y = as_float(a, t), as_float(b, t)
    if ftz:
        x, y = flush(x, t), flush(y, t)
    x, y = float(x), float(y)
    nan = math.isnan(x) or math.isnan(y)
    if cmp == "num":
        return not nan
    if cmp == "nan":
        return nan
    if cmp.endswith("u") and cmp != "neu" or cmp == "neu":
        return nan or _ORDERED[cmp[:-1]](x, y)
    return not nan and _ORDERED[cmp](x, y)


_BOOL = {"and": operator.and_, "or": operator.or_, "xor": operator.xor}


def _setp(m: dict, a: int, b: int, c: bool | None = None, pair: bool = False) -> Any:
    t = m.get("type")
    r = compare(m["cmp"], t, a, b, bool(m.get("ftz")))
    combine = (lambda x: _BOOL[m["boolop"]](x, bool(c))) if c is not None else (lambda x: x)
    return (int(combine(r)), int(combine(not r))) if pair else int(combine(r))


def _setp_packed(m: dict, a: int, b: int, c: bool | None = None) -> tuple:
    """setp.f16x2: the low elements' comparison into p, the high ones' into q."""
    e = element(m["type"])[0]
    rs = [compare(m["cmp"], e, x, y, bool(m.get("ftz"))) for x, y in zip(split(a, m["type"]), split(b, m["type"]))]
    combine = (lambda x: _BOOL[m["boolop"]](x, bool(c))) if c is not None else (lambda x: x)
    return tuple(int(combine(r)) for r in rs)


def _set(m: dict, a: int, b: int, c: bool | None = None) -> int:
    """set: all ones (1.0 for a float destination) where the comparison holds; of a packed
    source (set.u32.f16x2), each element's comparison into its own half of d."""
    st, dt = m.get("stype"), m["dtype"]
    e, count = element(st)

    def one(d: str, x: int, y: int) -> int:
        r = compare(m["cmp"], e, x, y, bool(m.get("ftz")))
        if c is not None:
            r = _BOOL[m["boolop"]](r, bool(c))
        return float_bits(1.0 if r else 0.0, d) if is_float(d) else (1 << width(d)) - 1 if r else 0
    if count > 1:
        half = element(dt)[0] if is_float(dt) else f"b{width(e)}"
        return join([one(half, x, y) for x, y in zip(split(a, st), split(b, st))], st)
    return one(dt, a, b)


def _slct(m: dict, a: int, b: int, c: int) -> int:
    if m["ctype"] != "f32":
        return a if as_int(c, "s32") >= 0 else b
    v = as_float(c, "f32")
    if m.get("ftz"):  # (a subnormal c is a zero of its sign: -1e-45 picks a)
        v = flush(v, "f32")
    return a if float(v) >= 0 else b  # (-0.0 too; NaN: b)


def _testp(m: dict, a: int) -> int:
    v = float(as_float(a, m["type"]))
    tiny = float(as_float(1 << (23 if m["type"] == "f32" else 52), m["type"]))
    finite, nan = math.isfinite(v), math.isnan(v)
    return int({"finite": finite, "infinite": not finite and not nan, "number": not nan, "notanumber": nan,
                "normal": finite and abs(v) >= tiny, "subnormal": finite and 0 < abs(v) < tiny}[m["op"]])


# ---------------------------------------------------------------- conversions
def cvt(m: dict, a: int) -> int:
    dt, at = m["dtype"], m["atype"]
    rnd = m.get("rnd") or ""
    if not is_float(at):
        x = as_int(a, at)
        if not is_float(dt):
            return _clamp(x, dt) if m.get("sat") else as_int(x, dt)
        return _finish(m, dt, Fraction(x), rnd or "rn")
    v = as_float(a, at)
    if m.get("ftz"):
        v = flush(v, at)
    if not is_float(dt):  # (float to integer: rounded to an integer by rni/rzi/rmi/rpi, clamped, NaN 0)
        f = float(v)
        if math.isnan(f):
            return 0
        if math.isinf(f):
            return _clamp(int(math.copysign(1 << 200, f)), dt)
        return _clamp(_integral(Fraction(f), rnd), dt)
    q = exact(v)
    integral = rnd.endswith("i")  # (float to float of the same size: to an integral value)
    if q is not None and integral:
        q = Fraction(_integral(q, rnd))
    if q is None or q == 0:  # (an infinity, NaN, or a zero of the operand's sign, as IEEE 754 says)
        q = math.copysign(0.0, float(v)) if q == 0 else float(v)
    return _finish(m, dt, q, "rn" if integral else rnd or "rn")


def _cvt_pair(m: dict, a: int, b: int) -> int:
    """cvt.rn.f16x2.f32 d, a, b: a converted into the upper half of d, b into the lower."""
    e = element(m["dtype"])[0]
    one = {**m, "dtype": e}
    return join([cvt(one, b), cvt(one, a)], m["dtype"])


def _integral(q: Fraction, rnd: str) -> int:
    if rnd == "rzi":
        return math.trunc(q)
    if rnd == "rmi":
        return math.floor(q)
    if rnd == "rpi":
        return math.ceil(q)
    if rnd in ("rni", ""):
        return round(q)  # (Fraction's round: ties to even)
    raise TVMSError(f"cvt of a float to an integer rounds by rni, rzi, rmi or rpi, not {rnd!r}")


def _cvt_pack(m: dict, a: int, b: int, c: int | None = None) -> int:
    t = m["convert"]
    size = width(t)
    packed = (_clamp(as_int(a, "s32"), t) & ((1 << size) - 1)) << size | _clamp(as_int(b, "s32"), t) & ((1 << size) - 1)
    if c is None:
        return packed
    return (packed | as_int(c, "u32") << (2 * size)) & 0xFFFFFFFF


# ---------------------------------------------------------------- moves
def _mov_pack(parts: int) -> Callable:
    def run(m: dict, *xs: int) -> int:
        w = width(m["type"]) // parts
        return sum((int(x) & ((1 << w) - 1)) << (w * i) for i, x in enumerate(xs))
    return run


def _mov_unpack(parts: int) -> Callable:
    def run(m: dict, x: int) -> tuple:
        w = width(m["type"]) // parts
        return tuple(int(x) >> (w * i) & ((1 << w) - 1) for i in range(parts))
    return run


def _mov(m: dict, a: Any) -> int:
    return int(bool(a)) if m["type"] == "pred" else as_int(a, m["type"]) if not is_float(m["type"]) else a


def _logic(fn: Callable) -> Callable:
    def run(m: dict, *xs: Any) -> int:
        if m["type"] == "pred":
            return int(fn(*(bool(x) for x in xs)) & 1)
        return as_int(fn(*(as_int(x, m["type"]) for x in xs)), m["type"])
    return run


def _copysign(m: dict, a: int, b: int) -> int:
    """copysign d, a, b: b with the sign of a."""
    def one(e: str, x: int, y: int) -> int:
        sign = 1 << (width(e) - 1)
        return y & ~sign | x & sign
    return lanewise(m["type"], one, a, b)


def _flushed(x: int, e: str) -> int:
    """.ftz of a register: a subnormal's bits become its sign's zero's."""
    return float_bits(flush(as_float(x, e), e), e)


def _neg(m: dict, a: int) -> int:
    def one(e: str, x: int) -> int:  # (the sign bit: NaN too)
        return (_flushed(x, e) if m.get("ftz") else x) ^ (1 << (width(e) - 1))
    return lanewise(m["type"], one, a)


def _abs_f(m: dict, a: int) -> int:
    def one(e: str, x: int) -> int:
        r = x & ((1 << (width(e) - 1)) - 1)
        return _flushed(r, e) if m.get("ftz") else r
    return lanewise(m["type"], one, a)


ARITHMETIC: dict[str, Callable] = {
    "add_int": _int_op(operator.add), "sub_int": _int_op(operator.sub),
    "add": _sum(lambda a, b: (a, b)), "add_half": _sum(lambda a, b: (a, b)),
    "sub": _sum(lambda a, b: (a, -b)), "sub_half": _sum(lambda a, b: (a, -b)),
    "mul": _float_op(operator.mul), "mul_half": _float_op(operator.mul),
    "fma": _sum(lambda a, b, c: (a * b, c), 3), "fma_half": _sum(lambda a, b, c: (a * b, c), 3),
    "mad_f": _sum(lambda a, b, c: (a * b, c), 3),
    "mul_int": _mul_int, "mul_wide": _mad_wide, "mad_int": _mad_int, "mad_wide": _mad_wide,
    "div": _div_int(lambda x, y, q: q), "rem": _div_int(lambda x, y, q: x - q * y), "div_f": _div_f,
    "abs": _int_op(abs), "neg_int": _int_op(operator.neg), "abs_f": _abs_f, "abs_half": _abs_f,
    "neg": _neg, "neg_half": _neg,
    "min": _min_max(min), "max": _min_max(max), "min3": _min_max(min), "max3": _min_max(max),
    "and": _logic(operator.and_), "or": _logic(operator.or_), "xor": _logic(operator.xor),
    "not": _logic(lambda x: ~x if not isinstance(x, bool) else not x),
    "cnot": lambda m, a: int(as_int(a, m["type"]) == 0),
    "shl": lambda m, a, b: _shift(m, a, b, True), "shr": lambda m, a, b: _shift(m, a, b, False), "shf": _shf,
    "popc": lambda m, a: bin(as_int(a, m["type"])).count("1"),
    "clz": lambda m, a: width(m["type"]) - as_int(a, m["type"]).bit_length(),
    "brev": lambda m, a: int(format(as_int(a, m["type"]), f"0{width(m['type'])}b")[::-1], 2),
    "bfind": _bfind, "bfe": _bfe, "bfi": _bfi, "prmt": _prmt,
    "lop3": lambda m, *xs: _lop3(*xs), "lop3_bool": _lop3_bool,
    "lop3_bool_sink": lambda m, *xs: _lop3_bool(m, *xs, sunk=True),
    "dp4a": lambda m, a, b, c: _dp(m, a, b, c, 4), "dp2a": lambda m, a, b, c: _dp(m, a, b, c, 2),
    "copysign": _copysign,
    "rcp": lambda m, a: (_approx(lambda x: 1 / x) if m["mode"] == "approx"
                         else _float_op(lambda x: 1 / x, 1))({**m, "rnd": m["mode"]}, a),
    "sqrt": _sqrt, "rsqrt": _approx(lambda x: 1 / np.sqrt(x)),
    "ex2": _approx(np.exp2), "ex2_half": _approx(np.exp2), "lg2": _approx(np.log2),
    "sin": _approx(np.sin), "cos": _approx(np.cos), "tanh": _approx(np.tanh), "tanh_half": _approx(np.tanh),
    "testp": _testp,
    "setp": _setp, "setp_bool": _setp, "setp_half": _setp, "setp_half_bool": _setp,
    "setp_pq": lambda m, a, b: _setp(m, a, b, pair=True), "setp_bool_pq": lambda m, a, b, c: _setp(m, a, b, c, True),
    "setp_half_pq": _setp_packed, "setp_half_bool_pq": _setp_packed,
    "set": _set, "set_bool": _set, "set_half": _set, "set_half_bool": _set,
    "selp": lambda m, a, b, c: a if c else b, "slct": _slct,
    "cvt": cvt, "cvt_f16x2_f32": _cvt_pair, "cvt_bf16x2_f32": _cvt_pair, "cvt_pack": _cvt_pack, "cvt_pack_c": _cvt_pack,
    "mov": _mov,
    "mov_pack_b16x2": _mov_pack(2), "mov_pack_b32x2": _mov_pack(2), "mov_pack_b16x4": _mov_pack(4),
    "mov_unpack_b16x2": _mov_unpack(2), "mov_unpack_b32x2": _mov_unpack(2), "mov_unpack_b16x4": _mov_unpack(4),
}
