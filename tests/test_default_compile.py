"""``tvms.compile`` is fast by default on the CPU: unscheduled TensorIR gets the default schedules
of ``tvms.dlight.cpu`` (and linear layers read their weights as stored), hand-scheduled functions
are kept, ``default_schedule=False`` compiles the TensorIR as written; the numbers never change."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, reject

from conftest import ROOT
from program_strategies import Program, assert_same_values, dataflow_programs
from test_pass_properties import SETTINGS
from test_pass_properties import _run as run_reference
from test_vm_compiled import _as_numpy, mlp_args
import tvms
from tvms import TVMSError, relax
from tvms.cli import main
from tvms.lowering.dlight import is_scheduled
from tvms.ir.function import PrimFunc
from tvms.script import from_source

pytest.importorskip("llvmlite")
MLP = (ROOT / "examples" / "mlp.tvms").read_text()


def _kernels(ex) -> dict:
    """The PrimFuncs the executable's kernels were compiled from."""
    return {k: f.compiled.func for k, f in ex.kernels().functions.items()}


def test_the_mlp_is_scheduled_by_default_and_computes_the_same() -> None:
    fast = tvms.compile(from_source(MLP), target="llvm")
    plain = tvms.compile(from_source(MLP), target="llvm", default_schedule=False)
    assert fast is not plain
    # (each linear layer's weight packing is split off, for the VM to run once per weight set)
    assert sorted(_kernels(fast)) == [f"{layer}_{part}" for layer in ("fused_NT_matmul1_add1", "fused_NT_matmul_add_relu")
                                      for part in ("prepacked", "weight_prepack")]
    assert all(is_scheduled(f) and f.attrs.get("tir.is_scheduled") for f in _kernels(fast).values())
    assert not any(f.attrs.get("tir.is_scheduled") for f in _kernels(plain).values())
    vms = [relax.VirtualMachine(ex, tvms.cpu()) for ex in (fast, plain)]
    for batch in (1, 16, 64):
        args = mlp_args(batch)
        x, w1, b1, w2, b2 = args
        want = np.maximum(x @ w1.T + b1, 0) @ w2.T + b2
        for vm in vms:
            np.testing.assert_allclose(vm["forward"](*args).numpy(), want, rtol=1e-4, atol=1e-3)


def test_a_hand_scheduled_function_is_kept() -> None:
    sch = tvms.tir.Schedule(from_source((ROOT / "examples" / "matmul.tvms").read_text()))
    sch.parallel(sch.get_loops(sch.get_block("C"))[0])
    lib = tvms.compile(sch.mod, target="llvm")
    assert lib["main"].compiled.func.attrs.get("tir.is_scheduled") is None
    a, b = (np.random.default_rng(i).standard_normal((128, 128)).astype("float32") for i in (1, 2))
    c = np.zeros((128, 128), "float32")
    lib["main"](a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


@SETTINGS
@given(program=dataflow_programs(max_bindings=5))
def test_drawn_programs_compile_to_the_reference_numbers(program: Program) -> None:
    try:
        want = run_reference(program.mod, program)
        # (TVM's legalized split assumes a symbolic size large enough for its sections: no claim
        # about arguments for which the lowered program itself fails)
        run_reference(relax.get_pipeline("zero")(program.mod), program)
        ex = tvms.compile(program.mod, target="llvm")
    except (TVMSError, ValueError):
        reject()  # (a program that fails by itself, or that the pipeline cannot lower)
    if _converts_a_non_finite_float(want):
        reject()
    vm = relax.VirtualMachine(ex, tvms.cpu())
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        got = _as_numpy(vm[program.entry](*program.args))
    assert_same_values(got, want)


def _converts_a_non_finite_float(value) -> bool:
    """An integer result holding its type's minimum: numpy's value for ``inf`` or ``nan`` cast to
    an integer, which C and LLVM leave undefined (a constant-folded cast gives anything)."""
    if isinstance(value, tuple):
        return any(_converts_a_non_finite_float(v) for v in value)
    value = np.asarray(value)
    return value.dtype.kind == "i" and value.size > 0 and bool((value == np.iinfo(value.dtype).min).any())


def test_the_command_line_can_turn_default_schedules_off(capsys) -> None:
    path = str(ROOT / "examples" / "mlp.tvms")
    printed = []
    for extra in ([], ["--no-default-schedule"]):
        assert main(["run", path, "--entry", "forward", "--random-inputs", "--shape", "n=2", *extra]) == 0
        printed.append(capsys.readouterr().out)
    for out in printed:
        assert "shape (2, 10)" in out and "float32" in out


def test_softmax_over_a_symbolic_middle_axis() -> None:
    """Found by the drawn programs: compute_at under a loop whose inner loop has a symbolic
    extent (rows of ``n``) kept that loop's variable unbound; it now refuses (a ScheduleError,
    so the next rule schedules the function) and the result is right."""
    mod = from_source('''
# from tvm.script import ir as I
# from tvm.script import relax as R
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((1, "n", 1), dtype="float32")) -> R.Tensor((1, "n", 1), dtype="float32"):
        n = T.int64()
        with R.dataflow():
            gv: R.Tensor((1, n, 1), dtype="float32") = R.nn.softmax(x, axis=-1)
            R.output(gv)
        return gv
''')
    vm = relax.VirtualMachine(tvms.compile(mod, target="llvm"), tvms.cpu())
    x = np.random.default_rng(3).standard_normal((1, 5, 1)).astype("float32")
    np.testing.assert_allclose(vm["main"](x).numpy(), np.ones((1, 5, 1), "float32"), rtol=1e-6)
    kernel = relax.get_pipeline("zero")(mod)
    name = next(k for k in kernel if isinstance(kernel[k], PrimFunc))
    sch = tvms.tir.Schedule(kernel[name])
    blocks = sch.get_child_blocks(sch.get_block("root"))
    with pytest.raises(tvms.tir.ScheduleError, match="symbolic extent"):
        sch.compute_at(blocks[2], sch.get_loops(blocks[3])[0])
