"""``nn.op``: the functional operators of the nn frontend (``nn.op.matmul(x, w)``, ``nn.relu(x)``).

Each emits one binding through the current BlockBuilder, named by ``name`` (the defaults are
TVM's: ``matmul``, ``add``, ``mul`` for multiply, ``neg`` for negative, ...), and returns a Tensor.
They only run inside ``Module.export_tvm``.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ..ir import relax_op
from ..ir.errors import TVMSError
from ..ir.expr import FloatImm, IntImm
from .block_builder import const
from .nn_frontend import Tensor, wrap_nested

_call = relax_op.make_call


def _binary(op: str, a: Tensor, b: Tensor, name: str) -> Tensor:
    return wrap_nested(_call(op, [a._expr, b._expr]), name)


def _unary(op: str, x: Tensor, name: str) -> Tensor:
    return wrap_nested(_call(op, [x._expr]), name)


# ---------------------------------------------------------------- elementwise
def add(a: Tensor, b: Tensor, name: str = "add") -> Tensor:
    """``a + b`` with numpy broadcasting."""
    return _binary("add", a, b, name)


def subtract(a: Tensor, b: Tensor, name: str = "subtract") -> Tensor:
    return _binary("subtract", a, b, name)


def multiply(a: Tensor, b: Tensor, name: str = "mul") -> Tensor:
    return _binary("multiply", a, b, name)


def divide(a: Tensor, b: Tensor, name: str = "divide") -> Tensor:
    return _binary("divide", a, b, name)


def maximum(x1: Tensor, x2: Tensor, name: str = "maximum") -> Tensor:
    return _binary("maximum", x1, x2, name)


def minimum(x1: Tensor, x2: Tensor, name: str = "minimum") -> Tensor:
    return _binary("minimum", x1, x2, name)


def less(a: Tensor, b: Tensor, name: str = "less") -> Tensor:
    return _binary("less", a, b, name)


def less_equal(a: Tensor, b: Tensor, name: str = "less_equal") -> Tensor:
    return _binary("less_equal", a, b, name)


def greater(a: Tensor, b: Tensor, name: str = "greater") -> Tensor:
    return _binary("greater", a, b, name)


def greater_equal(a: Tensor, b: Tensor, name: str = "greater_equal") -> Tensor:
    return _binary("greater_equal", a, b, name)


def equal(a: Tensor, b: Tensor, name: str = "equal") -> Tensor:
    return _binary("equal", a, b, name)


def not_equal(a: Tensor, b: Tensor, name: str = "not_equal") -> Tensor:
    return _binary("not_equal", a, b, name)


def where(condition: Tensor, x1: Tensor, x2: Tensor, name: str = "where") -> Tensor:
    condition = astype(condition, "bool")
    return wrap_nested(_call("where", [condition._expr, x1._expr, x2._expr]), name)


def sqrt(x: Tensor, name: str = "sqrt") -> Tensor:
    return _unary("sqrt", x, name)


def exp(x: Tensor, name: str = "exp") -> Tensor:
    return _unary("exp", x, name)


def log(x: Tensor, name: str = "log") -> Tensor:
    return _unary("log", x, name)


def floor(x: Tensor, name: str = "floor") -> Tensor:
    return _unary("floor", x, name)


def tanh(x: Tensor, name: str = "tanh") -> Tensor:
    return _unary("tanh", x, name)


def sigmoid(x: Tensor, name: str = "sigmoid") -> Tensor:
    return _unary("sigmoid", x, name)


def negative(x: Tensor, name: str = "neg") -> Tensor:
    return _unary("negative", x, name)


def astype(x: Tensor, dtype: str, name: str = "astype") -> Tensor:
    """Cast to ``dtype`` (no binding when the tensor already has it)."""
    if x.dtype == str(dtype):
        return x
    return wrap_nested(_call("astype", [x._expr], {"dtype": dtype}), name)


# ---------------------------------------------------------------- activations
def relu(x: Tensor, name: str = "relu") -> Tensor:
    return _unary("nn.relu", x, name)


def silu(x: Tensor, name: str = "silu") -> Tensor:
    return _unary("nn.silu", x, name)


def gelu(x: Tensor, approximate: str | None = None, name: str = "gelu") -> Tensor:
    """GELU; ``approximate="tanh"`` uses the tanh approximation (R.nn.gelu_tanh)."""
    return _unary("nn.gelu_tanh" if approximate == "tanh" else "nn.gelu", x, name)


def softmax(x: Tensor, axis: int = -1, name: str = "softmax") -> Tensor:
    return wrap_nested(_call("nn.softmax", [x._expr], {"axis": axis}), name)


# ---------------------------------------------------------------- linear algebra and layout
def matmul(a: Tensor, b: Tensor, out_dtype: str | None = None, name: str = "matmul") -> Tensor:
    """Matrix product with broadcasting over batch dimensions."""
    return wrap_nested(_call("matmul", [a._expr, b._expr], {"out_dtype": out_dtype}), name)


def permute_dims(x: Tensor, axes: Sequence[int] | None = None, name: str | None = None) -> Tensor:
    """Permute the dimensions (reverse them when ``axes`` is None). Unnamed, the binding is
    ``permute_dims`` (TVM's rule: ``matmul...`` when the input's name mentions ``linear``)."""
    if name is None:
        x_name = getattr(x._expr, "name", None)
        name = x_name.replace("linear", "matmul") if x_name is not None and "linear" in x_name \
            else "permute_dims"
    return wrap_nested(_call("permute_dims", [x._expr], {"axes": None if axes is None else list(axes)}), name)


def permute(x: Tensor, axes: Sequence[int] | None, name: str = "permute") -> Tensor:
    return wrap_nested(_call("permute_dims", [x._expr], {"axes": None if axes is None else list(axes)}), name)


def reshape(x: Tensor, shape: Sequence[Any], name: str = "reshape") -> Tensor:
    """Reshape; ``-1`` takes the remaining size."""
    return wrap_nested(_call("reshape", [x._expr, list(shape)]), name)


def broadcast_to(x: Tensor, shape: Sequence[Any], name: str = "broadcast_to") -> Tensor:
    return wrap_nested(_call("broadcast_to", [x._expr, list(shape)]), name)


def unsqueeze(x: Tensor, dim: int, name: str = "unsqueeze") -> Tensor:
    return wrap_nested(_call("expand_dims", [x._expr], {"axis": dim}), name)


def squeeze(x: Tensor, axis: int = -1, name: str = "squeeze") -> Tensor:
    return wrap_nested(_call("squeeze", [x._expr], {"axis": axis}), name)


def concat(x: list, dim: int, name: str = "concat") -> Tensor:
    from ..ir import relax as rx

    return wrap_nested(_call("concat", [rx.Tuple(tuple(t._expr for t in x))], {"axis": dim}), name)


def split(ary: Tensor, indices_or_sections: Any, axis: int = 0, name: str = "split") -> tuple:
    return wrap_nested(_call("split", [ary._expr], {"indices_or_sections": indices_or_sections,
                                                    "axis": axis}), name)


def chunk(x: Tensor, chunks: int, dim: int = 0, name: str = "chunk") -> tuple:
    return split(x, chunks, dim, name)


def take(x: Tensor, indices: Tensor, axis: int | None = None, name: str = "take") -> Tensor:
    return wrap_nested(_call("take", [x._expr, indices._expr], {"axis": axis}), name)


# ---------------------------------------------------------------- reductions
def sum(x: Tensor, axis: Any = None, keepdims: bool = False, name: str = "sum") -> Tensor:  # noqa: A001
    return wrap_nested(_call("sum", [x._expr], {"axis": axis, "keepdims": keepdims}), name)


def max(x: Tensor, axis: Any = None, keepdims: bool = False, name: str = "max") -> Tensor:  # noqa: A001
    return wrap_nested(_call("max", [x._expr], {"axis": axis, "keepdims": keepdims}), name)


def min(x: Tensor, axis: Any = None, keepdims: bool = False, name: str = "min") -> Tensor:  # noqa: A001
    return wrap_nested(_call("min", [x._expr], {"axis": axis, "keepdims": keepdims}), name)


# ---------------------------------------------------------------- normalization and convolution
def layer_norm(x: Tensor, normalized_shape: "int | list[int]", weight: Tensor | None = None,
               bias: Tensor | None = None, eps: float = 1e-5, name: str = "layer_norm") -> Tensor:
    """Layer normalization over the last ``len(normalized_shape)`` axes; without weight or bias,
    constants of ones and zeros take their place."""
    if isinstance(normalized_shape, int):
        normalized_shape = [normalized_shape]
    axes = list(range(-len(normalized_shape), 0))
    gamma = weight._expr if weight is not None else const(np.ones(normalized_shape), x.dtype)
    beta = bias._expr if bias is not None else const(np.zeros(normalized_shape), x.dtype)
    return wrap_nested(_call("nn.layer_norm", [x._expr, gamma, beta], {"axes": axes, "epsilon": eps}), name)


def rms_norm(x: Tensor, weight: Tensor, axes: "int | list[int]", epsilon: float = 1e-5,
             name: str = "rms_norm") -> Tensor:
    call = _call("nn.rms_norm", [x._expr, weight._expr], {"axes": axes, "epsilon": epsilon})
    return wrap_nested(call, name)


def conv2d(x: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1, padding: Any = 0,
           dilation: Any = 1, groups: int = 1, data_layout: str = "NCHW", name: str = "conv2d") -> Tensor:
    """2-D convolution; a bias is reshaped to broadcast over the channel axis and added."""
    out = _call("nn.conv2d", [x._expr, weight._expr],
                {"strides": stride, "padding": padding, "dilation": dilation, "groups": groups,
                 "data_layout": data_layout})
    if bias is not None:
        shapes = {"NCHW": [1, -1, 1, 1], "NHWC": [1, 1, 1, -1]}
        if data_layout not in shapes:
            raise TVMSError(f"nn.op.conv2d: a bias with data layout {data_layout!r} is not supported")
        out = _call("add", [out, _call("reshape", [bias._expr, shapes[data_layout]])])
    return wrap_nested(out, name)


def conv1d(x: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1, padding: Any = 0,
           dilation: Any = 1, groups: int = 1, name: str = "conv1d") -> Tensor:
    """1-D convolution (NCW); a bias is reshaped to broadcast over the channel axis and added."""
    out = _call("nn.conv1d", [x._expr, weight._expr],
                {"strides": stride, "padding": padding, "dilation": dilation, "groups": groups})
    if bias is not None:
        out = _call("add", [out, _call("reshape", [bias._expr, [1, -1, 1]])])
    return wrap_nested(out, name)


def group_norm(x: Tensor, num_groups: int, weight: Tensor | None, bias: Tensor | None, eps: float = 1e-5,
               channel_axis: int = 1, axes: list[int] | None = None, name: str = "group_norm") -> Tensor:
    """Group normalization over the channels in ``num_groups`` groups and ``axes`` (default: the
    axes after the channel axis); without weight or bias, constants of ones and zeros."""
    channels = x._expr.struct_info.dims[channel_axis]
    gamma = weight._expr if weight is not None else const(np.ones(int(channels.value)), x.dtype)
    beta = bias._expr if bias is not None else const(np.zeros(int(channels.value)), x.dtype)
    if axes is None:
        axes = list(range(2, x._expr.struct_info.ndim))
    call = _call("nn.group_norm", [x._expr, gamma, beta],
                 {"num_groups": num_groups, "channel_axis": channel_axis, "axes": axes, "epsilon": eps})
    return wrap_nested(call, name)


# ---------------------------------------------------------------- more nn operators
def softplus(x: Tensor, beta: float = 1.0, threshold: float = 20.0, name: str = "softplus") -> Tensor:
    return wrap_nested(_call("nn.softplus", [x._expr], {"beta": beta, "threshold": threshold}), name)


def prelu(x: Tensor, alpha: Tensor, name: str = "prelu") -> Tensor:
    return wrap_nested(_call("nn.prelu", [x._expr, alpha._expr]), name)


def pad(x: Tensor, pad: list[int], mode: str = "constant", value: float = 0.0, name: str = "pad") -> Tensor:
    """``pad`` holds (before, after) for each axis, in order."""
    return wrap_nested(_call("nn.pad", [x._expr], {"pad_width": pad, "pad_mode": mode, "pad_value": value}), name)


def scaled_dot_product_attention(query: Tensor, key: Tensor, value: Tensor, attn_mask: Tensor | None = None,
                                 is_causal: bool = False, scale: float | None = None,
                                 name: str = "scaled_dot_product_attention") -> Tensor:
    """R.nn.attention over (batch, sequence, heads, head dim) tensors; a causal mask is TopLeft."""
    if attn_mask is not None:
        raise TVMSError("nn.op.scaled_dot_product_attention: attn_mask is not supported (nor is it in TVM)")
    call = _call("nn.attention", [query._expr, key._expr, value._expr],
                 {"causal_mask": "TopLeft" if is_causal else None, "scale": scale})
    return wrap_nested(call, name)


# ---------------------------------------------------------------- creation
def full(shape: Sequence[Any], fill_value: Any, dtype: str = "float32", name: str = "full") -> Tensor:
    if isinstance(fill_value, (FloatImm, IntImm)):
        fill_value = fill_value.value
    value = const(fill_value, dtype) if isinstance(fill_value, (int, float)) else fill_value._expr
    return wrap_nested(_call("full", [list(shape), value], {"dtype": dtype}), name)


def zeros(shape: Sequence[Any], dtype: str = "float32", name: str = "zeros") -> Tensor:
    return wrap_nested(_call("zeros", [list(shape)], {"dtype": dtype}), name)


def ones(shape: Sequence[Any], dtype: str = "float32", name: str = "ones") -> Tensor:
    return wrap_nested(_call("ones", [list(shape)], {"dtype": dtype}), name)


__all__ = ["add", "subtract", "multiply", "divide", "maximum", "minimum", "less", "less_equal",
           "greater", "greater_equal", "equal", "not_equal", "where", "sqrt", "exp", "log",
           "floor", "tanh", "sigmoid", "negative", "astype", "relu", "silu", "gelu", "softmax",
           "matmul", "permute_dims", "permute", "reshape", "broadcast_to", "unsqueeze", "squeeze",
           "concat", "split", "chunk", "take", "sum", "max", "min", "layer_norm", "rms_norm",
           "conv2d", "conv1d", "group_norm", "softplus", "prelu", "pad", "scaled_dot_product_attention",
           "full", "zeros", "ones"]
