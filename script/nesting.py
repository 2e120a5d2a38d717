"""The parser's one limit on nesting: expressions and statements nested deeper than
``MAX_NESTING`` (a 5,000-term sum, 5,000 nested calls or loops) are refused where the limit is
passed, so that every later walk of the IR stays within the room ``tvms.ir.deep`` gives it."""
from __future__ import annotations

from ..ir.deep import MAX_NESTING
from ..ir.errors import ScriptError, Source, Span
from . import syntax as S


def check_nesting(tree: S.Syn, source: Source, limit: int = MAX_NESTING) -> None:
    """Raise a ScriptError at the first syntax node nested more than ``limit`` deep."""
    stack: list = [(tree, 0)]  # (a syntax node, or a list of them, and its depth)
    while stack:
        value, depth = stack.pop()
        if isinstance(value, S.Syn):
            if depth > limit:
                line, col = value.line or 1, value.col or 1
                raise ScriptError(f"nesting too deep (limit {limit})", Span(source, line, col, line, col + 1))
            for name in type(value).__slots__:
                child = getattr(value, name, None)
                if isinstance(child, (S.Syn, list, tuple)):
                    stack.append((child, depth + 1))
        elif isinstance(value, (list, tuple)):
            stack.extend((child, depth) for child in value if isinstance(child, (S.Syn, list, tuple)))
