"""Schedules against Apache TVM 0.27's goldens: the module after the steps, the trace text in both
dialects, the trace JSON, replay of each form, and the errors of illegal primitives.

The steps live in fixtures/schedule/cases.py, which make_goldens.py ran under TVM to write the
goldens; here the same functions run on a tvms Schedule.
"""
from __future__ import annotations

import json
import sys

import pytest
from conftest import CORPUS, CORPUS_COPY, FIXTURES, corpus_manifest

import tvms
from tvms.tir import Schedule, ScheduleError, Trace, apply_trace_text

GOLDEN = FIXTURES / "schedule"
sys.path.insert(0, str(GOLDEN))
import cases  # noqa: E402

DIALECT = "tvm-0.27"


def base_module(name: str) -> tvms.IRModule:
    base = cases.base_file(name)
    return tvms.script.from_source((GOLDEN / base).read_text())


def scheduled(name: str) -> Schedule:
    sch = Schedule(base_module(name))
    cases.cases[name](sch)
    return sch


CASES = sorted(cases.cases)


@pytest.mark.parametrize("name", CASES)
def test_module_after_steps_matches_tvm(name: str) -> None:
    assert scheduled(name).mod.script(dialect=DIALECT) == (GOLDEN / f"{name}.tvms").read_text()


# TVM 0.27 cannot print a trace holding decompose_padding (its printer fails, str() gives
# "Trace(<address>)"): those cases have no trace golden (test_decompose_padding_trace below).
TRACE_CASES = [name for name in CASES if (GOLDEN / f"{name}.trace.py").exists()]


@pytest.mark.parametrize("name", TRACE_CASES)
def test_trace_text_matches_tvm(name: str) -> None:
    assert str(scheduled(name).trace) == (GOLDEN / f"{name}.trace.py").read_text()


# TVM 0.27 crashes serializing an IndexMap (transform_layout, transform_block_layout) to JSON: those
# cases have no JSON golden.
JSON_CASES = [name for name in CASES if (GOLDEN / f"{name}.json").exists()]


@pytest.mark.parametrize("name", JSON_CASES)
def test_trace_json_matches_tvm(name: str) -> None:
    assert json.dumps(scheduled(name).trace.as_json()) == (GOLDEN / f"{name}.json").read_text()


@pytest.mark.parametrize("name", CASES)
@pytest.mark.parametrize("dialect", ["classic", "tvm-0.27"])
def test_printed_trace_replays(name: str, dialect: str) -> None:
    expected = (GOLDEN / f"{name}.tvms").read_text()
    text = scheduled(name).trace.script(dialect=dialect)
    replay = Schedule(base_module(name))
    apply_trace_text(text, replay)
    assert replay.mod.script(dialect=DIALECT) == expected
    assert replay.trace.script(dialect=dialect) == text


@pytest.mark.parametrize("name", CASES)
def test_json_and_trace_object_replay(name: str) -> None:
    expected = (GOLDEN / f"{name}.tvms").read_text()
    path = GOLDEN / f"{name}.json"
    golden_json = json.loads(path.read_text()) if path.exists() else scheduled(name).trace.as_json()
    from_json = Schedule(base_module(name))
    Trace.apply_json_to_schedule(golden_json, from_json)
    assert from_json.mod.script(dialect=DIALECT) == expected
    assert from_json.trace.as_json() == golden_json
    replay = Schedule(base_module(name))
    scheduled(name).trace.apply_to_schedule(replay, remove_postproc=True)
    assert replay.mod.script(dialect=DIALECT) == expected


# What each error names (TVM's message is in NAME.error.txt; tvms names loops and blocks by name).
ERRORS = {
    "e_decompose_ew_no_init": ["decompose_reduction", "block 'B'", "not a reduction block"],
    "e_decompose_ew_not_ancestor": ["decompose_reduction", "loop 'i'", "not an ancestor of block 'C'"],
    "e_fuse_ew_two_blocks": ["fuse", "outer loop 'i'", "not the parent"],
    "e_fuse_not_adjacent": ["fuse", "outer loop 'i'", "inner loop 'k'", "not the parent"],
    "e_no_block": ["get_block", "'D'", "cannot find a block"],
    "e_parallel_reduce": ["parallel", "loop 'k'", "block 'C'", "not a data parallel block iter"],
    "e_reorder_dup": ["reorder", "loop 'i'", "multiple times"],
    "e_reorder_ew_not_chain": ["reorder", "not in a single chain"],
    "e_split_small": ["split", "loop 'k'", "product of factors [2, 3]", "extent 128"],
    "e_split_stale_loop": ["loop 'i'", "no longer exists"],
    "e_split_two_none": ["split", "loop 'k'", "only one factor"],
    "e_vectorize_reduce": ["vectorize", "loop 'k'", "block 'C'", "not a data parallel block iter"],
    "e_inline_ew_output": ["compute_inline", "block 'C' is an output block", "'C'"],
    "e_reverse_inline_ew_no_producer": ["reverse_compute_inline", "block 'B'", "exactly one buffer"],
    "e_cache_read_index": ["read_buffer_index 5 is out of range", "block 'C'", "2 buffer(s)"],
    "e_set_scope_param": ["set_scope", "buffer 'C'", "parameter"],
    "e_compute_at_ew_consumer_first": ["compute_at", "block 'C' is an output block"],
    "e_rfactor_spatial": ["rfactor", "loop 'i'", "only the reduction of block 'C'"],
    "e_decompose_padding_ew_no_pattern": ["decompose_padding", "block 'B'", "does not match the padding pattern"],
    "e_decompose_padding_ew_not_ancestor": ["decompose_padding", "loop 'i'", "not an ancestor of block 'B'"],
    "e_pad_einsum_ew_padding_size": ["pad_einsum", "block 'B'", "2 positive integers", "[32, 32, 32]"],
    "e_pool_pad_einsum_not_einsum": ["pad_einsum", "block 'tensor'", "not a computation of Einsum pattern"],
    "e_cascade_rolling_buffer_not_tiled": ["rolling_buffer", "block 'B'", "is not a loop"],
    "e_cascade_rolling_buffer_output": ["rolling_buffer", "block 'C' is an output block"],
    "e_ew_rolling_buffer_no_overlap": ["rolling_buffer", "B[i:i + 1, 0:32]", "rolling pattern"],
    "e_crw_reindex_cache_read_not_match": ["reindex_cache_read", "iterator 'vi' of block 'C'", "[vi, vj]",
                                           "[vj * 2]"],
    "e_ew_cache_inplace_not_written": ["cache_inplace", "block 'C' reads buffer 'B' but does not write it"],
    "e_mm_read_at_index": ["read_buffer_index 5 is out of range", "block 'C'"],
    "e_biasbad_fuse_reduction_epilogue": ["fuse_reduction_epilogue", "block 'bad_epilogue'", "exactly once"],
    "e_biasscaled_fuse_reduction_epilogue": ["fuse_reduction_epilogue", "block 'scaled_epilogue'", "scales 'temp'"],
    "e_ew_transform_layout_padding": ["transform_layout", "buffer 'B' of shape (64, 32)", "(64, 7, 5)",
                                      "would introduce padding"],
    "e_lp_loop_partition_too_long": ["loop_partition", "sum of factors [1000, 2, 3]", "extent 128 of loop 'i'"],
    "e_crop_reverse_compute_at": ["reverse_compute_at", "TensorRegion pattern match failed: vg * 48 + vfl"],
    "e_cropf_reverse_compute_at": ["reverse_compute_at",
                                   "TensorRegion pattern match failed: vf // 34 * 48 + vf % 34"],
    "e_crops_reverse_compute_at": ["reverse_compute_at", "vg * 4 + vl * 2 + 1"],
}


def test_every_tvm_error_case_is_checked() -> None:
    assert sorted(ERRORS) == sorted(cases.errors)
    assert all(not (GOLDEN / f"{n}.error.txt").read_text().startswith("NO ERROR") for n in ERRORS)


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_illegal_primitive_raises_and_leaves_schedule_unchanged(name: str) -> None:
    sch = Schedule(base_module(name))
    before_text = sch.mod.script()
    trace_lines: list = []

    class Watch:  # records the trace just before the failing call
        def __getattr__(self, attr: str):
            method = getattr(sch, attr)

            def call(*args, **kwargs):
                trace_lines[:] = sch.trace.as_python()
                return method(*args, **kwargs)
            return call

    with pytest.raises(ScheduleError) as info:
        cases.errors[name](Watch())
    message = str(info.value)
    for part in ERRORS[name]:
        assert part in message, (part, message)
    assert isinstance(info.value, tvms.TVMSError)
    if name not in ("e_split_stale_loop", "e_ew_rolling_buffer_no_overlap"):  # (a legal first step)
        assert sch.mod.script() == before_text
    assert sch.trace.as_python() == trace_lines  # the failed call is not recorded


# ---------------------------------------------------------------- the corpus of TVM 0.27 output
BASE = "sched_matmul_00_base.tvms"
TRACES = [row["file"] for row in corpus_manifest() if row["kind"] == "trace"]
# The corpus keeps the schedules' outputs, not their inputs: these are reconstructed in the fixtures.
CORPUS_BASES = {"sched_reduce_sum_rfactor.trace.py": GOLDEN / "reduce_sum_00_base.tvms"}


@pytest.mark.parametrize("trace_file", TRACES)
def test_corpus_trace_reproduces_corpus_module(trace_file: str) -> None:
    text = (CORPUS / trace_file).read_text()
    base = CORPUS_BASES.get(trace_file, CORPUS / BASE)
    sch = Schedule(tvms.script.from_source(base.read_text()))
    apply_trace_text(text, sch, trace_file)
    expected = (CORPUS / trace_file.replace(".trace.py", ".tvms")).read_text()
    assert sch.mod.script(dialect=DIALECT) == expected
    assert str(sch.trace) == text


# Corpus modules kept without their trace, and the case of cases.py whose steps make them.
CORPUS_CASES = {"sched_matmul_cache_write_reverse_compute_at.tvms": "mm_cache_write_reverse_compute_at",
                "sched_matmul_transform_layout_output.tvms": "mm_transform_layout_output"}


@pytest.mark.parametrize("corpus_file", sorted(CORPUS_CASES))
def test_case_reproduces_the_corpus_module(corpus_file: str) -> None:
    path = CORPUS_COPY / corpus_file
    assert scheduled(CORPUS_CASES[corpus_file]).mod.script(dialect=DIALECT) == path.read_text()


def test_compute_inline_of_the_padding_reproduces_the_corpus_conv2d() -> None:
    """The corpus keeps the result of inlining a conv2d's padding block, not its input; the
    input (``conv2d_pad_00_base.tvms``) is rebuilt so that TVM 0.27 gives that exact result."""
    path = CORPUS_COPY / "sched_conv2d_compute_inline_pad.tvms"
    sch = Schedule(tvms.script.from_source((GOLDEN / "conv2d_pad_00_base.tvms").read_text()))
    sch.compute_inline(sch.get_sblock("pad"))
    assert sch.mod.script(dialect=DIALECT) == path.read_text()
    assert str(sch.trace).splitlines()[-1] == "  sch.compute_inline(block=b0)"


def test_add_unit_loop_keeps_the_numbers_and_refuses_the_root() -> None:
    import numpy as np

    from tvms.runtime.reference import run_prim_func

    sch = scheduled("ew_unit_loop")
    before, after = base_module("ew_unit_loop")["main"], sch.mod["main"]
    a = np.random.default_rng(0).standard_normal((64, 32)).astype("float32")
    outs = [np.zeros((64, 32), "float32") for _ in range(2)]
    for func, out in zip((before, after), outs):
        run_prim_func(func, a, out)
    np.testing.assert_array_equal(outs[0], outs[1])
    text = sch.mod.script()
    with pytest.raises(ScheduleError, match="on top of the root block"):
        sch.add_unit_loop(sch.get_sblock("root"))
    assert sch.mod.script() == text  # (a refused primitive leaves the schedule as it was)


@pytest.mark.parametrize("order", [[0, 1], [0, 1, 1], [0, 1, 3], "201"])
def test_reorder_block_iter_var_refuses_what_is_not_a_permutation(order) -> None:
    sch = Schedule(base_module("mm_reorder_block_iter_var"))
    text = sch.mod.script()
    with pytest.raises(ScheduleError, match="reorder indices are invalid"):
        sch.reorder_block_iter_var(sch.get_sblock("C"), order)
    assert sch.mod.script() == text


def test_unsafe_set_dtype_converts_at_the_stores_and_loads() -> None:
    import numpy as np

    from tvms.runtime.reference import run_prim_func

    sch = scheduled("ew_unsafe_set_dtype")
    a = np.random.default_rng(1).standard_normal((64, 32)).astype("float32")
    out = np.zeros((64, 32), "float32")
    run_prim_func(sch.mod["main"], a, out)
    # B holds A * 2 in float16: the result is C = float32(float16(A * 2)) + 1
    np.testing.assert_array_equal(out, (a * 2).astype("float16").astype("float32") + 1)
    with pytest.raises(ScheduleError, match="parameter of the function"):
        sch.unsafe_set_dtype(sch.get_sblock("C"), 0, "float16")
    with pytest.raises(ScheduleError):
        sch.unsafe_set_dtype(sch.get_sblock("B"), 0, "float17")


@pytest.mark.parametrize("buf_type, indices, message", [
    ("read", [2], "index 2 is out of range"), ("write", [1], "index 1 is out of range"),
    ("both", [0], "must be 'read' or 'write'")])
def test_unsafe_hide_buffer_access_refuses_bad_arguments(buf_type: str, indices: list, message: str) -> None:
    sch = Schedule(base_module("mm_unsafe_hide_buffer_access"))
    text = sch.mod.script()
    with pytest.raises(ScheduleError, match=message):
        sch.unsafe_hide_buffer_access(sch.get_sblock("C"), buf_type, indices)
    assert sch.mod.script() == text


@pytest.mark.parametrize("name", ["ew_merge_outer", "ew_merge_inner", "ew_unit_loop"])
def test_merged_and_unit_loops_keep_the_numbers(name: str) -> None:
    import numpy as np

    from tvms.runtime.reference import run_prim_func

    a = np.random.default_rng(2).standard_normal((64, 32)).astype("float32")
    outs = [np.zeros((64, 32), "float32") for _ in range(2)]
    for func, out in zip((base_module(name)["main"], scheduled(name).mod["main"]), outs):
        run_prim_func(func, a, out)
    np.testing.assert_array_equal(outs[0], outs[1])


def test_merge_refuses_loops_of_other_extents_or_depths() -> None:
    sch = Schedule(base_module("ew_merge_outer"))
    i_b, j_b = sch.get_loops(sch.get_sblock("B"))
    with pytest.raises(ScheduleError, match="at least two loops"):
        sch.merge(i_b)
    _, j_c = sch.get_loops(sch.get_sblock("C"))
    j0, j1 = sch.split(j_c, [None, 4])
    text = sch.mod.script()
    with pytest.raises(ScheduleError, match="extents of loops 'j' \\(32\\) and 'j_0' \\(8\\) differ"):
        sch.merge(j_b, j0)
    with pytest.raises(ScheduleError, match="nesting depths"):
        sch.merge(j_b, j1)
    assert sch.mod.script() == text  # (refused: the schedule is as it was)


def test_sample_partitioned_tile_draws_only_tilings_with_the_inner_factor() -> None:
    from math import prod

    for seed in range(20):
        sch = Schedule(base_module("mm_sample_partitioned_tile"), seed=seed)
        _, j, _ = sch.get_loops(sch.get_sblock("C"))
        factors = [sch.get(v) for v in sch.sample_partitioned_tile(j, n=3, partition_pos=1, innerpart_factor=16)]
        assert prod(factors) == 128 and prod(factors[1:]) % 16 == 0, factors
    with pytest.raises(ScheduleError, match="multiple of 4"):
        sch.sample_partitioned_tile(j, n=3, partition_pos=2, innerpart_factor=4, decision=[32, 2, 2])


SLOW_NUMBERS = ["einsum_pad_einsum", "mm_read_write_at", "bilinear_cache_index"]  # (over 2 s each)


@pytest.mark.parametrize("name", [
    "mm_reindex_read", "mm_reindex_write", "ew_reindex_read", "mm_transform_block_layout_permute",
    "mm_transform_block_layout_fuse", "ew_loop_partition", "pad1d_decompose_padding", "cascade_rolling_buffer_h",
    "cascade_rolling_buffer_not_perfect", "stride_rolling_buffer", "crw_reindex_cache_read",
    "crw_reindex_cache_write",
    "bias_fuse_reduction_epilogue", "biasf_fuse_reduction_epilogue",
    *(pytest.param(name, marks=pytest.mark.slow) for name in SLOW_NUMBERS)])
def test_scheduled_module_keeps_the_numbers(name: str) -> None:
    import numpy as np

    from tvms.runtime.reference import run_prim_func

    before, after = base_module(name)["main"], scheduled(name).mod["main"]
    rng = np.random.default_rng(3)
    buffers = [before.buffer_map[p] for p in before.params]
    args = [(rng.standard_normal([d.value for d in b.shape]) * 100).astype(str(b.dtype)) for b in buffers]
    outs = []
    for func in (before, after):
        copies = [a.copy() for a in args]
        run_prim_func(func, *copies)
        outs.append(copies[-1])
    np.testing.assert_allclose(outs[1], outs[0], rtol=1e-5, atol=1e-5)


def test_reindex_refuses_a_buffer_the_block_does_not_access() -> None:
    sch = Schedule(base_module("mm_reindex_read"))
    with pytest.raises(ScheduleError, match="accesses no buffer 'D'"):
        sch.reindex(sch.get_sblock("C"), "D")
    with pytest.raises(ScheduleError, match="out of range"):
        sch.reindex(sch.get_sblock("C"), ("read", 5))


@pytest.mark.parametrize("index_map, message", [
    (lambda i, j: (i, j), "takes 2 indices"),
    (lambda i, j, k: (i, j), "drops iterator 'vk'"),
    (lambda i, j, k: (i + j, k, j), "not bijective affine"),
    (lambda i, j, k: (i * 128 + k, j), "mixes iterators of different kinds"),
])
def test_transform_block_layout_refuses_maps_it_cannot_invert(index_map, message: str) -> None:
    sch = Schedule(base_module("mm_transform_block_layout_fuse"))
    text = sch.mod.script()
    with pytest.raises(ScheduleError, match=message):
        sch.transform_block_layout(sch.get_sblock("C"), index_map)
    assert sch.mod.script() == text


SYMBOLIC = """
@T.prim_func
def main(a: T.handle, b: T.handle, n: T.int32):
    A = T.match_buffer(a, (8, n))
    B = T.match_buffer(b, (8, n))
    for i, j in T.grid(8, n):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * T.float32(2)
"""


@pytest.mark.parametrize("prepare, factors, message", [
    (None, [-2, -64], "factor 0 of loop 'j' must be a positive integer"),
    (None, [0, None], "factor 0 of loop 'j' must be a positive integer"),
    (None, [None, 4, None], "only one factor"),
    (None, [16, 16], "larger than or equal to the extent 32"),
    (lambda sch, j: sch.annotate(j, "useless_annotation", True), [None, 10], "annotation or a thread binding"),
    (lambda sch, j: sch.bind(j, "threadIdx.x"), [None, 10], "annotation or a thread binding"),
])
def test_loop_partition_refuses_bad_factors_and_bound_loops(prepare, factors, message: str) -> None:
    sch = Schedule(base_module("ew_loop_partition"))
    _, j = sch.get_loops(sch.get_sblock("C"))
    if prepare:
        prepare(sch, j)
    text = sch.mod.script()
    with pytest.raises(ScheduleError, match=message):
        sch.loop_partition(j, factors)
    assert sch.mod.script() == text
    sch = Schedule(tvms.script.from_source(SYMBOLIC))
    with pytest.raises(ScheduleError, match="must be known at compile time"):
        sch.loop_partition(sch.get_loops(sch.get_sblock("B"))[1], [4, None])


def test_decompose_padding_trace_and_its_check() -> None:
    sch = scheduled("pad1d_decompose_padding")
    # (TVM 0.27's trace printer fails on this instruction; this is the line its code means to print)
    assert str(sch.trace).splitlines()[-1] == "  b2 = sch.decompose_padding(block=b0, loop=l1)"
    sch = Schedule(base_module("pad1d_decompose_padding"))
    block = sch.get_sblock("block")
    (loop,) = sch.get_loops(block)
    assert sch.can_decompose_padding(block, loop)
    assert len(sch.trace.insts) == 2  # the check is not traced
    sch.decompose_padding(block, loop)
    assert not sch.can_decompose_padding(block, sch.get_loops(block)[0])  # nothing left to decompose


TRIVIAL_PAD = """
@T.prim_func
def main(x: T.Buffer((1, 16, 225, 225), "int8"), y: T.Buffer((1, 16, 225, 225), "int8")):
    for i0, i1, i2, i3 in T.grid(1, 16, 225, 225):
        with T.block("pad_temp"):
            ax0, ax1, ax2, ax3 = T.axis.remap("SSSS", [i0, i1, i2, i3])
            y[ax0, ax1, ax2, ax3] = T.if_then_else(0 <= ax2 and ax2 < 225 and 0 <= ax3 and ax3 < 225,
                                                   x[ax0, ax1, ax2, ax3], T.int8(0))
"""


def test_decompose_padding_refuses_a_trivial_predicate() -> None:
    sch = Schedule(tvms.script.from_source(TRIVIAL_PAD))
    pad = sch.get_sblock("pad_temp")
    h = sch.get_loops(pad)[2]
    assert not sch.can_decompose_padding(pad, h)
    with pytest.raises(ScheduleError, match="in-bound predicate is trivial"):
        sch.decompose_padding(pad, h)


def test_cache_index_refuses_a_block_without_index_computations() -> None:
    sch = Schedule(base_module("ew_cache_index"))
    with pytest.raises(ScheduleError, match="computes no index worth caching"):
        sch.cache_index(sch.get_sblock("B"), "global")
    sch = Schedule(base_module("resize_cache_index"))
    with pytest.raises(ScheduleError, match="cse_thresh must be a non-negative integer"):
        sch.cache_index(sch.get_sblock("A"), "global", -1)


@pytest.mark.parametrize("args, message", [
    ((0, "both", lambda vi, vj: (vi, vj)), "buf_type must be 'read' or 'write'"),
    ((3, "read", lambda vi, vj: (vi, vj)), "buffer_index 3 is out of range"),
    ((0, "read", lambda vi, vj: (vi,)), "one range per iterator"),
    ((0, "write", lambda vi, vj: ((vi, vj, 1), vj)), "a pair"),
])
def test_annotate_buffer_access_refuses_bad_arguments(args, message: str) -> None:
    sch = Schedule(base_module("crw_annotate_buffer_access"))
    text = sch.mod.script()
    with pytest.raises(ScheduleError, match=message):
        sch.annotate_buffer_access(sch.get_sblock("B"), *args)
    assert sch.mod.script() == text


def test_get_sref_and_state_describe_the_module_now() -> None:
    """tvms makes srefs on request (see lowering/schedule/state.py): the block or loop, the sref of
    its enclosing block or loop and its index in an enclosing sequence, as TVM's have them."""
    sch = Schedule(base_module("ew_queries"))
    c = sch.get_sblock("C")
    i, j = sch.get_loops(c)
    sref = sch.get_sref(c)
    assert sref.stmt is sch.get(c) and sref.seq_index == -1
    assert sref.parent.stmt is sch.get(j) and sref.parent.parent.stmt is sch.get(i)
    assert sch.get_sref(i).seq_index == 1  # the second statement of the root block
    root = sch.get_sref(i).parent
    assert root.stmt.name_hint == "root" and root.parent is None
    assert sch.state.get_sref(sch.get(j)).same_as(sref.parent)
    assert sch.state.mod.script() == sch.mod.script()
    old_loop = sch.get(i)
    sch.fuse(i, j)
    assert sch.get_sref(c).parent.stmt.loop_var.name == "i_j_fused"
    assert sch.state.get_sref(old_loop) is None  # (that loop is gone from the module)
    with pytest.raises(ScheduleError, match="get_sref takes"):
        sch.get_sref("C")


def test_transform_layout_pads_only_when_told_how() -> None:
    """TVM 0.27 refuses a layout with padding unless given pad_value (of the buffer's dtype: an int for
    float32 is an error, as TVM's TransformationPaddingTypeError) or assume_injective_transform
    (test_schedule_transform_layout_pad.py pads)."""
    sch = Schedule(base_module("ew_transform_layout_padding"))
    with pytest.raises(ScheduleError, match="pad_value 0 is int32, buffer 'B' holds float32"):
        sch.transform_layout(sch.get_sblock("B"), ("write", 0), lambda i, j: (i, j // 5, j % 5), pad_value=0)
    sch.transform_layout(sch.get_sblock("B"), ("write", 0), lambda i, j: (i, j // 5, j % 5),
                         assume_injective_transform=True)
    assert "B = T.alloc_buffer((64, 7, 5))" in sch.mod.script()


WAR = """
@T.prim_func
def main(A: T.Buffer((8,), "float32"), D: T.Buffer((8,), "float32"), E: T.Buffer((8,), "float32")):
    for i in range(8):
        with T.block("X"):
            vi = T.axis.spatial(8, i)
            D[vi] = A[vi]
    for i in range(8):
        with T.block("W"):
            vi = T.axis.spatial(8, i)
            A[vi] = A[vi] + T.float32(1)
    for i in range(8):
        with T.block("C"):
            vi = T.axis.spatial(8, i)
            E[vi] = A[vi] * T.float32(2)
"""


def test_cache_read_leaves_readers_before_the_writer_alone() -> None:
    import numpy as np

    from tvms.runtime.reference import run_prim_func

    before = tvms.script.from_source(WAR)
    sch = Schedule(before)
    sch.cache_read(sch.get_sblock("C"), 0, "local")
    assert [r.buffer.name for r in sch.get(sch.get_sblock("X")).reads] == ["A"]
    assert [r.buffer.name for r in sch.get(sch.get_sblock("C")).reads] == ["A_local"]
    outs = []
    for func in (before, sch.mod["main"]):
        args = [np.arange(8, dtype="float32"), np.zeros(8, "float32"), np.zeros(8, "float32")]
        run_prim_func(func, *args)
        outs.append(args)
    for x, y in zip(*outs):
        np.testing.assert_array_equal(x, y)
