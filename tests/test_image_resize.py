"""image.resize2d / resize3d: the numpy reference against what Apache TVM 0.27 computes
(fixtures/image/resize_by_tvm.npz, made by generate_resize_with_tvm.py: LegalizeOps, built and run
by TVM), every interpolation method and most coordinate modes; and a compiled module running it
(tvms does not legalize resize: the VM runs the reference)."""
from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from conftest import FIXTURES
from tvms.runtime.reference_relax import run_relax
from tvms.script import from_source

_spec = importlib.util.spec_from_file_location("generate_resize_with_tvm",
                                               FIXTURES / "image" / "generate_resize_with_tvm.py")
_cases = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_cases)  # (the cases the golden was made from)
CASES, input_of = _cases.CASES, _cases.input_of

GOLDEN = np.load(FIXTURES / "image" / "resize_by_tvm.npz")


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
def test_resize_reference_equals_tvm(name: str) -> None:
    shape, call = CASES[name]
    got = run_relax(_module(shape, call), "main", input_of(shape))
    np.testing.assert_allclose(np.asarray(got), GOLDEN[name], rtol=1e-5, atol=1e-5)


def test_resize_compiled_runs_the_reference() -> None:
    import tvms

    shape, call = CASES["linear_half_pixel"]
    vm = tvms.relax.VirtualMachine(tvms.compile(_module(shape, call), target="llvm"), tvms.cpu())
    np.testing.assert_allclose(vm["main"](input_of(shape)).numpy(), GOLDEN["linear_half_pixel"], rtol=1e-5, atol=1e-5)
