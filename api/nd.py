"""tvms.nd: the tensor API of TVM before 0.20 (``tvm.nd.array``, ``tvm.nd.empty``), which the
seed tutorials use; the same tensors as ``tvms.runtime.tensor``."""
from __future__ import annotations

from .runtime.tensor import NDArray, Tensor, empty, from_dlpack
from .runtime.tensor import tensor as array

__all__ = ["NDArray", "Tensor", "array", "empty", "from_dlpack"]
