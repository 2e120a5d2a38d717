"""LegalizeOps for the Relax operators that are not math, as TVM 0.27 does it: ``R.print`` and
``R.assert_op`` call the runtime's ``relax.run.print`` / ``relax.run.assert_op``;
``R.shape_to_tensor`` of a known shape is a PrimFunc that writes the sizes (symbolic ones passed
as scalars), of an unknown one a pure call of ``relax.run.shape_to_tensor``.
"""
from __future__ import annotations

from typing import Any

from ...ir import relax as rx
from ...ir.dtype import DataType
from ...ir.expr import EQ, Cast, IntImm
from .. import te
from .legalize import CALL_PACKED, call_te, register_legalize

_I64 = DataType("int64")

CALL_PACKED.update({
    "relax.print": ("relax.run.print", False),
    "relax.assert_op": ("relax.run.assert_op", False),
    "relax.shape_to_tensor": ("relax.run.shape_to_tensor", True),
})


@register_legalize("relax.shape_to_tensor")
def _shape_to_tensor(bb: Any, call: rx.Call) -> Any:
    shape = call.args[0]
    values = list(shape.values if isinstance(shape, rx.ShapeExpr) else shape.struct_info.values)
    symbolic = [v for v in values if not isinstance(v, IntImm)]

    def shape_to_tensor(*sizes: Any) -> te.Tensor:
        sizes = list(sizes)
        known = [v if isinstance(v, IntImm) else sizes.pop(0) for v in values]

        def body(i: Any) -> Any:
            result = IntImm(_I64, 0)
            for k in range(len(known) - 1, -1, -1):  # (the first size's test outermost)
                v = known[k] if known[k].dtype == _I64 else Cast(_I64, known[k])
                result = te.if_then_else(EQ(i, IntImm(_I64, k)), v, result)
            return result

        return te.compute((IntImm(_I64, len(known)),), body, name="shape_to_tensor")

    sizes = [rx.PrimValue(v) for v in symbolic]
    return call_te(bb, shape_to_tensor, *sizes, primfunc_name_hint="shape_to_tensor")
