"""TVM 0.27's backend dispatch passes for a CPU target, for the operators LegalizeOps leaves alone:
``DispatchSortScan`` (cumsum, cumprod: topi's generic scan kernel) and ``DispatchSampling``
(multinomial_from_uniform: a cumsum of the probabilities, then TVM's generic ``get_sample_index``).
The kernels are in ``ir_kernels.py``; the results print as TVM's.
"""
from __future__ import annotations

from typing import Any

from ...ir import relax as rx
from ...ir.buffer import decl_buffer
from ...ir.dtype import DataType
from ...ir.expr import Add, IntImm, Mul, Var
from ...ir.relax_op import make_call
from ..pass_registry import register_pass
from ..transform import module_pass
from .ir_kernels import call_kernel, product, sample_index_kernel, scan_kernel
from .legalize import rewrite_calls

_I64 = DataType("int64")


def _scan_dispatch(name: str, combine: type, identity: int) -> Any:
    def dispatch(bb: Any, call: rx.Call) -> Any:
        x = call.args[0]
        sinfo = x.struct_info
        axis = call.attrs["axis"]
        axis = None if axis is None else axis % len(sinfo.dims)
        out_dtype = call.attrs["dtype"] or sinfo.dtype
        # te.extern's input buffer: an element offset of its own (printed as a module TypeVar)
        name_of_x = x.name if isinstance(x, rx.Var) else "A"  # (call_te names a constant by its position)
        data = decl_buffer(sinfo.dims, sinfo.dtype, name_of_x, elem_offset=Var("elem_offset", _I64))
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


def _multinomial(bb: Any, call: rx.Call) -> Any:
    prob, sample, indices = call.args
    dtypes = [a.struct_info.dtype for a in call.args]
    cumulative = bb.emit(make_call("cumsum", [prob], {"axis": 1, "dtype": dtypes[0], "exclusive": False}))
    gv = bb.add_func(sample_index_kernel(*dtypes, call.attrs["dtype"]), "get_sample_index")
    return make_call("call_tir", [gv, rx.Tuple((cumulative, sample, indices))], {}, (call.struct_info,))


@module_pass(opt_level=0, name="DispatchSampling")
class DispatchSampling:
    """``relax.backend.DispatchSampling()`` for a CPU target: multinomial_from_uniform becomes the
    cumulative probabilities and a call of the generic sample-index kernel."""

    def transform_module(self, mod: Any, ctx: Any = None) -> Any:
        return rewrite_calls(mod, {"relax.multinomial_from_uniform": _multinomial})


register_pass("DispatchSampling", DispatchSampling, override=True)

__all__ = ["DispatchSampling", "DispatchSortScan"]
