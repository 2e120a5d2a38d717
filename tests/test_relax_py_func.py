"""``R.call_py_func`` (issue 14): a Relax call of a Python function registered by name.

What TVM 0.27 infers and prints is checked by the struct-info golden
(fixtures/struct_info/call_py_func_*, both dialects in test_relax_calls); here: the Python
builder, TVM's error cases, and running it, where only a function the user's own Python code
registered is ever called (the text only names it).
"""
from __future__ import annotations

import numpy as np
import pytest
from conftest import FIXTURES

import tvms
from tvms import relax
from tvms.ir import structural_equal
from tvms.ir.errors import ScriptError, TVMSError
from tvms.runtime.reference_relax import run_relax
from tvms.script import from_source

GOLDEN = FIXTURES / "struct_info" / "call_py_func_inferred_by_tvm.tvms"

MODULE = """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 3), "float32")):
        a = R.call_py_func("rest_double", x, out_ty=R.Tensor((2, 3), "float32"))
        b = R.call_py_func("rest_pair", x, a, out_ty=[R.Tensor((2, 3), "float32"), R.Tensor((3,), "int32")])
        return b
"""


def test_builder_matches_the_parsed_call() -> None:
    """relax.op.call_py_func (TVM's (func_name, args, out_ty)) builds what the text parses to."""
    mod = from_source(GOLDEN.read_text())
    call = mod["static"].body.blocks[0].bindings[1].value
    x, a = mod["static"].params[0], mod["static"].body.blocks[0].bindings[0].var
    built = relax.op.call_py_func("pair", (x, a), [relax.TensorStructInfo((2, 3), "float32"),
                                                    relax.TensorStructInfo((3,), "int32")])
    assert structural_equal(built, call, map_free_vars=True)
    assert structural_equal(built.struct_info, call.struct_info)
    with pytest.raises(TVMSError, match="each out_ty is a tensor of known shape"):
        relax.op.call_py_func("pair", (x,), relax.TensorStructInfo(dtype="float32", ndim=2))


def test_runs_the_registered_function_in_both_executors() -> None:
    mod = from_source(MODULE)
    relax.register_py_func("rest_double", lambda x: x * 2)
    # (TVM's runtime name for the same registry)
    tvms.get_global_func("vm.builtin.register_py_func")("rest_pair", lambda x, y: (x + y, np.arange(3, dtype="int32")))
    x = np.arange(6, dtype="float32").reshape(2, 3)
    ref = run_relax(mod, "main", x)
    np.testing.assert_allclose(ref[0], x * 3)
    np.testing.assert_array_equal(ref[1], np.arange(3))
    vm = relax.VirtualMachine(tvms.compile(mod, "llvm"), tvms.cpu())
    out = vm["main"](tvms.runtime.tensor(x))
    np.testing.assert_allclose(out[0].numpy(), x * 3)
    np.testing.assert_array_equal(out[1].numpy(), np.arange(3))


def test_unregistered_or_misbehaving_functions_are_refused() -> None:
    mod = from_source(MODULE.replace("rest_double", "rest_not_registered"))
    with pytest.raises(TVMSError, match="no Python function named 'rest_not_registered' is registered"):
        run_relax(mod, "main", np.zeros((2, 3), "float32"))
    relax.register_py_func("rest_double", lambda x: x[:1])  # (a result of the wrong shape)
    with pytest.raises(TVMSError, match=r"R.call_py_func\('rest_double'\).*\(1, 3\).*\(2, 3\)"):
        run_relax(from_source(MODULE), "main", np.zeros((2, 3), "float32"))
    with pytest.raises(TVMSError, match="not callable"):
        relax.register_py_func("rest_double", "x * 2")


@pytest.mark.parametrize("call, message", [
    ('R.call_py_func(x, (x,), ty_args=(R.Tensor((2, 3), "float32"),))', "names the Python function as a string"),
    ('R.call_py_func(R.str("f"), x, ty_args=(R.Tensor((2, 3), "float32"),))', "the tuple of arguments"),
    ('R.call_py_func(R.str("f"), (x,))', "exactly one result struct info, got 0"),
    ('R.call_py_func("f", x, out_ty=R.Tensor(ndim=2))', "each out_ty is a tensor of known shape"),
])
def test_tvms_refuses_what_tvm_refuses(call, message) -> None:
    text = f"""
@R.function
def main(x: R.Tensor((2, 3), "float32")):
    a = {call}
    return a
"""
    with pytest.raises(ScriptError, match=message) as err:
        from_source(text)
    assert (err.value.span.line, err.value.span.col) == (4, 9)
