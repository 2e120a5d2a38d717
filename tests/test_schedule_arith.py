"""The arithmetic analyzer for index expressions and the iteration-map check.

Expected texts are what Apache TVM 0.27's canonical simplifier prints for the same input
(``tvm.sym.analyzer.Analyzer.canonical_simplify``), or, where the two differ, what its schedule
primitives print (their iteration-map simplification keeps a split fused iterator whole:
``(f0 * 128 + f1) // 128``, where canonical_simplify would give ``f1 // 128 + f0``).
"""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tvms  # noqa: F401  (registers the printer)
from tvms.ir.arith import AFFINE, CANONICAL, DIMENSION, SCHEDULE, Analyzer
from tvms.ir.expr import Add, FloorDiv, FloorMod, IntImm, Mul, Sub, Var, const
from tvms.ir.arith import is_bijective_affine

x, y = Var("x"), Var("y")
f, f0, f1 = Var("f"), Var("f0"), Var("f1")
k0, k1, k2 = Var("k_0"), Var("k_1"), Var("k_2")
c = const


def simplified(e, **ranges) -> str:
    analyzer = Analyzer()
    names = {"x": x, "y": y, "f": f, "f0": f0, "f1": f1}
    for name, (lo, extent) in ranges.items():
        analyzer.bind(names[name], lo, extent)
    return analyzer.simplify(e).script()


@pytest.mark.parametrize("expr, ranges, expected", [
    (FloorMod(FloorDiv(x, c(16)), c(8)), {"x": (0, 4096)}, "x % 128 // 16"),
    (Add(Sub(Mul(x, c(2)), Mul(x, c(5))), c(3)), {}, "3 - x * 3"),
    (Add(Mul(FloorDiv(x, c(4)), c(4)), FloorMod(x, c(4))), {}, "x"),
    (Sub(x, c(3)), {}, "x - 3"),
    (Sub(Mul(y, c(2)), x), {}, "y * 2 - x"),
    (FloorDiv(Add(Mul(y, c(4)), x), c(8)), {}, "(y * 4 + x) // 8"),
    # fuse(i_0: 4, i_1: 32, j: 128): i = i_0 * 32 + i_1 becomes f // 128
    (Add(Mul(FloorMod(FloorDiv(f, c(4096)), c(4)), c(32)), FloorMod(FloorDiv(f, c(128)), c(32))),
     {"f": (0, 16384)}, "f // 128"),
    (FloorMod(f, c(128)), {"f": (0, 16384)}, "f % 128"),
    # split bindings: nested products expand, terms go by decreasing scale
    (Add(Mul(Add(Mul(k0, c(7)), k1), c(7)), k2), {}, "k_0 * 49 + k_1 * 7 + k_2"),
    # split keeps these whole (the rest's range is unknown), as TVM's schedule output shows
    (FloorDiv(Add(Mul(f0, c(128)), f1), c(128)), {}, "(f0 * 128 + f1) // 128"),
    (FloorMod(Add(Mul(f0, c(128)), f1), c(128)), {}, "(f0 * 128 + f1) % 128"),
    # ... and drop them when it is known
    (FloorDiv(Add(Mul(f0, c(128)), f1), c(128)), {"f1": (0, 128)}, "f0"),
    (FloorMod(Add(Mul(f0, c(128)), f1), c(128)), {"f1": (0, 128)}, "f1"),
    (Add(Add(Mul(c(0), c(128)), Mul(x, c(16))), y), {}, "x * 16 + y"),
    (FloorDiv(x, c(64)), {"x": (0, 64)}, "0"),
])
def test_canonical_form_prints_as_tvm(expr, ranges, expected) -> None:
    assert simplified(expr, **ranges) == expected


def test_comparisons_are_decided_by_ranges() -> None:
    from tvms.ir.expr import LT
    analyzer = Analyzer()
    analyzer.bind(x, 0, 100)
    assert analyzer.prove(LT(x, c(100))) is True
    assert analyzer.prove(LT(x, c(50))) is None
    assert analyzer.prove(LT(Add(x, c(200)), c(100))) is False


@settings(deadline=None)  # up to 8**3 points are evaluated in Python
@given(st.lists(st.sampled_from([1, 2, 3, 4, 8]), min_size=1, max_size=3), st.data())
def test_simplified_expression_has_the_same_values(extents, data) -> None:
    """Fusing loops of these extents and reading each back: the simplified bindings agree with
    the raw ones at every point (the check a schedule's rewrite relies on)."""
    fused = Var("fused")
    total = 1
    for e in extents:
        total *= e
    analyzer = Analyzer()
    analyzer.bind(fused, 0, total)
    raws = []
    stride = total
    for e in extents:
        stride //= e
        raws.append(FloorMod(FloorDiv(fused, c(stride)), c(e)))
    weights = data.draw(st.lists(st.integers(-3, 3), min_size=len(extents), max_size=len(extents)))
    raw = c(data.draw(st.integers(-5, 5)))
    for w, r in zip(weights, raws):
        raw = Add(raw, Mul(r, c(w)))
    simple = analyzer.simplify(raw)
    divisor = data.draw(st.sampled_from([1, 2, 4, 16]))
    raw_div, simple_div = FloorDiv(raw, c(divisor)), analyzer.simplify(FloorDiv(raw, c(divisor)))
    for value in range(total):
        env = {fused: value}
        assert evaluate(simple, env) == evaluate(raw, env)
        assert evaluate(simple_div, env) == evaluate(raw_div, env)


def evaluate(e, env) -> int:
    if isinstance(e, IntImm):
        return e.value
    if isinstance(e, Var):
        return env[e]
    a, b = evaluate(e.a, env), evaluate(e.b, env)
    return {Add: a + b, Sub: a - b, Mul: a * b, FloorDiv: a // b if b else 0,
            FloorMod: a % b if b else 0}[type(e)]


def test_iteration_map_check() -> None:
    i, j = Var("i"), Var("j")
    loops = {id(i): (i, 0, 8), id(j): (j, 0, 16)}
    assert is_bijective_affine([Add(Mul(i, c(16)), j)], loops)
    assert is_bijective_affine([FloorDiv(j, c(4)), FloorMod(j, c(4)), i], loops)
    assert not is_bijective_affine([i, i], loops)  # i used twice
    assert not is_bijective_affine([Add(Mul(i, c(8)), j)], loops)  # values overlap
    assert not is_bijective_affine([Mul(i, j)], loops)  # not affine
    assert not is_bijective_affine([FloorDiv(j, c(4)), FloorMod(j, c(8))], loops)  # digits overlap


def test_iteration_map_check_sees_a_split_fused_iterator_as_one() -> None:
    f0, f1, k = Var("f0"), Var("f1"), Var("k")
    loops = {id(f0): (f0, 0, 164), id(f1): (f1, 0, 100), id(k): (k, 0, 128)}
    fused = Add(Mul(f0, c(100)), f1)
    assert is_bijective_affine([FloorDiv(fused, c(128)), FloorMod(fused, c(128)), k], loops)
    assert not is_bijective_affine([FloorDiv(fused, c(128)), f1], loops)  # f1 alone and in the sum
    assert not is_bijective_affine([FloorDiv(fused, c(64)), FloorMod(fused, c(128))], loops)


@pytest.mark.parametrize("mode", [SCHEDULE, CANONICAL])
def test_a_tile_index_divided_by_its_inner_tile_is_the_tile_variables(mode) -> None:
    """(i0 * 66 + i1 * 6 + i2) // 6 with i2 < 6 and i1 < 11: i2 never carries, so the quotient is
    the outer tile's variables, and the modulo is the innermost one."""
    i0, i1, i2 = Var("i0"), Var("i1"), Var("i2")
    analyzer = Analyzer(mode)
    analyzer.bind(i1, 0, 11)
    analyzer.bind(i2, 0, 6)
    index = Add(Add(Mul(i0, c(66)), Mul(i1, c(6))), i2)
    assert analyzer.simplify(FloorDiv(index, c(6))).script() == "i0 * 11 + i1"
    assert analyzer.simplify(FloorMod(index, c(6))).script() == "i2"
    assert analyzer.simplify(FloorMod(FloorDiv(index, c(6)), c(11))).script() == "i1"


def test_vector_lanes_inside_one_period_of_a_modulo_form_a_ramp() -> None:
    """(f0 * 8 + f1) % 1000 with the lane f1 in [0, 8): 8 divides 1000, so the lanes never wrap;
    the quotient does not depend on the lane at all. A schedule binding stays whole, as TVM's
    schedule primitives print it."""
    schedule = Analyzer(SCHEDULE)
    schedule.bind(f1, 0, 8)
    assert schedule.simplify(FloorMod(Add(Mul(f0, c(8)), f1), c(1000))).script() == "(f0 * 8 + f1) % 1000"
    analyzer = Analyzer(CANONICAL)
    analyzer.bind(f1, 0, 8)
    index = Add(Mul(f0, c(8)), f1)
    assert analyzer.simplify(FloorMod(index, c(1000))).script() == "f0 % 125 * 8 + f1"
    assert analyzer.simplify(FloorDiv(index, c(1000))).script() == "f0 // 125"
    lane_one = Add(Mul(f0, c(8)), c(1))  # the step from lane 0 to lane 1 is 1
    assert analyzer.simplify(Sub(FloorMod(lane_one, c(1000)), FloorMod(Mul(f0, c(8)), c(1000)))).script() == "1"
    # a lane that may cross the period stays whole: 12 does not divide 1000
    assert analyzer.simplify(FloorMod(Add(Mul(f0, c(12)), f1), c(1000))).script() == "(f0 * 12 + f1) % 1000"


@pytest.mark.parametrize("mode, expected", [
    (SCHEDULE, ["(f0 * 128 + f1) // 128", "(f0 * 128 + f1) % 128", "f0 * 2 + f1"]),
    (CANONICAL, ["f1 // 128 + f0", "f1 % 128", "f0 * 2 + f1"]),
    (DIMENSION, ["f0 + f1 // 128", "f1 % 128", "f1 + f0 * 2"]),
    (AFFINE, ["(f0 * 128 + f1) // 128", "(f0 * 128 + f1) % 128", "f1 + f0 * 2"]),
])
def test_each_mode_reproduces_its_tvm_behaviour(mode, expected) -> None:
    """One sum in the four modes: the schedule binding keeps a split fused iterator whole, TVM's
    canonical simplifier takes the multiples of 128 out (in its term order), the struct-info sizes
    keep the written order, and the affine fold leaves divisions alone."""
    analyzer = Analyzer(mode)
    fused = Add(Mul(f0, c(128)), f1)
    got = [analyzer.simplify(FloorDiv(fused, c(128))), analyzer.simplify(FloorMod(fused, c(128))),
           analyzer.simplify(Add(f1, Mul(f0, c(2))))]
    assert [e.script() for e in got] == expected
