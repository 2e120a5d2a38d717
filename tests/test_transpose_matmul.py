"""FuseTransposeMatmul: ``matmul(x, permute_dims(w))`` becomes an ``NT_matmul`` kernel reading
``w`` as stored. The text is TVM 0.27's (fixtures/transpose_matmul, generate_with_tvm.py) and
the numbers are the reference executor's before the pass."""
from __future__ import annotations

import numpy as np
import pytest

from conftest import FIXTURES
from tvms import relax
from tvms.runtime.reference_relax import run_relax
from tvms.script import from_source

HERE = FIXTURES / "transpose_matmul"
RNG = np.random.default_rng(0)


def _random_args(mod, entry: str) -> list:
    args = []
    for p in mod[entry].params:
        dims = [int(getattr(d, "value", 4)) for d in p.struct_info.dims]
        args.append(RNG.standard_normal(dims).astype(str(p.struct_info.dtype)))
    return args


@pytest.mark.parametrize("case, entry", [("mlp", "forward"), ("batched", "main")])
def test_prints_as_tvm_and_keeps_the_numbers(case: str, entry: str) -> None:
    mod = from_source((HERE / f"{case}_input.tvms").read_text())
    out = relax.transform.FuseTransposeMatmul()(mod)
    assert out.script(dialect="tvm-0.27") == (HERE / f"{case}_tvm_0.27.tvms").read_text().rstrip("\n")
    args = _random_args(mod, entry)
    want, got = run_relax(mod, entry, *args), run_relax(out, entry, *args)
    for w, g in zip(want if isinstance(want, tuple) else (want,), got if isinstance(got, tuple) else (got,)):
        np.testing.assert_allclose(g, w, rtol=2e-3 if w.dtype == np.float16 else 1e-5, atol=1e-3)


def test_a_transposition_used_elsewhere_stays() -> None:
    """The transposed weight also leaves the block: fusing would not save the copy (and TVM's
    pass fails on such a module), so nothing changes."""
    mod = from_source((HERE / "escaping_input.tvms").read_text())
    out = relax.transform.FuseTransposeMatmul()(mod)
    assert "NT_matmul" not in out.script() and "R.matmul(x, wt" in out.script()


def test_the_kernel_builds_and_matches_numpy() -> None:
    pytest.importorskip("llvmlite")
    import tvms

    out = relax.transform.FuseTransposeMatmul()(from_source((HERE / "batched_input.tvms").read_text()))
    lib = tvms.build(tvms.IRModule({"main": out["NT_matmul"]}), target="llvm")
    x = RNG.standard_normal((2, 3, 8)).astype("float32")
    w = RNG.standard_normal((2, 5, 8)).astype("float32")
    c = np.zeros((2, 3, 5), dtype="float32")
    lib["main"](x, w, c)
    np.testing.assert_allclose(c, x @ w.transpose(0, 2, 1), rtol=1e-5, atol=1e-5)


def test_a_result_of_unknown_shape_is_left_as_two_calls() -> None:
    """The NT kernel is written for a known shape: an operand of unknown shape (e.g. reshaped to
    a shape computed at run time, as ONNX graphs do) leaves the matmul and transposition alone."""
    mod = from_source("""
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(dtype="float32", ndim=2), w: R.Tensor((3, 4), dtype="float32")) -> R.Tensor(dtype="float32", ndim=2):
        with R.dataflow():
            wt = R.permute_dims(w, axes=None)
            y = R.matmul(x, wt, out_dtype="void")
            R.output(y)
        return y
""")
    out = relax.transform.FuseTransposeMatmul()(mod)
    assert out.script() == mod.script()
