"""tvms.script: the TVMScript parser, printer and decorators.

``from_source(text)`` parses text; ``node.script(dialect=...)`` prints (registered here);
``from tvms.script import ir as I, tir as T, relax as R`` gives ``@I.ir_module``, ``@T.prim_func``
and ``@R.function``.
"""
from . import ir, relax, tir
from .decorators import ir_module, prim_func
from .module_parser import from_source
from .printer import to_script

__all__ = ["from_source", "to_script", "ir", "relax", "tir", "ir_module", "prim_func"]
