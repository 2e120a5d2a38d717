"""The kernel of the ``cpu_blas`` backend (``lowering/relax/cpu_blas.py``): a composite's steps
run with numpy, whose ``np.matmul`` calls the BLAS numpy was built with.

The backend's codegen reaches it by name (``runtime.cpu_blas.kernel``): given the composite's
steps (variable, operator name, operands, attributes), parameters and results, it returns a
packed function in destination-passing style, ``f(*inputs, *outputs)``.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..ir import relax as rx
from ..ir.errors import TVMSError
from ..ir.registry import register_func
from .numpy_ops import NUMPY_OPS


def blas_kernel(steps: list, params: tuple, results: tuple, symbol: str = "") -> Callable:
    """The packed function running ``steps`` ((var, operator name, operands, attrs), in order)
    on the inputs ``params`` and writing ``results`` into the outputs."""
    prepared = [(var, NUMPY_OPS[op], operands, attrs) for var, op, operands, attrs in steps]

    def packed(*args: Any) -> None:
        if len(args) != len(params) + len(results):
            raise TVMSError(f"{symbol}: takes {len(params)} inputs and {len(results)} outputs, "
                            f"got {len(args)} arguments")
        env: dict = dict(zip(params, args))

        def read(x: Any) -> Any:
            return np.asarray(x.data) if isinstance(x, rx.Constant) else env[x]

        for var, kernel, operands, attrs in prepared:
            env[var] = kernel(tuple(read(x) for x in operands), attrs)
        for out, value in zip(args[len(params):], results):
            np.copyto(out, read(value), casting="same_kind")

    packed.__name__ = symbol or "cpu_blas_kernel"
    return packed


register_func("runtime.cpu_blas.kernel", blas_kernel, internal=True)

__all__ = ["blas_kernel"]
