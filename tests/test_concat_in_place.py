"""ConcatInPlace (``lowering/relax/concat_in_place.py``, tvms' own pass, run by ``tvms.compile``
with default schedules): the kernels whose results a concatenation joins write into their slice
of its result, the other parts are copied into theirs; checked by the printed program and
against numpy in both VM modes."""
from __future__ import annotations

import numpy as np
import pytest

import tvms
from tvms import relax
from tvms.ir import IRModule
from tvms.lowering.build import run_relax_pipeline
from tvms.lowering.relax.concat_in_place import concat_in_place
from tvms.lowering.relax.legalize import LegalizeOps
from tvms.lowering.relax.passes import BindParams
from tvms.script import from_source


def concat_module(axis: int) -> IRModule:
    """Two convolutions with relu (written in place), a parameter, a convolution that accumulates
    into its result and a reduction (both copied), joined along ``axis``."""
    y_shape = {1: (1, 3, 3, 4), 2: (1, 5, 2, 4)}[axis]
    out_shape = {1: (1, 19, 3, 4), 2: (1, 5, 12, 4)}[axis]
    return IRModule({"main": from_source(f"""
@R.function
def main(x: R.Tensor((1, 2, 3, 4), "float32"), w: R.Tensor((5, 2, 1, 1), "float32"), v: R.Tensor((5, 2, 3, 3), "float32"), y: R.Tensor({y_shape}, "float32")) -> R.Tensor({out_shape}, "float32"):
    with R.dataflow():
        a = R.nn.relu(R.nn.conv2d(x, w))
        a2 = R.nn.relu(R.nn.conv2d(x, v, padding=[1, 1]))
        b = R.nn.conv2d(x, w)
        s = R.max(R.nn.conv2d(x, v, padding=[1, 1]), axis=[{axis}], keepdims=True)
        c = R.concat((y, a, b, a2, s), axis={axis})
        R.output(c)
    return c
""")})


def expected(axis: int, x: np.ndarray, w: np.ndarray, v: np.ndarray, y: np.ndarray) -> np.ndarray:
    pad = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    conv3 = sum(np.einsum("nchw,fc->nfhw", pad[:, :, i:i + 3, j:j + 4], v[:, :, i, j]) for i in range(3) for j in range(3))
    conv1 = np.einsum("nchw,fc->nfhw", x, w[:, :, 0, 0])
    parts = [y, np.maximum(conv1, 0), conv1, np.maximum(conv3, 0), conv3.max(axis, keepdims=True)]
    return np.concatenate(parts, axis)


MAIN = """\
        with R.dataflow():
            lv_ = R.call_tir(cls.fused_conv2d_relu_in_concatenate, (x, w), out_sinfo=R.Tensor((1, 19, 3, 4), dtype="float32"))
            lv1_: R.Tensor((1, 19, 3, 4), dtype="float32") = R.call_tir_inplace(cls.fused_conv2d1_relu_in_concatenate, (x, v, lv_), out_sinfo=R.Tensor((1, 19, 3, 4), dtype="float32"), inplace_indices=[2])
            b = R.call_tir(cls.conv2d, (x, w), out_sinfo=R.Tensor((1, 5, 3, 4), dtype="float32"))
            lv5 = R.call_tir(cls.conv2d1, (x, v), out_sinfo=R.Tensor((1, 5, 3, 4), dtype="float32"))
            s = R.call_tir(cls.max, (lv5,), out_sinfo=R.Tensor((1, 1, 3, 4), dtype="float32"))
            c_: R.Tensor((1, 19, 3, 4), dtype="float32") = R.call_tir_inplace(cls.copy_in_concatenate, (y, lv1_), out_sinfo=R.Tensor((1, 19, 3, 4), dtype="float32"), inplace_indices=[1])
            c__1: R.Tensor((1, 19, 3, 4), dtype="float32") = R.call_tir_inplace(cls.copy_in_concatenate_1, (b, c_), out_sinfo=R.Tensor((1, 19, 3, 4), dtype="float32"), inplace_indices=[1])
            c__2: R.Tensor((1, 19, 3, 4), dtype="float32") = R.call_tir_inplace(cls.copy_in_concatenate_2, (s, c__1), out_sinfo=R.Tensor((1, 19, 3, 4), dtype="float32"), inplace_indices=[1])
            c: R.Tensor((1, 19, 3, 4), dtype="float32") = c__2
            R.output(c)
        return c
"""


def test_parts_written_in_place_and_the_others_copied() -> None:
    mod = run_relax_pipeline(concat_module(1), "zero", True)
    text = mod.script()
    assert text.endswith(MAIN.rstrip("\n"))
    # the concatenation's kernel and the first forms of the parts written in place are gone
    assert sorted(gv.name_hint for gv in mod.get_global_vars()) == [
        "conv2d", "conv2d1", "copy_in_concatenate", "copy_in_concatenate_1", "copy_in_concatenate_2",
        "fused_conv2d1_relu_in_concatenate", "fused_conv2d_relu_in_concatenate", "main", "max"]
    # each kernel stores its result at its part's offset (y 0, a 3, b 8, a2 13, s 18)
    stores = {"fused_conv2d_relu_in_concatenate": "compute_intermediate[v_i0, v_i1 + T.int64(3), v_i2, v_i3] = T.max(",
              "fused_conv2d1_relu_in_concatenate": "compute_intermediate[v_i0, v_i1 + T.int64(13), v_i2, v_i3] = T.max(",
              "copy_in_concatenate": "T_copy[v_i0, v_i1, v_i2, v_i3] = x[v_i0, v_i1, v_i2, v_i3]",
              "copy_in_concatenate_1": "T_copy[v_i0, v_i1 + T.int64(8), v_i2, v_i3] = x[v_i0, v_i1, v_i2, v_i3]",
              "copy_in_concatenate_2": "T_copy[v_i0, v_i1 + T.int64(18), v_i2, v_i3] = x[v_i0, v_i1, v_i2, v_i3]"}
    for name, store in stores.items():
        assert store in mod[name].script(), name
    assert concat_in_place(mod) is mod  # (a second run: nothing left to rewrite)


NESTED = """
@I.ir_module
class Module:
    @T.prim_func(private=True)
    def sym_exp(var_x: T.handle, var_y: T.handle):
        n = T.int64()
        x = T.match_buffer(var_x, (T.int64(1), T.int64(5), T.int64(3), T.int64(4)), "float32")
        y = T.match_buffer(var_y, (T.int64(1), n, T.int64(3), T.int64(4)), "float32")
        for i, j, h, w in T.grid(T.int64(1), n, T.int64(3), T.int64(4)):
            with T.block("b"):
                vi, vj, vh, vw = T.axis.remap("SSSS", [i, j, h, w])
                y[vi, vj, vh, vw] = T.exp(x[vi, vj, vh, vw])

    @R.function
    def main(x: R.Tensor((1, 5, 3, 4), "float32"), k: R.Tensor((1, 1, 3, 4), "float32")) -> R.Tensor((1, 26, 3, 4), "float32"):
        cls = Module
        with R.dataflow():
            a = R.exp(x)
            b = R.sigmoid(x)
            c1 = R.concat((a, b), axis=1)
            e = R.call_tir(cls.sym_exp, (x,), out_sinfo=R.Tensor((1, 5, 3, 4), "float32"))
            d = R.sigmoid(x)
            c = R.concat((c1, k, e, d, x), axis=1)
            R.output(c)
        return c
"""


@pytest.mark.parametrize("mode", ["compiled", "bytecode"])
def test_a_concatenation_of_one_a_constant_and_a_symbolic_kernel_are_copied(mode: str) -> None:
    """(review) a concatenation joining another (already rewritten: its binding is not a
    kernel's any more), a constant (once left alone with the whole concatenation) and a kernel
    whose result buffer has a symbolic size (widening it dropped the size's definition): each
    is copied into its slice; a and b are still written into c1 in place, d into c."""
    x = np.random.default_rng(0).standard_normal((1, 5, 3, 4)).astype("float32")
    k = np.full((1, 1, 3, 4), 2.5, "float32")
    mod = concat_in_place(LegalizeOps()(BindParams("main", {"k": k})(from_source(NESTED))))
    assert concat_in_place(mod) is mod
    names = sorted(gv.name_hint for gv in mod.get_global_vars())
    assert names == ["copy_in_concatenate1", "copy_in_concatenate1_1", "copy_in_concatenate1_2",
                     "copy_in_concatenate1_3", "main", "sym_exp", "tir_exp_in_concatenate",
                     "tir_sigmoid_in_concatenate", "tir_sigmoid_in_concatenate1"]
    want = np.concatenate([np.exp(x), 1 / (1 + np.exp(-x)), k, np.exp(x), 1 / (1 + np.exp(-x)), x], 1)
    vm = relax.VirtualMachine(tvms.compile(mod, "llvm", exec_mode=mode), tvms.cpu())
    for _ in range(2):
        np.testing.assert_allclose(vm["main"](x).numpy(), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("axis, mode", [(1, "compiled"), pytest.param(1, "bytecode", marks=pytest.mark.slow),
                                        pytest.param(2, "compiled", marks=pytest.mark.slow)])
def test_numbers(axis: int, mode: str) -> None:
    rng = np.random.default_rng(3)
    mod = concat_module(axis)
    shapes = [tuple(d.value for d in p.struct_info.dims) for p in mod["main"].params]
    args = [rng.standard_normal(s).astype("float32") for s in shapes]
    want = expected(axis, *args)
    vm = relax.VirtualMachine(tvms.compile(mod, "llvm", exec_mode=mode), tvms.cpu())
    for _ in range(2):  # (the second call on storage the first used)
        np.testing.assert_allclose(vm["main"](*args).numpy(), want, rtol=1e-5, atol=1e-5)


def test_a_public_kernel_written_in_place_twice_builds_and_computes() -> None:
    """A public PrimFunc whose two calls a concatenation joins: each slice's copy of it is public
    under its own name (its global_symbol had been copied too, and the build refused two
    functions with one symbol)."""
    mod = from_source('''
@I.ir_module
class Module:
    @T.prim_func
    def rsum(a: T.Buffer((4, 4), "float32"), b: T.Buffer((4,), "float32")):
        tmp = T.alloc_buffer((4,), "float32")
        for i, k in T.grid(4, 4):
            with T.block("r"):
                vi, vk = T.axis.remap("SR", [i, k])
                with T.init():
                    tmp[vi] = T.float32(0)
                tmp[vi] = tmp[vi] + a[vi, vk]
        for i in range(4):
            with T.block("b"):
                vi = T.axis.spatial(4, i)
                b[vi] = tmp[vi] + T.float32(1)

    @R.function
    def main(x: R.Tensor((4, 4), "float32"), y: R.Tensor((4, 4), "float32")) -> R.Tensor((8,), "float32"):
        cls = Module
        with R.dataflow():
            u = R.call_tir(cls.rsum, (x,), out_sinfo=R.Tensor((4,), "float32"))
            v = R.call_tir(cls.rsum, (y,), out_sinfo=R.Tensor((4,), "float32"))
            w = R.concat((u, v), axis=0)
            R.output(w)
        return w
''')
    rewritten = concat_in_place(LegalizeOps()(mod))
    copies = [name for name in rewritten if name.startswith("rsum_in_")]
    assert len(copies) == 2 and all(rewritten[name].attrs["global_symbol"] == name for name in copies)
    x, y = (np.random.default_rng(seed).standard_normal((4, 4)).astype("float32") for seed in (1, 2))
    vm = relax.VirtualMachine(tvms.compile(mod, target="llvm"), tvms.cpu())
    np.testing.assert_allclose(vm["main"](x, y).numpy(), np.concatenate([x.sum(1), y.sum(1)]) + 1, rtol=1e-5)
