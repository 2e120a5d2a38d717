"""tvms.script: the TVMScript parser, printer and decorators.

``from_source(text)`` parses text; ``node.script(dialect=...)`` prints (registered here);
``from tvms.script import ir as I, tir as T`` gives ``@I.ir_module`` and ``@T.prim_func``.
"""
from . import ir, tir
from .decorators import ir_module, prim_func
from .module_parser import from_source
from .printer import to_script

__all__ = ["from_source", "to_script", "ir", "tir", "ir_module", "prim_func"]
