"""ONNX's random operators: RandomUniform(Like), RandomNormal(Like), Multinomial, Bernoulli, and
the draw of training-mode Dropout.

A draw is ``R.call_packed("tvms.random.NAME", ...)`` of a run-time function
(``runtime/random_ops.py``): an impure call, so no pass folds it into a constant, lifts it out
as a weight transform or merges two equal draws into one. The importer then builds ``main`` as
an impure function with the draws between its dataflow blocks (``split_at_impure``). Bernoulli
and Dropout compare a uniform draw in Relax operators, which fuse as any others.

The ``seed`` attribute makes a draw the same on every call; without it each call draws afresh.
"""
from __future__ import annotations

from ..ir import relax as rx
from ..ir.expr import FloatImm
from ..ir.dtype import DataType
from ..ir.struct_info import TensorStructInfo
from ..ir.visitor import Mutator, collect
from .onnx_convert import OnnxOpConverter, Unsupported, converter, dtype_of, onnx_dtype, scalar_like, tensor_info
from .relax_op_api import call_packed, op

FLOATS = ("float16", "bfloat16", "float32", "float64")
# the operators that may draw at random (Dropout: in training mode), converted here and in
# onnx_ops_nn; a deferred call of one is impure (onnx_deferred)
RANDOM_OPS = frozenset({"Bernoulli", "Dropout", "Multinomial", "RandomNormal", "RandomNormalLike", "RandomUniform",
                        "RandomUniformLike"})
RANDOM_INSIDE = "a random operator inside an If, Loop or Scan body"


def may_draw(ctx) -> bool:
    """Whether a draw may be emitted here: at the top level of ``main`` (which ``split_at_impure``
    then makes impure), not in a body of If, Loop or Scan (a function of its own, or a block
    inside one)."""
    return ctx.bb.function_depth() == 1 and ctx.bb.current_block_is_dataflow()


def draw(ctx, name: str, shape_or_like, sinfo: TensorStructInfo, *args, seed=None):
    """The impure call of ``tvms.random.<name>`` (shape or tensor, dtype, ``args``, seed if any)
    typed ``sinfo``; only at the top level of ``main``, which the importer then makes impure."""
    if not may_draw(ctx):
        raise Unsupported(RANDOM_INSIDE)
    values = [rx.PrimValue(FloatImm(DataType("float64"), float(a))) if isinstance(a, (int, float)) else a
              for a in args + ((seed,) if seed is not None else ())]
    return call_packed(f"tvms.random.{name}", shape_or_like, rx.StringImm(str(sinfo.dtype)), *values,
                       sinfo_args=sinfo)


def _dtype(attrs, default: str) -> str:
    dtype = onnx_dtype(attrs["dtype"]) if attrs.get("dtype") is not None else default
    if dtype not in FLOATS:
        raise Unsupported(f"the dtype {dtype} (random values are floating point)")
    return dtype


def _like(x, dtype: str) -> TensorStructInfo:
    info = tensor_info(x)
    return TensorStructInfo(info.dims, dtype) if info.dims is not None else TensorStructInfo(dtype=dtype, ndim=info.ndim)


def _fixed(attrs, dtype: str):
    """(the R.shape, the struct info) of the ``shape`` attribute of RandomUniform/RandomNormal."""
    shape = [int(d) for d in attrs["shape"]]
    if any(d < 0 for d in shape):
        raise Unsupported(f"the shape {shape} has a negative dimension")
    return rx.ShapeExpr(shape), TensorStructInfo(shape, dtype)


class _Draw(OnnxOpConverter):
    """RandomUniform(Like), RandomNormal(Like): the distribution ``name`` of the attributes
    ``params`` (name, default), of the ``shape`` attribute's shape or the input's (``like``)."""

    name, params, like = "", (), False

    @classmethod
    def _impl_v1(cls, ctx, inputs, attrs):
        if cls.like:
            shape, sinfo = inputs[0], _like(inputs[0], _dtype(attrs, dtype_of(inputs[0])))
        else:
            shape, sinfo = _fixed(attrs, _dtype(attrs, "float32"))
        values = [attrs.get(key, default) for key, default in cls.params]
        return draw(ctx, cls.name, shape, sinfo, *values, seed=attrs.get("seed"))


for _op_type, _name, _params in (("RandomUniform", "uniform", (("low", 0.0), ("high", 1.0))),
                                 ("RandomNormal", "normal", (("mean", 0.0), ("scale", 1.0)))):
    for _like_input in (False, True):
        _type = _op_type + "Like" * _like_input
        converter(_type)(type(_type, (_Draw,), {"name": _name, "params": _params, "like": _like_input}))
del _op_type, _name, _params, _like_input, _type


@converter("Bernoulli")
class Bernoulli(OnnxOpConverter):
    """1 with probability ``x`` (element by element): a uniform draw below ``x``."""

    @classmethod
    def _impl_v15(cls, ctx, inputs, attrs):
        x = inputs[0]
        if dtype_of(x) not in FLOATS:
            raise Unsupported(f"probabilities of dtype {dtype_of(x)}")
        dtype = onnx_dtype(attrs["dtype"]) if attrs.get("dtype") is not None else dtype_of(x)
        if dtype_of(x) in ("float16", "bfloat16"):  # (a draw below 1 may round to 1 in 16 bits: p=1 gives 0)
            x = ctx.emit(op.astype(x, "float32"))
        u = ctx.emit(draw(ctx, "uniform", x, _like(x, dtype_of(x)), 0.0, 1.0, seed=attrs.get("seed")))
        return op.astype(op.less(u, x), dtype)


@converter("Multinomial")
class Multinomial(OnnxOpConverter):
    """``sample_size`` class indices per row of unnormalized log probabilities (batch, classes)."""

    @classmethod
    def _impl_v7(cls, ctx, inputs, attrs):
        x = inputs[0]
        info = tensor_info(x)
        if info.ndim != 2 or dtype_of(x) not in FLOATS:
            raise Unsupported(f"an input of rank {info.ndim} and dtype {dtype_of(x)} (ONNX takes "
                              f"floating-point [batch, classes])")
        dtype = onnx_dtype(attrs.get("dtype", 6))
        if dtype not in ("int32", "int64"):
            raise Unsupported(f"the dtype {dtype} (int32 or int64)")
        samples = int(attrs.get("sample_size", 1))
        if samples < 0:
            raise Unsupported(f"sample_size={samples}")
        sinfo = TensorStructInfo([info.dims[0], samples], dtype) if info.dims is not None \
            else TensorStructInfo(dtype=dtype, ndim=2)
        return draw(ctx, "multinomial", x, sinfo, rx.PrimValue(samples), seed=attrs.get("seed"))


def dropout(ctx, x, rate: float, seed) -> list:
    """Training-mode Dropout: each element kept with probability 1 - ``rate`` and scaled by
    1 / (1 - rate), the others 0; and the mask of the kept ones."""
    if dtype_of(x) not in FLOATS:
        raise Unsupported(f"training-mode dropout of {dtype_of(x)} data")
    if not 0 <= rate < 1:
        raise Unsupported(f"the ratio {rate:g} (ONNX takes [0, 1))")
    u = ctx.emit(draw(ctx, "uniform", x, _like(x, "float32"), 0.0, 1.0, seed=seed))
    keep = ctx.emit(op.greater_equal(u, ctx.constant(rate, "float32")))
    out = op.where(keep, op.multiply(x, scalar_like(1 / (1 - rate), x)), scalar_like(0, x))
    return [out, keep]


def _impure(binding) -> bool:
    value = binding.value
    return isinstance(value, rx.Call) and getattr(value.op, "name", None) == "relax.call_packed"


class _Rebind(Mutator):
    def __init__(self, mapping: dict):
        self.mapping = mapping

    def visit_DataflowVar(self, v):
        return self.mapping.get(v, v)


def split_at_impure(func: rx.Function) -> rx.Function:
    """``func`` made impure, each of its dataflow blocks split around the impure calls (the
    draws), which Relax keeps out of dataflow blocks: a draw is bound in a binding block of its
    own, and a dataflow variable read outside the block that now binds it becomes a variable;
    ``func`` itself where it draws nothing."""
    if not any(_impure(b) for block in func.body.blocks for b in block.bindings):
        return func
    blocks = []
    for block in func.body.blocks:
        runs: list = []
        for b in block.bindings:
            pure = isinstance(block, rx.DataflowBlock) and not _impure(b)
            if runs and runs[-1][0] == pure:
                runs[-1][1].append(b)
            else:
                runs.append((pure, [b]))
        blocks += [(rx.DataflowBlock if pure else rx.BindingBlock)(tuple(bs)) for pure, bs in runs]
    home = {b.var: k for k, block in enumerate(blocks) for b in block.bindings}
    moved = {}
    for k, block in enumerate(blocks):
        local = isinstance(block, rx.DataflowBlock)
        for b in block.bindings:
            for v in collect(b.value, rx.DataflowVar) + ([] if local else [b.var]):
                if isinstance(v, rx.DataflowVar) and (not local or home.get(v) != k):
                    moved[v] = rx.Var(v.name, v.struct_info)
    body = _Rebind(moved).visit(rx.SeqExpr(tuple(blocks), func.body.body))
    return func.with_changes(body=body, is_pure=False)


__all__ = ["FLOATS", "RANDOM_INSIDE", "RANDOM_OPS", "draw", "dropout", "may_draw", "split_at_impure"]
