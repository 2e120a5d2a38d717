"""Source spans and the exception family every tvms error belongs to."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Comments:
    """The comments a statement carries from its source text (each ``"# ..."`` as written):
    ``before`` on their own lines above it, ``after`` at the end of its first line, ``inside``
    first in its body (beside the lines that declare a block or function: axes, T.reads, ...),
    ``below`` on their own lines after it (and its body), at its indentation: a block's end."""

    before: tuple[str, ...] = ()
    after: str | None = None
    inside: tuple[str, ...] = ()
    below: tuple[str, ...] = ()

    def __add__(self, other: "Comments") -> "Comments":
        """Both, in order; ``other``'s trailing comment becomes a line of its own."""
        after = self.after
        before = self.before + other.before
        if other.after is not None:
            if after is None:
                after = other.after
            else:
                before += (other.after,)
        return Comments(before, after, self.inside + other.inside, self.below + other.below)


@dataclass(frozen=True, slots=True)
class Span:
    """A region of a source text; lines and columns count from 1. ``comments``: those attached
    to the statement that starts here (annotations like the position: never semantics)."""

    source: "Source"
    line: int
    col: int
    end_line: int
    end_col: int
    comments: Comments | None = field(default=None, compare=False)

    def __repr__(self) -> str:
        return f"Span({self.source.name}:{self.line}:{self.col})"


class Source:
    """A named text that spans point into (a file, ``<stdin>``, or a Python file's decorated code)."""

    __slots__ = ("name", "text", "line_offset", "col_offset", "_lines", "comments")

    def __init__(self, text: str, name: str = "<string>", line_offset: int = 0, col_offset: int = 0):
        self.name = name
        self.text = text
        self.line_offset = line_offset  # lines before the text in the real file (embedded scripts)
        self.col_offset = col_offset  # indentation removed from every line (embedded scripts)
        self._lines: list[str] | None = None
        # (line, col) of a statement -> its Comments, filled by the parser (tvms.script.comments)
        self.comments: dict[tuple[int, int], Comments] = {}

    def line_text(self, line: int) -> str:
        if self._lines is None:
            self._lines = self.text.split("\n")  # lines as the lexer counts them
        return self._lines[line - 1] if 0 < line <= len(self._lines) else ""


class TVMSError(Exception):
    """The root of every error tvms raises on purpose."""


def _visible(code: str) -> str:
    """The source line as shown under an error: control characters (a stray carriage return, a
    NUL, an escape sequence) become their one-column pictures (U+2400...), so they neither
    garble the terminal nor move the caret; tabs stay, the caret line copies them."""
    return "".join(chr(0x2400 + ord(c)) if (ord(c) < 32 and c != "\t") else "\u2421" if c == "\x7f" else c
                   for c in code)


class ScriptError(TVMSError):
    """An error located in TVMScript source: renders as ``file:line:col: error: message``,
    then the source line and a caret under the offending column."""

    def __init__(self, message: str, span: Span | None = None, note: str | None = None):
        self.message = message
        self.span = span
        self.note = note
        super().__init__(self.render())

    def render(self) -> str:
        if self.span is None:
            text = f"error: {self.message}"
        else:
            s = self.span
            src = s.source
            line = s.line + src.line_offset
            col = s.col + src.col_offset
            text = f"{src.name}:{line}:{col}: error: {self.message}"
            code = _visible(src.line_text(s.line).removesuffix("\r"))  # (a CRLF line end)
            if code:
                width = max(1, (s.end_col - s.col) if s.end_line == s.line else len(code) - s.col + 1)
                gutter = f"{line} | "
                # keep the tabs of the line so that the caret lines up under it
                lead = "".join(c if c == "\t" else " " for c in code[:s.col - 1])
                caret = " " * len(gutter) + lead + "^" + "~" * (width - 1)
                text += f"\n{gutter}{code}\n{caret}"
        if self.note:
            text += f"\nnote: {self.note}"
        return text
