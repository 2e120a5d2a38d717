"""tvms.script: the TVMScript parser, printer and decorators.

``from_source(text)`` parses; ``node.script(dialect=...)`` prints (registered here).
"""
from .module_parser import from_source
from .printer import to_script

__all__ = ["from_source", "to_script"]
