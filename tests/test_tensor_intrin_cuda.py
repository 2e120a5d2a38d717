"""The CUDA WMMA tensor intrinsics (lowering/schedule/tensor_intrin_cuda.py): every one TVM 0.27
registers, by its name, prints its description and implementation as TVM does
(fixtures/tensor_intrin_cuda, made by generate_with_tvm.py there)."""
from __future__ import annotations

import json

import pytest
from conftest import FIXTURES

from tvms.ir.errors import TVMSError
from tvms.lowering.schedule.tensor_intrin_cuda import get_wmma_intrin_group
from tvms.tir import TensorIntrin

GOLDEN = json.loads((FIXTURES / "tensor_intrin_cuda" / "wmma_intrinsics.json").read_text())


def test_every_wmma_intrinsic_prints_as_tvms():
    for name, texts in GOLDEN.items():
        intrin = TensorIntrin.get(name)
        assert intrin.desc.script(dialect="tvm-0.27") == texts["desc"], name
        assert intrin.impl.script(dialect="tvm-0.27") == texts["impl"], name


def test_intrin_group_names_registered_intrinsics():
    group = get_wmma_intrin_group("shared.dyn", "shared.dyn", "float16", "float32", trans_b=True)
    assert group == {"init": "wmma_fill_16x16x16_f32", "load_a": "wmma_load_16x16x16_f16_a_shared_dyn",
                     "load_b": "wmma_load_16x16x16_f16_b_trans_shared_dyn",
                     "compute": "wmma_sync_16x16x16_f16f16f32_trans", "store": "wmma_store_16x16x16_f32_shared_dyn"}
    int8 = get_wmma_intrin_group("shared", "global", "int8", "int32", trans_b=False)
    assert all(name in GOLDEN for name in int8.values())
    with pytest.raises(TVMSError, match="float64"):
        get_wmma_intrin_group("shared", "shared", "float64", "float32", trans_b=False)


def test_a_lazy_intrinsic_is_built_once_and_not_registered_twice():
    built = []

    def build() -> TensorIntrin:
        built.append(1)
        return TensorIntrin.get("wmma_fill_16x16x16_f16")

    TensorIntrin.register_lazy("tvms_test_lazy_fill", build)
    with pytest.raises(TVMSError, match="already registered"):
        TensorIntrin.register_lazy("tvms_test_lazy_fill", build)
    assert TensorIntrin.get("tvms_test_lazy_fill") is TensorIntrin.get("tvms_test_lazy_fill")
    assert built == [1]
    with pytest.raises(TVMSError, match="already registered"):
        TensorIntrin.register_lazy("wmma_fill_16x16x16_f32", build)


def test_a_lazy_intrinsic_that_fails_to_build_fails_again_with_its_error():
    """A lazy intrinsic whose build fails stays lazy: asked again, the same error (not "no tensor
    intrinsic named ... is registered"); an unknown name says where the WMMA names come from."""
    def build() -> TensorIntrin:
        raise TVMSError("the description does not parse")

    TensorIntrin.register_lazy("tvms_test_lazy_broken", build)
    for _ in range(2):
        with pytest.raises(TVMSError, match="the description does not parse"):
            TensorIntrin.get("tvms_test_lazy_broken")
    with pytest.raises(TVMSError, match=r"no tensor intrinsic named 'wmma_nothing' is registered \(TensorIntrin"
                                        r".register; the CUDA WMMA ones, wmma_\*, register when "
                                        r"tvms.lowering.schedule.tensor_intrin_cuda is imported\)"):
        TensorIntrin.get("wmma_nothing")
