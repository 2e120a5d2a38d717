"""AnnotateEntryFunc: mark the module's entry PrimFunc ``tirx.is_entry_func``.

The entry is the only function of the module, or else the only externally visible one (with a
``global_symbol``) when that one is a PrimFunc; otherwise nothing can be inferred.
"""
from __future__ import annotations

from ....ir.function import PrimFunc
from ....ir.module import IRModule
from ...pass_registry import register_pass
from ...transform import module_pass

ENTRY = "tir.is_entry_func"


def annotate_entry_func(mod: IRModule) -> IRModule:
    items = mod.functions_items()
    external = items if len(items) == 1 else [
        (gv, f) for gv, f in items if "global_symbol" in getattr(f, "attrs", {})]
    if len(external) != 1 or not isinstance(external[0][1], PrimFunc):
        return mod
    gv, func = external[0]
    if func.attrs.get(ENTRY):
        return mod
    result = mod.copy()
    result[gv] = func.with_attr(ENTRY, True)
    return result


def AnnotateEntryFunc():  # noqa: N802 (TVM's name)
    """The pass: ``tvm.tirx.transform.AnnotateEntryFunc()``."""
    return module_pass(lambda mod, ctx: annotate_entry_func(mod), opt_level=0, name="AnnotateEntryFunc")


register_pass("AnnotateEntryFunc", AnnotateEntryFunc)

__all__ = ["AnnotateEntryFunc", "annotate_entry_func"]
