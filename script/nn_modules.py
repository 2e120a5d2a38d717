"""The layers of the nn frontend: Linear, activations, normalizations, Embedding, Conv2D.

Each is a Module whose parameters are attributes (``weight``, ``bias``) and whose ``forward``
calls the functional operators of ``nn_op`` exactly as TVM's layers do, so exported modules
print the same bindings.
"""
from __future__ import annotations

from typing import Any

from ..ir.expr import FloorDiv, IntImm, PrimExpr
from . import nn_op as op
from .nn_frontend import Module, Parameter, Tensor


class ReLU(Module):
    def forward(self, x: Tensor) -> Tensor:
        return op.relu(x)


class SiLU(Module):
    def forward(self, x: Tensor) -> Tensor:
        return op.silu(x)


class GELU(Module):
    def forward(self, x: Tensor) -> Tensor:
        return op.gelu(x)


class Identity(Module):
    def forward(self, x: Tensor) -> Tensor:
        return x


class Linear(Module):
    """``y = x W^T + b``; ``weight`` is (out_features, in_features)."""

    def __init__(self, in_features: Any, out_features: Any, bias: bool = True, dtype: str | None = None,
                 out_dtype: str | None = None) -> None:
        self.in_features, self.out_features, self.out_dtype = in_features, out_features, out_dtype
        self.weight = Parameter((out_features, in_features), dtype)
        self.bias = Parameter((out_features,), dtype if out_dtype is None else out_dtype) if bias else None

    def forward(self, x: Tensor) -> Tensor:
        w = op.permute_dims(self.weight)
        x = op.matmul(x, w, out_dtype=self.out_dtype)
        if self.bias is not None:
            x = x + self.bias
        return x

    def to(self, dtype: str | None = None) -> None:
        # the bias stays in out_dtype when there is one (x + bias would not type-check otherwise)
        self.weight.to(dtype=dtype)
        if self.bias is not None and self.out_dtype is None:
            self.bias.to(dtype=dtype)


class LayerNorm(Module):
    """Layer normalization over the last dimension, with learnable ``weight`` and ``bias``."""

    def __init__(self, normalized_shape: int, eps: float | None = 1e-5, elementwise_affine: bool = True,
                 dtype: str | None = None) -> None:
        self.normalized_shape, self.eps, self.elementwise_affine = normalized_shape, eps, elementwise_affine
        if elementwise_affine:
            self.weight = Parameter((normalized_shape,), dtype=dtype)
            self.bias = Parameter((normalized_shape,), dtype=dtype)
        else:
            self.weight = self.bias = None

    def forward(self, x: Tensor) -> Tensor:
        return op.layer_norm(x, normalized_shape=self.normalized_shape, weight=self.weight,
                             bias=self.bias, eps=self.eps)


class RMSNorm(Module):
    """Root-mean-square normalization over ``axes``, scaled by ``weight`` (plus ``bias``)."""

    def __init__(self, hidden_size: int, axes: "int | list[int]", epsilon: float = 1e-5, bias: bool = True,
                 dtype: str | None = None) -> None:
        self.epsilon, self.axes = epsilon, axes
        self.weight = Parameter((hidden_size,), dtype=dtype)
        self.bias = Parameter((hidden_size,), dtype=dtype) if bias else None

    def forward(self, x: Tensor) -> Tensor:
        out = op.rms_norm(x, weight=self.weight, axes=self.axes, epsilon=self.epsilon)
        if self.bias is not None:
            out = op.add(out, self.bias)
        return out


class Embedding(Module):
    """A lookup table: ``weight`` is (num, dim); indices of any rank."""

    def __init__(self, num: Any, dim: Any, dtype: str | None = None) -> None:
        self.num, self.dim = num, dim
        self.weight = Parameter((num, dim), dtype=dtype)

    def forward(self, x: Tensor) -> Tensor:
        if x.ndim == 1:
            return op.take(self.weight, x, axis=0)
        flat = op.take(self.weight, op.reshape(x, shape=[-1]), axis=0)
        return op.reshape(flat, shape=[*x.shape, self.weight.shape[1]])


class Conv2D(Module):
    """2-D convolution; ``weight`` is (out_channels, in_channels / groups, kh, kw)."""

    def __init__(self, in_channels: Any, out_channels: int, kernel_size: "int | list[int]", stride: int = 1,
                 padding: int = 0, dilation: int = 1, groups: int = 1, bias: bool = True,
                 dtype: str | None = None, data_layout: str = "NCHW") -> None:
        self.in_channels, self.out_channels = in_channels, out_channels
        self.stride, self.padding, self.dilation, self.groups = stride, padding, dilation, groups
        self.data_layout = data_layout
        per_group: Any = in_channels  # dynamic input channels (a name or an expression) too
        if isinstance(in_channels, int):
            per_group = int(in_channels / groups)
        elif isinstance(in_channels, PrimExpr) and groups != 1:
            per_group = FloorDiv(in_channels, IntImm(in_channels.dtype, groups))
        self.kernel_size = [kernel_size] * 2 if isinstance(kernel_size, int) else list(kernel_size)
        self.weight = Parameter([out_channels, per_group] + self.kernel_size, dtype)
        self.bias = Parameter((out_channels,), dtype) if bias else None

    def forward(self, x: Tensor) -> Tensor:
        return op.conv2d(x, self.weight, self.bias, self.stride, self.padding, self.dilation,
                         self.groups, self.data_layout)


__all__ = ["ReLU", "SiLU", "GELU", "Identity", "Linear", "LayerNorm", "RMSNorm", "Embedding", "Conv2D"]
