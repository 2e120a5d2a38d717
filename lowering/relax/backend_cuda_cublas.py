"""The ``cublas`` backend's patterns and codegen (TVM's ``relax.backend.cuda.cublas``).

Importing this module registers the cuBLAS patterns, with TVM 0.27's names, shapes, priority
and check (``cublas.matmul``, ``cublas.matmul_bias``, ``..._bias_relu``, ``..._bias_gelu``, the
``matmul_transposed`` family, ``matmul_transposed_dequantize``, ``matmul_transposed_multiply``;
batched operands are matched by the same patterns)::

    mod = partition_for_cublas(mod)           # FuseOpsByPattern(..., annotate_codegen=True)
    mod = relax.transform.RunCodegen()(mod)            # R.call_dps_packed("fused_..._cublas", ...)

The codegen, ``relax.ext.cublas``, is registered only once the runtime has loaded the cuBLAS
library (``enable_codegen``): each offloaded function becomes a ``GemmCall`` (which parameter is
the left operand, the right one, the bias or the scales; whether the right one is transposed;
the epilogue; the dequantization scale), and the runtime's ``runtime.cublas.gemm`` makes the
packed function that calls cuBLASLt with it. Without the library RunCodegen says why.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import reduce

import numpy as np

from ...ir import relax as rx
from ...ir.arith.analyzer import Analyzer
from ...ir.dtype import DataType
from ...ir.errors import TVMSError
from ...ir.expr import EQ, GE, IntImm, Mul, PrimExpr, Var
from ...ir.registry import get_global_func, register_func
from .backend import (MATMUL_SHAPES, composite_of, get_patterns_with_prefix,
                      has_leaking_intermediate_variables, make_matmul_pattern, register_patterns,
                      set_unavailable)
from .dpl import DFPattern, get_var2val, is_const, is_op, wildcard
from .fuse_by_pattern import FuseOpsByPattern, PatternCheckContext
from .run_codegen import ExternalModule, external_module

BACKEND = "cublas"
# What cuBLASLt multiplies (TVM's _is_supported_dtype): operand dtypes, both the same
_GEMM_DTYPES = ("float16", "float32", "int8", "bfloat16")
_FP8 = "float8_e4m3fn"


def is_supported_dtype(lhs: str, rhs: str, out: str) -> bool:
    """Whether cuBLAS multiplies ``lhs`` x ``rhs`` into ``out`` (fp8 e4m3 inputs cannot give
    an e5m2 result)."""
    if lhs == rhs == _FP8:
        return out != "float8_e5m2"
    return lhs == rhs and lhs in _GEMM_DTYPES


def _dims(expr: rx.RelaxExpr) -> tuple:
    return tuple(getattr(expr.struct_info, "dims", None) or ())


def _dtype(expr: rx.RelaxExpr) -> str:
    return str(getattr(expr.struct_info, "dtype", ""))


def _const(dim: object) -> int | None:
    return dim if isinstance(dim, int) else dim.value if isinstance(dim, IntImm) else None


def _product(dims: tuple) -> PrimExpr | int:
    """The number of batches: an int, the one symbolic dimension, or a product to prove about
    (folding constants as TVM's operators do)."""
    known = reduce(lambda a, b: a * b, (_const(d) for d in dims if _const(d) is not None), 1)
    symbolic = [d for d in dims if _const(d) is None]
    if not symbolic:
        return known
    if known == 1 and len(symbolic) == 1:
        return symbolic[0]
    factors = symbolic + ([IntImm(symbolic[0].dtype, known)] if known != 1 else [])
    return reduce(Mul, factors)


def _is_transposed(context: PatternCheckContext) -> bool:
    rhs_var = context.annotated_expr["root"].args[1]
    value = context.matched_bindings.get(rhs_var)
    return isinstance(value, rx.Call) and getattr(value.op, "name", "") == "relax.permute_dims"


def _swaps_last_two(permute: rx.Call, ndim: int) -> bool:
    axes = permute.attrs.get("axes") if permute.attrs else None
    if axes is None:
        return ndim == 2  # reverses every axis: a transpose only of a matrix
    axes = [int(getattr(a, "value", a)) % ndim for a in axes]
    return axes == list(range(ndim - 2)) + [ndim - 1, ndim - 2]


def check_matmul(context: PatternCheckContext) -> bool:
    """TVM's ``_check_matmul``: accept a match cuBLAS can run. The operands' dtypes are
    supported; the reduction axis is known (a multiple of 4 for int8, which takes no epilogue);
    fp8 needs a transposed, 16-byte aligned right side; the bias is one vector; batched
    operands have as many batches, or only the left one is batched.

    tvms also declines what TVM's runtime would multiply wrongly: a 1-D operand, and a
    ``permute_dims`` that is not a transpose of the last two axes."""
    if has_leaking_intermediate_variables(context):
        return False
    ann = context.annotated_expr
    lhs, rhs, root = ann["lhs"], ann["rhs"], ann["root"]
    lhs_dtype, rhs_dtype, out_dtype = _dtype(lhs), _dtype(rhs), _dtype(root)
    lhs_shape, rhs_shape = _dims(lhs), _dims(rhs)
    if len(lhs_shape) < 2 or len(rhs_shape) < 2 or not is_supported_dtype(lhs_dtype, rhs_dtype,
                                                                           out_dtype):
        return False
    if "scale" in ann and "zp" in ann:
        scale, zero_point = ann["scale"], ann["zp"]
        if len(_dims(scale)) != 0 or len(_dims(zero_point)) != 0:
            return False  # one scale, one zero point
        if float(np.asarray(zero_point.data)) != 0.0:
            return False
    transposed = _is_transposed(context)
    if transposed and not _swaps_last_two(context.matched_bindings[root.args[1]], len(rhs_shape)):
        return False
    k = _const(lhs_shape[-1])
    if k is None:
        return False  # cuBLAS needs the reduction length when the call is planned
    if lhs_dtype == "int8":
        n = _const(rhs_shape[-1])
        if k % 4 or n is None or n % 4:
            return False  # IGEMM takes multiples of 4
    elif lhs_dtype == _FP8:
        if not transposed:
            return False
        rows, cols = _const(rhs_shape[-2]), _const(rhs_shape[-1])
        out_per_16_bytes = 16 // max(1, DataType(out_dtype).bits // 8)
        if cols is None or cols % 16 or rows is None or rows % out_per_16_bytes:
            return False  # 16-byte alignment of every fp8 operand
    if "bias" in ann:
        if lhs_dtype == "int8":
            return False  # IGEMM has only the default epilogue
        bias_batches = _product(_dims(ann["bias"])[:-1])
        if not isinstance(bias_batches, int) or bias_batches > 1:
            return False  # a bias vector only
    return _batches_fit(_product(lhs_shape[:-2]), _product(rhs_shape[:-2]))


def _batches_fit(lhs: PrimExpr | int, rhs: PrimExpr | int) -> bool:
    """cuBLASLt's strided batches need the same count on both sides, unless only the left
    side is batched (its batches then fold into the rows of one GEMM)."""
    if isinstance(lhs, Var) or isinstance(rhs, Var):
        return True  # TVM leaves one symbolic count to the runtime
    if isinstance(lhs, int) and isinstance(rhs, int):
        return lhs == rhs or (lhs >= 1 and rhs == 1)
    dtype = (lhs if isinstance(lhs, PrimExpr) else rhs).dtype
    lhs, rhs, one = (v if isinstance(v, PrimExpr) else IntImm(dtype, v) for v in (lhs, rhs, 1))
    analyzer = Analyzer()
    return analyzer.prove(EQ(lhs, rhs)) is True or (analyzer.prove(GE(lhs, one)) is True
                                                    and analyzer.prove(EQ(rhs, one)) is True)


def make_matmul_dequantize_pattern(transposed_rhs: bool = False) -> tuple[DFPattern, dict]:
    """``dequantize(matmul(lhs, rhs), scale, zp)`` with constant ``scale`` and ``zp``."""
    out, annotations = make_matmul_pattern(transposed_rhs=transposed_rhs)
    annotations.update(scale=is_const(), zp=is_const())
    return is_op("relax.dequantize")(out, annotations["scale"], annotations["zp"]), annotations


def make_matmul_multiply_pattern(transposed_rhs: bool = False) -> tuple[DFPattern, dict]:
    """``astype(matmul(lhs, rhs) * (scaleA * scaleB))`` with one-element scales (fp8)."""
    out, annotations = make_matmul_pattern(transposed_rhs=transposed_rhs)
    annotations.update(scaleA=wildcard(), scaleB=wildcard())
    scale = is_op("relax.multiply")(annotations["scaleA"].has_shape((1,)),
                                    annotations["scaleB"].has_shape((1,)))
    return is_op("relax.astype")(is_op("relax.multiply")(out, scale)), annotations


register_patterns([(f"{BACKEND}.{name}", *make_matmul_pattern(bias, act, transposed), check_matmul)
                   for name, bias, act, transposed in MATMUL_SHAPES]
                  + [(f"{BACKEND}.matmul_transposed_dequantize",
                      *make_matmul_dequantize_pattern(transposed_rhs=True), check_matmul),
                     (f"{BACKEND}.matmul_transposed_multiply",
                      *make_matmul_multiply_pattern(transposed_rhs=True), check_matmul)])


def partition_for_cublas(mod, bind_constants: bool = False):
    """The module with every cuBLAS-supported subgraph grouped into a function annotated
    ``"Codegen": "cublas"`` (TVM's ``partition_for_cublas``); ``bind_constants`` keeps bound
    constants inside the groups."""
    patterns = get_patterns_with_prefix(BACKEND)
    return FuseOpsByPattern(patterns, bind_constants=bind_constants, annotate_codegen=True)(mod)


# --------------------------------------------------------------------------- codegen


@dataclass(frozen=True)
class GemmCall:
    """How one offloaded function calls cuBLASLt: the positions of its operands among the
    packed function's inputs (``bias``/``scale_a``/``scale_b`` are None when absent), whether
    the right side is transposed, the epilogue (``"default"``, ``"bias"``, ``"relu_bias"``,
    ``"gelu_bias"``) and ``alpha`` (the dequantization scale, else 1)."""

    symbol: str
    num_inputs: int
    lhs: int
    rhs: int
    bias: int | None = None
    scale_a: int | None = None
    scale_b: int | None = None
    transposed_rhs: bool = False
    epilogue: str = "default"
    alpha: float = 1.0


def _epilogue(composite_name: str) -> str:
    for activation in ("relu", "gelu"):
        if activation in composite_name:
            return f"{activation}_bias"
    return "bias" if "bias" in composite_name else "default"


def gemm_call(func: rx.Function) -> GemmCall:
    """The GemmCall of a ``"Codegen": "cublas"`` function, found by matching its composite
    again with the pattern it was fused by (as TVM's codegen finds its arguments)."""
    symbol = str(func.attrs.get("global_symbol", ""))
    if not symbol:
        raise TVMSError(f"{BACKEND}: a function to offload needs a global_symbol")
    composite = composite_of(func)
    name = str(composite.attrs["Composite"])
    pattern = next((p for p in get_patterns_with_prefix(BACKEND) if p.name == name), None)
    if pattern is None:
        raise TVMSError(f"{BACKEND}: {symbol} holds a {name!r} composite; cuBLAS runs "
                        f"{', '.join(p.name for p in get_patterns_with_prefix(BACKEND))}")
    body = composite.body.body
    var2val = get_var2val(composite)
    matched = pattern.pattern.extract_matched_expr(var2val.get(body, body), var2val)
    if matched is None:
        hint = ("; its scale and zero point must be constants inside the group: partition "
                "with bind_constants=True") if "scale" in pattern.annotation_patterns else ""
        raise TVMSError(f"{BACKEND}: the body of {symbol} is not a {name} pattern{hint}")
    params = list(composite.params)

    def position(role: str) -> int | None:
        sub = pattern.annotation_patterns.get(role)
        if sub is None:
            return None
        expr = matched[sub]
        if expr not in params:
            raise TVMSError(f"{BACKEND}: the {role} of {symbol} is not an input of the function; "
                            f"partition with bind_constants=False to pass constants as inputs")
        return params.index(expr)

    alpha = 1.0
    if "scale" in pattern.annotation_patterns:
        alpha = float(np.asarray(matched[pattern.annotation_patterns["scale"]].data, "float32"))
    return GemmCall(symbol, len(params), position("lhs"), position("rhs"), position("bias"),
                    position("scaleA"), position("scaleB"), "transposed" in name,
                    _epilogue(name), alpha)


def codegen(functions: list, options: object = None,
            constant_names: object = None) -> list[ExternalModule]:
    """``relax.ext.cublas``: one module per offloaded function (as TVM's cuBLAS codegen
    makes one JSON runtime module each), holding its cuBLASLt-backed packed function."""
    make = get_global_func("runtime.cublas.gemm")
    modules = []
    for func in functions:
        call = gemm_call(func)
        modules.append(external_module(BACKEND, {call.symbol: make(call)}))
    return modules


def enable_codegen(reason_unavailable: str = "") -> bool:
    """Register ``relax.ext.cublas`` when the runtime has loaded cuBLAS (it registers
    ``runtime.cublas.gemm``); otherwise record why there is none, for RunCodegen to say."""
    if get_global_func("runtime.cublas.gemm", True) is None:
        set_unavailable(BACKEND, reason_unavailable or "the cuBLAS library is not loaded")
        return False
    register_func(f"relax.ext.{BACKEND}", codegen, override=True, internal=True)
    return True


__all__ = ["BACKEND", "GemmCall", "check_matmul", "codegen", "enable_codegen", "gemm_call",
           "is_supported_dtype", "make_matmul_dequantize_pattern", "make_matmul_multiply_pattern",
           "partition_for_cublas"]
