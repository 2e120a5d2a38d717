"""Turning positions in TVMScript text into ``ScriptError``s that show the line and a caret."""
from __future__ import annotations

import difflib
from typing import Any, Iterable

from ..ir.errors import ScriptError, Source, Span


class SyntaxProblem(Exception):
    """Raised while building syntax nodes, before the Source is at hand; becomes a ScriptError."""

    def __init__(self, message: str, where: Any):
        super().__init__(message)
        self.message = message
        self.where = where


def span_of(source: Source, syn: Any) -> Span | None:
    """The Span of a syntax node or a Lark token (None when it has no known position)."""
    line = getattr(syn, "line", 0) or 0
    if line <= 0:
        return None
    col = getattr(syn, "col", None) or getattr(syn, "column", 1) or 1
    end_line = getattr(syn, "end_line", line) or line
    end_col = getattr(syn, "end_col", None) or getattr(syn, "end_column", col + 1) or col + 1
    # a statement's comments travel in the spans of the nodes built from it
    comments = source.comments.get((line, col)) if source.comments else None
    return Span(source, line, col, end_line, end_col, comments)


def error(source: Source, syn: Any, message: str, note: str | None = None) -> ScriptError:
    return ScriptError(message, span_of(source, syn), note)


def did_you_mean(word: str, candidates: Iterable[str]) -> str:
    """`` (did you mean "T.grid"?)`` or empty."""
    close = difflib.get_close_matches(word, list(candidates), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def join_or(words: list[str]) -> str:
    """``a``, ``a or b``, ``a, b or c``."""
    words = list(words)
    if len(words) <= 1:
        return "".join(words)
    return ", ".join(words[:-1]) + " or " + words[-1]
