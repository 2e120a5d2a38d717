"""The operators of distributed Relax: sharding annotations (``R.dist.*``) and collective
communication (``R.ccl.*``), with struct info as TVM 0.27 infers it (src/relax/op/ccl,
src/relax/op/distributed). ``R.dist.call_tir`` is ``R.call_tir`` with DTensor outputs.

Elementwise operators (``R.add``, ``R.exp``, ...) of DTensors sharded alike give a DTensor
sharded the same way (``infer_on_dtensors``); TVM's other distributed rules (matmul, reductions,
collectives on DTensors, ...) are not inferred: such a call is an ``R.Object`` until the binding's
annotation (which TVM prints) states its DTensor.
"""
from __future__ import annotations

from .distributed import DTensorStructInfo
from .expr import IntImm
from .relax_infer import describe, dim_floordiv, dim_mul, make_tensor, tensor_arg
from .relax_op import ATTR_ANY, ATTR_BOOL, ATTR_INT, ATTR_STR, Attr, CallInfo, OpSpec, register
from .relax_ops import _infer_call_tir, _prepare_dps
from .struct_info import ObjectStructInfo, StructInfo


def _same(info: CallInfo) -> StructInfo:
    return tensor_arg(info, 0)


def _infer_allgather(info: CallInfo) -> StructInfo:
    x = tensor_arg(info, 0)
    if x.dims is None:
        return x
    return make_tensor((dim_mul(x.dims[0], IntImm(x.dims[0].dtype, info.attrs["num_workers"])),) + x.dims[1:],
                       x.dtype, vdevice=x.vdevice)


def _infer_scatter(info: CallInfo) -> StructInfo:
    """scatter_from_worker0, redistribute_replica_to_shard: the axis divided among the workers."""
    x = tensor_arg(info, 0)
    if x.dims is None:
        raise info.fail(f"the input needs a known shape, got {describe(x)}")
    axis, workers = info.attrs["axis"], info.attrs["num_workers"]
    dims = list(x.dims)
    size = dims[axis]
    if isinstance(size, IntImm) and size.value % workers != 0:
        raise info.fail(f"the size of axis {axis} ({size.value}) must be divisible by num_workers ({workers})")
    dims[axis] = dim_floordiv(size, IntImm(size.dtype, workers))
    return make_tensor(tuple(dims), x.dtype, vdevice=x.vdevice)


def _infer_redistribute(info: CallInfo) -> StructInfo:
    x = info.sinfo[0]
    if not isinstance(x, DTensorStructInfo):
        raise info.fail(f"takes a DTensor, got {describe(x)}")
    return DTensorStructInfo(x.tensor_sinfo, info.attrs["device_mesh"], info.attrs["placement"])


def _infer_replica_to_shard(info: CallInfo) -> StructInfo:
    """On a DTensor replicated over a 1-d mesh: the same tensor, sharded along ``axis``."""
    x = info.sinfo[0]
    if not isinstance(x, DTensorStructInfo):
        return _infer_scatter(info)
    if len(x.device_mesh.shape) != 1 or x.placement != "R":
        raise info.fail(f"takes a DTensor replicated over a 1-d mesh, got {describe(x)}")
    _infer_scatter(CallInfo(info.spec, info.args, (x.tensor_sinfo,), info.attrs, info.sinfo_args))
    return DTensorStructInfo(x.tensor_sinfo, x.device_mesh, f"S[{info.attrs['axis']}]")


_SHARDING = (Attr("device_mesh", None, ATTR_ANY, required=True), Attr("placement", None, ATTR_ANY, required=True))
register("dist.annotate_sharding", ("input",), lambda info: info.sinfo[0], _SHARDING)
register("dist.redistribute", ("input",), _infer_redistribute, _SHARDING)
register("dist.call_tir_local_view", ("func", "args"), _infer_call_tir, prepare=_prepare_dps)
register("dist.redistribute_replica_to_shard", ("input",), _infer_replica_to_shard,
         (Attr("num_workers", None, ATTR_INT, required=True), Attr("axis", 0, ATTR_INT)))

register("ccl.allreduce", ("x",), _same, (Attr("op_type", "sum", ATTR_STR), Attr("in_group", True, ATTR_BOOL)))
register("ccl.allgather", ("x",), _infer_allgather,
         (Attr("num_workers", None, ATTR_INT, required=True), Attr("in_group", True, ATTR_BOOL)))
register("ccl.broadcast_from_worker0", ("x",), _same)
register("ccl.scatter_from_worker0", ("x",), _infer_scatter,
         (Attr("num_workers", None, ATTR_INT, required=True), Attr("axis", 0, ATTR_INT)))

# The operators TVM infers on DTensors element by element, by name (the unary, binary, comparison
# and nn activation operators that src/relax/op/distributed gives an elementwise dist rule)
DTENSOR_ELEMENTWISE = frozenset("relax." + name for name in (
    "abs", "acos", "acosh", "asin", "asinh", "atan", "atanh", "bitwise_not", "ceil", "cos", "cosh",
    "exp", "floor", "log", "logical_not", "negative", "round", "rsqrt", "sigmoid", "sign", "sin", "sinh",
    "square", "sqrt", "tan", "tanh", "erf", "isfinite", "isinf", "isnan",
    "add", "divide", "floor_divide", "multiply", "power", "subtract", "mod", "floor_mod", "minimum",
    "maximum", "logical_and", "logical_or", "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor",
    "left_shift", "right_shift", "equal", "greater", "greater_equal", "less", "less_equal", "not_equal",
    "nn.relu", "nn.gelu", "nn.gelu_tanh", "nn.silu"))


def infer_on_dtensors(spec: OpSpec, info: CallInfo) -> StructInfo:
    """The struct info of an elementwise operator called on DTensors: what it infers for the local
    tensors, distributed as its highest-rank DTensor operand (the others on the same mesh, placed
    alike or replicated)."""
    if spec.name not in DTENSOR_ELEMENTWISE:
        return ObjectStructInfo()  # (not inferred: the binding's annotation, which TVM prints, says it)
    dtensors = [s for s in info.sinfo if isinstance(s, DTensorStructInfo)]
    first = max(dtensors, key=lambda d: d.tensor_sinfo.ndim)
    for d in dtensors:
        replicated = all(p == "R" for p in d.placement.split(", "))
        if d.device_mesh is not first.device_mesh or not (d.placement == first.placement or replicated):
            raise info.fail(f"the DTensors are placed differently ({describe(first)} and {describe(d)})")
    local = tuple(s.tensor_sinfo if isinstance(s, DTensorStructInfo) else s for s in info.sinfo)
    out = spec.infer(CallInfo(info.spec, info.args, local, info.attrs, info.sinfo_args))
    return DTensorStructInfo(out, first.device_mesh, first.placement)


__all__ = ["DTENSOR_ELEMENTWISE", "infer_on_dtensors"]
