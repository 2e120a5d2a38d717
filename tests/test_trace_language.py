"""The trace language: a trace file is interpreted by tvms, never executed as Python.

What a trace may hold is what TVM prints; everything else is a ScriptError at file:line:col.
"""
from __future__ import annotations

import inspect
import re

import pytest
from conftest import FIXTURES

import tvms
from tvms.cli import main
from tvms.ir.errors import ScriptError
from tvms.lowering.schedule.replay import PrimitiveFailed, evaluate_lambda
from tvms.tir import Schedule, ScheduleError, apply_trace_text

GOLDEN = FIXTURES / "schedule"
BASE = GOLDEN / "matmul_00_base.tvms"


def matmul() -> tvms.IRModule:
    return tvms.script.from_source(BASE.read_text())


def escapes(marker) -> list[str]:
    """Traces that, executed as Python, reach os.system through the schedule object and create
    ``marker``: each passed the old AST check (only sch.<method> calls, attributes, names)."""
    return [
        # replace a method of the instance by dict.get of the module's globals, then by os.system
        f'sch.get_loops = sch.get_block.__globals__.get\nrnd = sch.get_loops("random")\n'
        f'sch.get_loops = rnd._os.system\nsch.get_loops("touch {marker}")\n',
        # the same through the class: every later Schedule would run the payload
        f'sch.__class__.get_loops = sch.get_block.__globals__.get\n'
        f'sch.get_loops = sch.get_loops("random")._os.system\nsch.get_loops("touch {marker}")\n',
        # the same inside apply_trace
        f'def apply_trace(sch):\n  sch.get_loops = sch.get_block.__globals__.get\n'
        f'  sch.get_loops = sch.get_loops("random")._os.system\n'
        f'  sch.get_loops("touch {marker}")\n',
    ]


@pytest.mark.parametrize("index", range(3))
def test_escape_payloads_run_nothing(tmp_path, index: int) -> None:
    marker = tmp_path / "pwned"
    get_loops = Schedule.get_loops
    sch = Schedule(matmul())
    with pytest.raises(ScriptError) as info:
        apply_trace_text(escapes(marker)[index], sch, "evil.py")
    assert not marker.exists()
    assert Schedule.get_loops is get_loops and "get_loops" not in vars(sch)
    first = str(info.value).splitlines()[0]
    assert first == {0: "evil.py:1:1: error: a trace assigns to names, not to an attribute",
                     1: "evil.py:1:1: error: a trace assigns to names, not to an attribute",
                     2: "evil.py:2:3: error: a trace assigns to names, not to an attribute"}[index]
    assert sch.trace.insts == []


def test_escape_payload_from_the_command_line(tmp_path, capsys) -> None:
    marker = tmp_path / "pwned"
    trace = tmp_path / "evil.py"
    trace.write_text(escapes(marker)[0])
    assert main(["schedule", str(BASE), "--trace", str(trace)]) == 2
    err = capsys.readouterr().err
    assert err == (f"{trace}:1:1: error: a trace assigns to names, not to an attribute\n"
                   "1 | sch.get_loops = sch.get_block.__globals__.get\n"
                   "    ^~~~~~~~~~~~~\n")
    assert not marker.exists()


B0 = 'b0 = sch.get_block(name="C", func_name="main")\n'


@pytest.mark.parametrize("text, first_line", [
    # names: only the trace's own variables
    ("sch.get_loops(block=b0)", "t.py:1:21: error: unknown variable 'b0'"),
    (B0 + "sch.get_loops(block=bo)", "t.py:2:21: error: unknown variable 'bo'"),
    ('sch.get_loops(block=__builtins__)', "t.py:1:21: error: unknown variable '__builtins__'"),
    ("b0 = sch", "t.py:1:6: error: the schedule 'sch' can only be called: sch.<primitive>(...)"),
    ("sch = 1", "t.py:1:1: error: a trace cannot assign to the schedule 'sch'"),
    # calls: only the primitives of the instruction table, with their own parameters
    ("sch.copy()", "t.py:1:1: error: sch.copy is not a schedule primitive a trace can call"),
    ("sch._run('x', print)", "t.py:1:1: error: sch._run is not a schedule primitive a trace can call"),
    ('__import__("os").system("true")',
     't.py:1:1: error: __import__("os").system(...) is not a schedule method a trace can call'),
    ('print("hi")', 't.py:1:1: error: print(...) is not a schedule method a trace can call'),
    ("sch.get_block(name='C', func='main')", "t.py:1:25: error: sch.get_block has no parameter 'func'"),
    ("sch.get_block(name='C', **{'func_name': 'main'})",
     "t.py:1:25: error: a trace passes keyword arguments one by one, not as **dict"),
    (B0 + "sch.reorder(*sch.get_loops(b0))", "t.py:2:13: error: a trace passes arguments one by one, not as *list"),
    ("sch.get_block('C', 'main', 3)",
     "t.py:1:1: error: sch.get_block(...): too many positional arguments"),
    # unpacking: as many names as results
    (B0 + "l1, l2 = sch.get_loops(b0)", "t.py:2:1: error: sch.get_loops(b0) gives 3 value(s); the trace unpacks 2"),
    (B0 + "l1, = sch.get_loops(b0)", "t.py:2:1: error: sch.get_loops(b0) gives 3 value(s); the trace unpacks 1"),
    ('b0, = sch.get_block("C")', 't.py:1:1: error: sch.get_block("C") gives one value; the trace unpacks 1'),
    ("a = b = sch.get_block('C')", "t.py:1:5: error: a trace assigns to one name or one tuple of names"),
    ("x[0] = 1", "t.py:1:1: error: a trace assigns to names, not to indexing"),
    # other statements and expressions
    ("import os", "t.py:1:1: error: an import is not part of the trace language"),
    ("for i in []: pass", "t.py:1:1: error: a loop is not part of the trace language"),
    ("b0 += 1", "t.py:1:1: error: an augmented assignment is not part of the trace language"),
    ("x = 1 + 2", "t.py:1:5: error: arithmetic is not part of the trace language"),
    ("x = {}", "t.py:1:5: error: a dict is not part of the trace language"),
    ("x = f'{1}'", "t.py:1:5: error: an f-string is not part of the trace language"),
    ("x = b'1'", "t.py:1:5: error: a trace's literals are numbers, strings, booleans and None, not b'1'"),
    ("x = -'a'", "t.py:1:5: error: unary minus applies to a number"),
    ("sch", "t.py:1:1: error: a statement of a trace is a schedule call, not this form (Name)"),
    ("def f(sch): pass", "t.py:1:1: error: a trace may define only apply_trace, not 'f'"),
    ("@d\ndef apply_trace(sch): pass", "t.py:1:2: error: apply_trace takes no decorator"),
    ("def apply_trace(sch, x=os.system('true')): pass",
     "t.py:1:1: error: apply_trace takes one parameter, the schedule: def apply_trace(sch)"),
    ("def apply_trace(sch: os.system('x')): pass",
     "t.py:1:22: error: the schedule parameter is annotated s_tir.Schedule, if at all"),
    ("def apply_trace(sch) -> os: pass", "t.py:1:25: error: apply_trace returns None"),
    ("def apply_trace(sch):\n  def g(): pass",
     "t.py:2:3: error: apply_trace is defined at the top of a trace, not inside it"),
    ("def apply_trace(sch): pass\ndef apply_trace(sch): pass", "t.py:2:1: error: a trace defines apply_trace once"),
    ("return", "t.py:1:1: error: return outside apply_trace"),
    ("def apply_trace(sch):\n  return sch", "t.py:2:10: error: apply_trace returns nothing"),
    # index maps: arithmetic on the lambda's parameters
    (B0 + 'sch.transform_layout(b0, ("write", 0), lambda i, j: (i.__class__, j))',
     "t.py:2:54: error: an index map is arithmetic (+ - * // %) on its parameters; an attribute is not"),
    (B0 + 'sch.transform_layout(b0, ("write", 0), lambda i, j: (b0, j))',
     "t.py:2:54: error: an index map can use only its parameters (i, j), not 'b0'"),
    (B0 + 'sch.transform_layout(b0, ("write", 0), lambda i, j=print: (i, j))',
     "t.py:2:40: error: an index map takes plain parameters: lambda i, j: (...)"),
    (B0 + 'sch.transform_layout(b0, ("write", 0), lambda i, j: (i ** 2, j))',
     "t.py:2:54: error: an index map's operators are + - * // %, not **"),
    (B0 + 'sch.transform_layout(b0, ("write", 0), lambda i, j: (i // 0, j))',
     "t.py:2:59: error: the index map divides by zero"),
    (B0 + 'sch.transform_layout(b0, ("write", 0), lambda i, j: (i * 99999999999, j))',
     "t.py:2:58: error: an index map's constants are int32 integers, not 99999999999"),
    # the text itself
    ("b0 = = 1", "t.py:1:6: error: the trace is not valid Python: invalid syntax"),
    ('b0 = sch.get_block("C")\nb1 = x\0y', "t.py:2:7: error: a trace cannot contain NUL bytes"),
    ("x = " + "-" * 70 + "1", "t.py:1:70: error: nesting too deep (limit 64)"),
    ("x = " + "-" * 100000 + "1", "t.py:1:1: error: the trace is nested too deeply to read "
                                  "(expressions nest at most 64 deep)"),
    ("x = " + "[" * 150 + "]" * 150, "t.py:1:70: error: nesting too deep (limit 64)"),
    ("x = " + "[" * 300 + "]" * 300, "t.py:1:205: error: the trace is not valid Python: too many nested parentheses"),
    # columns count characters, not UTF-8 bytes
    ('sch.annotate(block_or_loop="é", ann_key="k", ann_val=é)', "t.py:1:54: error: unknown variable 'é'"),
])
def test_bad_traces_are_located_errors(text: str, first_line: str) -> None:
    sch = Schedule(matmul())
    with pytest.raises(ScriptError) as info:
        apply_trace_text(text, sch, "t.py")
    assert str(info.value).splitlines()[0] == first_line
    assert not isinstance(info.value, ScheduleError)  # a bad trace, not a failed primitive


def test_error_shows_the_line_and_a_caret_under_the_node() -> None:
    with pytest.raises(ScriptError) as info:
        apply_trace_text(B0 + "l1, l2 = sch.get_loops(block=b0)  # wrong arity\n", Schedule(matmul()), "t.py")
    assert str(info.value) == ("t.py:2:1: error: sch.get_loops(block=b0) gives 3 value(s); the trace unpacks 2\n"
                               "2 | l1, l2 = sch.get_loops(block=b0)  # wrong arity\n"
                               "    ^~~~~~")
    with pytest.raises(ScriptError) as info:
        apply_trace_text(B0 + "sch.get_loops(block=b_0)", Schedule(matmul()), "t.py")
    assert info.value.note == "did you mean 'b0'?"


def test_a_failed_primitive_is_a_schedule_error_at_its_call() -> None:
    sch = Schedule(matmul())
    text = "def apply_trace(sch: s_tir.Schedule) -> None:\n" \
           '  b0 = sch.get_sblock(name="C", func_name="main")\n' \
           "  l1, l2, l3 = sch.get_loops(block=b0)\n" \
           "  l4, l5 = sch.split(loop=l3, factors=[2, 3])\n"
    with pytest.raises(ScheduleError) as info:
        apply_trace_text(text, sch, "t.py")
    assert isinstance(info.value, PrimitiveFailed) and isinstance(info.value, ScriptError)
    assert (info.value.span.line, info.value.span.col) == (4, 12)
    assert str(info.value).startswith("t.py:4:12: error: split: ") and "product of factors [2, 3]" in str(info.value)
    assert len(sch.trace.insts) == 2  # the calls before it ran, the failed one left no trace


def test_a_malformed_apply_trace_runs_none_of_the_trace() -> None:
    sch = Schedule(matmul())
    with pytest.raises(ScriptError, match="apply_trace takes one parameter"):
        apply_trace_text(B0 + "def apply_trace(sch, other): pass\n", sch)
    assert sch.trace.insts == []


def test_a_wrong_argument_value_is_a_located_error() -> None:
    with pytest.raises(ScriptError) as info:
        apply_trace_text(B0 + "l1, l2, l3 = sch.get_loops(b0)\nsch.split(l1, factors=['a', None])",
                         Schedule(matmul()), "t.py")
    assert str(info.value).startswith("t.py:3:1: error: ")


def test_every_form_tvm_prints_replays() -> None:
    """Comments, pass, keywords, negative numbers, floats, None, tuples, ``l1, = ...`` and index
    maps, in the classic dialect and around ``def apply_trace``; statements outside apply_trace run
    first, as Python would run them."""
    text = ("# from tvm import s_tir\n"
            "def apply_trace(sch: s_tir.Schedule) -> None:\n"
            "  l1, l2, l3 = sch.get_loops(block=b0)  # a comment\n"
            "  l4, l5 = sch.split(loop=l2, factors=[None, 4], preserve_unit_iters=True)\n"
            "  sch.annotate(block_or_loop=l4, ann_key=\"k\", ann_val=-1.5)\n"
            "  sch.transform_layout(block=b0, buffer=(\"write\", 0), index_map=lambda i, j: (j // 4, j % 4, i,),"
            " pad_value=None)\n"
            "  pass\n"
            "  return\n"
            "  sch.parallel(loop=l1)\n")
    sch = Schedule(matmul())
    apply_trace_text('b0 = sch.get_block(name="C")\n' + text, sch)
    assert str(sch.trace).splitlines()[3:] == [
        "  l1, l2, l3 = sch.get_loops(block=b0)",
        "  l4, l5 = sch.split(loop=l2, factors=[None, 4], preserve_unit_iters=True, disable_predication=False)",
        '  sch.annotate(block_or_loop=l4, ann_key="k", ann_val=-1.5)',
        '  sch.transform_layout(block=b0, buffer=("write", 0), index_map=lambda i, j: (j // 4, j % 4, i,), '
        "pad_value=None, assume_injective_transform=False)"]
    assert 'C: T.Buffer((32, 4, 128), "float32")' in sch.mod.script()


def test_index_maps_evaluate_their_arithmetic() -> None:
    index_map = evaluate_lambda("lambda i, j: (i // 16, j % 16, i * 2 + -j - 1)")
    assert index_map(37, 21) == (2, 5, 52)
    assert evaluate_lambda("lambda i: i - 3")(5) == 2
    assert list(inspect.signature(index_map).parameters) == ["i", "j"]
    for bad, message in [("lambda i: i.real", "an attribute is not"), ("lambda i: x", "not 'x'"),
                         ("lambda: __import__('os')", "this form (Call) is not"),
                         ("print", "an index map is a lambda"), ("lambda i: (i,) if i else ()", "IfExp")]:
        with pytest.raises(ScriptError, match=re.escape(message)):
            evaluate_lambda(bad)
