"""How the TIR lowering passes are made: a PrimFunc -> PrimFunc function becomes a named pass.

``define_tir_pass("LowerInitBlock", lower_init_block)`` returns a factory (``LowerInitBlock()``
makes the pass, as ``tvm.s_tir.transform.LowerInitBlock()`` does) and registers it under the
same name, so ``tvms opt -p LowerInitBlock`` finds it.
"""
from __future__ import annotations

from typing import Callable

from ...ir.function import PrimFunc
from ...ir.tile_layout import refuse_tile_layouts
from ...ir.tile_primitive import refuse_tile_primitives
from ..pass_registry import register_pass
from ..transform import Pass, prim_func_pass

PrimFuncTransform = Callable[[PrimFunc], PrimFunc]


def define_tir_pass(name: str, transform: PrimFuncTransform) -> Callable[[], Pass]:
    """A factory of the pass that applies ``transform`` to every PrimFunc, registered as ``name``."""

    def lower(func: PrimFunc, mod: object, ctx: object) -> PrimFunc:
        # A user running a lowering pass by hand skips build's refusal, and the passes that
        # rewrite indexing would drop the layouts silently, and none knows a tile primitive. (The build pipelines call the
        # transforms themselves, after build has checked once.)
        refuse_tile_layouts(func, name)
        refuse_tile_primitives(func, name)
        return transform(func)

    def factory() -> Pass:
        return prim_func_pass(lower, opt_level=0, name=name)

    factory.__name__ = factory.__qualname__ = name
    factory.__doc__ = transform.__doc__
    register_pass(name, factory)
    return factory


__all__ = ["define_tir_pass", "PrimFuncTransform"]
