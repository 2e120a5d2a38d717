"""The registry of backend patterns (TVM's ``relax.backend``), and the pattern shapes backends
share.

::

    register_patterns([("cpu_blas.matmul", *make_matmul_pattern(), check)])
    get_pattern("cpu_blas.matmul")                    # a FusionPattern, or None
    get_patterns_with_prefix("cpu_blas")              # highest priority first

Patterns registered later have higher priority, as in TVM; the lists handed out are ordered
from the highest priority down, the order FuseOpsByPattern wants.
"""
from __future__ import annotations

from typing import Any

from ...ir import relax as rx
from ...ir.errors import TVMSError
from .dpl import DFPattern, is_op, wildcard
from .fuse_by_pattern import FusionPattern, PatternCheckContext, as_fusion_pattern

_PATTERNS: dict[str, FusionPattern] = {}  # in order of registration: the last is tried first
_UNAVAILABLE: dict[str, str] = {}  # backend -> why its codegen is not registered


def register_patterns(patterns: list) -> None:
    """Register fusion patterns (FusionPattern objects or ``(name, pattern[, annotations[,
    check]])`` tuples); registering a name again replaces it and gives it top priority."""
    if not isinstance(patterns, (list, tuple)):
        raise TVMSError("register_patterns takes a list of patterns")
    for item in patterns:
        pattern = as_fusion_pattern(item)
        _PATTERNS.pop(pattern.name, None)
        _PATTERNS[pattern.name] = pattern


def get_pattern(name: str) -> FusionPattern | None:
    """The pattern registered as ``name``, or None."""
    return _PATTERNS.get(name)


def get_patterns_with_prefix(prefix: str) -> list[FusionPattern]:
    """The patterns whose names start with ``prefix``, highest priority first."""
    return [p for p in reversed(_PATTERNS.values()) if p.name.startswith(prefix)]


def registered_patterns() -> list[FusionPattern]:
    """Every registered pattern, highest priority first."""
    return list(reversed(_PATTERNS.values()))


def set_unavailable(backend: str, reason: str) -> None:
    """Record why ``backend`` has no codegen here (a library that did not load), for
    RunCodegen to say."""
    _UNAVAILABLE[backend] = reason


def unavailable_reason(backend: str) -> str:
    """Why ``backend`` has no codegen, when a backend said so; else ``""``."""
    return _UNAVAILABLE.get(backend, "")


def composite_of(func: rx.Function) -> rx.Function:
    """The composite function a ``"Codegen"`` function calls (bound as ``local_func`` or called
    directly)."""
    body = func.body
    for b in (b for block in getattr(body, "blocks", ()) for b in block.bindings):
        if isinstance(b.value, rx.Function) and "Composite" in b.value.attrs:
            return b.value
    result = body.body if isinstance(body, rx.SeqExpr) else body
    if isinstance(result, rx.Call) and isinstance(result.op, rx.Function):
        return result.op
    raise TVMSError(f"{func.attrs.get('Codegen', 'a backend')}: "
                    f"{func.attrs.get('global_symbol', '?')!r} calls no composite function")


def has_leaking_intermediate_variables(context: PatternCheckContext) -> bool:
    """Whether a value inside a match, other than its result, is used outside it (or is
    visible after the block): fusing it would make the fused function return it too, which a
    library call cannot. Backends' checks reject such matches."""
    root = context.value_to_bound_var[context.matched_expr]
    for var in context.matched_bindings:
        if var is root:
            continue
        if not isinstance(var, rx.DataflowVar):
            return True
        if any(user not in context.matched_bindings for user in context.var_usages.get(var, ())):
            return True
    return False


# --------------------------------------------------------------------------- shared shapes


def with_bias_activation(out: DFPattern, annotations: dict, with_bias: bool = False,
                         activation: str | None = None) -> tuple[DFPattern, dict]:
    """``out``, then ``+ bias`` (annotated ``"bias"``), then ``activation`` (an operator name)."""
    if with_bias:
        annotations["bias"] = bias = wildcard()
        out = is_op("relax.add")(out, bias)
    if activation:
        out = is_op(activation)(out)
    return out, annotations


def make_fused_bias_activation_pattern(op_name: str, with_bias: bool = False,
                                       activation: str | None = None) -> tuple[DFPattern, dict]:
    """``activation(op(lhs, rhs) + bias)``; annotations ``lhs``, ``rhs``, ``root``, ``bias``."""
    lhs, rhs = wildcard(), wildcard()
    out = is_op(op_name)(lhs, rhs)
    return with_bias_activation(out, {"lhs": lhs, "rhs": rhs, "root": out}, with_bias, activation)


# The matmul patterns BLAS backends register, as TVM's cuBLAS backend does: name, with bias,
# activation, transposed right-hand side; in registration order (later entries take priority).
MATMUL_SHAPES = [
    ("matmul", False, None, False),
    ("matmul_bias", True, None, False),
    ("matmul_bias_relu", True, "relax.nn.relu", False),
    ("matmul_bias_gelu", True, "relax.nn.gelu", False),
    ("matmul_transposed", False, None, True),
    ("matmul_transposed_bias", True, None, True),
    ("matmul_transposed_bias_relu", True, "relax.nn.relu", True),
    ("matmul_transposed_bias_gelu", True, "relax.nn.gelu", True),
]


def make_matmul_pattern(with_bias: bool = False, activation: str | None = None,
                        transposed_rhs: bool = False) -> tuple[DFPattern, dict]:
    """``activation(matmul(lhs, rhs) + bias)`` with ``rhs`` behind ``permute_dims`` when
    ``transposed_rhs`` (``nn.Linear``'s weight); annotations ``lhs``, ``rhs``, ``root``,
    ``bias``, as TVM's pattern of the same name."""
    lhs, rhs = wildcard(), wildcard()
    annotations: dict[str, Any] = {"lhs": lhs, "rhs": rhs}
    right = is_op("relax.permute_dims")(rhs) if transposed_rhs else rhs
    out = is_op("relax.matmul")(lhs, right)
    annotations["root"] = out
    return with_bias_activation(out, annotations, with_bias, activation)


__all__ = ["MATMUL_SHAPES", "composite_of", "get_pattern", "get_patterns_with_prefix",
           "has_leaking_intermediate_variables", "make_fused_bias_activation_pattern",
           "make_matmul_pattern", "register_patterns", "registered_patterns", "set_unavailable",
           "unavailable_reason", "with_bias_activation"]
