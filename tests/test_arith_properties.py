"""Every rewrite of the arithmetic simplifier preserves the value of the expression.

Random integer expressions over variables with bounded ranges (``+ - * // % min max``, constants,
nesting) are simplified in each mode -- the analyzer as schedule primitives use it (``SCHEDULE``),
as legalization uses it (``CANONICAL``), the affine fold (``simplify``) and the dimension folding of
struct-info inference (``simplify_dim``) -- and both expressions are evaluated at points inside the
ranges with TVM's semantics: floor division and modulo, and int32 wrap-around. A point where the
original expression overflows int32 is skipped (the simplifier, like TVM's, assumes no overflow).
"""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

import tvms  # noqa: F401  (registers the printer, for the failure messages)
from tvms.ir.arith import CANONICAL, SCHEDULE, Analyzer, simplify
from tvms.ir.dtype import DataType
from tvms.ir.expr import (EQ, GE, GT, LE, LT, NE, Add, And, FloorDiv, FloorMod, IntImm, Max, Min, Mul, Not, Or,
                          Select, Sub, Var, const, wrap_int)
from tvms.ir.relax_infer import simplify_dim

I32 = DataType("int32")
VARS = (Var("x", I32), Var("y", I32), Var("z", I32))
DIVISORS = (1, 2, 3, 4, 6, 8, 16, 66, 128, 1000, -3)
LIMIT = 2 ** 31


def _evaluate(e, env: dict, exact: bool) -> int:
    """The value of ``e``; ``exact`` raises OverflowError where an int32 step would wrap,
    otherwise each step wraps as the machine computes it."""
    if isinstance(e, IntImm):
        return e.value
    if isinstance(e, Var):
        return env[e]
    if isinstance(e, Not):
        return not _evaluate(e.a, env, exact)
    if isinstance(e, Select):
        return _evaluate(e.true_value if _evaluate(e.condition, env, exact) else e.false_value, env, exact)
    a, b = _evaluate(e.a, env, exact), _evaluate(e.b, env, exact)
    value = {Add: lambda: a + b, Sub: lambda: a - b, Mul: lambda: a * b, FloorDiv: lambda: a // b,
             FloorMod: lambda: a % b, Min: lambda: min(a, b), Max: lambda: max(a, b),
             EQ: lambda: a == b, NE: lambda: a != b, LT: lambda: a < b, LE: lambda: a <= b,
             GT: lambda: a > b, GE: lambda: a >= b, And: lambda: a and b, Or: lambda: a or b}[type(e)]()
    if exact and not -LIMIT <= value < LIMIT:
        raise OverflowError
    return value if exact else wrap_int(value, e.dtype)


def _leaf():
    return st.one_of(st.sampled_from(VARS), st.integers(-12, 12).map(lambda v: const(v, I32)))


def _extend(inner):
    divisor = st.sampled_from(DIVISORS).map(lambda v: const(v, I32))
    small = st.integers(-5, 8).map(lambda v: const(v, I32))
    return st.one_of(
        st.builds(Add, inner, inner), st.builds(Sub, inner, inner),
        st.builds(Mul, inner, small), st.builds(Mul, small, inner), st.builds(Mul, inner, inner),
        st.builds(FloorDiv, inner, divisor), st.builds(FloorMod, inner, divisor),
        st.builds(Min, inner, inner), st.builds(Max, inner, inner))


EXPRS = st.recursive(_leaf(), _extend, max_leaves=10)
RANGES = st.tuples(st.integers(-20, 20), st.integers(1, 40))  # (min, extent) of each variable


def _analyzer(mode: str, ranges: list) -> Analyzer:
    analyzer = Analyzer(mode)
    for var, (lo, extent) in zip(VARS, ranges):
        analyzer.bind(var, lo, extent)
    return analyzer


def _check(e, ranges: list, data) -> None:
    simplified = {
        "schedule": _analyzer(SCHEDULE, ranges).simplify(e),
        "canonical": _analyzer(CANONICAL, ranges).simplify(e),
        "canonical, no ranges": Analyzer(CANONICAL).simplify(e),
        "affine fold": simplify(e),
        "dimension folding": simplify_dim(e),
    }
    points = [{v: lo for v, (lo, _) in zip(VARS, ranges)},
              {v: lo + extent - 1 for v, (lo, extent) in zip(VARS, ranges)}]
    points += [{v: data.draw(st.integers(lo, lo + extent - 1)) for v, (lo, extent) in zip(VARS, ranges)}
               for _ in range(6)]
    for env in points:
        try:
            expected = _evaluate(e, env, exact=True)
        except OverflowError:
            continue
        for mode, s in simplified.items():
            assert s.dtype == e.dtype, mode
            got = _evaluate(s, env, exact=False)
            assert got == expected, (f"{mode}: {e.script()} became {s.script()}, which is {got} "
                                     f"instead of {expected} at {({v.name: x for v, x in env.items()})}")


@settings(max_examples=300)
@given(EXPRS, st.lists(RANGES, min_size=3, max_size=3), st.data())
def test_simplification_preserves_the_value(e, ranges, data) -> None:
    _check(e, ranges, data)


def _index_sums():
    """Sums of scaled, divided and reduced variables: the shape of the indices that schedules and
    legalization build, where the division and modulo rules do their work."""
    positive = st.sampled_from(DIVISORS[:-1])
    term = st.builds(lambda v, s: Mul(v, const(s, I32)), st.sampled_from(VARS),
                     st.sampled_from((1, 1, 2, 4, 6, 8, 8, 66)))
    term = st.one_of(term, term, term, st.builds(lambda t, d: FloorDiv(t, const(d, I32)), term, positive),
                     st.builds(lambda t, d: FloorMod(t, const(d, I32)), term, positive))
    total = st.lists(term, min_size=1, max_size=4).map(lambda ts: _add_all(ts))
    total = st.builds(Add, total, st.integers(-10, 10).map(lambda v: const(v, I32)))
    return st.builds(lambda t, op, d: op(t, const(d, I32)), total, st.sampled_from((FloorDiv, FloorMod)),
                     positive)


@st.composite
def _period_cases(draw):
    """``(x * g * m + y * s + base) // (g * k)`` and ``%`` with ranges: a multiple of ``g`` plus a
    small part whose range ends just below, at or just past one period ``g`` of the divisor (the
    vector lanes of a fused loop, the inner tile of a split)."""
    x, y = VARS[0], VARS[1]
    g = draw(st.sampled_from((2, 4, 6, 8)))
    m, s = draw(st.sampled_from((1, 2, 3))), draw(st.sampled_from((1, 2, 3)))
    base, k = draw(st.integers(0, g - 1)), draw(st.sampled_from((2, 3, 125)))
    op = draw(st.sampled_from((FloorDiv, FloorMod)))
    y_extent = draw(st.integers(1, (g - base) // s + 2))
    x_extent = draw(st.sampled_from((2, 3, 8, 9, 125, 130)))
    total = Add(Add(Mul(x, const(g * m, I32)), Mul(y, const(s, I32))), const(base, I32))
    return op(total, const(g * k, I32)), [(0, x_extent), (0, y_extent), (0, 1)]


# loop ranges as tiles make them: from 0 (mostly), extents that divide, or just miss, the divisors
TILE_RANGES = st.tuples(st.sampled_from((0, 0, 0, 1, -1)),
                        st.sampled_from((2, 3, 4, 6, 8, 9, 11, 16, 66, 125, 130)))


def _add_all(terms):
    out = terms[0]
    for t in terms[1:]:
        out = Add(out, t)
    return out


@settings(max_examples=200)
@given(_index_sums(), st.lists(TILE_RANGES, min_size=3, max_size=3), st.data())
def test_index_simplification_preserves_the_value(e, ranges, data) -> None:
    _check(e, ranges, data)


@settings(max_examples=200)
@given(_period_cases(), st.data())
def test_division_of_a_period_and_its_lanes_preserves_the_value(case, data) -> None:
    _check(*case, data)


@settings(max_examples=100)
@given(EXPRS, st.integers(-4, 6),
       st.lists(st.tuples(st.integers(1, 20), st.integers(1, 20)), min_size=3, max_size=3),
       st.data())
def test_exact_division_by_a_symbolic_size_preserves_the_value(e, k, ranges, data) -> None:
    """``e * x * k // x`` and ``(e * k) // e``: the dimension folding divides by a size that divides
    exactly (the sizes here are positive, as tensor sizes are)."""
    x = VARS[0]
    _check(FloorDiv(Mul(Mul(e, x), const(k, I32)), x), ranges, data)
    nonzero = Add(Mul(x, const(2, I32)), const(1, I32))  # never 0
    _check(FloorDiv(Mul(nonzero, const(k, I32)), nonzero), ranges, data)


COMPARISONS = (EQ, NE, LT, LE, GT, GE)


@st.composite
def _conditions(draw):
    """Comparisons of two expressions (a constant one side, often), joined by and/or/not, in a
    Select: the conditions of loop guards and predicates."""
    side = st.one_of(EXPRS, _index_sums(), st.integers(-20, 40).map(lambda v: const(v, I32)))
    compare = st.builds(lambda op, a, b: op(a, b), st.sampled_from(COMPARISONS), side, side)
    cond = draw(st.recursive(compare, lambda inner: st.one_of(
        st.builds(And, inner, inner), st.builds(Or, inner, inner), st.builds(Not, inner)), max_leaves=3))
    return Select(cond, VARS[0], VARS[1]) if draw(st.booleans()) else cond


@settings(max_examples=300)
@given(_conditions(), st.lists(RANGES, min_size=3, max_size=3), st.data())
def test_condition_simplification_preserves_the_value(cond, ranges, data) -> None:
    """The rewrites of comparisons (constants moved, factors divided out, quotients multiplied out,
    bounds of one variable met) and of and/or/not keep a condition's truth everywhere in the ranges."""
    _check(cond, ranges, data)
