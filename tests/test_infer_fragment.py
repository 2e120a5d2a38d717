"""InferFragment (lowering/tir/gpu/infer_fragment.py): the fragment allocations of a kernel get
TVM 0.27's fragment_shape / fragment_layout attributes (fixtures/infer_fragment, made by
generate_with_tvm.py there), and the CUDA code generator declares the fragments from them: DLight's
tensorized matmuls compile with NVRTC to cubins."""
from __future__ import annotations

import pytest
from conftest import FIXTURES

from tvms.ir.errors import TVMSError
from tvms.ir.expr import Call
from tvms.ir.module import IRModule
from tvms.ir.stmt import AllocBuffer, AttrStmt
from tvms.ir.target import Target
from tvms.ir.visitor import collect
from tvms.lowering.dlight.base import ApplyDefaultSchedule
from tvms.lowering.dlight.gpu_matmul import Matmul
from tvms.lowering.tir.gpu.infer_fragment import infer_fragment
from tvms.lowering.tir.gpu.pipeline import lower_for_cuda
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


def test_fragments_read_back_as_tvm_prints_them():
    """TVM 0.27 declares a fragment (named by its attributes before its allocation) as
    ``x = T.Buffer(...)`` right before the first attribute and allocates that same buffer under
    the same name; its ``x.data`` arguments then name it: its InferFragment stage and DLight's
    tensor-core kernels (SplitHostDevice and device stages, merged shared memory) print back
    byte for byte."""
    texts = [HERE / "wmma_after.tvms", *(FIXTURES / "merge_shared_memory" / f"dlight_matmul_f16_{s}.tvms" for s in ("before", "after")),
             *(FIXTURES / "cuda_codegen" / f"dlight_matmul_{k}.{s}" for k in ("f16", "dyn") for s in ("tvms", "device.tvms"))]
    for path in texts:
        text = path.read_text().rstrip("\n")  # (some generators end the file with a newline)
        assert from_source(text).script(dialect="tvm-0.27") == text, path.name


def test_a_declared_buffer_is_allocated_once():
    """The first allocation after ``x = T.Buffer(...)`` is that buffer; a second ``x =
    T.alloc_buffer`` of the same name and memory beside it is another buffer."""
    text = """# from tvm.script import tirx as T

@T.prim_func
def main(A: T.Buffer((16,), "float32")):
    x = T.Buffer((16,), scope="shared")
    with T.attr(x.data, "storage_alignment", 128):
        for i in range(2):
            x = T.alloc_buffer((16,), scope="shared")
            x[i] = A[i]
    for i in range(2):
        x = T.alloc_buffer((16,), scope="shared")
        x[i] = A[i + 2]"""
    func = from_source(text)
    first, second = collect(func.body, AllocBuffer)
    assert first.buffer.data is collect(func.body, AttrStmt)[0].node and second.buffer is not first.buffer


@pytest.mark.slow
def test_dlight_tensor_core_matmuls_compile_to_cubins_for_sm80_and_sm90():
    """DLight's WMMA schedules on sm_80 (float16 into float32 and into float16, int8 into int32),
    their tiles staged in dynamic shared memory as TVM's, through the cuda lowering: each kernel
    declares one ``extern __shared__`` array, the host launches it with the array's bytes (float16:
    72 KiB of double-buffered A and B tiles, int8: 64 KiB of int32 accumulators written back, over
    the 48 KiB a launch gets without the driver's opt-in), and NVRTC compiles and assembles them to
    cubins."""
    from cuda_support import assert_compiles, kernels_source
    from test_reference_wmma import TEMPLATE

    target = Target("cuda -arch=sm_80")
    lowered, launches = [], {}
    # (TVM 0.27's sizes for the float16 ones: the A and B tiles double-buffered by the software
    # pipeline; TVM's InjectSoftwarePipeline fails on the int8 one, whose inner k loop has one step)
    for in_dtype, out_dtype, shared_bytes in (("float16", "float32", 73728), ("float16", "float16", 73728),
                                              ("int8", "int32", 65536)):
        name = f"mm_{in_dtype}_{out_dtype}"
        text = TEMPLATE.replace("IN", in_dtype).replace("OUT", out_dtype)
        if in_dtype == out_dtype:  # (as legalized: no cast; the intrinsic matches no float16 to float16 cast)
            text = text.replace('T.Cast("float16", x[vi, vk]) * T.Cast("float16", w[vk, vj])', "x[vi, vk] * w[vk, vj]")
        func = from_source(text).with_attr("global_symbol", name)
        with target:
            mod = lower_for_cuda(ApplyDefaultSchedule(Matmul())(IRModule({"main": func}))["main"], target)
        (call,) = [c for c in collect(mod[name].body, Call) if c.op.name == "tir.call_ffi_kernel"]
        launches[name] = (call.attrs["launch_params"][-1], int(call.args[-1].value))
        assert launches[name] == ("tirx.use_dyn_shared_memory", shared_bytes), name
        lowered.append(mod)
    source = kernels_source(lowered)
    # (the products of a float16 kernel in the bodies and epilogues of its two pipelines: 4, as in
    # TVM's; of the int8 one, whose inner k loop has one step: 2)
    assert source.count("extern __shared__") == 3 and source.count("nvcuda::wmma::mma_sync(") == 10
    assert set(assert_compiles(source)) == {"sm_80", "sm_90"}


def test_fragments_of_two_shapes_are_refused():
    text = (HERE / "wmma_before.tvms").read_text().replace('B.data, 0, 256, 1), 16, "col_major"',
                                                         'B.data, 0, 256, 1), 16, "row_major"')
    text = text.replace("tvm_load_matrix_sync(b.data, 16, 16, 16", "tvm_load_matrix_sync(b.data, 8, 32, 16")
    with pytest.raises(TVMSError, match="tvm_mma_sync on fragments that are not all filled or loaded with one shape"):
        infer_fragment(from_source(text)["main"])
