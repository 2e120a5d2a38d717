"""``import tvms`` loads the IR layer only; the other parts load on first use (issue 17: import time).
Each check runs in a fresh interpreter, where nothing else has imported them yet. No timing is
asserted: what is checked is which modules an import brings in, and that the lazily loaded API
works as before."""
from __future__ import annotations

import json
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent


def fresh(code: str):
    """The JSON value the last line of ``code``'s output holds, run in a fresh interpreter."""
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_import_tvms_leaves_the_heavy_parts_for_later() -> None:
    loaded = fresh("import json, sys; import tvms; print(json.dumps(sorted(sys.modules)))")
    assert "tvms.ir" in loaded and "numpy" in loaded
    heavy = ("llvmlite", "lark", "cuda.bindings", "tvms.script", "tvms.runtime", "tvms.relax", "tvms.tir",
             "tvms.dlight", "tvms.ir.relax_ops", "tvms.lowering.relax", "tvms.lowering.schedule",
             "tvms.lowering.dlight", "tvms.lowering.tune", "tvms.lowering.codegen", "tvms.lowering.tir")
    early = [m for m in loaded if m.startswith(heavy) or "cuda" in m.split(".")[-1] and m.startswith("tvms")]
    assert early == []


def test_the_api_loads_on_first_use() -> None:
    got = fresh("""
import json
import tvms
from tvms import relax  # (a submodule by from-import)
import tvms.tirx  # (TVM 0.27's name of tvms.tir, as a module)
text = open("examples/mlp.tvms").read()
from tvms.script import from_source
mod = from_source(text)
vm = tvms.relax.VirtualMachine(tvms.compile(mod, target="llvm"), tvms.cpu())
try:
    tvms.no_such_name
    missing = None
except AttributeError as err:
    missing = str(err)
print(json.dumps({"tirx": tvms.tirx is tvms.tir and tvms.tirx.Schedule is tvms.tir.Schedule,
                  "relax": relax is tvms.relax, "vm": type(vm).__name__, "missing": missing,
                  "dir": sorted({"relax", "compile", "cpu", "tirx", "dlight"} - set(dir(tvms))),
                  "transform": tvms.ir.transform is tvms.transform}))
""")
    assert got == {"tirx": True, "relax": True, "vm": "VirtualMachine", "transform": True, "dir": [],
                   "missing": "module 'tvms' has no attribute 'no_such_name'"}


def test_what_the_other_layers_register_is_found_before_they_are_imported() -> None:
    """The printer, global functions of the runtime and passes registered by the lowering layer
    (one through the face ``tvms.relax.transform``), looked up right after ``import tvms``: the
    lookup loads the layers, and a listing loads them all."""
    got = fresh("""
import json
import tvms
printed = (tvms.ir.Var("x", "int32") + 3).script()
loader = tvms.ir.registry.get_global_func("runtime.vm.executable")
passes = [tvms.transform.get_pass(name).info.name for name in ("UnrollLoop", "LegalizeOps", "ThreadSync")]
names = tvms.ir.registry.list_global_func_names()
print(json.dumps([printed, callable(loader), passes, "runtime.cpu_blas.kernel" in names,
                  "runtime.module.load_cuda" in names, "DeadCodeElimination" in tvms.transform.list_passes()]))
""")
    assert got == ["x + 3", True, ["UnrollLoop", "LegalizeOps", "ThreadSync"], True, True, True]


def test_fold_constant_finds_the_reference_executor_in_a_fresh_process() -> None:
    """FoldConstant evaluates with the global function ``runtime.reference_relax.eval_expr``,
    which nothing had imported in a fresh process (the pass failed there)."""
    got = fresh('''
import json
import tvms
from tvms.script import from_source
mod = from_source("""@I.ir_module
class Module:
    @R.function
    def main() -> R.Tensor((2,), dtype="float32"):
        with R.dataflow():
            gv = R.add(R.const([1.0, 2.0], "float32"), R.const([3.0, 4.0], "float32"))
            R.output(gv)
        return gv
""")
folded = tvms.relax.transform.FoldConstant()(mod)["main"].body.body
print(json.dumps(folded.data.tolist()))
''')
    assert got == [4.0, 6.0]


def test_lowering_tir_loads_gpu_only_for_its_names() -> None:
    """Another name (``__wrapped__``, as ``inspect`` asks) is missing without loading gpu/; a name
    of gpu/ loads it. The static list of gpu/'s names is its ``__all__``."""
    got = fresh("""
import json, sys
import tvms.lowering.tir as tir
asked = hasattr(tir, "__wrapped__"), hasattr(tir, "no_such_pass")
before = "tvms.lowering.tir.gpu" in sys.modules
found = tir.ThreadSync.__name__
from tvms.lowering.tir import gpu
print(json.dumps([asked, before, found, sorted(tir.GPU_NAMES) == sorted(gpu.__all__)]))
""")
    assert got == [[False, False], False, "ThreadSync", True]


def test_dlight_asks_which_math_vectorizes_without_loading_llvmlite() -> None:
    got = fresh('''
import json, sys
from tvms.script import from_source
from tvms.lowering.dlight.analysis import flat_schedule, vectorizes_well
func = from_source("""# from tvm.script import tir as T

@T.prim_func
def main(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32")):
    for i in range(64):
        with T.sblock("B"):
            vi = T.axis.spatial(64, i)
            B[vi] = T.exp(A[vi]) + T.tanh(A[vi])
""")
print(json.dumps([vectorizes_well(flat_schedule(func)[1][0]), "llvmlite" in sys.modules]))
''')
    assert got == [True, False]


def test_a_layer_loader_that_raises_stays_pending(monkeypatch) -> None:
    """A layer whose import fails raises at every lookup that needs it (it was dropped after the
    first, and the next lookup reported a plain miss), and loads once it can."""
    import pytest

    from tvms.ir import registry

    calls = []

    def load() -> None:
        calls.append(len(calls))
        if len(calls) < 3:
            raise ImportError("the layer's import failed")

    monkeypatch.setattr(registry, "_layer_loaders", [load])
    for _ in range(2):
        with pytest.raises(ImportError, match="the layer's import failed"):
            registry.load_layers()
    registry.load_layers()
    assert calls == [0, 1, 2] and registry._layer_loaders == []
