"""image.resize2d / resize3d, affine_grid, grid_sample and the vision operators: the numpy
references against what Apache TVM 0.27 computes (fixtures/image/image_by_tvm.npz, made by
generate_image_with_tvm.py: LegalizeOps, built and run by TVM): every resize method and most
coordinate modes, grids at corners and centers, bilinear and nearest sampling with each padding
mode, region pooling (average and max, NCHW and NHWC) over regions partly outside the image,
valid-box compaction, anchor decoding, classic, soft and per-class non-maximum suppression; and a
compiled module running them (tvms does not legalize these but affine_grid: the VM runs the
references)."""
from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from conftest import FIXTURES
from tvms.runtime.reference_relax import run_relax
from tvms.script import from_source

_spec = importlib.util.spec_from_file_location("generate_image_with_tvm",
                                               FIXTURES / "image" / "generate_image_with_tvm.py")
_cases = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_cases)  # (the cases the golden was made from)
CASES, input_of = _cases.CASES, _cases.input_of

GOLDEN = np.load(FIXTURES / "image" / "image_by_tvm.npz")


def _module(shape: tuple, call: str):
    return from_source(f"""
@I.ir_module
class M:
    @R.function
    def main(x: R.Tensor({shape}, "float32")):
        a = {call}
        return a
""")


@pytest.mark.parametrize("name", sorted(CASES))
def test_reference_equals_tvm(name: str) -> None:
    shape, call = CASES[name]
    got = run_relax(_module(shape, call), "main", input_of(shape))
    fields = got if isinstance(got, tuple) else (got,)
    names = [f"{name}.{k}" for k in range(len(fields))] if isinstance(got, tuple) else [name]
    for field, key in zip(fields, names):
        field, want = np.asarray(field), GOLDEN[key]
        assert field.dtype == want.dtype
        if field.shape != want.shape:  # (TVM trims the ONNX NMS rows to their count: the rest are 0)
            assert not field[len(want):].any()
            field = field[:len(want)]
        np.testing.assert_allclose(field, want, rtol=1e-5, atol=1e-5)


def test_resize_compiled_runs_the_reference() -> None:
    import tvms

    shape, call = CASES["linear_half_pixel"]
    vm = tvms.relax.VirtualMachine(tvms.compile(_module(shape, call), target="llvm"), tvms.cpu())
    np.testing.assert_allclose(vm["main"](input_of(shape)).numpy(), GOLDEN["linear_half_pixel"], rtol=1e-5, atol=1e-5)


def test_affine_grid_legalized_as_tvm_and_compiled() -> None:
    """affine_grid's LegalizeOps byte for byte as TVM prints it (golden math_affine_grid made by
    legalize/generate_math_with_tvm.py); compiled, it gives the reference's numbers."""
    from test_legalize_index import _compiled_equals_reference, _text
    from tvms.lowering.relax.legalize import LegalizeOps

    out = LegalizeOps()(from_source(_text("math_affine_grid", "before")))
    assert out.script(dialect="tvm-0.27") == _text("math_affine_grid", "legalized")
    printed = _text("math_affine_grid", "printed_by_tvm")
    assert from_source(printed).script(dialect="tvm-0.27") == printed
    rng = np.random.default_rng(8)
    args = (rng.standard_normal((2, 2, 3)).astype("float32"), rng.standard_normal((1, 3, 4)).astype("float32"))
    _compiled_equals_reference("math_affine_grid", args, 3, rtol=1e-5, atol=1e-6)
