"""TMA (CUDA tensor maps) in tvms's CUDA code generator: a kernel takes each map the host encodes as
a ``const __grid_constant__ CUtensorMap`` parameter (by value) and hands ``T.address_of(map)`` to
``cp.async.bulk.tensor``. The kernels are those of TVM's test_codegen_hopper.py (unicast 1-D and
2-D, a 128-byte swizzle, a 3-D store) and one with the forms of ``T.cuda.mbarrier_wait``, written
by fixtures/ptx_dialect/write_tma_kernels_with_tvm.py and compiled by TVM 0.27
(generate_with_tvm.py): tvms writes the same kernels, byte for byte, with the same helpers, and
NVRTC compiles them for sm_90a. The host encodes the maps (``runtime.cuTensorMapEncodeTiled``:
its checks are TVM's), the reference executor copies through them (reference_tma), the driver path
runs on an emulated GPU, and on a Hopper GPU where there is one.
"""
from __future__ import annotations

import ctypes
import gc

import numpy as np
import pytest

import tvms
from tvms.ir import expr as E
from tvms.ir.errors import TVMSError
from tvms.lowering.codegen.c_source import CSource
from tvms.runtime import cuda_driver
from tvms.runtime.cuda_module import ReferenceLauncher, TensorMapParameter
from tvms.runtime.cuda_tensor_map import tiled_encoding
from tvms.runtime.reference import run_prim_func
from tvms.script import from_source

from conftest import FIXTURES
from cuda_support import assert_compiles
from test_cuda_ptx_dialect import helpers_and_calls

GOLDEN = FIXTURES / "ptx_dialect"
TMA_KERNELS = sorted(p.stem for p in GOLDEN.glob("hopper_tma_*.tvms"))
SM90A = {"kind": "cuda", "arch": "sm_90a"}


@pytest.fixture(scope="module")
def sources() -> dict[str, str]:
    return {case: tvms.build(from_source((GOLDEN / f"{case}.tvms").read_text(), f"{case}.tvms"), target=SM90A)
            .imported_modules[0].get_source() for case in TMA_KERNELS}


def test_the_tma_kernels_of_tvms_hopper_tests_are_all_here() -> None:
    assert TMA_KERNELS == ["hopper_tma_mbarrier_waits", "hopper_tma_store_3d", "hopper_tma_swizzle_128b",
                           "hopper_tma_unicast_1d", "hopper_tma_unicast_2d"]


@pytest.mark.parametrize("case", TMA_KERNELS)
def test_a_tma_kernel_is_written_as_tvm_writes_it(case: str, sources: dict[str, str]) -> None:
    ours, theirs = sources[case], (GOLDEN / f"{case}.cu").read_text()
    kernel = 'extern "C"'
    assert ours[ours.index(kernel):] == theirs[theirs.index(kernel):]
    assert helpers_and_calls(ours)[0] == helpers_and_calls(theirs)[0]  # (TVM writes them in a hash order)


def test_a_tensor_map_parameter_is_passed_by_value_and_its_address_read_generically(sources) -> None:
    source = sources["hopper_tma_unicast_2d"]
    assert ("main_kernel(const __grid_constant__ CUtensorMap A_map, const __grid_constant__ CUtensorMap B_map)"
            in source)
    assert "((void*)((unsigned long long)(&(A_map))))" in source


def test_nvrtc_compiles_the_tma_kernels_for_sm_90a(sources: dict[str, str]) -> None:
    for case in TMA_KERNELS:
        assert assert_compiles(sources[case], archs=("sm_90a",))["sm_90a"]


BARE = FIXTURES / "tensor_map" / "bare_operands.tvms"


def test_bare_address_operands_read_as_tvm_reads_them() -> None:
    """fixtures/tensor_map/bare_operands.tvms writes the PTX operands bare (``T.address_of(A_map)``,
    shared pointers); TVM 0.27's reading coerces them (print_with_tvm.py): the map's uint64 address
    reinterpreted as a handle, a shared pointer converted to its shared window address. tvms reads
    the same function."""
    func = from_source(BARE.read_text(), BARE.name)
    assert func.script(dialect="tvm-0.27") + "\n" == (BARE.parent / "bare_operands.tvm.tvms").read_text()


def test_bare_address_operands_compile_and_run() -> None:
    """The kernel of the bare operands compiles for sm_90a (the map's address reaches the helper's
    ``const void*`` as TVM passes it) and copies A to C and B on the reference executor."""
    lib = tvms.build(from_source(BARE.read_text(), BARE.name), target=SM90A)
    assert_compiles(lib.imported_modules[0].get_source(), archs=("sm_90a",))
    a = np.arange(128, dtype="float32")
    b, c = np.zeros(128, "float32"), np.zeros(128, "float32")
    lib.with_launcher(ReferenceLauncher())["main"](a, b, c, 0)
    np.testing.assert_array_equal(b, a)
    np.testing.assert_array_equal(c, a)


def test_a_reinterpret_to_a_pointer_is_written_as_tvm_writes_it() -> None:
    """fixtures/tensor_map/reinterpret_handles.tvms (compile_with_tvm.py): a typed pointer's let is
    declared and cast to its element type, a constant address goes through reinterpret_cast."""
    case = FIXTURES / "tensor_map" / "reinterpret_handles"
    lib = tvms.build(from_source(case.with_suffix(".tvms").read_text()), target=SM90A)
    source = lib.imported_modules[0].get_source()
    assert source[source.index('extern "C" __global__'):] == case.with_suffix(".cu").read_text()
    assert_compiles(source, archs=("sm_90a",))


def test_a_c_target_refuses_a_tensor_map_parameter() -> None:
    var = E.Var("A_map", "handle", E.PointerType(E.TensorMapType()))
    with pytest.raises(TVMSError, match=r"A_map is a T\.TensorMap\(\), a CUDA tensor map that only the cuda target"):
        CSource().pointer_type(var)


# ---------------------------------------------------------------- the host: runtime.cuTensorMapEncodeTiled

# (TVM's test_tensormap_encode_tiled_runtime_validation: shape, dtype, encode arguments, its message)
INVALID = [
    ((16, 16), "float16", [0, 16, 32, 16, 16, 1, 1, 0, 0, 0, 0], r"globalDim\[0\] must be non-zero"),
    ((16, 16), "float16", [(1 << 32) + 1, 16, 32, 16, 16, 1, 1, 0, 0, 0, 0],
     r"globalDim\[0\] must be less than or equal to 2\^32"),
    ((16, 16), "float16", [16, 16, 1 << 40, 16, 16, 1, 1, 0, 0, 0, 0], r"globalStrides\[0\] must be less than 2\^40"),
    ((16, 16), "float16", [16, 16, 32, 0, 16, 1, 1, 0, 0, 0, 0], r"boxDim\[0\] must be non-zero"),
    ((16, 16), "float16", [16, 16, 32, 7, 16, 1, 1, 0, 0, 0, 0],
     r"boxDim\[0\] \* elementSizeInBytes\(tensorDataType\) must be a multiple of 16 bytes"),
    ((16, 16), "float16", [16, 16, 32, 16, 16, 0, 1, 0, 0, 0, 0], r"elementStrides\[0\] must be non-zero"),
    ((16, 16), "float16", [16, 16, 32, 16, 16, 9, 1, 0, 0, 0, 0],
     r"elementStrides\[0\] must be less than or equal to 8"),
    ((16, 16), "float16", [16, 16, 32, 16, 16, 2, 1, 0, 0, 0, 0], r"elementStrides\[0\] must be one"),
    ((16, 16), "float16", [16, 16, 32, 16, 16, 1, 1, 2, 0, 0, 0],
     r"tensorRank must be greater than or equal to 3 when interleave is not NONE"),
    ((8, 8, 8), "float16", [8, 8, 8, 16, 128, 8, 8, 8, 1, 1, 1, 2, 1, 0, 0],
     r"globalStrides\[0\] must be a multiple of 32"),
    ((8, 8, 8), "float16", [8, 8, 8, 32, 256, 8, 8, 8, 1, 1, 1, 2, 2, 0, 0],
     r"CU_TENSOR_MAP_INTERLEAVE_32B requires CU_TENSOR_MAP_SWIZZLE_32B"),
    ((16, 16), "int32", [16, 16, 64, 4, 16, 1, 1, 0, 0, 0, 1],
     r"CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA requires a floating-point tensorDataType"),
    ((16, 16), "float32", [16, 16, 64, 4, 16, 1, 1, 0, 0, 0, 0, 7],
     r"force_cu_dtype only supports CU_TENSOR_MAP_DATA_TYPE_TFLOAT32"),
    ((16, 16), "float16", [16, 16, 32, 8, 16, 1, 1, 0, 0, 0, 0, 11],
     r"CU_TENSOR_MAP_DATA_TYPE_TFLOAT32 requires a scalar float32"),
    # (and what TVM checks that its test does not)
    ((16,), "float16", [16, 16, 1, 0, 0], r"cuTensorMapEncodeTiled expects 11 \(or \+1 force_cu_dtype\) arguments"),
    ((16, 16), "float16", [16, 16, 24, 16, 16, 1, 1, 0, 0, 0, 0], r"global strides must be multiple of 16"),
    ((16, 16), "float16", [16, 16, 32, 257, 16, 1, 1, 0, 0, 0, 0], r"boxDim\[0\] must be less than or equal to 256"),
    ((16, 16), "float16", [64, 16, 128, 32, 16, 1, 1, 0, 1, 0, 0],
     r"CU_TENSOR_MAP_SWIZZLE_32B implies the bounding box inner dimension will be <= 32\."),
    ((16, 16), "float16", [64, 16, 128, 64, 16, 1, 1, 0, 2, 0, 0],
     r"CU_TENSOR_MAP_SWIZZLE_64B implies the bounding box inner dimension will be <= 64\."),
    ((16, 16), "float16", [128, 16, 256, 128, 16, 1, 1, 0, 3, 0, 0],
     r"CU_TENSOR_MAP_SWIZZLE_128B implies the bounding box inner dimension will be <= 128\."),
    ((16, 16), "float16", [16, 16, 32, 16, 16, 1, 1, 0, 7, 0, 0], r"Unsupported swizzle enum value: 7"),
    ((16, 16), "float16", [16, 16, 32, 16, 16, 1, 1, 3, 0, 0, 0], r"Unsupported interleave enum value: 3"),
    ((16, 16), "float16", [16, 16, 32, 16, 16, 1, 1, 0, 0, 4, 0], r"Unsupported l2Promotion enum value: 4"),
    ((16, 16), "float16", [16, 16, 32, 16, 16, 1, 1, 0, 0, 0, 2], r"Unsupported oobFill enum value: 2"),
    ((16, 16), "int16", [16, 16, 32, 16, 16, 1, 1, 0, 0, 0, 0], r"Unsupported data type int16"),
    ((16, 16), "float16x2", [16, 16, 64, 16, 16, 1, 1, 0, 0, 0, 0], r"Expect tensor_dtype to have lanes=1"),
    ((16, 16, 16, 16, 16, 16), "float16", [], r"cuTensorMapEncodeTiled only supports up to 5D tensors"),
]


@pytest.mark.parametrize("shape, dtype, args, message", INVALID)
def test_the_encoders_arguments_are_checked_as_tvms_runtime_checks_them(shape, dtype, args, message) -> None:
    with pytest.raises(TVMSError, match=r"runtime\.cuTensorMapEncodeTiled: " + message):
        tiled_encoding(dtype, len(shape), 0, args)


def test_an_encoding_holds_the_fields_innermost_first() -> None:
    enc = tiled_encoding("float16", 2, 256, [64, 16, 128, 64, 8, 1, 1, 0, 3, 2, 1])
    assert (enc.dims, enc.strides, enc.box, enc.element_strides) == ((64, 16), (128,), (64, 8), (1, 1))
    assert (enc.data_type, enc.interleave, enc.swizzle, enc.l2_promotion, enc.oob_fill) == (6, 0, 3, 2, 1)
    assert enc.box_bytes == 64 * 8 * 2
    assert tiled_encoding("float32", 1, 0, [128, 32, 1, 0, 0, 0, 0, 11]).data_type == 11  # (TFLOAT32, forced)
    assert tiled_encoding("float8_e4m3fn", 1, 0, [128, 32, 1, 0, 0, 0, 0]).data_type == 0  # (as bytes)
    with pytest.raises(TVMSError, match="globalAddress must be 16-byte aligned"):
        tiled_encoding("float16", 2, 8, [64, 16, 128, 64, 8, 1, 1, 0, 0, 0, 0])
    with pytest.raises(TVMSError, match=r"argument 4 must be an integer, got 1\.5"):
        tiled_encoding("float16", 1, 0, [1.5, 16, 1, 0, 0, 0, 0])


def test_the_encoder_is_a_registered_global_function() -> None:
    from tvms.runtime.cuda_tensor_map import encode_tiled
    assert tvms.get_global_func("runtime.cuTensorMapEncodeTiled") is encode_tiled
    with pytest.raises(TVMSError, match="the first argument must be a tensor-map slot"):
        encode_tiled(None, "float16", 1, 0, 128, 128, 1, 0, 0, 0, 0)


ENCODE_ONLY = '''# from tvm.script import tirx as T

@T.prim_func
def main(A: T.Buffer({shape}, "{dtype}", align=16), B: T.Buffer((1,), "int32")):
    A_map: T.let[T.TensorMap()] = T.tvm_stack_alloca("tensormap", 1)
    T.call_packed("runtime.cuTensorMapEncodeTiled", A_map, "{dtype}", {rank}, A.data, {args})
    with T.attr({{"tirx.device_entry": T.bool(True)}}):
        for blockIdx in T.thread_binding(1, thread="blockIdx.x"):
            for threadIdx in T.thread_binding(1, thread="threadIdx.x"):
                B[0] = 1
'''


def _encode_only(shape, dtype, args):
    text = ENCODE_ONLY.format(shape=tuple(shape), dtype=dtype, rank=len(shape), args=", ".join(map(str, args)))
    return tvms.build(from_source(text), target="cuda").with_launcher(ReferenceLauncher())["main"]


@pytest.mark.parametrize("shape, dtype, args, message", [INVALID[0], INVALID[7], INVALID[11]])
def test_the_host_function_encodes_its_maps_before_the_launch(shape, dtype, args, message) -> None:
    """The host makes the slot, calls the encoder by name (its checks are the call's errors) and
    launches nothing when it refuses."""
    a, b = np.zeros(shape, dtype), np.zeros(1, "int32")
    with pytest.raises(TVMSError, match=message):
        _encode_only(shape, dtype, args)(a, b)
    assert b[0] == 0
    _encode_only((16, 16), "float16", [16, 16, 32, 16, 16, 1, 1, 0, 0, 0, 0])(np.zeros((16, 16), "float16"), b)
    assert b[0] == 1


ONE_MAP = ENCODE_ONLY.format(shape=(16, 16), dtype="float16", rank=2, args="16, 16, 32, 16, 16, 1, 1, 0, 0, 0, 0")


def _run_both_ways(text: str, message: str) -> None:
    """Built and run by the CUDA host function (reference launcher), and run whole by the executor:
    the same TVMSError, nothing launched."""
    a, b = np.zeros((16, 16), "float16"), np.zeros(1, "int32")
    with pytest.raises(TVMSError, match=message):
        tvms.build(from_source(text), target="cuda").with_launcher(ReferenceLauncher())["main"](a, b)
    with pytest.raises(TVMSError, match=message):
        run_prim_func(from_source(text), a, b)
    assert b[0] == 0


def test_an_encoder_call_with_too_few_arguments_is_refused_as_tvm_refuses_it() -> None:
    text = ONE_MAP.replace('A_map, "float16", 2, A.data, 16, 16, 32, 16, 16, 1, 1, 0, 0, 0, 0)', "A_map)")
    assert text != ONE_MAP
    _run_both_ways(text, r"runtime\.cuTensorMapEncodeTiled: cuTensorMapEncodeTiled expects at least 4 arguments "
                         r"\(tensor_map, tensor_dtype, tensor_rank, tensor_ptr, \.\.\.\), got 1")


def test_a_slot_of_two_tensor_maps_is_refused_by_the_build_and_the_executor_alike() -> None:
    text = ONE_MAP.replace('T.tvm_stack_alloca("tensormap", 1)', 'T.tvm_stack_alloca("tensormap", 2)')
    assert text != ONE_MAP
    _run_both_ways(text, r'a tensor-map slot is T.tvm_stack_alloca\("tensormap", 1\) \(one CUDA tensor map\), '
                         r"not T.tvm_stack_alloca\('tensormap', 2\)")


# ---------------------------------------------------------------- the reference executor
def _reference(case: str):
    func = from_source((GOLDEN / f"{case}.tvms").read_text(), f"{case}.tvms")
    return tvms.build(func, target=SM90A).with_launcher(ReferenceLauncher())["main"]


def _swizzled_elements(count: int, elem_bytes: int, width: int) -> np.ndarray:
    """Where a swizzle of ``width`` bytes puts each element of a buffer (its 16-byte chunks XORed
    with the 128-byte row): TVM's ComposeLayout(log2(16 / elem_bytes), log2(width / 16), 3) of its test."""
    byte = np.arange(count) * elem_bytes
    return (byte ^ ((byte >> 7 & (width // 16 - 1)) << 4)) // elem_bytes


@pytest.mark.parametrize("case, dtype", [("hopper_tma_unicast_1d", "float32"), ("hopper_tma_unicast_2d", "float16")])
def test_a_tma_load_and_store_copy_the_tensor_on_the_reference_executor(case: str, dtype: str) -> None:
    """test_cp_async_bulk_tensor_global_to_shared_unicast: the box lands in shared memory when the
    mbarrier's phase completes (the copy's bytes and the expect_tx arrival), the store writes it
    back at its bulk group's wait."""
    shape = (128,) if case.endswith("1d") else (16, 64)
    a = np.random.default_rng(0).standard_normal(shape).astype(dtype)
    b = np.zeros(shape, dtype)
    _reference(case)(a, b)
    np.testing.assert_array_equal(b, a)


def test_a_128_byte_swizzle_moves_16_byte_chunks_as_the_hardware_does() -> None:
    """test_cp_async_bulk_tensor_global_to_shared_swizzle (128B, float16): loaded swizzled, stored
    plainly, B holds A's elements where the swizzle put them."""
    a = np.arange(4096).astype("float16")
    b = np.zeros(4096, "float16")
    _reference("hopper_tma_swizzle_128b")(a, b)
    np.testing.assert_array_equal(b[_swizzled_elements(4096, 2, 128)], a)
    assert not np.array_equal(b, a)


def test_a_tma_store_writes_a_3d_box_from_shared_memory() -> None:
    """test_cp_async_bulk_tensor_shared_to_global ((16, 16, 4) float32)."""
    a = np.zeros((16, 16, 4), "float32")
    _reference("hopper_tma_store_3d")(a)
    np.testing.assert_array_equal(a, np.arange(1024, dtype="float32").reshape(16, 16, 4))


BOX = '''# from tvm.script import tirx as T

@T.prim_func
def main(A: T.Buffer(({dy}, {dx}), "float32", align=16), B: T.Buffer(({by}, 8), "float32")):
    A_map: T.let[T.TensorMap()] = T.tvm_stack_alloca("tensormap", 1)
    T.call_packed("runtime.cuTensorMapEncodeTiled", A_map, "float32", 2, A.data, {dx}, {dy}, {stride}, 8, {by}, {element_strides}, 0, {swizzle}, 0, {fill})
    with T.attr({{"tirx.device_entry": T.bool(True)}}):
        for blockIdx in T.thread_binding(1, thread="blockIdx.x"):
            for threadIdx in T.thread_binding({by} * 8, thread="threadIdx.x"):
                bar = T.alloc_shared((1,), "uint64", align=8)
                S = T.alloc_shared(({by} * 8,), align=128)
                if threadIdx == 0:
                    T.ptx.mbarrier(T.cuda.cvta_generic_to_shared(T.address_of(bar[0])), T.uint32(1), "init", "", "shared", "b64", "")
                    T.ptx.cp(T.cuda.cvta_generic_to_shared(S.data), T.reinterpret(T.handle().ty, T.address_of(A_map)), {cx}, {cy}, T.cuda.cvta_generic_to_shared(T.address_of(bar[0])), "async", "bulk", "tensor", "2d", "shared::cluster", "global", "", "mbarrier::complete_tx::bytes", "", "", "", "")
                    {arrive}
                {wait}
                B[threadIdx // 8, threadIdx % 8] = S[threadIdx]
'''
ARRIVE = ('T.ptx.mbarrier(T.cuda.cvta_generic_to_shared(T.address_of(bar[0])), T.uint32({tx}), "arrive", "expect_tx", '
          '"", "", "shared", "b64", "")')


WAIT = "T.cuda.mbarrier_wait(T.address_of(bar[0]), 0)"


def _box_kernel(dx=8, dy=4, cx=0, cy=0, swizzle=0, fill=0, tx=128, by=4, wait=WAIT, element_strides="1, 1"):
    text = BOX.format(dx=dx, dy=dy, by=by, stride=dx * 4, cx=cx, cy=cy, swizzle=swizzle, fill=fill, wait=wait,
                      element_strides=element_strides,
                      arrive=ARRIVE.format(tx=tx) if tx is not None else "T.evaluate(0)")
    return tvms.build(from_source(text), target=SM90A).with_launcher(ReferenceLauncher())["main"]


@pytest.mark.parametrize("cx, cy, fill", [(4, 0, 0), (-4, 2, 0), (4, 2, 1)])
def test_a_box_past_the_tensors_edge_is_clipped_and_filled(cx: int, cy: int, fill: int) -> None:
    """The box (8 x 4 at (cx, cy)) reads what is inside the tensor; the rest is zero, or NaN
    under CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA."""
    a = np.arange(1, 33, dtype="float32").reshape(4, 8)
    b = np.full((4, 8), -1, "float32")
    _box_kernel(cx=cx, cy=cy, fill=fill)(a, b)
    expected = np.full((4, 8), np.nan if fill else 0, "float32")
    for r in range(4):
        for c in range(8):
            if 0 <= cy + r < 4 and 0 <= cx + c < 8:
                expected[r, c] = a[cy + r, cx + c]
    np.testing.assert_array_equal(b, expected)


def test_a_32_byte_swizzle_of_box_rows() -> None:
    """Rows of 32 bytes: from the fifth on (address bit 7), their two 16-byte chunks swap."""
    a = np.arange(64, dtype="float32").reshape(8, 8)
    b = np.zeros((8, 8), "float32")
    _box_kernel(dy=8, by=8, swizzle=1, tx=256)(a, b)
    np.testing.assert_array_equal(b.reshape(-1)[_swizzled_elements(64, 4, 32)], a.reshape(-1))
    assert not np.array_equal(b, a)


def test_a_wait_for_a_phase_that_cannot_complete_is_an_error() -> None:
    """Without the arrival that expects the copy's bytes the phase never completes: every thread
    waits, and the executor says so (a GPU would hang)."""
    with pytest.raises(TVMSError, match=r"waits at .* for an mbarrier phase that never completes"):
        _box_kernel(tx=None)(np.zeros((4, 8), "float32"), np.zeros((4, 8), "float32"))
    with pytest.raises(TVMSError, match=r"waits at .* for an mbarrier phase that never completes"):
        _box_kernel(tx=64)(np.zeros((4, 8), "float32"), np.zeros((4, 8), "float32"))  # (128 bytes come)


def test_a_read_of_the_box_before_its_mbarrier_completes_is_an_error() -> None:
    with pytest.raises(TVMSError, match=r"reads element 0 of the shared buffer 'S' .* while a cp\.async copy into "
                                         r"it is in flight .* its mbarrier's phase"):
        _box_kernel(tx=None, wait="T.evaluate(0)")(np.zeros((4, 8), "float32"), np.zeros((4, 8), "float32"))


@pytest.mark.parametrize("count, completes", [(33, True), (34, False)])
def test_an_arrive_without_a_count_is_one_arrival(count: int, completes: bool) -> None:
    """mbarrier.arrive.shared.b64 [bar] (no count operand) by each of the 32 threads and thread 0's
    arrive.expect_tx: 33 arrivals complete a phase of 33 and not one of 34."""
    plain = 'T.ptx.mbarrier(T.cuda.cvta_generic_to_shared(T.address_of(bar[0])), "arrive", "", "", "shared", "b64", "")'
    text = BOX.format(dx=8, dy=4, by=4, stride=32, cx=0, cy=0, swizzle=0, fill=0, element_strides="1, 1",
                      wait=plain + "\n                " + WAIT, arrive=ARRIVE.format(tx=128))
    text = text.replace('T.uint32(1), "init"', f'T.uint32({count}), "init"')
    run = tvms.build(from_source(text), target=SM90A).with_launcher(ReferenceLauncher())["main"]
    a, b = np.arange(32, dtype="float32").reshape(4, 8), np.zeros((4, 8), "float32")
    if completes:
        run(a, b)
        np.testing.assert_array_equal(b, a)
    else:
        with pytest.raises(TVMSError, match=r"waits at .* for an mbarrier phase that never completes"):
            run(a, b)


def test_element_strides_other_than_one_are_refused_by_the_executor() -> None:
    with pytest.raises(TVMSError, match=r"does not copy boxes of a tensor map with element strides other than 1"):
        _box_kernel(element_strides="1, 2")(np.zeros((4, 8), "float32"), np.zeros((4, 8), "float32"))


def test_multicast_is_refused_clearly() -> None:
    text = BOX.format(dx=8, dy=4, by=4, stride=32, cx=0, cy=0, swizzle=0, fill=0, wait=WAIT, element_strides="1, 1",
                      arrive=ARRIVE.format(tx=128)).replace(
        '"mbarrier::complete_tx::bytes", "", "", "", "")',
        '"mbarrier::complete_tx::bytes", "multicast::cluster", "", "", "")').replace(
        "T.cuda.cvta_generic_to_shared(T.address_of(bar[0])), \"async\"",
        "T.cuda.cvta_generic_to_shared(T.address_of(bar[0])), T.uint16(15), \"async\"")
    run = tvms.build(from_source(text), target=SM90A).with_launcher(ReferenceLauncher())["main"]
    with pytest.raises(TVMSError, match=r"multicast::cluster: the reference executor runs one block, not a cluster"):
        run(np.zeros((4, 8), "float32"), np.zeros((4, 8), "float32"))


ROW = '''# from tvm.script import tirx as T

@T.prim_func
def main(A: T.Buffer(({n},), "{buffer}", align=16), B: T.Buffer(({n},), "{buffer}")):
    A_map: T.let[T.TensorMap()] = T.tvm_stack_alloca("tensormap", 1)
    T.call_packed("runtime.cuTensorMapEncodeTiled", A_map, "{map}", 1, A.data, {dim}, {box}, 1, 0, 0, 0, {fill}{forced})
    with T.attr({{"tirx.device_entry": T.bool(True)}}):
        for blockIdx in T.thread_binding(1, thread="blockIdx.x"):
            for threadIdx in T.thread_binding(1, thread="threadIdx.x"):
                bar = T.alloc_shared((1,), "uint64", align=8)
                S = T.alloc_shared(({n},), "{buffer}", align=128)
                T.ptx.mbarrier(T.cuda.cvta_generic_to_shared(T.address_of(bar[0])), T.uint32(1), "init", "", "shared", "b64", "")
                T.ptx.cp(T.cuda.cvta_generic_to_shared(S.data), T.reinterpret(T.handle().ty, T.address_of(A_map)), 0, T.cuda.cvta_generic_to_shared(T.address_of(bar[0])), "async", "bulk", "tensor", "1d", "shared::cluster", "global", "", "mbarrier::complete_tx::bytes", "", "", "", "")
                T.ptx.mbarrier(T.cuda.cvta_generic_to_shared(T.address_of(bar[0])), T.uint32({tx}), "arrive", "expect_tx", "", "", "shared", "b64", "")
                T.cuda.mbarrier_wait(T.address_of(bar[0]), 0)
                for i in range({n}):
                    B[i] = S[i]
'''


def _row(buffer: str, n: int, map: str, dim: int, box: int, tx: int, fill: int = 0, forced: str = ""):
    """A kernel that loads the box at 0 of a 1-d ``map`` over an ``n``-element ``buffer`` into shared
    memory and copies shared memory to B."""
    text = ROW.format(buffer=buffer, n=n, map=map, dim=dim, box=box, tx=tx, fill=fill, forced=forced)
    return tvms.build(from_source(text), target=SM90A).with_launcher(ReferenceLauncher())["main"]


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_the_nan_fill_is_nan_for_every_floating_map_type(dtype: str) -> None:
    """A box of 16 over a tensor of 8: the 8 elements past its edge are NaN (bfloat16's numpy type is
    not a numpy float kind, its map type is floating all the same)."""
    from tvms.runtime.tir_values import numpy_dtype
    a = np.arange(1, 17).astype(numpy_dtype(dtype))
    b = np.zeros(16, numpy_dtype(dtype))
    _row(dtype, 16, dtype, dim=8, box=16, tx=16 * a.itemsize, fill=1)(a, b)
    np.testing.assert_array_equal(b[:8], a[:8])
    assert np.isnan(b[8:].astype("float32")).all()


def test_a_map_of_another_type_reads_the_buffers_bytes_as_its_own_elements() -> None:
    """A float16 map over a float32 buffer (legal: the driver sees an address and bytes) copies the
    32 bytes of 16 halves: B gets A's bytes."""
    a = np.array([1.5, -2.25, 3e-8, 7.0, 1e30, -0.0, 0.125, 42.0], "float32")
    b = np.zeros(8, "float32")
    _row("float32", 8, "float16", dim=16, box=16, tx=32)(a, b)
    np.testing.assert_array_equal(b.view(np.uint32), a.view(np.uint32))


def test_a_packed_4_bit_map_is_refused_by_name() -> None:
    """float4_e2m1fn maps are CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN16B (16 values in 8 bytes, then 8 bytes
    of gap): not one byte per value, which the executor would otherwise copy. (Run whole: tvms's CUDA
    target writes no fp4 type.)"""
    from tvms.runtime.tir_values import numpy_dtype
    fp4 = numpy_dtype("float4_e2m1fn")
    text = ROW.format(buffer="float4_e2m1fn", n=128, map="float4_e2m1fn", dim=128, box=128, tx=64, fill=0, forced="")
    memory = np.zeros(128 + 32, fp4)
    a = memory[-memory.ctypes.data % 32:][:128]  # (the packed formats need a 32-byte aligned address)
    with pytest.raises(TVMSError, match=r"does not copy boxes of a tensor map with the packed type float4_e2m1fn "
                                         r"\(CUtensorMapDataType 14"):
        run_prim_func(from_source(text), a, np.zeros(128, fp4))


def test_a_tfloat32_map_is_refused_by_name() -> None:
    """force_cu_dtype 11: the hardware rounds each float32 to tf32 as it loads, which the executor
    does not model (an exact float32 copy would be wrong)."""
    run = _row("float32", 4, "float32", dim=4, box=4, tx=16, forced=", 11")
    with pytest.raises(TVMSError, match=r"does not copy boxes of a tensor map with the data type TFLOAT32 "
                                         r"\(the hardware rounds"):
        run(np.ones(4, "float32"), np.zeros(4, "float32"))


STORE = '''# from tvm.script import tirx as T

@T.prim_func
def main(C: T.Buffer((4, 8), "float32", align=16)):
    C_map: T.let[T.TensorMap()] = T.tvm_stack_alloca("tensormap", 1)
    T.call_packed("runtime.cuTensorMapEncodeTiled", C_map, "float32", 2, C.data, 8, 4, 32, 8, 4, 1, 1, 0, 0, 0, 0)
    with T.attr({{"tirx.device_entry": T.bool(True)}}):
        for blockIdx in T.thread_binding(1, thread="blockIdx.x"):
            for threadIdx in T.thread_binding(1, thread="threadIdx.x"):
                S = T.alloc_shared((32,), align=128)
                for i in range(32):
                    S[i] = T.Cast("float32", i)
                T.ptx.fence("proxy", "async", "shared::cta", "")
                T.ptx.cp(T.reinterpret(T.handle().ty, T.address_of(C_map)), 0, 0, T.cuda.cvta_generic_to_shared(S.data), "async", "bulk", "tensor", "2d", "global", "shared::cta", "tile", "bulk_group", "", "")
                T.ptx.cp("async", "bulk", "commit_group", "")
                {before}
                T.ptx.cp(0, "async", "bulk", "wait_group", "{read}", "")
                {after}
'''
OVERWRITE = "S[5] = T.float32(-1)"


@pytest.mark.parametrize("read", ["", "read"])
def test_a_write_to_the_box_a_bulk_store_still_reads_is_an_error(read: str) -> None:
    """The store reads shared memory asynchronously until its group's wait: overwriting the box
    before it would race with the hardware's read (the value stored is either)."""
    run = tvms.build(from_source(STORE.format(before=OVERWRITE, read=read, after="T.evaluate(0)")),
                     target=SM90A).with_launcher(ReferenceLauncher())["main"]
    with pytest.raises(TVMSError, match=r"writes element 5 of the shared buffer 'S' at .* while a bulk copy to "
                                         r"global memory \(cp\.async\.bulk\.tensor, shared to global\) is reading "
                                         r"it \(no cp\.async\.bulk\.wait_group has completed its group\)"):
        run(np.zeros((4, 8), "float32"))
    c = np.zeros((4, 8), "float32")  # (after the wait the box is the thread's again)
    tvms.build(from_source(STORE.format(before="T.evaluate(0)", read=read, after=OVERWRITE)),
               target=SM90A).with_launcher(ReferenceLauncher())["main"](c)
    np.testing.assert_array_equal(c, np.arange(32, dtype="float32").reshape(4, 8))


# ---------------------------------------------------------------- the driver path
@pytest.fixture
def emulated_gpu(monkeypatch):
    """``use(case)``: the golden kernel built for sm_90a, run by the driver launcher on an emulated GPU
    (tests/cuda_emulated.py: its memory host memory, its launches the reference executor's)."""
    from cuda_emulated import EmulatedDriver

    def use(case: str, edit=lambda text: text):
        gc.collect()  # (device memory earlier tests left is freed now, not in this driver's memory)
        lib = tvms.build(from_source(edit((GOLDEN / f"{case}.tvms").read_text()), f"{case}.tvms"), target=SM90A)
        driver = EmulatedDriver({k.name: k for k in lib["main"].artifact.kernels})
        monkeypatch.setattr(cuda_driver, "_driver_module", lambda: driver)
        monkeypatch.setattr(cuda_driver, "_initialized", cuda_driver._initialized.__wrapped__)
        monkeypatch.setattr(cuda_driver, "primary_context", cuda_driver.primary_context.__wrapped__)
        return driver, lib
    return use


def test_the_driver_launcher_encodes_each_map_and_passes_its_128_bytes_by_value(emulated_gpu) -> None:
    driver, lib = emulated_gpu("hopper_tma_unicast_2d")
    a = np.random.default_rng(1).standard_normal((16, 64)).astype("float16")
    A, B = tvms.nd.array(a, device=tvms.cuda(0)), tvms.nd.array(np.zeros((16, 64), "float16"), device=tvms.cuda(0))
    lib["main"](A, B)
    np.testing.assert_array_equal(B.numpy(), a)
    (encoding_a, address_a), (encoding_b, address_b) = driver.tensor_maps
    assert (address_a, address_b) == (A.ptr, B.ptr)
    assert (encoding_a.dims, encoding_a.strides, encoding_a.box, encoding_a.data_type) == ((64, 16), (128,),
                                                                                          (64, 16), 6)
    assert ctypes.sizeof(TensorMapParameter) == 128
    assert lib["main"].outputs == (1,)  # (B: written through its map)


def test_a_binding_that_refuses_the_argument_types_is_a_clear_error(emulated_gpu, monkeypatch) -> None:
    """A cuda-python whose cuTensorMapEncodeTiled takes other types than the sizes tvms passes (as
    12.9 refused plain ints): a TVMSError naming the call, not the binding's TypeError."""
    driver, lib = emulated_gpu("hopper_tma_unicast_2d")
    monkeypatch.setattr(driver, "cuuint64_t", int)
    A = tvms.nd.array(np.ones((16, 64), "float16"), device=tvms.cuda(0))
    B = tvms.nd.array(np.zeros((16, 64), "float16"), device=tvms.cuda(0))
    with pytest.raises(TVMSError, match=r"runtime\.cuTensorMapEncodeTiled: cuda-python's cuTensorMapEncodeTiled "
                                         r"does not take the arguments tvms passes \(Cannot convert int"):
        lib["main"](A, B)
    assert driver.launches == []


def test_a_launch_with_a_map_never_encoded_is_refused(emulated_gpu) -> None:
    """A host function that makes a slot but never encodes it: the launch is refused, nothing runs."""
    call = ('    T.call_packed("runtime.cuTensorMapEncodeTiled", A_map, "float16", 2, A.data, 64, 16, 128, 64, 16, '
            '1, 1, 0, 0, 0, 0)\n')

    def without_encoding(text: str) -> str:
        assert call in text
        return text.replace(call, "")
    driver, lib = emulated_gpu("hopper_tma_unicast_2d", without_encoding)
    A = tvms.nd.array(np.ones((16, 64), "float16"), device=tvms.cuda(0))
    B = tvms.nd.array(np.zeros((16, 64), "float16"), device=tvms.cuda(0))
    with pytest.raises(TVMSError, match=r"kernel \w+ is launched with a tensor map that was never encoded"):
        lib["main"](A, B)
    assert driver.launches == []


# ---------------------------------------------------------------- on a Hopper GPU
HAS_HOPPER = cuda_driver.cuda_device_count() > 0 and float(cuda_driver.attribute(0, "compute_version")) >= 9.0


@pytest.mark.skipif(not HAS_HOPPER, reason="needs a CUDA GPU of compute capability 9.0 or higher (TMA): "
                    + (cuda_driver.missing_reason(0) or "this GPU is older"))
@pytest.mark.parametrize("case, shape, dtype", [("hopper_tma_unicast_1d", (128,), "float32"),
                                                ("hopper_tma_unicast_2d", (16, 64), "float16"),
                                                ("hopper_tma_swizzle_128b", (4096,), "float16")])
def test_tma_kernels_on_the_gpu(case: str, shape: tuple, dtype: str) -> None:
    """test_codegen_hopper.py's unicast and swizzle kernels, built by tvms and run on the device:
    B == A (where the 128-byte swizzle put A's elements)."""
    lib = tvms.build(from_source((GOLDEN / f"{case}.tvms").read_text(), f"{case}.tvms"), target=SM90A)
    a = np.arange(int(np.prod(shape))).reshape(shape).astype(dtype)
    A = tvms.nd.array(a, device=tvms.cuda(0))
    B = tvms.nd.array(np.zeros(shape, dtype), device=tvms.cuda(0))
    lib["main"](A, B)
    tvms.cuda(0).sync()
    b = B.numpy()
    if "swizzle" in case:
        np.testing.assert_array_equal(b[_swizzled_elements(4096, 2, 128)], a)
    else:
        np.testing.assert_array_equal(b, a)


def test_the_function_runs_whole_on_the_reference_executor_before_it_is_split() -> None:
    """run_prim_func of the PrimFunc itself: its host part makes and encodes the maps
    (T.tvm_stack_alloca, T.call_packed), its kernel copies through them."""
    func = from_source((GOLDEN / "hopper_tma_swizzle_128b.tvms").read_text())
    a, b = np.arange(4096).astype("float16"), np.zeros(4096, "float16")
    run_prim_func(func, a, b)
    np.testing.assert_array_equal(b[_swizzled_elements(4096, 2, 128)], a)
    other = from_source('''# from tvm.script import tirx as T

@T.prim_func
def main():
    s: T.let[T.handle] = T.tvm_stack_alloca("shape", 2)
    T.evaluate(0)
''')
    with pytest.raises(TVMSError, match=r'a tensor-map slot is T.tvm_stack_alloca\("tensormap", 1\) .* not '
                                         r"T.tvm_stack_alloca\('shape', 2\)"):
        run_prim_func(other)


def test_a_multicast_kernel_of_a_thread_block_cluster_is_refused_clearly() -> None:
    """test_cp_async_bulk_tensor_global_to_shared_multicast1 (fixtures/tensor_map/multicast.tvms):
    tvms's CUDA runtime launches no clusters, and the executor runs one block."""
    func = from_source((FIXTURES / "tensor_map" / "multicast.tvms").read_text())
    with pytest.raises(TVMSError, match=r"the cuda code generator launches grids of blocks of threads .*, not "
                                         r"clusterCtaIdx\.x \(thread block clusters"):
        tvms.build(func, target=SM90A)


@pytest.mark.parametrize("wait", ["T.cuda.mbarrier_wait(T.cuda.cvta_generic_to_shared(T.address_of(bar[0])), 0)",
                                  "T.cuda.mbarrier_wait_acquire_cluster(T.address_of(bar[0]), 0)"])
def test_the_other_forms_of_the_wait_block_as_well(wait: str) -> None:
    a = np.arange(32, dtype="float32").reshape(4, 8)
    b = np.zeros((4, 8), "float32")
    _box_kernel(wait=wait)(a, b)
    np.testing.assert_array_equal(b, a)
