"""InferFragment (lowering/tir/gpu/infer_fragment.py): the fragment allocations of a kernel get
TVM 0.27's fragment_shape / fragment_layout attributes (fixtures/infer_fragment, made by
generate_with_tvm.py there), and the CUDA code generator declares the fragments from them: DLight's
tensorized matmul compiles with NVRTC."""
from __future__ import annotations

import pytest
from conftest import FIXTURES

from tvms.ir.errors import TVMSError
from tvms.ir.stmt import AllocBuffer, AttrStmt
from tvms.ir.visitor import collect
from tvms.ir.target import Target
from tvms.lowering.codegen.cuda import cuda_source, kernels_of
from tvms.lowering.codegen.nvrtc import compile_cuda
from tvms.lowering.tir.gpu.pipeline import finalize_kernels, split_for_cuda
from tvms.lowering.tir.gpu.infer_fragment import infer_fragment
from tvms.script import from_source

HERE = FIXTURES / "infer_fragment"


def _attributes(func) -> list:
    return [(s.node.name, s.attr_key, s.value.value) for s in collect(func.body, AttrStmt)
            if s.attr_key.startswith("fragment_")]


def test_fragments_get_tvms_attributes():
    """The attributes, in TVM's order and nesting (layout outside shape, around the allocation;
    the accumulator row_major, as its first call is a fill). TVM 0.27 prints the allocation flat
    inside them, which tvms's AllocBuffer (with a body) cannot print the same: the attributes are
    compared, not the text."""
    got = infer_fragment(from_source((HERE / "wmma_before.tvms").read_text())["main"])
    want = from_source((HERE / "wmma_after.tvms").read_text())["main"]
    assert _attributes(got) == _attributes(want) == [
        ("a", "fragment_layout", "row_major"), ("a", "fragment_shape", "16, 16, 16"),
        ("b", "fragment_layout", "col_major"), ("b", "fragment_shape", "16, 16, 16"),
        ("c", "fragment_layout", "row_major"), ("c", "fragment_shape", "16, 16, 16")]
    for s in collect(got.body, AttrStmt):
        if s.attr_key == "fragment_shape":
            assert isinstance(s.body, AllocBuffer) and s.body.buffer is s.node


@pytest.mark.slow
def test_tensorized_matmul_compiles_for_sm80_and_sm90():
    """DLight's WMMA schedule (staged through static shared memory) rendered as CUDA and compiled
    by NVRTC to PTX with tensor-core instructions. (Not assembled: with static shared memory its
    tiles exceed the 48 KiB a kernel may declare; TVM stages them in dynamic shared memory.)"""
    from test_reference_wmma import tensorized
    mod = finalize_kernels(split_for_cuda(tensorized(rows=128).with_attr("global_symbol", "main"), Target("cuda -arch=sm_80")))
    source = cuda_source(kernels_of(mod))
    assert "nvcuda::wmma::mma_sync(" in source
    for arch in ("sm_80", "sm_90"):
        assert "wmma.mma.sync" in compile_cuda(source, arch=arch, fmt="ptx").decode()


def test_fragments_of_two_shapes_are_refused():
    text = (HERE / "wmma_before.tvms").read_text().replace('B.data, 0, 256, 1), 16, "col_major"',
                                                         'B.data, 0, 256, 1), 16, "row_major"')
    text = text.replace("tvm_load_matrix_sync(b.data, 16, 16, 16", "tvm_load_matrix_sync(b.data, 8, 32, 16")
    with pytest.raises(TVMSError, match="tvm_mma_sync on fragments that are not all filled or loaded with one shape"):
        infer_fragment(from_source(text)["main"])
