"""Deep input goes through every layer without a RecursionError (issue 12, point 5): long sums,
nested loops, nested Relax calls and tuples, deep attribute lists. The fast tests use depths past
Python's default recursion limit; the slow ones go to the parser's limit (``MAX_NESTING``)."""
from __future__ import annotations

import numpy as np
import pytest

import tvms
from tvms.cli import main
from tvms.ir import Mutator, ScriptError, TVMSError, structural_equal, structural_hash
from tvms.ir import expr as E
from tvms.ir.deep import MAX_NESTING, run_deep
from tvms.ir.visitor import collect
from tvms.lowering.relax.pipeline import get_pipeline
from tvms.runtime.reference import run_prim_func
from tvms.runtime.reference_relax import run_relax
from tvms.script import from_source

from deep_programs import (long_sum_relax, long_sum_tir, nested_list_attr, nested_loops_tir,
                           nested_relax_calls, nested_tuple_relax, relax_chain)

FAST = {"sum": 2000, "loops": 300, "calls": 400, "tuple": 500, "list": 500}
LIMIT = MAX_NESTING - 50  # the generators' few enclosing levels (class, def, statement) included


def _round_trip(text: str):
    mod = from_source(text)
    printed = mod.script()
    again = from_source(printed)
    assert structural_equal(again, mod)
    assert structural_hash(again) == structural_hash(mod)
    assert again.script() == printed
    return mod


def _nested_tuple(value, depth: int):
    for _ in range(depth):
        value = (value,)
    return value


def _check_long_sum_tir(terms: int) -> None:
    mod = _round_trip(long_sum_tir(terms))
    func = mod["main"]
    assert len(collect(func.body, E.Add)) == terms - 1
    # the generic mutator walks it, changing nothing (a walk called directly, outside the entry
    # points, gets the room they have through run_deep)
    assert run_deep(Mutator().visit, func) is func
    a = np.arange(4, dtype="float32")
    expected = a * terms
    b = np.zeros(4, "float32")
    run_prim_func(func, a, b)  # the reference executor
    np.testing.assert_allclose(b, expected)
    lib = tvms.build(mod)  # LLVM code generation
    out = tvms.nd.array(np.zeros(4, "float32"))
    lib["main"](tvms.nd.array(a), out)
    np.testing.assert_allclose(out.numpy(), expected)


def _check_nested_relax_calls(depth: int) -> None:
    mod = _round_trip(nested_relax_calls(depth))
    x = np.ones(4, "float32")
    np.testing.assert_allclose(run_relax(mod, "main", x), x * (depth + 1))
    lowered = get_pipeline("zero")(mod)  # LegalizeOps, FuseOps, FuseTIR, ...
    np.testing.assert_allclose(run_relax(lowered, "main", x), x * (depth + 1))
    vm = tvms.relax.VirtualMachine(tvms.compile(mod), tvms.cpu())
    np.testing.assert_allclose(vm["main"](tvms.nd.array(x)).numpy(), x * (depth + 1))


def _check_nested_tuple(depth: int) -> None:
    mod = _round_trip(nested_tuple_relax(depth))
    x = np.arange(4, dtype="float32")
    result = run_relax(mod, "main", x)
    inner = result
    for _ in range(depth):
        assert isinstance(inner, tuple) and len(inner) == 1
        inner = inner[0]
    np.testing.assert_allclose(inner, x)


def test_nested_tuples_go_through_passes():
    # LegalizeOps walks the tuple (past Python's default recursion limit at this depth already);
    # the pipeline's time is quadratic in the depth, as the struct info is
    mod = from_source(nested_tuple_relax(300))
    lowered = get_pipeline("zero")(mod)
    assert structural_equal(lowered["main"], mod["main"])  # nothing to lower: the same function


def test_long_tir_sum_parses_prints_runs_and_compiles():
    _check_long_sum_tir(FAST["sum"])


def test_long_relax_sum_and_chain_parse_and_print():
    mod = _round_trip(long_sum_relax(FAST["sum"]))
    x = np.ones(4, "float32")
    np.testing.assert_allclose(run_relax(mod, "main", x), x * FAST["sum"])
    chain = _round_trip(relax_chain(FAST["sum"]))
    np.testing.assert_allclose(run_relax(chain, "main", x), x * (FAST["sum"] + 1))


def test_nested_loops_parse_print_and_compile():
    depth = FAST["loops"]
    mod = _round_trip(nested_loops_tir(depth))
    assert len(collect(mod["main"].body, tvms.ir.For)) == depth
    a = tvms.nd.array(np.full(1, 41, "float32"))
    b = tvms.nd.array(np.zeros(1, "float32"))
    tvms.build(mod)["main"](a, b)
    assert b.numpy()[0] == 42


def test_reference_executor_refuses_loops_deeper_than_python_allows():
    # its generated Python function has a `for` per loop: Python allows 20 in one function
    mod = from_source(nested_loops_tir(FAST["loops"]))
    with pytest.raises(TVMSError, match="nests too deeply for the Python function it becomes"):
        run_prim_func(mod["main"], np.zeros(1, "float32"), np.zeros(1, "float32"))
    a, b = np.full(1, 41, "float32"), np.zeros(1, "float32")
    run_prim_func(from_source(nested_loops_tir(19))["main"], a, b)
    assert b[0] == 42


def test_nested_relax_calls_go_through_passes_and_the_vm():
    _check_nested_relax_calls(FAST["calls"])


def test_nested_tuples_go_through_the_reference_executor():
    _check_nested_tuple(FAST["tuple"])


def test_deep_attribute_list_round_trips():
    depth = FAST["list"]
    mod = _round_trip(nested_list_attr(depth))
    assert mod["main"].attrs["deep"] == _nested_tuple(1, depth)  # (attribute lists are frozen)


def test_nesting_past_the_limit_is_a_positioned_error():
    text = nested_relax_calls(MAX_NESTING + 10)
    with pytest.raises(ScriptError) as info:
        from_source(text, "deep.tvms")
    err = info.value
    assert err.message == f"nesting too deep (limit {MAX_NESTING})"
    assert err.span.line == 9
    assert str(err).startswith(f"deep.tvms:9:{err.span.col}: error: nesting too deep")
    assert "\n9 |         gv = R.add(R.add(" in str(err)


def test_cli_fmt_of_deep_input_gives_no_traceback(tmp_path, capsys):
    ok = tmp_path / "ok.tvms"
    ok.write_text(nested_relax_calls(FAST["calls"]))
    assert main(["fmt", str(ok)]) == 0
    assert capsys.readouterr().out.count("R.add(") == FAST["calls"]
    deep = tmp_path / "deep.tvms"
    deep.write_text(long_sum_tir(MAX_NESTING + 10))
    assert main(["fmt", str(deep)]) == 2
    assert f"nesting too deep (limit {MAX_NESTING})" in capsys.readouterr().err


SPLIT_TRACE = """# from tvm import s_tir
def apply_trace(sch: s_tir.Schedule) -> None:
  b0 = sch.get_sblock(name="B", func_name="main")
  (l1,) = sch.get_loops(block=b0)
  l2, l3 = sch.split(loop=l1, factors=[None, 2], preserve_unit_iters=True, disable_predication=False)
"""


def test_cli_schedule_of_a_long_sum(tmp_path, capsys):
    # schedule primitives walk the block's body; the CLI gives every subcommand the room
    module, trace = tmp_path / "sum.tvms", tmp_path / "split.py"
    module.write_text(long_sum_tir(FAST["sum"]))
    trace.write_text(SPLIT_TRACE)
    assert main(["schedule", str(module), "--trace", str(trace)]) == 0
    out = capsys.readouterr().out
    assert "for i_0, i_1 in T.grid(2, 2):" in out and out.count("A[vi]") == FAST["sum"] + 1



def test_schedule_api_on_a_long_sum_runs_with_room_and_records_once():
    # a primitive that runs out of recursion is undone and run again with room: the trace
    # holds each instruction once and the schedule computes what it did
    sch = tvms.tir.Schedule(from_source(long_sum_tir(FAST["sum"])))
    (loop,) = sch.get_loops(sch.get_block("B"))
    outer, inner = sch.split(loop, [2, 2])
    sch.reorder(inner, outer)
    assert [inst.kind for inst in sch.trace.insts] == ["GetSBlock", "GetLoops", "Split", "Reorder"]
    a = np.arange(4, dtype="float32")
    b = np.zeros(4, dtype="float32")
    run_deep(run_prim_func, sch.mod["main"], a, b)
    np.testing.assert_allclose(b, a * FAST["sum"])

RECURSIVE = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4,), dtype="float32")) -> R.Tensor((4,), dtype="float32"):
        cls = Module
        gv: R.Tensor((4,), dtype="float32") = cls.main(x)
        return gv
'''


def test_vm_reports_endless_relax_recursion_as_a_tvms_error():
    vm = tvms.relax.VirtualMachine(tvms.compile(from_source(RECURSIVE)), tvms.cpu())
    with pytest.raises(TVMSError, match="recursion too deep: a Relax function calls itself"):
        vm["main"](tvms.nd.array(np.ones(4, "float32")))


def test_deep_ir_built_from_python_is_a_tvms_error_not_a_recursion_error():
    # past what any parsed text reaches: the walks end in a TVMSError
    x = E.Var("x", "int32")
    e = x
    for _ in range(200_000):
        e = E.Add(e, x)
    with pytest.raises(TVMSError, match="nested too deeply"):
        structural_hash(e)


@pytest.mark.slow
def test_long_tir_sum_at_the_limit():
    _check_long_sum_tir(LIMIT)


@pytest.mark.slow
def test_nested_relax_calls_at_the_limit():
    _check_nested_relax_calls(LIMIT)


@pytest.mark.slow
def test_deep_lists_at_the_limit_and_deep_tuples():
    _round_trip(nested_list_attr(LIMIT))
    # each level of a Relax tuple carries the struct info of everything inside it, so its size
    # (and the time of every walk) is quadratic in the depth: 2,000 takes minutes
    _check_nested_tuple(1000)
