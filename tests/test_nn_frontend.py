"""tvms.relax.frontend.nn: models export to the Relax text TVM prints, byte for byte, in both
dialects (goldens: the seeds' printed MLPs, the TVM 0.27 corpus, tests/fixtures/nn_frontend)."""
from __future__ import annotations

import pathlib

import numpy as np
import pytest
from conftest import CORPUS_COPY, FIXTURES

import tvms as tvm
from tvms import relax
from tvms.ir import first_mismatch, structural_equal
from tvms.relax.frontend import nn
from tvms.script import from_source

GOLDEN = FIXTURES / "nn_frontend"
SEEDS = FIXTURES / "seeds_relax"


class MLP(nn.Module):
    """The MLPs of the seeds: 784 -> hidden -> 10."""

    def __init__(self, hidden: int = 256, bias1: bool = True, bias2: bool = True):
        super().__init__()
        self.fc1 = nn.Linear(784, hidden, bias=bias1)
        self.relu1 = nn.ReLU()
        self.fc2 = nn.Linear(hidden, 10, bias=bias2)

    def forward(self, x):
        x = self.fc1(x)
        x = self.relu1(x)
        x = self.fc2(x)
        return x


def export(model: nn.Module, shape: tuple) -> tuple:
    return model.export_tvm(spec={"forward": {"x": nn.spec.Tensor(shape, "float32")}})


def assert_roundtrip(mod: tvm.IRModule) -> None:
    for dialect in ("classic", "tvm-0.27"):
        back = from_source(mod.script(dialect=dialect))
        assert structural_equal(mod, back), (dialect, first_mismatch(mod, back))


# (model, input shape, [(dialect, golden file), ...], parameter names)
MLPS = {
    "seed000": (lambda: MLP(256, True, False), (1, 784),
                [("classic", SEEDS / "seed000_relax_mlp_exported.tvms"),
                 ("tvm-0.27", GOLDEN / "seed000_mlp_exported.tvms")],
                ["fc1.weight", "fc1.bias", "fc2.weight"]),
    "seed003": (lambda: MLP(128), ("n", 784),
                [("classic", SEEDS / "seed003_relax_mlp_exported.tvms"),
                 ("tvm-0.27", GOLDEN / "seed003_mlp_exported.tvms")],
                ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]),
    "corpus_bias_dyn": (lambda: MLP(256), ("n", 784),
                        [("tvm-0.27", CORPUS_COPY / "mlp_bias_dyn_01_exported.tvms")],
                        ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]),
    "corpus_nobias_static": (lambda: MLP(256, False, False), (1, 784),
                             [("tvm-0.27", CORPUS_COPY / "mlp_nobias_static_01_exported.tvms")],
                             ["fc1.weight", "fc2.weight"]),
}


@pytest.mark.parametrize("case", list(MLPS))
def test_mlp_export_prints_as_tvm(case: str) -> None:
    make, shape, goldens, names = MLPS[case]
    mod, params = export(make(), shape)
    for dialect, path in goldens:
        want = path.read_text()
        assert mod.script(dialect=dialect) == want, dialect
        parsed = from_source(want)
        assert structural_equal(mod, parsed), first_mismatch(mod, parsed)
    assert [n for n, _ in params] == names
    assert_roundtrip(mod)


def test_mlp_params_and_signature() -> None:
    model = MLP(128)
    mod, params = export(model, ("n", 784))
    assert [(n, p.shape, p.dtype) for n, p in params] == [
        ("fc1.weight", [128, 784], "float32"), ("fc1.bias", [128], "float32"),
        ("fc2.weight", [10, 128], "float32"), ("fc2.bias", [10], "float32")]
    assert all(isinstance(p, nn.Parameter) for _, p in params)
    assert [p for _, p in params] == list(model.parameters())
    func = mod["forward"]
    assert [p.name for p in func.params] == ["x", "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]
    assert dict(func.attrs) == {"num_input": 1, "global_symbol": "forward"}
    n = func.params[0].struct_info.dims[0]
    assert isinstance(n, tvm.ir.Var) and n.name == "n" and func.ret_struct_info.dims[0] is n
    (block,) = func.body.blocks
    assert isinstance(block, relax.DataflowBlock)
    assert [b.var.name for b in block.bindings] == ["permute_dims", "matmul", "add", "relu", "permute_dims1",
                                                    "matmul1", "add1", "gv"]
    assert all(isinstance(b.var, relax.DataflowVar) for b in block.bindings[:-1])
    assert type(block.bindings[-1].var) is relax.Var and func.body.body is block.bindings[-1].var


# ---------------------------------------------------------------- more layers (TVM goldens)
class Block(nn.Module):
    def __init__(self):
        self.norm = nn.LayerNorm(64)
        self.layers = nn.ModuleList([nn.Linear(64, 64), nn.Linear(64, 64, bias=False)])
        self.act = nn.GELU()
        self.rms = nn.RMSNorm(64, axes=-1, bias=False)
        self.silu = nn.SiLU()

    def forward(self, x):
        h = self.norm(x)
        for layer in self.layers:
            h = self.act(layer(h))
        h = self.rms(h) * 2.0 + x
        return self.silu(h)

    def head(self, x):
        return self.silu(x)


class Conv(nn.Module):
    def __init__(self):
        self.conv = nn.Conv2D(3, 8, 3, padding=1)
        self.emb = nn.Embedding(100, 16)

    def forward(self, img, ids):
        return self.conv(img), self.emb(ids)


class Functional(nn.Module):
    def __init__(self):
        self.w = nn.Parameter((16, "k"), "float32")

    def forward(self, x, y):
        a = nn.op.matmul(x, self.w)
        b = nn.op.permute_dims(a, [1, 0])
        c = nn.softmax(b, axis=0)
        d = nn.op.reshape(c, [-1])
        e = nn.op.take(d, y, axis=0)
        f = nn.op.concat([e, e], dim=0)
        g = nn.op.sum(f, axis=0, keepdims=True)
        h = nn.relu(g - 1.0) / 2.0
        return nn.op.exp(h), nn.op.split(f, 2)


def check_golden(mod: tvm.IRModule, name: str) -> None:
    want = (GOLDEN / f"{name}.tvms").read_text()
    assert mod.script(dialect="tvm-0.27") == want
    parsed = from_source(want)
    assert structural_equal(mod, parsed), first_mismatch(mod, parsed)
    assert_roundtrip(mod)


def test_layer_norm_module_list_gelu_rms_norm_silu() -> None:
    mod, params = Block().export_tvm({"forward": {"x": nn.spec.Tensor(("b", "s", 64), "float32")}})
    check_golden(mod, "block_layers")
    assert [(n, p.shape) for n, p in params] == [
        ("norm.weight", [64]), ("norm.bias", [64]), ("layers.0.weight", [64, 64]), ("layers.0.bias", [64]),
        ("layers.1.weight", [64, 64]), ("rms.weight", [64])]


def test_conv2d_and_embedding() -> None:
    mod, params = Conv().export_tvm({"forward": {"img": nn.spec.Tensor((1, 3, 32, 32), "float32"),
                                                 "ids": nn.spec.Tensor(("n", 4), "int32")}})
    check_golden(mod, "conv_embedding")
    assert [(n, p.shape) for n, p in params] == [("conv.weight", [8, 3, 3, 3]), ("conv.bias", [8]),
                                                 ("emb.weight", [100, 16])]
    assert mod["forward"].attrs["num_input"] == 2


def test_functional_ops_and_symbolic_parameter() -> None:
    mod, params = Functional().export_tvm({"forward": {"x": nn.spec.Tensor(("m", 16), "float32"),
                                                       "y": nn.spec.Tensor((3,), "int64")}})
    check_golden(mod, "functional_ops")
    ((name, w),) = params
    assert name == "w" and w.shape[0] == 16 and isinstance(w.shape[1], tvm.ir.Var)


def test_packed_and_no_params_two_methods() -> None:
    mod, _ = Block().export_tvm({
        "forward": {"x": nn.spec.Tensor((2, 64), "float32"), "$": {"param_mode": "packed"}},
        "head": {"x": nn.spec.Tensor((2, 64), "float32"), "$": {"param_mode": "none"}}})
    check_golden(mod, "packed_params_two_methods")
    assert [gv.name_hint for gv in mod.get_global_vars()] == ["forward", "head"]


class IntInput(nn.Module):
    def __init__(self):
        self.body = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2, bias=False))

    def forward(self, x, k):
        return self.body(x)


def export_int_input() -> tuple:
    return IntInput().export_tvm({"forward": {"x": nn.spec.Tensor(("k", 4), "float32"), "k": int}})


def test_sequential_and_int_input() -> None:
    mod, params = export_int_input()
    want = (GOLDEN / "int_input.tvms").read_text()  # TVM's, with nn.ModuleList for Sequential
    assert mod.script(dialect="tvm-0.27") == want
    back = from_source(want)
    assert structural_equal(mod, back), first_mismatch(mod, back)
    assert [n for n, _ in params] == ["body.0.weight", "body.0.bias", "body.2.weight"]
    func = mod["forward"]
    assert [p.name for p in func.params] == ["x", "k", "body.0.weight", "body.0.bias", "body.2.weight"]
    k = func.params[0].struct_info.dims[0]
    assert func.params[1].struct_info.values == (k,)  # R.Shape([k]) shares the size of x


def test_int_input_classic_roundtrip() -> None:
    mod, _ = export_int_input()
    back = from_source(mod.script())
    assert structural_equal(mod, back), first_mismatch(mod, back)


# ---------------------------------------------------------------- the Module API
def test_state_dict_and_parameter_data() -> None:
    model = MLP(8)
    assert list(model.state_dict()) == ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]
    w = model.fc1.weight
    w.data = np.zeros((8, 784), "float32")
    with pytest.raises(tvm.TVMSError, match="shape mismatch"):
        w.data = np.zeros((784, 8), "float32")
    other = MLP(8)
    other.load_state_dict({"fc1.weight": w}, strict=False)
    assert other.fc1.weight.data is w.data
    with pytest.raises(tvm.TVMSError, match="missing keys"):
        other.load_state_dict({"fc1.weight": w})
    with pytest.raises(tvm.TVMSError, match="lose precision"):
        model.to("float16")  # fc1.weight holds data
    fresh = MLP(8)
    fresh.to("float16")
    assert fresh.fc2.weight.dtype == "float16" and fresh.fc1.bias.dtype == "float16"


def test_frontend_errors() -> None:
    with pytest.raises(tvm.TVMSError, match="only run inside Module.export_tvm"):
        nn.relu(nn.Tensor.placeholder((2,), "float32"))
    with pytest.raises(tvm.TVMSError, match="does not take"):
        MLP().export_tvm({"forward": {"y": nn.spec.Tensor((1, 784), "float32")}})
    with pytest.raises(tvm.TVMSError, match="no method 'backward'"):
        MLP().export_tvm({"backward": {"x": nn.spec.Tensor((1, 784), "float32")}})
    with pytest.raises(tvm.TVMSError, match=r"R.matmul"):  # 784 against 100: inference fails
        MLP().export_tvm({"forward": {"x": nn.spec.Tensor((1, 100), "float32")}})
    assert relax.BlockBuilder.current() is None  # a failed export leaves no builder behind


def test_face_is_the_tvm_shape() -> None:
    import tvms.relax.frontend.nn as nn_module

    assert nn_module is nn and tvm.relax.frontend.nn is nn
    assert nn.op.matmul is nn.matmul and nn.spec.Tensor((1,), "float32").shape == [1]
    assert pathlib.Path(nn.__file__).parent.name == "frontend"  # the face lives in api/relax/frontend
