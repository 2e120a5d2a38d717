"""ONNX control flow (If, Loop, Scan) and sequences/optionals through from_onnx -> tvms.compile ->
VM, checked against numpy: run-time trip counts and conditions, bodies that read the enclosing
graph's values, and the forms refused with a message."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

import tvms  # noqa: E402
from tvms import relax  # noqa: E402
from tvms.ir.errors import TVMSError  # noqa: E402
from tvms.relax.frontend.onnx import from_onnx  # noqa: E402

F, I64, BOOL = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL
node = helper.make_node
RNG = np.random.default_rng(7)


def info(name, dtype, shape):
    return helper.make_tensor_value_info(name, dtype, shape)


def model(nodes, inputs, outputs, opset=17):
    return helper.make_model(helper.make_graph(nodes, "g", inputs, outputs),
                             opset_imports=[helper.make_opsetid("", opset)])


def run(mod, *args, exec_mode="compiled"):
    vm = relax.VirtualMachine(tvms.compile(mod, "llvm", exec_mode=exec_mode), tvms.cpu())
    out = vm["main"](*args)

    def numpy(r):
        return [numpy(x) for x in r] if isinstance(r, (list, tuple)) else r.numpy()
    return numpy(out)


def _loop_model():
    """y, s = Loop(n, cond, y0): y += w * i each iteration (w read from the enclosing graph),
    s stacks y; the body stops when y's sum passes `limit` (a run-time condition)."""
    body = helper.make_graph(
        [node("Cast", ["i"], ["fi"], to=F), node("Mul", ["w", "fi"], ["step"]),
         node("Add", ["y", "step"], ["y_out"]), node("ReduceSum", ["y_out"], ["total"], keepdims=0),
         node("Less", ["total", "limit"], ["c_out"]), node("Identity", ["y_out"], ["s_out"])],
        "body", [info("i", I64, []), info("c", BOOL, []), info("y", F, [3])],
        [info("c_out", BOOL, []), info("y_out", F, [3]), info("s_out", F, [3])])
    return model([node("Loop", ["n", "cond", "y0"], ["y", "s"], body=body)],
                 [info("n", I64, []), info("cond", BOOL, []), info("y0", F, [3]), info("w", F, [3]),
                  info("limit", F, [])],
                 [info("y", F, [3]), info("s", F, ["k", 3])])


def _loop_numpy(n, cond, y, w, limit):
    stacked = []
    i = 0
    while i < n and cond:
        y = y + w * np.float32(i)
        stacked.append(y)
        cond = y.sum() < limit
        i += 1
    return y, np.array(stacked, "float32").reshape(-1, 3)


def test_loop_with_a_run_time_trip_count_and_condition():
    mod = from_onnx(_loop_model())
    assert "loop" in [gv.name_hint for gv in mod.get_global_vars()]
    y0, w = RNG.standard_normal(3).astype("float32"), np.abs(RNG.standard_normal(3)).astype("float32")
    for n, cond, limit in [(5, True, 1e9), (40, True, 12.0), (0, True, 1e9), (6, False, 1e9)]:
        args = [np.array(n), np.array(cond), y0, w, np.array(limit, "float32")]
        y, s = run(mod, *args)
        want_y, want_s = _loop_numpy(*args)
        np.testing.assert_allclose(y, want_y, rtol=1e-5)
        np.testing.assert_allclose(s, want_s, rtol=1e-5)
    # the bytecode VM runs the same recursion
    y, s = run(mod, np.array(7), np.array(True), y0, w, np.array(1e9, "float32"), exec_mode="bytecode")
    np.testing.assert_allclose(s, _loop_numpy(7, True, y0, w, 1e9)[1], rtol=1e-5)


def test_a_loop_carried_tensor_may_change_its_shape():
    """y grows by one element each iteration: the loop's parameter gets a symbolic size."""
    body = helper.make_graph([node("Identity", ["c"], ["c_out"]), node("Cast", ["i"], ["fi"], to=F),
                              node("Unsqueeze", ["fi", "zero"], ["tail"]),
                              node("Concat", ["y", "tail"], ["y_out"], axis=0)],
                             "body", [info("i", I64, []), info("c", BOOL, []), info("y", F, [1])],
                             [info("c_out", BOOL, []), info("y_out", F, None)])
    zero = helper.make_tensor("zero", I64, [1], [0])
    mod = from_onnx(model([node("Constant", [], ["zero"], value=zero), node("Loop", ["n", "", "y0"], ["y"], body=body)],
                          [info("n", I64, []), info("y0", F, [1])], [info("y", F, None)]))
    for n in (0, 4):
        want = np.concatenate([[7.0], np.arange(n)]).astype("float32")
        np.testing.assert_array_equal(run(mod, np.array(n), np.array([7.0], "float32")), want)


def test_scan_outputs_of_sizes_known_at_run_time():
    """A Loop's scan outputs whose element shapes are symbolic: one of the graph's named size n,
    one computed in the body (NonZero of an outer value)."""
    body = helper.make_graph([node("Identity", ["c"], ["c_out"]), node("Identity", ["y"], ["y_out"]),
                              node("Cast", ["i"], ["fi"], to=F), node("Mul", ["y", "fi"], ["scaled"]),
                              node("NonZero", ["mask"], ["where"])],
                             "body", [info("i", I64, []), info("c", BOOL, []), info("y", F, ["n"])],
                             [info("c_out", BOOL, []), info("y_out", F, ["n"]), info("scaled", F, ["n"]),
                              info("where", I64, None)])
    mod = from_onnx(model([node("Loop", ["trips", "", "y0"], ["y", "ys", "ws"], body=body)],
                          [info("trips", I64, []), info("y0", F, ["n"]), info("mask", BOOL, [5])],
                          [info("y", F, ["n"]), info("ys", F, None), info("ws", I64, None)]))
    y0, mask = RNG.standard_normal(3).astype("float32"), np.array([0, 1, 1, 0, 1], bool)
    y, ys, ws = run(mod, np.array(4), y0, mask)
    np.testing.assert_allclose(ys, np.stack([y0 * i for i in range(4)]), rtol=1e-6)
    np.testing.assert_array_equal(ws, np.stack([np.array(np.nonzero(mask))] * 4))
    y, ys, ws = run(mod, np.array(0), y0, mask)
    assert ys.shape == (0, 3) and ws.shape[0] == 0


def _if_model():
    """out = If(sum(x) > 0): then x * w (w from the enclosing graph), else concat(x, x)
    (branches of different shapes), and inside the then branch a nested If."""
    inner = helper.make_graph([node("Neg", ["w"], ["neg"])], "inner", [], [info("neg", F, [4])])
    inner_else = helper.make_graph([node("Identity", ["w"], ["same"])], "inner_else", [], [info("same", F, [4])])
    then = helper.make_graph(
        [node("If", ["flip"], ["ww"], then_branch=inner, else_branch=inner_else), node("Mul", ["x", "ww"], ["t"])],
        "then", [], [info("t", F, None)])
    other = helper.make_graph([node("Concat", ["x", "x"], ["e"], axis=0)], "else", [], [info("e", F, None)])
    return model([node("ReduceSum", ["x"], ["total"], keepdims=0),
                  node("Greater", ["total", "zero"], ["positive"]),
                  node("If", ["positive"], ["out"], then_branch=then, else_branch=other)],
                 [info("x", F, [4]), info("w", F, [4]), info("flip", BOOL, []), info("zero", F, [])],
                 [info("out", F, None)])


def test_if_on_a_computed_condition_reads_outer_values_and_nests():
    mod = from_onnx(_if_model())
    w = RNG.standard_normal(4).astype("float32")
    zero = np.array(0, "float32")
    for x in (np.abs(RNG.standard_normal(4)).astype("float32"), -np.abs(RNG.standard_normal(4)).astype("float32")):
        for flip in (True, False):
            want = x * (-w if flip else w) if x.sum() > 0 else np.concatenate([x, x])
            np.testing.assert_allclose(run(mod, x, w, np.array(flip), zero), want, rtol=1e-6)


def test_if_on_a_constant_condition_converts_the_branch_taken_only():
    then = helper.make_graph([node("Neg", ["x"], ["t"])], "then", [], [info("t", F, [2])])
    other = helper.make_graph([node("GlobalLpPool", ["x"], ["e"])], "else", [], [info("e", F, [2])])
    one = helper.make_tensor("one", BOOL, [], [True])
    mod = from_onnx(model([node("Constant", [], ["c"], value=one),
                           node("If", ["c"], ["y"], then_branch=then, else_branch=other)],
                          [info("x", F, [2])], [info("y", F, [2])]))
    assert len(mod.get_global_vars()) == 1  # (no function for the branches: the taken one is inline)
    x = np.array([1.5, -2.0], "float32")
    np.testing.assert_array_equal(run(mod, x), -x)


def test_scan_in_both_directions_against_numpy():
    """Scan (opset 9): a running sum over the rows of x read backwards, and its outputs stacked
    reversed along axis 1."""
    body = helper.make_graph([node("Add", ["acc", "row"], ["acc_out"]), node("Mul", ["acc_out", "row"], ["out"])],
                             "body", [info("acc", F, [3]), info("row", F, [3])],
                             [info("acc_out", F, [3]), info("out", F, [3])])
    mod = from_onnx(model([node("Scan", ["init", "x"], ["final", "ys"], body=body, num_scan_inputs=1,
                                scan_input_axes=[1], scan_input_directions=[1], scan_output_axes=[1],
                                scan_output_directions=[1])],
                          [info("init", F, [3]), info("x", F, [3, 5])], [info("final", F, [3]), info("ys", F, [3, 5])]))
    init, x = RNG.standard_normal(3).astype("float32"), RNG.standard_normal((3, 5)).astype("float32")
    acc, outs = init, []
    for t in reversed(range(5)):
        acc = acc + x[:, t]
        outs.append(acc * x[:, t])
    final, ys = run(mod, init, x)
    np.testing.assert_allclose(final, acc, rtol=1e-5)
    np.testing.assert_allclose(ys, np.stack(outs[::-1], axis=1), rtol=1e-5)
    # opset 8's Scan converts each batch element on its own: a batch past the unroll limit is refused
    with pytest.raises(TVMSError, match="a batch of 5000: opset 8's Scan converts each batch element on its own"):
        from_onnx(model([node("Scan", ["", "init", "x"], ["final", "ys"], body=body, num_scan_inputs=1)],
                        [info("init", F, [5000, 3]), info("x", F, [5000, 5, 3])],
                        [info("final", F, [5000, 3]), info("ys", F, [5000, 5, 3])], opset=8))


def test_sequences_are_tuples_and_positions_may_be_run_time_values():
    """SplitToSequence -> SequenceInsert at a run-time position -> SequenceErase -> ConcatFromSequence."""
    mod = from_onnx(model(
        [node("SplitToSequence", ["x"], ["seq"], axis=0),
         node("SequenceInsert", ["seq", "row", "pos"], ["seq2"]),
         node("SequenceErase", ["seq2", "minus_one"], ["seq3"]),
         node("SequenceAt", ["seq3", "at"], ["picked"]),
         node("ConcatFromSequence", ["seq3"], ["joined"], axis=0, new_axis=1),
         node("SequenceLength", ["seq3"], ["length"])],
        [info("x", F, [4, 2]), info("row", F, [1, 2]), info("pos", I64, []), info("minus_one", I64, []),
         info("at", I64, [])],
        [info("joined", F, None), info("picked", F, None), info("length", I64, [])]))
    x, row = RNG.standard_normal((4, 2)).astype("float32"), RNG.standard_normal((1, 2)).astype("float32")
    for pos, at in [(0, 3), (2, -2), (-1, 0), (4, -1)]:
        items = list(np.split(x, 4))
        items.insert(pos if pos >= 0 else pos + 4, row)  # (ONNX: -1 inserts before the last)
        items.pop(-1)
        joined, picked, length = run(mod, x, row, np.array(pos), np.array(-1), np.array(at))
        np.testing.assert_array_equal(joined, np.stack(items, axis=0))
        np.testing.assert_array_equal(picked, items[at])
        assert length == 4
    # (a run-time position out of range is an error, as ONNX says, not clipped)
    vm = relax.VirtualMachine(tvms.compile(mod, "llvm"), tvms.cpu())
    for pos, minus_one, at, message in [(5, -1, 0, "position 5 .* length 4"), (0, -6, 0, "position -6 .* length 5"),
                                        (0, -1, -5, "position -5 .* length 4")]:
        with pytest.raises(TVMSError, match=f"{message}$"):
            vm["main"](x, row, np.array(pos), np.array(minus_one), np.array(at))


def test_sequence_graph_inputs_take_their_length_from_shape_dict():
    seq = helper.make_tensor_sequence_value_info("s", F, None)
    m = model([node("ConcatFromSequence", ["s"], ["y"], axis=1)], [seq], [info("y", F, None)], opset=13)
    with pytest.raises(TVMSError, match=r"graph input 's' is a sequence: its length is needed at import time"):
        from_onnx(m)
    a, b = np.ones((2, 1), "float32"), np.arange(6, dtype="float32").reshape(2, 3)
    mod = from_onnx(m, shape_dict={"s": [[2, 1], [2, 3]]})
    np.testing.assert_array_equal(run(mod, (tvms.nd.array(a), tvms.nd.array(b))), np.concatenate([a, b], 1))


def test_a_loop_grows_a_sequence_over_a_run_time_trip_count():
    """Unrolled when the trip count is a constant (a tuple); else a sequence of run-time length
    (runtime/sequence.py), which only SequenceInsert/Erase/Length take."""
    body = helper.make_graph([node("Identity", ["c"], ["c_out"]), node("Cast", ["i"], ["fi"], to=F),
                              node("Mul", ["x", "fi"], ["xi"]), node("SequenceInsert", ["s", "xi"], ["s1"]),
                              node("SequenceLength", ["s1"], ["n1"]), node("Cast", ["n1"], ["fn"], to=F),
                              node("Unsqueeze", ["fn", "zero"], ["fn1"]),
                              node("SequenceInsert", ["s1", "fn1", "zero_s"], ["s2"]),
                              node("SequenceErase", ["s2"], ["s_out"])],
                             "body", [info("i", I64, []), info("c", BOOL, []),
                                      helper.make_tensor_sequence_value_info("s", F, None)],
                             [info("c_out", BOOL, []), helper.make_tensor_sequence_value_info("s_out", F, None)])
    zero = helper.make_tensor("zero", I64, [1], [0])
    zero_s = helper.make_tensor("zero_s", I64, [], [0])
    consts = [node("Constant", [], ["zero"], value=zero), node("Constant", [], ["zero_s"], value=zero_s),
              node("SequenceEmpty", [], ["empty"], dtype=F)]
    loop = node("Loop", ["n", "", "empty"], ["seq"], body=body, name="grow")
    seq_out = helper.make_tensor_sequence_value_info("seq", F, None)

    def expected(n, x):
        items = []
        for i in range(n):  # (insert x * i, then its length in front, then erase the last)
            items = [np.array([len(items) + 1], "float32")] + items + [x * i]
            items.pop()
        return items

    x = np.array([1.0, 2.0], "float32")
    mod = from_onnx(model(consts + [loop], [info("n", I64, []), info("x", F, [2])], [seq_out]))
    for n in (0, 3):
        got = run(mod, np.array(n), x)
        assert len(got) == n and all(np.array_equal(a, b) for a, b in zip(got, expected(n, x)))
    with pytest.raises(TVMSError, match=r"node 'cat' \(ConcatFromSequence, opset 17\): not supported: a "
                                        r"sequence whose length is known only at run time"):
        from_onnx(model(consts + [loop, node("ConcatFromSequence", ["seq"], ["y"], axis=0, name="cat")],
                        [info("n", I64, []), info("x", F, [2])], [info("y", F, None)]))
    three = helper.make_tensor("three", I64, [], [3])
    mod = from_onnx(model(consts + [node("Constant", [], ["n"], value=three), loop,
                                    node("ConcatFromSequence", ["seq"], ["y"], axis=0)],
                          [info("x", F, [2])], [info("y", F, None)]))
    np.testing.assert_array_equal(run(mod, x), np.concatenate(expected(3, x)))


def test_split_sizes_and_a_ragged_insert_position_known_at_run_time():
    """SplitToSequence by sizes given at run time (dynamic slices), then SequenceInsert at a
    run-time position into pieces of different shapes (a sequence rebuilt at run time)."""
    mod = from_onnx(model([node("SplitToSequence", ["x", "sizes"], ["seq"], axis=1),
                           node("SequenceInsert", ["seq", "extra", "pos"], ["out"])],
                          [info("x", F, [2, 6]), info("sizes", I64, [3]), info("extra", F, [2, 2]),
                           info("pos", I64, [])],
                          [helper.make_tensor_sequence_value_info("out", F, None)]))
    x, extra = RNG.standard_normal((2, 6)).astype("float32"), RNG.standard_normal((2, 2)).astype("float32")
    for sizes, pos in [([1, 2, 3], 0), ([0, 6, 0], -1), ([4, 1, 1], 3)]:
        items = np.split(x, np.cumsum(sizes)[:-1], axis=1)
        items.insert(pos if pos >= 0 else pos + 3, extra)
        got = run(mod, x, np.array(sizes), extra, np.array(pos))
        assert len(got) == 4 and all(np.array_equal(a, b) for a, b in zip(got, items))


def test_run_time_sequence_functions_check_positions():
    insert, erase = (tvms.runtime.get_global_func(f"tvms.sequence.{n}") for n in ("insert", "erase"))
    a, b = tvms.nd.array(np.zeros(1, "float32")), tvms.nd.array(np.ones(2, "float32"))
    assert insert((a,), b, np.array(-1))[0] is b and erase((a, b))[0] is a
    with pytest.raises(TVMSError, match="position 2 is out of range for a sequence of length 1"):
        insert((a,), b, np.array(2))
    with pytest.raises(TVMSError, match="position -3 is out of range for a sequence of length 2"):
        erase((a, b), np.array(-3))
    with pytest.raises(TVMSError, match="erasing from an empty sequence"):
        erase(())
    with pytest.raises(TVMSError, match=r"a sequence position is one integer, not a tensor of shape \(0,\)"):
        erase((a, b), np.zeros(0, "int64"))


def test_split_into_chunks_of_a_run_time_size_and_a_scan_of_one_state():
    """SplitToSequence by a scalar size given at run time: as many pieces as the size decides (a
    loop filling a sequence of run-time length); a Scan carrying one state and no scan output."""
    mod = from_onnx(model([node("SplitToSequence", ["x", "size"], ["seq"], axis=1)],
                          [info("x", F, [2, 7]), info("size", I64, [])],
                          [helper.make_tensor_sequence_value_info("seq", F, None)]))
    x = RNG.standard_normal((2, 7)).astype("float32")
    for size in (1, 3, 7, 9):
        got = run(mod, x, np.array(size))
        want = np.split(x, range(size, 7, size), axis=1)
        assert len(got) == len(want) and all(np.array_equal(a, b) for a, b in zip(got, want))
    body = helper.make_graph([node("Max", ["m", "row"], ["m_out"])], "body", [info("m", F, [3]), info("row", F, [3])],
                             [info("m_out", F, [3])])
    mod = from_onnx(model([node("Scan", ["m0", "x"], ["m"], body=body, num_scan_inputs=1)],
                          [info("m0", F, [3]), info("x", F, [4, 3])], [info("m", F, [3])]))
    m0, x = np.full(3, -np.inf, "float32"), RNG.standard_normal((4, 3)).astype("float32")
    np.testing.assert_array_equal(run(mod, m0, x), x.max(axis=0))


def test_scan_outputs_are_written_in_place_into_a_buffer_that_doubles():
    """Each iteration writes its slices into the scan outputs in place (R.call_tir_inplace),
    doubling a buffer when it is full, and the loop returns the rows written: right for trip
    counts across several doublings (a scalar int64 output and a float row), and for none. (The
    outputs grew by a concatenation of all earlier slices before: time quadratic in the count.)"""
    body = helper.make_graph([node("Identity", ["c"], ["c_out"]), node("Mul", ["i", "i"], ["square"]),
                              node("Cast", ["i"], ["fi"], to=F), node("Add", ["y", "fi"], ["y_out"]),
                              node("Identity", ["y_out"], ["y_seen"])],
                             "body", [info("i", I64, []), info("c", BOOL, []), info("y", F, [4])],
                             [info("c_out", BOOL, []), info("y_out", F, [4]), info("square", I64, []),
                              info("y_seen", F, [4])])
    mod = from_onnx(model([node("Loop", ["n", "", "y0"], ["y", "squares", "ys"], body=body)],
                          [info("n", I64, []), info("y0", F, [4])],
                          [info("y", F, [4]), info("squares", I64, ["k"]), info("ys", F, ["k", 4])]))
    assert mod.script().count("R.call_tir_inplace(cls.write_slice") == 4  # (2 outputs, doubled or not)
    y0 = RNG.standard_normal(4).astype("float32")
    for n in (0, 1, 2, 3, 37):
        y, squares, ys = run(mod, np.array(n), y0)
        steps = np.cumsum(np.arange(n, dtype="float32"))
        np.testing.assert_array_equal(squares, np.arange(n) ** 2)
        np.testing.assert_allclose(ys, y0 + steps[:, None] if n else np.zeros((0, 4)), rtol=1e-6)
        np.testing.assert_allclose(y, y0 + (steps[-1] if n else 0), rtol=1e-6)
