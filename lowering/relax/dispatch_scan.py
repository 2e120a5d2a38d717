"""``DispatchSortScan`` for cumsum and cumprod: TVM 0.27's ``relax.backend.DispatchSortScan`` on a
CPU target, which LegalizeOps does not cover (TVM's LegalizeOps leaves the scans alone).

Each call becomes an ``R.call_tir`` of topi's generic scan kernel (``ir_kernels.scan_kernel``),
printed as TVM's.
"""
from __future__ import annotations

from typing import Any

from ...ir import relax as rx
from ...ir.buffer import decl_buffer
from ...ir.dtype import DataType
from ...ir.expr import Add, IntImm, Mul, Var
from ..pass_registry import register_pass
from ..transform import module_pass
from .ir_kernels import call_kernel, product, scan_kernel
from .legalize import _NotLegalized, rewrite_calls

_I64 = DataType("int64")


def _scan_dispatch(name: str, combine: type, identity: int) -> Any:
    def dispatch(bb: Any, call: rx.Call) -> Any:
        x = call.args[0]
        if not isinstance(x, rx.Var):
            raise _NotLegalized
        sinfo = x.struct_info
        axis = call.attrs["axis"]
        axis = None if axis is None else axis % len(sinfo.dims)
        out_dtype = call.attrs["dtype"] or sinfo.dtype
        # te.extern's input buffer: an element offset of its own (printed as a module TypeVar)
        data = decl_buffer(sinfo.dims, sinfo.dtype, x.name, elem_offset=Var("elem_offset", _I64))
        out_shape = (product(sinfo.dims),) if axis is None else tuple(sinfo.dims)
        out_shape = tuple(IntImm(_I64, d) if isinstance(d, int) else d for d in out_shape)
        func = scan_kernel(data, out_shape, out_dtype, axis, call.attrs["exclusive"], combine, identity, name)
        return call_kernel(bb, func, name, [x], func.buffer_map[func.params[1]])

    return dispatch


SCANS = {"relax.cumsum": _scan_dispatch("cumsum", Add, 0), "relax.cumprod": _scan_dispatch("cumprod", Mul, 1)}


@module_pass(opt_level=0, name="DispatchSortScan")
class DispatchSortScan:
    """``relax.backend.DispatchSortScan()`` for a CPU target: cumsum and cumprod become calls of
    the generic scan kernel (sort, argsort and topk are not covered)."""

    def transform_module(self, mod: Any, ctx: Any = None) -> Any:
        return rewrite_calls(mod, SCANS)


register_pass("DispatchSortScan", DispatchSortScan, override=True)

__all__ = ["DispatchSortScan"]
