"""LowerTIRx, its scope-id part: a tirx kernel's device region (``T.device_entry()``) with its
scope ids (``T.cta_id``, ``T.thread_id``, ``T.warp_id`` ...) becomes thread launches over
``T.let`` bindings of the ids, as TVM 0.27's ``tirx.LowerTIRx`` (TilePrimitiveDispatch) makes it
(``ir/scope_ids.py``; the reference executor runs the same). Its tile primitives (``T.tile.*``,
``T.warp.*``) are not in tvms: the pass refuses them."""
from __future__ import annotations

from ....ir.function import PrimFunc
from ....ir.scope_ids import resolve_scope_ids
from ...pass_registry import register_pass
from ..tir_pass import checked_prim_func_pass


def lower_tirx(func: PrimFunc, warp_helper: bool = False) -> PrimFunc:
    """``warp_helper``: bind ``warp_id_in_cta`` first, as TVM's LowerTIRx does (the tirx pipeline;
    the s_tir one, which TVM never runs on scope ids, keeps the plain formulas)."""
    return resolve_scope_ids(func, warp_helper)


def LowerTIRx():  # noqa: N802 (TVM's name)
    """The pass: ``tvm.tirx.transform.LowerTIRx()``."""
    return checked_prim_func_pass(lambda f, mod, ctx: lower_tirx(f), "tirx.LowerTIRx")


register_pass("tirx.LowerTIRx", LowerTIRx)

__all__ = ["LowerTIRx", "lower_tirx"]
