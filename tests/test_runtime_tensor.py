"""Runtime devices (runtime/device.py), tensors (runtime/tensor.py, ``tvms.nd``) and the global
function registry (ir/registry.py), against Apache TVM 0.27's observable behaviour
(fixtures/runtime/tvm027_devices_tensors.json, made by the script beside it)."""
from __future__ import annotations

import importlib
import importlib.util
import re
import json

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tvms as tvm
from tvms import TVMSError
from tvms.ir import registry
from tvms.runtime import reference_relax
from tvms.runtime.reference_relax import run_relax
from tvms.runtime.tensor import ALIGNMENT, TENSOR_DTYPES
from tvms.script import from_source

from conftest import FIXTURES

GOLDEN = json.loads((FIXTURES / "runtime" / "tvm027_devices_tensors.json").read_text())
RNG = np.random.default_rng(5)
# (``tvms.runtime.device`` is the function, as in TVM; the module is reached by its full name)
device_module = importlib.import_module("tvms.runtime.device")


def aligned(t: tvm.nd.Tensor) -> bool:
    return t.array.flags.c_contiguous and (t.array.size == 0 or t.array.ctypes.data % ALIGNMENT == 0)


# --------------------------------------------------------------------------- devices


@pytest.mark.parametrize("case", GOLDEN["devices"], ids=lambda c: repr(tuple(c["args"])))
def test_device_prints_and_codes_as_tvm(case: dict) -> None:
    dev = tvm.device(*case["args"])
    assert (repr(dev), str(dev), dev.type, dev.index, dev.dlpack_device_type()) == \
        (case["repr"], case["str"], case["type"], case["index"], case["dlpack_device_type"])
    assert (dev.device_type, dev.device_id) == (case["dlpack_device_type"], case["index"])


def test_device_shortcuts_and_equality() -> None:
    made = {"cpu()": tvm.cpu(), "cpu(2)": tvm.cpu(2), "cuda()": tvm.cuda(), "cuda(1)": tvm.cuda(1)}
    assert {k: repr(v) for k, v in made.items()} == GOLDEN["shortcuts"]
    assert tvm.cpu(0) == tvm.device("cpu", 0) == tvm.device("cpu:0") == tvm.runtime.Device(1, 0)
    assert tvm.cpu(0) != tvm.cpu(1) and tvm.cpu(0) != tvm.cuda(0)
    assert len({tvm.cpu(), tvm.cpu(0), tvm.device("cpu"), tvm.cuda()}) == 2
    assert tvm.device(tvm.cuda(1)) == tvm.cuda(1) and tvm.device(tvm.cuda(1), 0) == tvm.cuda(0)


def test_cpu_exists_and_cuda_needs_cuda_python_and_a_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    assert tvm.cpu().exist and tvm.cpu(3).exist
    tvm.cpu().sync()
    if importlib.util.find_spec("cuda") is None:  # this machine: no cuda-python
        assert not tvm.cuda(0).exist
        with pytest.raises(TVMSError, match="cannot synchronize cuda:0: cuda-python is not installed"):
            tvm.cuda(0).sync()
    monkeypatch.setattr(device_module, "cuda_device_count", lambda: 2)  # a driver with two GPUs
    assert tvm.cuda(0).exist and tvm.cuda(1).exist and not tvm.cuda(2).exist


@pytest.mark.parametrize("args,message", [
    (("foo",), "unknown device 'foo'; tvms knows 'cpu', 'cuda'"),
    (("llvm",), r"'llvm' \(a target, not a device: use tvms.cpu\(\)\)"),
    (("cpu", -1), "a device index is a non-negative integer, not -1"),
    (("cuda:x",), "the device index in 'cuda:x' is not a non-negative integer"),
    (("cuda:1", 2), "already names its index"),
    ((7, 0), r"unknown device type code 7: tvms knows 1 \(cpu\), 2 \(cuda\)"),
    ((1.5,), "named by a string"),
])
def test_bad_devices(args: tuple, message: str) -> None:
    with pytest.raises(TVMSError, match=message):
        tvm.device(*args)


# --------------------------------------------------------------------------- tensors


def test_seed_patterns() -> None:
    """What the seed tutorials write, with ``import tvms as tvm``."""
    a_np = np.random.rand(128, 128).astype("float32")
    a = tvm.nd.array(a_np)
    c = tvm.nd.empty((128, 128), "float32")
    b = tvm.runtime.tensor(np.random.rand(*a_np.shape).astype("float32"), device=tvm.cpu())
    assert isinstance(a, tvm.nd.NDArray) and isinstance(b, tvm.runtime.Tensor)
    assert (a.shape, a.dtype, a.device, c.shape, c.dtype) == \
        ((128, 128), "float32", tvm.cpu(0), (128, 128), "float32")
    np.testing.assert_array_equal(a.numpy(), a_np)
    c.copyfrom(a.numpy() + b.numpy())
    np.testing.assert_array_equal(c.numpy(), a_np + b.numpy())
    assert all(aligned(t) for t in (a, b, c))


@pytest.mark.parametrize("text", [k for k in GOLDEN["tensors"] if not k.startswith("empty")])
def test_tensor_from_python_values_as_tvm(text: str) -> None:
    want = GOLDEN["tensors"][text]
    t = tvm.runtime.tensor(eval(text))  # the literals of the fixture's keys
    assert (list(t.shape), t.dtype, t.numpy().tolist()) == (want["shape"], want["dtype"], want["numpy"])


@pytest.mark.parametrize("dtype", TENSOR_DTYPES)
def test_empty_of_every_dtype_as_tvm(dtype: str) -> None:
    want = GOLDEN["tensors"][f"empty((2, 3), {dtype!r})"]
    t = tvm.nd.empty((2, 3), dtype)
    assert (list(t.shape), t.dtype, list(t.__dlpack_device__())) == \
        (want["shape"], want["dtype"], want["dlpack_device"])
    assert t.array.dtype == np.dtype(dtype) and aligned(t)


@given(hnp.arrays(st.sampled_from([np.dtype(d) for d in TENSOR_DTYPES]),
                  hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=5)))
def test_array_copies_into_aligned_memory(x: np.ndarray) -> None:
    t = tvm.nd.array(x)
    assert aligned(t) and t.shape == x.shape and t.dtype == x.dtype.name
    np.testing.assert_array_equal(t.numpy(), x)
    assert not np.shares_memory(t.array, x)


def test_numpy_returns_a_copy_and_array_copies_its_source() -> None:
    x = np.arange(6, dtype="float32").reshape(2, 3)
    t = tvm.nd.array(x)
    x[0, 0] = 100
    out = t.numpy()
    out[0, 1] = 200
    assert t.numpy()[0].tolist() == [0, 1, 2]
    assert tvm.nd.array(x[:, ::2]).numpy().tolist() == [[100, 2], [3, 5]]  # strided source
    assert tvm.nd.array(x.astype(">f4")).dtype == "float32"  # big-endian source: native copy
    assert tvm.nd.array([1, 2], dtype="float16").numpy().dtype == np.float16
    u = tvm.nd.array(t)  # from a tensor: a new tensor
    assert u.array is not t.array and u.numpy().tolist() == t.numpy().tolist()


def test_copyfrom_and_copyto_check_shapes_and_dtypes() -> None:
    t = tvm.nd.empty((2, 3), "float32")
    assert t.copyfrom(np.ones((2, 3))) is t  # float64 data: cast to float32, as TVM does
    assert t.numpy().dtype == np.float32 and t.numpy().sum() == 6
    t.copyfrom([[1, 2, 3], [4, 5, 6]])
    assert t.numpy().tolist() == [[1, 2, 3], [4, 5, 6]]
    with pytest.raises(TVMSError, match=r"copyfrom: the source has shape \(3, 2\), this tensor \(2, 3\)"):
        t.copyfrom(np.zeros((3, 2), "float32"))
    with pytest.raises(TVMSError, match="the source tensor has dtype int32, this tensor float32"):
        t.copyfrom(tvm.nd.empty((2, 3), "int32"))
    with pytest.raises(TVMSError, match="cannot make a tensor from list"):
        t.copyfrom([[1, 2, 3], [4]])
    with pytest.raises(TVMSError, match="cannot copy float64 data into a int32 tensor"):
        tvm.nd.empty((2, 3), "int32").copyfrom(np.ones((2, 3)))
    u = tvm.nd.empty((2, 3), "float32")
    assert t.copyto(u) is u and u.numpy().tolist() == t.numpy().tolist()
    v = t.copyto(tvm.cpu())
    assert v.array is not t.array and v.numpy().tolist() == t.numpy().tolist()
    with pytest.raises(TVMSError, match="copyto: expected a Tensor or a Device, not str"):
        t.copyto("cpu")


@pytest.mark.parametrize("call,message", [
    (lambda: tvm.nd.empty((2, -1)), r"a tensor shape is a tuple of non-negative integers, not \(2, -1\)"),
    (lambda: tvm.nd.empty((2, "n")), "non-negative integers"),
    (lambda: tvm.nd.empty(None), "a tensor shape is a tuple of integers, not None"),
    (lambda: tvm.nd.empty((2,), "float6"), "tensors of dtype 'float6' are not supported: tvms tensors hold bool"),
    (lambda: tvm.nd.empty((2,), "float32x4"), "'float32x4' are not supported"),
    (lambda: tvm.nd.empty((2,), "floot32"), "unknown data type 'floot32'"),
    (lambda: tvm.nd.array(np.zeros(2, complex)), "tensors cannot hold numpy complex128 data"),
    (lambda: tvm.nd.array(np.array(["a", 1], object)), "a string tensor holds str elements, not int"),
    (lambda: tvm.nd.array([1.5], dtype="string"), "a string tensor is made of str or bytes, not numpy float64"),
    (lambda: tvm.nd.array([b"\xff"]), "a string tensor's bytes must be UTF-8 text"),
    (lambda: np.from_dlpack(tvm.nd.array(["a"])), "a string tensor has no DLPack form"),
    (lambda: tvm.nd.array([[1, 2], [3]]), "cannot make a tensor from list"),
    (lambda: tvm.nd.array([1.0], device="cpu"), "device must be a tvms Device .* not str"),
    (lambda: tvm.nd.array([1, 2], dtype="float32x2"), "'float32x2' are not supported"),
    (lambda: tvm.runtime.Tensor([1.0]), "a Tensor wraps a numpy array, not list"),
    (lambda: tvm.runtime.Tensor(np.zeros((4, 4), "float32")[:, :2]), "must be C-contiguous"),
])
def test_bad_tensors(call, message: str) -> None:
    with pytest.raises(TVMSError, match=message):
        call()


def test_a_cuda_tensor_says_why_it_cannot_be() -> None:
    reason = device_module.missing_reason(tvm.cuda(0))
    if not reason:
        pytest.skip("this machine has a GPU (tests/test_cuda_runtime.py runs tensors on it)")
    with pytest.raises(TVMSError, match="cannot place a tensor on cuda:0: " + re.escape(reason)):
        tvm.nd.array(np.zeros(3, "float32"), device=tvm.cuda(0))
    with pytest.raises(TVMSError, match="cannot place a tensor on cuda:0"):
        tvm.nd.empty((3,), "float32", tvm.device("cuda", 0))
    with pytest.raises(TVMSError, match="a Tensor holds host memory, not cuda:0 memory"):
        tvm.runtime.Tensor(tvm.nd.empty((3,), "float32").array, tvm.cuda(0))


def test_repr_and_str() -> None:
    t = tvm.nd.array(np.arange(3, dtype="int32"))
    assert repr(t) == "<tvms.runtime.Tensor shape=(3,), cpu:0>\narray([0, 1, 2], dtype=int32)"
    assert str(t) == "[0 1 2]"


# --------------------------------------------------------------------------- DLPack


def test_dlpack_out_shares_memory() -> None:
    t = tvm.nd.array(np.arange(6, dtype="float32").reshape(2, 3))
    assert t.__dlpack_device__() == (1, 0)
    view = np.from_dlpack(t)
    view[1, 2] = -1  # a consumer writes: the tensor sees it
    assert t.numpy()[1, 2] == -1 and view.shape == (2, 3) and view.dtype == np.float32
    np.testing.assert_array_equal(np.asarray(t), t.numpy())


def test_dlpack_in_shares_memory() -> None:
    producer = tvm.nd.empty((4, 16), "float64").array  # aligned, contiguous memory of someone else
    producer[...] = RNG.standard_normal((4, 16))
    t = tvm.nd.from_dlpack(producer)
    assert (t.shape, t.dtype, t.device) == ((4, 16), "float64", tvm.cpu(0))
    producer[0, 0] = 42.0
    assert t.numpy()[0, 0] == 42.0
    assert tvm.runtime.from_dlpack(t).array is t.array  # a tvms tensor: the same memory


def test_dlpack_in_refuses_what_tvm_refuses() -> None:
    raw = tvm.nd.empty((65,), "uint8").array
    with pytest.raises(TVMSError, match="must start on a 64-byte boundary; tvms.nd.array copies"):
        tvm.nd.from_dlpack(raw[1:])
    with pytest.raises(TVMSError, match="must be C-contiguous"):
        tvm.nd.from_dlpack(tvm.nd.empty((4, 4), "float32").array.T)
    with pytest.raises(TVMSError, match="from_dlpack: list does not support DLPack"):
        tvm.nd.from_dlpack([1.0])
    frozen = tvm.nd.empty((4,), "float32").array
    frozen.flags.writeable = False
    with pytest.raises(TVMSError, match="must be writable"):
        tvm.nd.from_dlpack(frozen)

    class OnGPU:
        def __dlpack__(self, **kwargs):
            raise AssertionError("not reached: the device is checked first")

        def __dlpack_device__(self):
            return (2, 0)

    if not tvm.cuda(0).exist:
        with pytest.raises(TVMSError, match="from_dlpack: the data is on cuda:0: "):
            tvm.nd.from_dlpack(OnGPU())
    OnGPU.__dlpack_device__ = lambda self: (4, 0)  # (OpenCL)
    with pytest.raises(TVMSError, match=r"the data is on DLPack device \(4, 0\); tvms tensors live on the CPU"):
        tvm.nd.from_dlpack(OnGPU())


# --------------------------------------------------------------------------- the registry


@pytest.fixture
def clean_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """Registrations made by a test disappear after it."""
    monkeypatch.setattr(registry, "_FUNCTIONS", dict(registry._FUNCTIONS))


def test_register_and_get(clean_registry: None) -> None:
    @tvm.register_func("test.rt.add")
    def add(a, b):
        return a + b

    assert tvm.get_global_func("test.rt.add")(1, 2) == 3 and add(1, 2) == 3
    tvm.register_func("test.rt.sub", lambda a, b: a - b)
    assert tvm.get_global_func("test.rt.sub")(5, 2) == 3

    @tvm.register_func
    def test_rt_bare(x):
        return -x

    assert tvm.get_global_func("test_rt_bare")(2) == -2
    assert {"test.rt.add", "test.rt.sub", "test_rt_bare"} <= set(tvm.runtime.list_global_func_names())
    with pytest.raises(TVMSError, match=r"'test.rt.add' is already registered \(pass override=True"):
        tvm.register_func("test.rt.add", lambda a, b: 0)
    tvm.register_func("test.rt.add", lambda a, b: a * b, override=True)
    assert tvm.get_global_func("test.rt.add")(3, 4) == 12
    tvm.runtime.remove_global_func("test.rt.sub")
    assert tvm.get_global_func("test.rt.sub", allow_missing=True) is None
    with pytest.raises(TVMSError, match="no global function named 'test.rt.ad' is registered; "
                                        "did you mean 'test.rt.add'"):
        tvm.get_global_func("test.rt.ad")
    with pytest.raises(TVMSError, match="cannot remove 'test.rt.sub'"):
        tvm.runtime.remove_global_func("test.rt.sub")
    with pytest.raises(TVMSError, match="is not callable"):
        tvm.register_func("test.rt.number", 3)
    with pytest.raises(TVMSError, match="non-empty string"):
        tvm.register_func("", print)


def test_one_registry_for_relax_and_codegen() -> None:
    """The reference executor's old names and the codegen backends use the same registry."""
    assert reference_relax.register_func is tvm.register_func
    assert reference_relax.get_func is tvm.get_global_func
    from tvms.lowering.relax import cpu_blas
    assert tvm.get_global_func("relax.ext.cpu_blas") is cpu_blas.codegen


def test_seed002_environment_functions_run_from_relax(clean_registry: None) -> None:
    """Seed 002's MyModuleMixture: ``env.relu`` / ``env.linear`` registered with
    ``tvm.register_func(..., override=True)`` and reading their arguments through DLPack."""
    @tvm.register_func("env.linear", override=True)
    def numpy_linear(x, w, b, out):
        x, w, b, out = (np.from_dlpack(v) for v in (x, w, b, out))
        np.matmul(x, w.T, out=out)
        np.add(out, b, out=out)

    @tvm.register_func("env.relu", override=True)
    def numpy_relu(x, out):
        np.maximum(np.from_dlpack(x), 0, out=np.from_dlpack(out))

    mod = from_source((FIXTURES / "seeds_relax" / "input" / "seed002_mymodule_mixture.tvms").read_text())
    x = RNG.standard_normal((1, 784)).astype("float32")
    w0 = (RNG.standard_normal((128, 784)) * 0.05).astype("float32")
    b0 = RNG.standard_normal(128).astype("float32")
    w1 = (RNG.standard_normal((10, 128)) * 0.05).astype("float32")
    b1 = RNG.standard_normal(10).astype("float32")
    want = np.maximum(x @ w0.T + b0, 0) @ w1.T + b1
    np.testing.assert_allclose(run_relax(mod, "main", x, w0, b0, w1, b1), want, rtol=1e-4, atol=1e-5)


def test_call_packed_reaches_a_function_registered_on_the_face(clean_registry: None) -> None:
    tvm.register_func("test.rt.scale", lambda x, s: tvm.nd.array(x.numpy() * s))
    mod = from_source('''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((3,), "float32")):
        y = R.call_packed("test.rt.scale", x, R.prim_value(T.float32(3)), sinfo_args=(R.Tensor((3,), "float32"),))
        return y
''')
    x = np.arange(3, dtype="float32")
    np.testing.assert_array_equal(run_relax(mod, "main", x), x * 3)
    tvm.runtime.remove_global_func("test.rt.scale")
    with pytest.raises(TVMSError, match="no global function named 'test.rt.scale'"):
        run_relax(mod, "main", x)


def test_packed_functions_receive_tvm_tensors(clean_registry: None) -> None:
    """As in TVM, a registered function sees its tensors as NDArrays (shape, dtype, device,
    numpy(), copyfrom, DLPack), numbers as numbers, and its destination-passing output shared
    with the caller, both in the compiled VM and in the reference executor."""
    seen = []

    @tvm.register_func("test.rt.affine", override=True)
    def affine(x, s, out):
        seen.append((type(x), x.shape, x.dtype, str(x.device), type(s)))
        assert isinstance(out, tvm.nd.NDArray) and out.shape == (2, 3)
        out.copyfrom(x.numpy() * s + np.from_dlpack(x))

    mod = from_source('''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 3), "float32")):
        y = R.call_dps_packed("test.rt.affine", (x, R.prim_value(T.float32(2))), out_sinfo=R.Tensor((2, 3), "float32"))
        return y
''')
    x = np.arange(6, dtype="float32").reshape(2, 3)
    vm = tvm.relax.VirtualMachine(tvm.compile(mod), tvm.cpu())
    np.testing.assert_array_equal(vm["main"](x).numpy(), 3 * x)
    np.testing.assert_array_equal(run_relax(mod, "main", x), 3 * x)
    assert seen == [(tvm.nd.NDArray, (2, 3), "float32", "cpu:0", float)] * 2
