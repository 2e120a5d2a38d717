"""How the TIR lowering passes are made: a PrimFunc -> PrimFunc function becomes a named pass.

``define_tir_pass("LowerInitBlock", lower_init_block)`` returns a factory (``LowerInitBlock()``
makes the pass, as ``tvm.s_tir.transform.LowerInitBlock()`` does) and registers it under the
same name, so ``tvms opt -p LowerInitBlock`` finds it. A pass that takes arguments or the pass
context is made with ``checked_prim_func_pass`` (``checked_module_pass``): every TIR pass refuses,
the same way, the tile primitives and layouts it would misread.
"""
from __future__ import annotations

from typing import Callable

from ...ir.function import PrimFunc
from ...ir.tile_layout import refuse_tile_layouts
from ...ir.tile_primitive import refuse_tile_primitives
from ..pass_registry import register_pass
from ..transform import Pass, module_pass, prim_func_pass

PrimFuncTransform = Callable[[PrimFunc], PrimFunc]


def refuse_unlowered_tirx(func: PrimFunc, name: str) -> None:
    """A TVMSError if ``func`` holds what no tvms TIR pass lowers: a user running a lowering pass
    by hand skips build's refusal, the passes that rewrite indexing would drop the layouts
    silently, and none knows a tile primitive. (The build pipelines call the transforms
    themselves, after build has checked once.)"""
    refuse_tile_layouts(func, name)
    refuse_tile_primitives(func, name)


def checked_prim_func_pass(pass_func: Callable, name: str) -> Pass:
    """``prim_func_pass(pass_func)`` named ``name``, refusing first what it would misread."""

    def checked(func: PrimFunc, mod: object, ctx: object) -> PrimFunc:
        refuse_unlowered_tirx(func, name)
        return pass_func(func, mod, ctx)

    return prim_func_pass(checked, opt_level=0, name=name)


def checked_module_pass(pass_func: Callable, name: str) -> Pass:
    """``module_pass(pass_func)`` named ``name``, refusing first what it would misread in any
    of the module's PrimFuncs."""

    def checked(mod: object, ctx: object) -> object:
        for _, func in mod.functions_items():
            if isinstance(func, PrimFunc):
                refuse_unlowered_tirx(func, name)
        return pass_func(mod, ctx)

    return module_pass(checked, opt_level=0, name=name)


def define_tir_pass(name: str, transform: PrimFuncTransform) -> Callable[[], Pass]:
    """A factory of the pass that applies ``transform`` to every PrimFunc, registered as ``name``."""

    def factory() -> Pass:
        return checked_prim_func_pass(lambda func, mod, ctx: transform(func), name)

    factory.__name__ = factory.__qualname__ = name
    factory.__doc__ = transform.__doc__
    register_pass(name, factory)
    return factory


__all__ = ["checked_module_pass", "checked_prim_func_pass", "define_tir_pass", "PrimFuncTransform",
           "refuse_unlowered_tirx"]
