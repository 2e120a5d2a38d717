"""transform_layout with pad_value, against TVM 0.27: the Before modules of TVM's
test_tir_schedule_transform_layout.py (test_padded_transform_*, test_implicit_padding_assume_injective)
and, as the golden, the module TVM's schedule gives (``<case>_expected_by_tvm.tvms``)."""
from __future__ import annotations

import importlib.util
import pathlib
import re

import numpy as np
import pytest

import tvms
from tvms.ir.structural import assert_structural_equal
from tvms.runtime.reference import run_prim_func
from tvms.tir import Schedule, ScheduleError, Trace, apply_trace_text

FIXTURES = pathlib.Path(__file__).parent / "fixtures" / "transform_layout_pad"
_spec = importlib.util.spec_from_file_location("generate_with_tvm", FIXTURES / "generate_with_tvm.py")
CASES = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(CASES)
OTHER = tvms.tir.decl_buffer((1,), "int32", name="other")
SPLIT = lambda i: [i // 4, i % 4]  # noqa: E731  (14 elements into (4, 4): (3, 2) and (3, 3) are padding)


def before(name: str) -> tvms.IRModule:
    return tvms.script.from_source((FIXTURES / f"{name}_before.tvms").read_text())


def padded(name: str, buffer: str, pad_value, index_map=SPLIT, **kwargs) -> Schedule:
    sch = Schedule(before(name))
    sch.transform_layout(sch.get_sblock("block"), buffer, index_map, pad_value=pad_value, **kwargs)
    return sch


@pytest.mark.parametrize("case, before_name, buffer, index_map, pad_value, injective", CASES.CASES,
                         ids=[c[0] for c in CASES.CASES])
def test_padded_layouts_are_tvms(case, before_name, buffer, index_map, pad_value, injective) -> None:
    """if_then_else in a row-major producer (its init too), a padding block after a producer that
    writes more, T.assume blocks for an input, padding left undefined; the trace replays."""
    sch = padded(before_name, buffer, eval(pad_value), eval(index_map), assume_injective_transform=injective)
    golden = (FIXTURES / f"{case}_expected_by_tvm.tvms").read_text()
    assert_structural_equal(sch.mod, tvms.script.from_source(golden))
    assert sch.mod.script(dialect="tvm-0.27") + "\n" == golden
    for replay in (lambda s: apply_trace_text(str(sch.trace), s, "trace.py"),
                   lambda s: Trace.from_json(sch.trace.as_json()).apply_to_schedule(s, remove_postproc=False)):
        replayed = Schedule(before(before_name))
        replay(replayed)
        assert_structural_equal(replayed.mod, sch.mod)


@pytest.mark.parametrize("extent, factor, predicate", [  # TVM 0.27's output for these maps
    (15, 4, "v_axis0 == 3 and v_axis1 == 3"), (13, 4, "v_axis0 == 3 and 1 <= v_axis1"),
    (17, 8, "v_axis0 == 2 and 1 <= v_axis1"), (6, 4, "v_axis0 == 1 and 2 <= v_axis1"),
])
def test_the_padding_predicate_is_written_as_tvm_simplifies_it(extent, factor, predicate) -> None:
    sch = Schedule(tvms.script.from_source(f"""
@T.prim_func
def main(A: T.Buffer(({extent},), "int32")):
    B = T.alloc_buffer(({extent},), "int32")
    for i in range({extent}):
        with T.block("block"):
            vi = T.axis.spatial({extent}, i)
            B[vi] = A[vi]
"""))
    sch.transform_layout(sch.get_block("block"), "B", lambda i: [i // factor, i % factor], pad_value=0)
    assert (f"B[v_axis0, v_axis1] = T.if_then_else({predicate}, 0, A[v_axis0 * {factor} + v_axis1])"
            in sch.mod.script())


def test_the_trace_records_the_pad_value_as_tvm_prints_it() -> None:
    assert ("pad_value=lambda indices_0, indices_1: (0,), assume_injective_transform=False)"
            in str(padded("if_then_else", "B", 0).trace))
    assert "pad_value=lambda i, j: (i + j,)" in str(padded("if_then_else", "B", lambda i, j: i + j).trace)


@pytest.mark.parametrize("case, computes", [("if_then_else", lambda a: a), ("post_proc", lambda a: a),
                                            ("reduction_opaque", lambda a: a.sum(axis=1)),
                                            ("two_producers", lambda a: a + 1)])
def test_the_padded_buffer_holds_the_elements_and_the_pad_value(case, computes) -> None:
    """The padded intermediate B, made an output: its elements as before, 7 in the padding."""
    sch = padded(case, "B", 7)
    text = re.sub(r' *B = T.alloc_buffer\(\(4, 4\), "int32"\)\n', "", sch.mod.script())
    text = text.replace('(A: T.Buffer((14,), "int32")', '(A: T.Buffer((14,), "int32"), B: T.Buffer((4, 4), "int32")')
    text = text.replace('(A: T.Buffer((14, 32), "int32")',
                        '(A: T.Buffer((14, 32), "int32"), B: T.Buffer((4, 4), "int32")')
    func = tvms.script.from_source(text)["main"]
    a = np.arange(1, 14 * (32 if "reduction" in case else 1) + 1, dtype="int32").reshape(14, -1).squeeze()
    b = np.full((4, 4), -1, dtype="int32")
    run_prim_func(func, a, b)
    assert b.reshape(16)[:14].tolist() == computes(a).tolist() and b[3, 2:].tolist() == [7, 7]


def test_an_input_with_its_padding_as_assumed_gives_the_same_output() -> None:
    func = before("input_assumption")["main"]
    a = np.arange(14, dtype="int32") * 3
    b, b_padded = np.zeros(14, dtype="int32"), np.zeros(14, dtype="int32")
    run_prim_func(func, a, b)
    a_padded = np.concatenate([a, np.full(2, 42, "int32")]).reshape(4, 4)
    run_prim_func(padded("input_assumption", "A", 42).mod["main"], a_padded, b_padded)
    assert b_padded.tolist() == b.tolist() == a.tolist()


@pytest.mark.parametrize("pad_value, index_map, message", [
    (None, SPLIT, "would introduce padding: give pad_value, or assume_injective_transform=True"),
    (tvms.tir.const(0, "int8"), SPLIT, "pad_value T.int8(0) is int8, buffer 'B' holds int32"),
    (0.5, SPLIT, "pad_value T.float32(0.5) is float32, buffer 'B' holds int32"),
    (0, lambda i: [(i + 5) // 4, (i + 5) % 4], "the new index (i + 5) // 4 is not i, (i + b) // c or (i + b) % c"),
    (0, lambda i: [0, i // 4, i % 4], "the new index 0 is not i, (i + b) // c or (i + b) % c"),
    (lambda i, j: OTHER[0], SPLIT, "pad_value other[0] reads a buffer (not supported)"),
])
def test_what_tvms_does_not_pad_is_a_schedule_error(pad_value, index_map, message) -> None:
    sch = Schedule(before("if_then_else"))
    text = sch.mod.script()
    with pytest.raises(ScheduleError) as info:
        sch.transform_layout(sch.get_sblock("block"), "B", index_map, pad_value=pad_value)
    assert message in str(info.value)
    assert sch.mod.script() == text
