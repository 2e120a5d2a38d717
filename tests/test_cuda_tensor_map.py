"""TMA (CUDA tensor maps) in tvms's CUDA code generator: a kernel takes each map the host encodes as
a ``const __grid_constant__ CUtensorMap`` parameter (by value) and hands ``T.address_of(map)`` to
``cp.async.bulk.tensor``. The kernels are those of TVM's test_codegen_hopper.py (unicast 1-D and
2-D, a 128-byte swizzle, a 3-D store), written by fixtures/ptx_dialect/write_tma_kernels_with_tvm.py
and compiled by TVM 0.27 (generate_with_tvm.py): tvms writes the same kernels, byte for byte, with
the same helpers, and NVRTC compiles them for sm_90a.
"""
from __future__ import annotations

import pytest

import tvms
from tvms.ir import expr as E
from tvms.ir.errors import TVMSError
from tvms.lowering.codegen.c_source import CSource
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
    assert TMA_KERNELS == ["hopper_tma_store_3d", "hopper_tma_swizzle_128b", "hopper_tma_unicast_1d",
                           "hopper_tma_unicast_2d"]


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


def test_a_c_target_refuses_a_tensor_map_parameter() -> None:
    var = E.Var("A_map", "handle", E.PointerType(E.TensorMapType()))
    with pytest.raises(TVMSError, match=r"A_map is a T\.TensorMap\(\), a CUDA tensor map that only the cuda target"):
        CSource().pointer_type(var)
