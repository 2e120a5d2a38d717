"""BlockChannels: a network's convolutions and the operators between them on NCHW16c data, checked
against the numpy reference of the plain program, and by what stays plain."""
from __future__ import annotations

import hypothesis.strategies as st
import numpy as np
from hypothesis import HealthCheck, given, settings

import tvms
from tvms import relax
from tvms.ir import relax as rx
from tvms.lowering.relax.block_channels import BlockChannels
from tvms.lowering.transform import PassContext
from tvms.runtime.reference_relax import run_relax
from tvms.script import from_source

# a first conv on 3 channels, a per-channel bias as (C, 1, 1), relu, two branches concatenated,
# a residual add, batch norm's scale and shift as (1, C, 1, 1), pooling, a global mean, a reshape
NETWORK = """# from tvm.script import ir as I
# from tvm.script import relax as R

@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((1, 3, 18, 18), dtype="float32"), w0: R.Tensor((32, 3, 3, 3), dtype="float32"), b0: R.Tensor((32, 1, 1), dtype="float32"), w1: R.Tensor((16, 32, 1, 1), dtype="float32"), w2: R.Tensor((16, 32, 3, 3), dtype="float32"), s: R.Tensor((1, 32, 1, 1), dtype="float32")) -> R.Tensor((1, 32), dtype="float32"):
        with R.dataflow():
            c0 = R.nn.conv2d(x, w0, strides=[2, 2], padding=[1, 1, 1, 1])
            a0 = R.add(c0, b0)
            r0 = R.nn.relu(a0)
            c1 = R.nn.conv2d(r0, w1)
            c2 = R.nn.conv2d(r0, w2, padding=[1, 1, 1, 1])
            cat = R.concat((c1, c2), axis=1)
            res = R.add(cat, r0)
            bn = R.multiply(res, s)
            bn1 = R.add(bn, s)
            clipped = R.clip(bn1, R.prim_value(T.float32(0)), R.prim_value(T.float32(6)))
            pooled = R.nn.max_pool2d(clipped, pool_size=[3, 3], strides=[2, 2], padding=[1, 1, 1, 1])
            mean = R.mean(pooled, axis=[2, 3], keepdims=True)
            gv = R.reshape(mean, R.shape([1, 32]))
            R.output(gv)
        return gv
"""


def inputs() -> list:
    rng = np.random.default_rng(1)
    shapes = [(1, 3, 18, 18), (32, 3, 3, 3), (32, 1, 1), (16, 32, 1, 1), (16, 32, 3, 3), (1, 32, 1, 1)]
    return [rng.random(s, dtype=np.float32) - 0.25 for s in shapes]


def calls(mod: tvms.IRModule, name: str) -> list:
    found = []
    for block in mod["main"].body.blocks:
        for b in block.bindings:
            if isinstance(b.value, rx.Call) and getattr(b.value.op, "name", "") == f"relax.{name}":
                found.append(b.value)
    return found


def test_the_network_runs_blocked_and_computes_as_plain():
    mod = from_source(NETWORK.replace("# from tvm.script import relax as R",
                                      "# from tvm.script import relax as R\n# from tvm.script import tir as T"))
    blocked = BlockChannels(16)(mod)
    convs = calls(blocked, "nn.conv2d")
    assert [(c.attrs["data_layout"], c.attrs["kernel_layout"], c.attrs["out_layout"]) for c in convs] == [
        ("NCHW", "OIHW16o", "NCHW16c"), ("NCHW16c", "OIHW16i16o", "NCHW16c"), ("NCHW16c", "OIHW16i16o", "NCHW16c")]
    assert calls(blocked, "nn.max_pool2d")[0].attrs["layout"] == "NCHW16c"
    # the data goes back to NCHW once, for the reshape, after the mean; the others relay weights
    # and per-channel operands
    data_moves = [c for c in calls(blocked, "layout_transform") if len(c.args[0].struct_info.dims) == 5]
    assert len(data_moves) == 1 and [d.value for d in data_moves[0].args[0].struct_info.dims] == [1, 2, 1, 1, 16]
    args = inputs()
    expected = np.asarray(run_relax(mod, "main", *args))
    np.testing.assert_allclose(np.asarray(run_relax(blocked, "main", *args)), expected, rtol=1e-5, atol=1e-6)
    with PassContext(config={"relax.BlockChannels.enable": True}):
        vm = relax.VirtualMachine(tvms.compile(mod, "llvm"), tvms.cpu())
    np.testing.assert_allclose(vm["main"](*map(tvms.nd.array, args)).numpy(), expected, rtol=1e-4, atol=1e-5)


def test_what_it_leaves_plain():
    text = NETWORK
    mod = from_source(text.replace("# from tvm.script import relax as R",
                                   "# from tvm.script import relax as R\n# from tvm.script import tir as T")
                      .replace("c1 = R.nn.conv2d(r0, w1)", "c1 = R.nn.conv2d(r0, w1, groups=2)")
                      .replace("w1: R.Tensor((16, 32, 1, 1)", "w1: R.Tensor((16, 16, 1, 1)"))
    blocked = BlockChannels(16)(mod)
    layouts = [c.attrs["out_layout"] for c in calls(blocked, "nn.conv2d")]
    assert layouts == ["NCHW16c", "NCHW", "NCHW16c"]  # (a grouped conv stays NCHW)
    # after a softmax over the channels (plain), the first conv's region would hold it alone: it
    # stays NCHW (a relayout for nothing: AlexNet's first layer before its normalization); the two
    # convs after it read relaid-out inputs and start a region of their own, joined by the concat
    after_plain = BlockChannels(16)(from_source(NETWORK.replace(
        "# from tvm.script import relax as R", "# from tvm.script import relax as R\n# from tvm.script import tir as T")
        .replace("c2 = R.nn.conv2d(r0, w2, padding=[1, 1, 1, 1])", "c2 = R.nn.conv2d(a0, w2, padding=[1, 1, 1, 1])")
        .replace("a0 = R.add(c0, b0)", "a0 = R.nn.softmax(c0, axis=1)")))
    assert [c.attrs["out_layout"] for c in calls(after_plain, "nn.conv2d")] == ["NCHW", "NCHW16c", "NCHW16c"]
    # its input goes back to NCHW for it (once), and the concat of a plain and a blocked part is blocked
    assert len([c for c in calls(blocked, "layout_transform") if len(c.args[0].struct_info.dims) == 5]) == 2
    assert calls(blocked, "concat")[0].struct_info.ndim == 5


PADDED = """# from tvm.script import ir as I
# from tvm.script import relax as R

@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((1, 3, 5, 5), dtype="float32"), w0: R.Tensor((32, 3, 3, 3), dtype="float32"), w: R.Tensor((72, 32, 1, 1), dtype="float32"), b: R.Tensor((72, 1, 1), dtype="float32")) -> R.Tensor((1, 72), dtype="float32"):
        with R.dataflow():
            c0 = R.nn.conv2d(x, w0, padding=[1, 1, 1, 1])
            r0 = R.nn.relu(c0)
            c = R.nn.conv2d(r0, w)
            a = R.add(c, b)
            r = R.nn.relu(a)
            m = R.mean(r, axis=[2, 3], keepdims=True)
            gv = R.reshape(m, R.shape([1, 72]))
            R.output(gv)
        return gv
"""


def test_output_channels_padded_to_whole_blocks_and_dropped_at_the_end():
    """72 classes: 8 zero filters fill the fifth block (as SqueezeNet's 1000 to 1008); the
    per-channel bias is padded along, and the channels added are dropped going back to NCHW."""
    mod = from_source(PADDED)
    blocked = BlockChannels(16)(mod)
    assert calls(blocked, "nn.conv2d")[1].struct_info.dims[1].value == 5
    assert [d.value for d in calls(blocked, "strided_slice")[0].struct_info.dims] == [1, 72, 1, 1]
    rng = np.random.default_rng(2)
    args = [rng.random(s, dtype=np.float32) - 0.5 for s in ((1, 3, 5, 5), (32, 3, 3, 3), (72, 32, 1, 1), (72, 1, 1))]
    expected = np.asarray(run_relax(mod, "main", *args))
    with PassContext(config={"relax.BlockChannels.enable": True}):
        vm = relax.VirtualMachine(tvms.compile(mod, "llvm"), tvms.cpu())
    np.testing.assert_allclose(vm["main"](*map(tvms.nd.array, args)).numpy(), expected, rtol=1e-4, atol=1e-5)
    # 72 -> 80 costs little; 20 -> 32 would not: left NCHW, and so is the first conv, alone then
    few = BlockChannels(16)(from_source(PADDED.replace("72", "20")))
    assert [c.attrs["out_layout"] for c in calls(few, "nn.conv2d")] == ["NCHW", "NCHW"]


def test_compile_caches_each_setting_apart():
    mod = from_source(PADDED)
    with PassContext(config={"relax.BlockChannels.enable": True}):
        blocked = tvms.compile(mod, "llvm")
    with PassContext(config={"relax.BlockChannels.enable": False}):
        plain = tvms.compile(mod, "llvm")
    assert any("conv2d_NCHWc" in name for name in blocked.kernels().functions)
    assert not any("NCHWc" in name for name in plain.kernels().functions)


# -- the property: random small conv networks compute the same blocked (16 and 8 lanes) as plain
@st.composite
def conv_networks(draw):
    """(module, inputs): a first conv from 3 channels, then up to five layers drawn from convs
    (groups of one or two, 1x1 or 3x3, strided or not), relu, a per-channel add or multiply,
    a residual add, pooling, a concatenation, a softmax over the channels (which needs NCHW),
    ending with a mean over (H, W) or the last tensor."""
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    bb = relax.BlockBuilder()
    size, batch = draw(st.integers(5, 9)), draw(st.sampled_from([1, 1, 2]))
    x = relax.Var("x", relax.TensorStructInfo((batch, 3, size, size), "float32"))
    args = [rng.random((batch, 3, size, size), dtype=np.float32) - 0.5]

    def weight(shape):
        return relax.const(rng.random(shape, dtype=np.float32) - 0.5)

    def conv(value, channels, filters, groups=1):
        k, s = draw(st.sampled_from([(1, 1), (3, 1), (3, 2)]))
        w = weight((filters, channels // groups, k, k))
        return bb.emit(relax.op.nn.conv2d(value, w, strides=[s, s], padding=[k // 2] * 4, groups=groups))

    layers = []
    ops = relax.op
    with bb.function("main", [x]):
        with bb.dataflow():
            value = conv(x, 3, draw(st.sampled_from([16, 32, 72, 20])))
            for _ in range(draw(st.integers(0, 5))):
                shape = [d.value for d in value.struct_info.dims]
                c = shape[1]
                kind = draw(st.sampled_from(["conv", "relu", "channel", "residual", "pool", "concat", "softmax"]))
                if kind == "conv":
                    groups = 2 if c % 2 == 0 and draw(st.booleans()) else 1
                    value = conv(value, c, draw(st.sampled_from([16, 32, 48])), groups)
                elif kind == "relu":
                    value = bb.emit(ops.nn.relu(value))
                elif kind == "channel":
                    operand = weight(draw(st.sampled_from([(c, 1, 1), (1, c, 1, 1)])))
                    value = bb.emit(draw(st.sampled_from([ops.add, ops.multiply]))(value, operand))
                elif kind == "residual":
                    same = [v for v in layers if [d.value for d in v.struct_info.dims] == shape]
                    value = bb.emit(ops.add(value, draw(st.sampled_from(same)) if same else value))
                elif kind == "pool" and shape[2] > 2:
                    pool = draw(st.sampled_from([ops.nn.max_pool2d, ops.nn.avg_pool2d]))
                    value = bb.emit(pool(value, pool_size=[3, 3], strides=[2, 2], padding=[1, 1, 1, 1]))
                elif kind == "concat":
                    spatial = [v for v in layers if [d.value for d in v.struct_info.dims][2:] == shape[2:]]
                    other = draw(st.sampled_from(spatial)) if spatial else value
                    value = bb.emit(ops.concat([value, other], axis=1))
                elif kind == "softmax":
                    value = bb.emit(ops.nn.softmax(value, axis=1))
                layers.append(value)
            if draw(st.booleans()):
                value = bb.emit(ops.mean(value, axis=[2, 3], keepdims=True))
            out = bb.emit_output(value)
        bb.emit_func_output(out)
    return bb.get(), args


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conv_networks(), st.sampled_from([16, 8]))
def test_blocked_networks_compute_as_plain(network, block):
    mod, args = network
    expected = np.asarray(run_relax(mod, "main", *args))
    blocked = BlockChannels(block)(mod)
    np.testing.assert_allclose(np.asarray(run_relax(blocked, "main", *args)), expected, rtol=1e-4, atol=1e-4)


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conv_networks())
def test_blocked_networks_compile_to_what_plain_ones_compute(network):
    """The same networks through tvms.compile (the blocked kernels' default schedules) against the
    reference executor on the plain program."""
    mod, args = network
    expected = np.asarray(run_relax(mod, "main", *args))
    vm = relax.VirtualMachine(tvms.compile(mod, "llvm"), tvms.cpu())
    np.testing.assert_allclose(vm["main"](*map(tvms.nd.array, args)).numpy(), expected, rtol=1e-4, atol=1e-4)


def two_convs_and_concat(bb, x, weights, part):
    """conv (3 -> 16), relu, conv (16 -> 16), then concatenated with ``part`` (plain, 16 channels)."""
    first = bb.emit(relax.op.nn.relu(bb.emit(relax.op.nn.conv2d(x, weights[0], padding=[1, 1, 1, 1]))))
    second = bb.emit(relax.op.nn.conv2d(first, weights[1]))
    return bb.emit(relax.op.concat([second, part], axis=1))


def test_an_operand_relaid_out_in_one_block_is_relaid_out_again_in_the_next():
    """The relaid-out copy of a plain operand (a parameter, a shared constant) is a variable of its
    own dataflow block: a second block, or a second function, makes its own."""
    rng = np.random.default_rng(3)
    weights = [relax.const(rng.random(s, dtype=np.float32) - 0.5) for s in ((16, 3, 3, 3), (16, 16, 1, 1))]
    k = relax.const(rng.random((1, 16, 6, 6), dtype=np.float32))
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorStructInfo((1, 3, 6, 6), "float32"))
    y = relax.Var("y", relax.TensorStructInfo((1, 16, 6, 6), "float32"))
    with bb.function("main", [x, y]):
        with bb.dataflow():
            first = bb.emit_output(two_convs_and_concat(bb, x, weights, y))
        twice = bb.emit(relax.op.multiply(first, first))
        with bb.dataflow():
            second = bb.emit_output(relax.op.add(two_convs_and_concat(bb, x, weights, y), twice))
        bb.emit_func_output(second)
    for name in ("f1", "f2"):
        with bb.function(name, [x]):
            with bb.dataflow():
                out = bb.emit_output(relax.op.nn.relu(two_convs_and_concat(bb, x, weights, k)))
            bb.emit_func_output(out)
    mod = bb.get()
    assert len(calls(BlockChannels(16)(mod), "concat")) == 2  # (blocked, its plain part relaid out)
    args = [rng.random((1, 3, 6, 6), dtype=np.float32), rng.random((1, 16, 6, 6), dtype=np.float32)]
    executable = tvms.compile(mod, "llvm")
    for name, inputs in (("main", args), ("f1", args[:1]), ("f2", args[:1])):
        got = relax.VirtualMachine(executable, tvms.cpu())[name](*map(tvms.nd.array, inputs)).numpy()
        np.testing.assert_allclose(got, np.asarray(run_relax(mod, name, *inputs)), rtol=1e-5, atol=1e-5)


def test_a_half_precision_first_layer_accumulating_in_float32():
    rng = np.random.default_rng(4)
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorStructInfo((1, 3, 6, 6), "float16"))
    w = relax.const(rng.random((32, 3, 3, 3)).astype(np.float16))
    w1 = relax.const(rng.random((16, 32, 1, 1), dtype=np.float32))
    with bb.function("main", [x]):
        with bb.dataflow():
            conv = bb.emit(relax.op.nn.conv2d(x, w, padding=[1, 1, 1, 1], out_dtype="float32"))
            second = bb.emit(relax.op.nn.conv2d(bb.emit(relax.op.nn.relu(conv)), w1))
            out = bb.emit_output(relax.op.nn.relu(second))
        bb.emit_func_output(out)
    mod = bb.get()
    assert calls(BlockChannels(16)(mod), "nn.conv2d")[0].attrs["out_layout"] == "NCHW16c"
    data = rng.random((1, 3, 6, 6)).astype(np.float16)
    got = relax.VirtualMachine(tvms.compile(mod, "llvm"), tvms.cpu())["main"](tvms.nd.array(data)).numpy()
    np.testing.assert_allclose(got, np.asarray(run_relax(mod, "main", data)), rtol=1e-4, atol=1e-4)


def test_which_targets_block_their_channels():
    from tvms.lowering.build import _layout_passes
    from tvms.target import Target

    blocks = lambda target: [p.block for p in _layout_passes(Target(target)) if isinstance(p, BlockChannels)]
    assert blocks("llvm -mattr=+avx512f,+avx2,+fma") == [16]
    assert blocks("llvm -mattr=+avx2,+fma") == [8]
    # a named x86 CPU without -mattr: the lanes LLVM gives it
    assert blocks("llvm -mcpu=skylake-avx512") == [16] and blocks("llvm -mcpu=haswell") == [8]
    # ... with -mattr added to or taken from its features
    assert blocks("llvm -mcpu=skylake-avx512 -mattr=+fma") == [16]
    assert blocks("llvm -mcpu=skylake-avx512 -mattr=-avx512f") == [8]
    # too few lanes, or another architecture (which the llvm target refuses): NCHW
    assert blocks("llvm -mcpu=x86-64") == blocks("llvm -mtriple=aarch64-linux-gnu") == []
    assert blocks("llvm -mattr=+sse2") == []
    with PassContext(config={"relax.BlockChannels.enable": False}):
        assert blocks("llvm -mattr=+avx512f") == []
