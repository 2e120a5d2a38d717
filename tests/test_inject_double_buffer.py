"""InjectDoubleBuffer (lowering/tir/gpu/inject_double_buffer.py) against Apache TVM 0.27.

fixtures/double_buffer (made by generate_with_tvm.py there) holds the inputs of TVM's test of the
pass and what TVM's pass alone prints for them (with ``split_loop`` 1, 2 and 0). tvms must print the
same byte for byte, and the double-buffered functions must compute what they computed (reference
executor) for any split.
"""
from __future__ import annotations

import numpy as np
import pytest
from conftest import FIXTURES

from tvms.ir.errors import TVMSError
from tvms.lowering.pass_registry import get_pass
from tvms.lowering.tir import gpu  # noqa: F401  (registers the GPU passes)
from tvms.lowering.transform import PassContext
from tvms.runtime.reference import run_prim_func
from tvms.script import from_source

HERE = FIXTURES / "double_buffer"
SHAPES = {"shared": [(400,), (4,)], "cache": [(16, 32), (16,)]}


def _double_buffered(case: str, split: int):
    with PassContext(config={"s_tir.InjectDoubleBuffer": {"split_loop": split}}):
        return get_pass("InjectDoubleBuffer")(from_source((HERE / f"{case}_input.tvms").read_text()))


@pytest.mark.parametrize("case,split", [("shared", 1), ("shared", 2), ("shared", 0), ("cache", 1)])
def test_prints_what_tvm_prints(case: str, split: int) -> None:
    suffix = "" if split == 1 else f"_split{split}"
    want = (HERE / f"{case}{suffix}_InjectDoubleBuffer.tvms").read_text()
    assert _double_buffered(case, split).script(dialect="tvm-0.27") == want


def test_double_buffered_functions_compute_what_they_computed() -> None:
    for case, shapes in SHAPES.items():
        before = from_source((HERE / f"{case}_input.tvms").read_text())
        (name,) = [gv for gv, _ in before.functions_items()]
        for split in (0, 1, 2, 4):
            after = _double_buffered(case, split)
            assert "double_buffer_write" in after.script()
            rng = np.random.default_rng(split)
            arrays = [rng.standard_normal(s).astype("float32") for s in shapes]
            want, got = [a.copy() for a in arrays], [a.copy() for a in arrays]
            run_prim_func(before[name], *want)
            run_prim_func(after[name], *got)
            for w, g in zip(want, got):
                np.testing.assert_array_equal(g, w, err_msg=f"{case}, split_loop {split}")


def test_refusals() -> None:
    for split in (3, -2, 2.5, True):
        with pytest.raises(TVMSError, match=r"split_loop takes 0 \(no split\), 1 or a positive even number, not "):
            _double_buffered("shared", split)
    with pytest.raises(TVMSError, match=r"unknown option\(s\) \['splitloop'\]"):
        with PassContext(config={"s_tir.InjectDoubleBuffer": {"splitloop": 2}}):
            get_pass("InjectDoubleBuffer")(from_source((HERE / "shared_input.tvms").read_text()))
    text = (HERE / "cache_input.tvms").read_text()
    with pytest.raises(TVMSError, match="expects flat 1-d buffers"):
        get_pass("InjectDoubleBuffer")(from_source(text.replace("T.alloc_buffer((32,))", "T.alloc_buffer((4, 8))")
                                                   .replace("cache[j]", "cache[j // 8, j % 8]")))
