"""transform_layout refuses an index map that is not one-to-one on the buffer (it would lose data)."""
from __future__ import annotations

import time

import numpy as np
import pytest

import tvms
from tvms.runtime.reference import run_prim_func
from tvms.tir import Schedule, ScheduleError, apply_trace_text


def copy_module(*shape: int) -> tvms.IRModule:
    """``B[...] = A[...] + 1`` over a buffer of ``shape``."""
    names = "ijkl"[:len(shape)]
    dims = ", ".join(map(str, shape))
    return tvms.script.from_source(f"""
@T.prim_func
def main(A: T.Buffer(({dims},), "float32"), B: T.Buffer(({dims},), "float32")):
    for {", ".join(names)} in T.grid({dims}):
        with T.block("B"):
            {", ".join("v" + n for n in names)} = T.axis.remap("{'S' * len(shape)}", [{", ".join(names)}])
            B[{", ".join("v" + n for n in names)}] = A[{", ".join("v" + n for n in names)}] + T.float32(1.0)
""")


def relayout(shape: tuple, index_map, **kwargs) -> Schedule:
    sch = Schedule(copy_module(*shape))
    sch.transform_layout(sch.get_block("B"), ("write", 0), index_map, **kwargs)
    return sch


@pytest.mark.parametrize("shape, index_map, message", [
    ((128, 128), lambda i, j: (i,),
     "the index map lambda i, j: (i,) on buffer 'B' of shape (128, 128) is not one-to-one: it sends "
     "(i=0, j=0) and (i=0, j=1) both to (0,), so the new layout would lose data"),
    ((16,), lambda i: (i // 2,),
     "the index map lambda i: (i // 2,) on buffer 'B' of shape (16,) is not one-to-one: it sends "
     "(i=0) and (i=1) both to (0,)"),
    ((8, 8), lambda i, j: (i + j, 0),
     "it sends (i=0, j=1) and (i=1, j=0) both to (1, 0)"),
    ((8, 8), lambda i, j: (i * 7 + j,),
     "it sends (i=0, j=7) and (i=1, j=0) both to (7,)"),
    ((4, 6), lambda i, j: (j // 2, i % 2, i // 2 * 0),
     "it sends (i=0, j=0) and (i=0, j=1) both to (0, 0, 0)"),
    ((2, 3, 4), lambda i, j, k: (k, i, j % 2),
     "it sends (i=0, j=0, k=0) and (i=0, j=2, k=0) both to (0, 0, 0)"),
])
def test_a_map_that_merges_elements_is_a_schedule_error(shape, index_map, message) -> None:
    sch = Schedule(copy_module(*shape))
    before = sch.mod.script()
    with pytest.raises(ScheduleError) as info:
        sch.transform_layout(sch.get_block("B"), ("write", 0), index_map)
    assert str(info.value).startswith("transform_layout: ") and message in str(info.value)
    assert sch.mod.script() == before and sch.trace.insts[-1].kind == "GetSBlock"


@pytest.mark.parametrize("shape, index_map, new_shape", [
    ((128, 128), lambda i, j: (j, i), (128, 128)),
    ((128, 128), lambda i, j: (i // 16, j // 16, i % 16, j % 16), (8, 8, 16, 16)),
    ((128, 128), lambda i, j: (i * 128 + j,), (16384,)),
    ((12,), lambda i: (i % 3, i // 3), (3, 4)),
    ((2, 3, 4), lambda i, j, k: (k, j, i), (4, 3, 2)),
    ((1, 8), lambda i, j: (j,), (8,)),  # an index of extent 1 may go
])
def test_one_to_one_maps_relayout_and_compute_the_same(shape, index_map, new_shape) -> None:
    sch = relayout(shape, index_map)
    func = sch.mod["main"]
    out = func.buffer_map[func.params[1]]
    assert tuple(e.value for e in out.shape) == new_shape
    a = np.random.default_rng(0).standard_normal(shape).astype("float32")
    b = np.full(new_shape, np.nan, dtype="float32")
    run_prim_func(func, a, b)
    for point in np.ndindex(*shape):
        assert b[tuple(int(x) for x in np.atleast_1d(index_map(*point)))] == a[point] + 1


def test_padding_is_refused_unless_left_undefined() -> None:
    """As TVM 0.27: a layout with places no element goes to needs pad_value
    (test_schedule_transform_layout_pad.py) or assume_injective_transform=True, which leaves them
    undefined."""
    with pytest.raises(ScheduleError, match="would introduce padding"):
        relayout((10,), lambda i: (i // 4, i % 4))
    sch = relayout((10,), lambda i: (i // 4, i % 4), assume_injective_transform=True)
    func = sch.mod["main"]
    a = np.random.default_rng(0).standard_normal((10,)).astype("float32")
    b = np.full((3, 4), np.nan, dtype="float32")
    run_prim_func(func, a, b)
    assert [b[i // 4, i % 4] for i in range(10)] == list(a + 1) and np.isnan(b[2, 2:]).all()


def test_large_buffers_are_checked_in_time() -> None:
    start = time.perf_counter()
    relayout((2048, 2048), lambda i, j: (i % 2048 + j * 2048,))  # one group of 4M points, enumerated
    # beyond: affine maps that use each digit of each index once are proved by their form
    relayout((4096, 4096), lambda i, j: (i * 4096 + j,))
    relayout((4096, 4096), lambda i, j: (i * 64 + j // 64, j % 64))
    relayout((4096, 4096), lambda i, j: (i // 64, j // 64, i % 64, j % 64))  # groups of 4096 points
    assert time.perf_counter() - start < 10
    with pytest.raises(ScheduleError, match=r"not one-to-one: it sends \(i=0, j=2047\) and \(i=1, j=0\)"):
        relayout((2048, 2048), lambda i, j: (i * 2047 + j,))
    with pytest.raises(ScheduleError) as info:
        relayout((4096, 4096), lambda i, j: (i * 4095 + j * 2,))
    assert str(info.value) == ("transform_layout: cannot check that the index map lambda i, j: (i * 4095 + j * 2,) "
                               "on buffer 'B' of shape (4096, 4096) is one-to-one (one group of its indices spans "
                               "16777216 points, more than the 4194304 checked one by one); pass "
                               "assume_injective_transform=True if it is")
    relayout((4096, 4096), lambda i, j: (i * 4095 + j * 2,), assume_injective_transform=True)


def test_the_caller_may_vouch_for_a_map() -> None:
    sch = relayout((8, 8), lambda i, j: (i + j, 0), assume_injective_transform=True)
    assert "assume_injective_transform=True" in str(sch.trace)


def test_a_trace_with_a_merging_map_fails_at_its_line(tmp_path, capsys) -> None:
    text = ('b0 = sch.get_block(name="B", func_name="main")\n'
            'sch.transform_layout(block=b0, buffer=("write", 0), index_map=lambda i, j: (i,))\n')
    with pytest.raises(ScheduleError) as info:
        apply_trace_text(text, Schedule(copy_module(4, 4)), "t.py")
    assert str(info.value).startswith("t.py:2:1: error: transform_layout: the index map lambda i, j: (i,) "
                                      "on buffer 'B' of shape (4, 4) is not one-to-one")
    from tvms.cli import main
    source, trace = tmp_path / "m.tvms", tmp_path / "t.py"
    source.write_text(copy_module(4, 4).script())
    trace.write_text(text)
    assert main(["schedule", str(source), "--trace", str(trace)]) == 1
    assert f"{trace}:2:1: error: transform_layout: " in capsys.readouterr().err


def test_an_index_map_object_of_the_wrong_arity_is_refused() -> None:
    first = relayout((4, 4), lambda i, j: (j, i))
    index_map = first.trace.insts[-1].inputs[1]
    sch = Schedule(copy_module(16))
    with pytest.raises(ScheduleError, match="the index map takes 2 indices, the buffer has 1 dimensions"):
        sch.transform_layout(sch.get_block("B"), ("write", 0), index_map)


INT64_COPY = """
@T.prim_func(s_tir=True)
def main(A: T.Buffer((T.int64(16),), "float32"), B: T.Buffer((T.int64(16),), "float32")):
    for i in range(T.int64(16)):
        with T.sblock("B"):
            vi = T.axis.spatial(T.int64(16), i)
            B[vi] = A[vi] * T.float32(2)
"""
# TVM 0.27's trace and module after transform_layout(B, ("write", 0), m) with
# m = IndexMap.from_func(lambda i: [i // 4, i % 4], index_dtype="int32") (tvm.s_tir.Schedule)
INT64_TRACE = """# from tvm import s_tir
def apply_trace(sch: s_tir.Schedule) -> None:
  b0 = sch.get_sblock(name="B", func_name="main")
  sch.transform_layout(block=b0, buffer=("write", 0), index_map=lambda i: (i // 4, i % 4,), pad_value=None, assume_injective_transform=False)"""
INT64_MODULE = """# from tvm.script import ir as I
# from tvm.script import tirx as T
# from tvm.tirx.layout import Axis

@I.ir_module
class Module:
    @T.prim_func(s_tir=True)
    def main(A: T.Buffer((T.int64(16),), "float32"), B: T.Buffer((T.int64(4), T.int64(4)), "float32")):
        # with T.sblock("root"):
        for i in range(T.int64(16)):
            with T.sblock("B"):
                vi = T.axis.spatial(T.int64(16), i)
                T.reads(A[vi])
                T.writes(B[vi // T.int64(4), vi % T.int64(4)])
                B[vi // T.int64(4), vi % T.int64(4)] = A[vi] * T.float32(2.0)"""


def test_an_int32_index_map_on_an_int64_buffer_is_traced_as_given() -> None:
    """The buffer is indexed in int64 (``vi // T.int64(4)``), while the trace keeps the caller's
    IndexMap over int32 (``i // 4``), as TVM 0.27's does; a lambda is traced converted."""
    from tvms.lowering.schedule.layout import IndexMap

    for index_map, traced in ((IndexMap.from_func(lambda i: (i // 4, i % 4), 1), "(i // 4, i % 4,)"),
                              (lambda i: (i // 4, i % 4), "(i // T.int64(4), i % T.int64(4),)")):
        sch = Schedule(tvms.IRModule({"main": tvms.script.from_source(INT64_COPY)}))
        sch.transform_layout(sch.get_block("B"), ("write", 0), index_map)
        assert sch.trace.script("tvm-0.27") == INT64_TRACE.replace("(i // 4, i % 4,)", traced)
        assert sch.mod.script(dialect="tvm-0.27") == INT64_MODULE
