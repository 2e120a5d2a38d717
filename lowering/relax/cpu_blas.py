"""The ``cpu_blas`` backend: matrix multiplications (with bias and activation) offloaded to
numpy, whose ``np.matmul`` calls the BLAS numpy was built with.

Importing this module registers its patterns (``cpu_blas.matmul``, ``cpu_blas.matmul_bias``,
``cpu_blas.matmul_transposed_bias_relu``, ..., shaped like TVM's cuBLAS patterns) with the
backend registry and its codegen ``relax.ext.cpu_blas`` with the runtime's function registry::

    patterns = relax.backend.get_patterns_with_prefix("cpu_blas")
    mod = relax.transform.FuseOpsByPattern(patterns, annotate_codegen=True)(mod)
    mod = relax.transform.RunCodegen()(mod)      # R.call_dps_packed("fused_..._cpu_blas", ...)

The codegen turns each composite function into a packed function in destination-passing style
(``f(*inputs, *outputs)``): it checks the composite and lists its steps (operator, operands,
attributes); the kernel that runs them with numpy is the runtime's (``runtime/cpu_blas.py``,
reached by name: ``runtime.cpu_blas.kernel``).
"""
from __future__ import annotations

from typing import Any, Callable

from ...ir import relax as rx
from ...ir.errors import TVMSError
from ...ir.expr import Op
from ...ir.registry import get_global_func, register_func
from .backend import (MATMUL_SHAPES, composite_of, has_leaking_intermediate_variables,
                      make_matmul_pattern, register_patterns)
from .fuse_by_pattern import PatternCheckContext
from .run_codegen import ExternalModule, external_module

BACKEND = "cpu_blas"
_DTYPES = ("float32", "float64")  # what numpy's BLAS multiplies natively
# The operators a cpu_blas composite may hold (what its patterns match).
_KERNEL_OPS = ("relax.matmul", "relax.permute_dims", "relax.add", "relax.nn.relu", "relax.nn.gelu")


def check_matmul(context: PatternCheckContext) -> bool:
    """Accept a match whose operands share a BLAS float dtype and whose intermediates stay
    inside it."""
    if has_leaking_intermediate_variables(context):
        return False
    lhs = context.annotated_expr["lhs"].struct_info
    rhs = context.annotated_expr["rhs"].struct_info
    return str(getattr(lhs, "dtype", "")) == str(getattr(rhs, "dtype", "")) \
        and str(getattr(lhs, "dtype", "")) in _DTYPES


register_patterns([(f"{BACKEND}.{name}", *make_matmul_pattern(bias, act, transposed), check_matmul)
                   for name, bias, act, transposed in MATMUL_SHAPES])


# --------------------------------------------------------------------------- codegen


def _bindings(func: rx.Function) -> list:
    body = func.body
    return [b for block in getattr(body, "blocks", ()) for b in block.bindings]


def compile_composite(composite: rx.Function, symbol: str = "") -> Callable:
    """A packed function ``f(*inputs, *outputs)`` that runs ``composite`` and writes its
    result(s) into ``outputs``: its steps checked here, run by the runtime's kernel."""
    steps = []
    for b in _bindings(composite):
        value = b.value
        if not (isinstance(b, rx.VarBinding) and isinstance(value, rx.Call)
                and isinstance(value.op, Op) and value.op.name in _KERNEL_OPS):
            what = value.op.name if isinstance(value, rx.Call) and isinstance(value.op, Op) \
                else type(value).__name__
            raise TVMSError(f"{BACKEND}: cannot offload {what} in {symbol or 'a composite'}; "
                            f"it runs {', '.join(_KERNEL_OPS)}")
        for x in value.args:
            if not isinstance(x, (rx.Var, rx.Constant)):
                raise TVMSError(f"{BACKEND}: {value.op.name} in {symbol or 'a composite'} takes a "
                                f"{type(x).__name__}; the kernels take tensors only")
        steps.append((b.var, value.op.name, value.args, value.attrs))
    result = composite.body.body
    results = result.fields if isinstance(result, rx.Tuple) else (result,)
    return get_global_func("runtime.cpu_blas.kernel")(steps, composite.params, results, symbol)


def codegen(functions: list, options: Any = None,
            constant_names: Any = None) -> list[ExternalModule]:
    """``relax.ext.cpu_blas``: one module holding a packed function per ``"Codegen"`` function."""
    built = {}
    for func in functions:
        symbol = str(func.attrs.get("global_symbol", ""))
        if not symbol:
            raise TVMSError(f"{BACKEND}: a function to offload needs a global_symbol")
        built[symbol] = compile_composite(composite_of(func), symbol)
    return [external_module(BACKEND, built)]


register_func(f"relax.ext.{BACKEND}", codegen, override=True, internal=True)

__all__ = ["BACKEND", "check_matmul", "codegen", "compile_composite", "composite_of"]
