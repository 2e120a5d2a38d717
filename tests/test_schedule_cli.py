"""``tvms schedule``: apply a trace file to a module from the command line."""
from __future__ import annotations

import pytest
from conftest import FIXTURES

from tvms.cli import main

GOLDEN = FIXTURES / "schedule"
BASE = GOLDEN / "matmul_00_base.tvms"


def test_applies_a_trace_and_prints_the_module(capsys) -> None:
    assert main(["schedule", str(BASE), "--trace", str(GOLDEN / "mm_schedule_mm.trace.py")]) == 0
    out = capsys.readouterr().out
    assert out == (GOLDEN / "mm_schedule_mm.tvms").read_text() + "\n"


def test_writes_atomically_and_prints_the_trace(tmp_path, capsys) -> None:
    target = tmp_path / "out.tvms"
    trace = GOLDEN / "mm_loop_kinds.trace.py"
    assert main(["schedule", str(BASE), "--trace", str(trace), "-o", str(target), "--print-trace"]) == 0
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == trace.read_text() + "\n"
    assert target.read_text() == (GOLDEN / "mm_loop_kinds.tvms").read_text() + "\n"
    assert [p.name for p in tmp_path.iterdir()] == ["out.tvms"]  # no temporary file left


def test_classic_dialect_output_and_classic_trace(tmp_path, capsys) -> None:
    trace = tmp_path / "t.py"
    trace.write_text((GOLDEN / "seed002_schedule_mm.trace.py").read_text())
    assert main(["schedule", str(BASE), "--trace", str(trace), "--dialect", "classic", "--print-trace"]) == 0
    captured = capsys.readouterr()
    assert "with T.block(\"C_init\"):" in captured.out and "@T.prim_func\n" in captured.out
    assert captured.err == trace.read_text() + "\n"


@pytest.mark.parametrize("trace_text, code, located", [
    # a primitive that fails on this module: exit 1, located at its call
    ('b0 = sch.get_block(name="D", func_name="main")', 1,
     "t.py:1:6: error: get_block: cannot find a block with the name 'D' in function 'main'\n"
     '1 | b0 = sch.get_block(name="D", func_name="main")\n'
     "         ^" + "~" * 40 + "\n"),
    ('b0 = sch.get_block(name="C", func_name="main")\nl1, l2, l3 = sch.get_loops(block=b0)\n'
     'sch.vectorize(loop=l3)', 1, "t.py:3:1: error: vectorize: the \"vectorize\" of loop 'k' "),
    # a file that is not a trace: exit 2
    ("import os", 2, "t.py:1:1: error: an import is not part of the trace language\n1 | import os\n    ^~~~~~~~~\n"),
    ("b0 = = 1", 2, "t.py:1:6: error: the trace is not valid Python: invalid syntax\n1 | b0 = = 1\n         ^\n"),
    ("sch.get_loops()", 2, "t.py:1:1: error: sch.get_loops(...): missing a required argument: 'block'\n"),
    ('b0 = sch.get_block(name="C", func_name="main")\nl1, l2 = sch.get_loops(block=b0)', 2,
     "t.py:2:1: error: sch.get_loops(block=b0) gives 3 value(s); the trace unpacks 2\n"
     "2 | l1, l2 = sch.get_loops(block=b0)\n    ^~~~~~\n"),
    ("sch.get_loops(block=b9)", 2, "t.py:1:21: error: unknown variable 'b9'\n"),
    ('b0 = sch.get_block(nme="C")', 2, "t.py:1:20: error: sch.get_block has no parameter 'nme'\n"),
])
def test_failures_exit_with_a_located_message(tmp_path, capsys, trace_text, code, located) -> None:
    trace = tmp_path / "t.py"
    trace.write_text(trace_text)
    target = tmp_path / "out.tvms"
    assert main(["schedule", str(BASE), "--trace", str(trace), "-o", str(target)]) == code
    err = capsys.readouterr().err
    assert err.startswith(f"{trace.parent}/{located}"), err
    assert "Traceback" not in err
    assert not target.exists()


def test_unreadable_inputs_and_usage(tmp_path, capsys) -> None:
    assert main(["schedule", str(tmp_path / "missing.tvms"), "--trace", str(BASE)]) == 2
    assert "cannot read" in capsys.readouterr().err
    bad = tmp_path / "bad.tvms"
    bad.write_text("@I.ir_module\nclass M:\n    x = = 1\n")
    assert main(["schedule", str(bad), "--trace", str(GOLDEN / "mm_bind.trace.py")]) == 2
    assert "bad.tvms:" in capsys.readouterr().err
    assert main(["schedule", str(BASE)]) == 2  # --trace is required


def test_default_schedules_from_the_command_line(tmp_path, capsys) -> None:
    """``--default`` gives every function its default CPU schedule; the result reads back,
    carries ``tir.is_scheduled`` and computes the same matmul."""
    import numpy as np

    import tvms
    from tvms.script import from_source

    target = tmp_path / "scheduled.tvms"
    assert main(["schedule", str(BASE), "--default", "-o", str(target)]) == 0
    text = target.read_text().rstrip("\n")
    mod = from_source(text)
    assert mod.script(dialect="tvm-0.27") == text
    assert '"tirx.is_scheduled": True' in text and "T.parallel" in text
    pytest.importorskip("llvmlite")
    a, b = (np.random.default_rng(i).standard_normal((128, 128)).astype("float32") for i in (1, 2))
    c = np.zeros((128, 128), dtype="float32")
    tvms.build(mod, target="llvm")["main"](a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def test_default_and_trace_exclude_each_other(capsys) -> None:
    trace = str(GOLDEN / "mm_schedule_mm.trace.py")
    assert main(["schedule", str(BASE), "--default", "--trace", trace]) == 2
    assert main(["schedule", str(BASE)]) == 2
    assert "give either --trace TRACE.py or --default" in capsys.readouterr().err
