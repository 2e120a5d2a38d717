"""LegalizeOps for image.affine_grid, as TVM 0.27 builds it (``topi.image.affine_grid``): each
grid point is the affine matrix applied to the normalized target coordinates.

TVM's resize, grid_sample and the vision operators legalize into long topi computations (or
TE externs) that tvms does not reproduce yet: the VM runs their numpy references."""
from __future__ import annotations

from typing import Any

from ...ir import arith
from ...ir import relax as rx
from ...ir.expr import Add, Cast, FloatImm, IntImm, Mul
from .. import te
from .legalize import _NotLegalized, call_te, register_legalize
from .legalize_manip import _i64


@register_legalize("relax.image.affine_grid")
def _affine_grid(bb: Any, call: rx.Call) -> Any:
    size = getattr(call.args[1], "values", None)
    if size is None or not all(isinstance(v, IntImm) for v in size):
        raise _NotLegalized  # (TVM needs a static target size too)
    size = [v.value for v in size]
    corners = call.attrs["align_corners"]

    def affine_grid(theta: te.Tensor) -> te.Tensor:
        dt = theta.dtype
        # (the constants are computed in double and kept so, as TVM's tirx.const does)
        starts = [-1.0 if corners else -1.0 + 1.0 / s for s in size]
        steps = [(2.0 - 1e-7) / (s - 1) if corners else 2.0 / s for s in size]
        ndim = len(size)

        def body(n: Any, dim: Any, *coords: Any) -> Any:
            value = theta[n, dim, _i64(ndim)]
            for r in range(ndim):  # (coordinates slowest first; the matrix's columns x first)
                coord = arith.binary(Add, FloatImm(dt, starts[r]),
                                     arith.binary(Mul, Cast(dt, coords[r]), FloatImm(dt, steps[r])))
                value = arith.binary(Add, value, arith.binary(Mul, theta[n, dim, _i64(ndim - 1 - r)], coord))
            return value

        shape = (theta.shape[0], IntImm(theta.shape[0].dtype, ndim)) + tuple(IntImm(theta.shape[0].dtype, s) for s in size)
        return te.compute(shape, body, name="compute", tag="affine_grid",
                          varargs_names=[f"i{k}" for k in range(ndim)])

    return call_te(bb, affine_grid, call.args[0])
