"""LegalizeOps for layout_transform, as TVM 0.27 builds it: a copy of the tensor made with TE
(``te.compute(data.shape, data)``, whose axes Python names ``self, i0, i1, ...``), whose output
buffer the schedule primitive ``transform_layout`` then stores through the index map.

A map that pads (a split that does not divide its dimension) also needs ``transform_layout``'s
``pad_value``, and a symbolic shape a relayout of symbolic buffers, neither of which the schedule
supports yet: such calls are left to the reference."""
from __future__ import annotations

from typing import Any

from ...ir import relax as rx
from ...ir.expr import IntImm
from ...ir.index_map import IndexMap, split_terms
from ...ir.relax_op import make_call
from ...ir.struct_info import TensorStructInfo
from .. import te
from ..schedule import layout
from ..schedule.schedule import Schedule
from .legalize import _NotLegalized, gen_call_tir_inputs, register_legalize

_NAME = "te_layout_transform"


def _pads(index_map: IndexMap, shape: tuple) -> bool:
    """Whether some split of the map does not divide its dimension (or might not: a symbolic one)."""
    extents = dict(zip(index_map.initial_indices, shape))
    for e in index_map.final_indices:
        for var, kind, c, _ in split_terms(e) or ():
            d = extents[var]
            if kind != "var" and not (isinstance(d, IntImm) and d.value % c == 0):
                return True
    return False


@register_legalize("relax.layout_transform")
def _layout_transform(bb: Any, call: rx.Call) -> Any:
    index_map = call.attrs["index_map"]
    x = call.args[0]
    dims = tuple(x.struct_info.dims)
    if _pads(index_map, dims) or not all(isinstance(d, IntImm) for d in dims):
        raise _NotLegalized

    def copy(data: te.Tensor) -> te.Tensor:
        names = ["self"] + [f"i{k}" for k in range(len(data.shape) - 1)]
        return te.compute(tuple(data.shape), lambda *idx: data[idx], name=_NAME, varargs_names=names)

    func, args, _ = gen_call_tir_inputs(copy, x)
    sch = Schedule(func)
    sch.transform_layout(sch.get_block(_NAME), ("write", 0),
                         layout.IndexMap(list(index_map.initial_indices), list(index_map.final_indices)))
    gv = bb.add_func(sch.mod["main"], _NAME)
    out = TensorStructInfo(rx.ShapeExpr(index_map.map_shape(dims)), x.struct_info.dtype,
                           vdevice=x.struct_info.vdevice)
    return make_call("call_tir", [gv, rx.Tuple(tuple(args))], {}, (out,))
