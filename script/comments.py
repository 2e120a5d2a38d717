"""Comments of TVMScript text, attached to the statements they belong to.

The indenter (``parser.TVMScriptIndenter``) records every comment with its position; here each
one becomes part of a statement's ``Comments`` (``tvms.ir.errors``), keyed by where the statement
starts, so that the builders put it into the spans of the nodes they make (``span_of``):

- a comment on a line of its own goes ``before`` the next statement; at the end of a block
  (no statement of the block follows) it goes ``below`` the block's last statement, choosing
  among the blocks that end there the innermost one it is indented at least as deep as;
- the comments of lines that make no statement of their own move on: those of a block's or a
  function's declarations (``T.axis``, ``T.reads``, ``T.func_attr``, ...) go ``inside`` it,
  printed first in its body; others to the next statement, and those of ``R.output(...)``
  below the dataflow block's last binding;
- a comment after code on the first line of a statement (the header line of a ``for``,
  ``with``, ``if``, ``def``) is that statement's ``after``;
- a comment inside a statement that spans lines (between the arguments of a call, after its
  closing bracket) goes ``before`` that statement: the printer lays expressions out again.

The lines that the printer generates (``# from tvm.script import ...``, ``# from typing import
TypeVar``, ``# with T.block("root"):``, the note on omitted metadata) are dropped: they are
printed again where they belong, never twice. So are the lines that older TVM printers wrote
into every function (``# function attr dict``, ``# body``, ``# with T.block("root")``): the seed
tutorials show them, and they are not a user's words.
"""
from __future__ import annotations

import bisect
from dataclasses import replace
from typing import Any

from ..ir.errors import Comments, Source
from . import syntax as S
from .dialect import DIALECTS, RELAX_HEADER
from .printer import METADATA_NOTE

# The comment lines that the printer writes itself.
GENERATED = frozenset([line for d in DIALECTS.values()
                       for line in (*d.header, d.typevar_header, f'# with T.{d.block}("root"):') if line]
                      + [RELAX_HEADER, METADATA_NOTE]
                      + ["# function attr dict", "# body", '# with T.block("root")'])


def attach(tree: S.Module, source: Source) -> None:
    """Fill ``source.comments`` with the comments of the parsed text, by statement start."""
    raw = [c for c in tree.comments if c[2] not in GENERATED]
    if not raw:
        return
    entries = _statements(tree.body, source.text.split("\n"))
    if not entries:
        return
    starts = [e.first_line for e in entries]
    notes: dict[Any, tuple[list, list, list]] = {}

    def note(entry: "_Entry", where: int, text: str) -> None:
        notes.setdefault(entry.key, ([], [], []))[where].append(text)

    for line, col, text, own_line, in_brackets in raw:
        if own_line and not in_brackets:
            prev_i = bisect.bisect_left(starts, line) - 1
            next_i = bisect.bisect_right(starts, line)
            nxt = entries[next_i] if next_i < len(entries) else None
            if prev_i >= 0 and entries[prev_i].key[0] > line:  # between decorators and `def`
                note(entries[prev_i], 0, text)
                continue
            owner = _closing_block_end(entries, prev_i, nxt, line, col) if prev_i >= 0 else None
            if owner is not None:
                note(owner, 2, text)
            elif nxt is not None:
                note(nxt, 0, text)
            continue
        host_i = bisect.bisect_right(starts, line) - 1
        if host_i < 0:
            note(entries[0], 0, text)
            continue
        host = entries[host_i]
        if line == host.key[0] and not own_line and not notes.get(host.key, ((), [], ()))[1]:
            note(host, 1, text)
        else:
            note(host, 0, text)
    source.comments = {key: Comments(tuple(b), a[0] if a else None, (), tuple(w))
                       for key, (b, a, w) in notes.items()}


def take(source: Source, syn: Any) -> Comments | None:
    """The comments of a statement, which no node built from it will carry then."""
    return source.comments.pop((syn.line, syn.col), None) if source.comments else None


def as_lines(comments: Comments) -> tuple[str, ...]:
    return comments.before + ((comments.after,) if comments.after else ()) + comments.inside \
        + comments.below


def add_below(node: Any, comments: Comments) -> Any:
    """``node`` with more comments below it (a node already built: its span is rebuilt)."""
    span = node.span
    if span is None:
        return node
    below = Comments(below=as_lines(comments))
    return node.with_changes(span=replace(span, comments=span.comments + below if span.comments else below))


def carry(source: Source, syn: Any, to: Any, where: str = "before") -> None:
    """Move the comments of a statement that makes no node of its own (``T.reads``, ``T.func_attr``,
    ``R.output``) to another statement, as lines ``before`` it, ``inside`` it (first in its body)
    or ``below`` it."""
    comments = take(source, syn)
    if comments is None or to is None:
        return
    key = (to.line, to.col)
    old = source.comments.get(key, Comments())
    if where == "before" and comments.after is not None and old.after is None:
        # a trailing comment stays one: the printer writes the lines that make no node (a
        # variable's or a buffer's declaration) as the first lines of the statement they precede,
        # and its trailing comment at the end of the first, so the text is a fixed point
        lines = as_lines(replace(comments, after=None))
        source.comments[key] = replace(old, before=lines + old.before, after=comments.after)
        return
    lines = as_lines(comments)
    source.comments[key] = Comments(before=lines) + old if where == "before" else \
        old + Comments(**{where: lines})


class _Entry:
    """A statement in source order: where it starts (its decorators included), the key of its
    comments, the block it is in (``body``: an id; ``indent``: the block's column) and the
    statement whose block that is."""

    __slots__ = ("first_line", "key", "body", "indent", "parent", "fence")

    def __init__(self, first_line: int, key: tuple, body: int, indent: int, parent: "_Entry | None",
                 fence: int):
        self.first_line, self.key, self.body, self.indent, self.parent = first_line, key, body, indent, parent
        self.fence = fence  # the block ends before this line (the `else:` after an if's body)


def _bodies(syn: Any) -> list[list]:
    if isinstance(syn, S.If):
        return [b for b in (syn.body, syn.orelse) if b]
    if isinstance(syn, (S.For, S.While, S.With, S.FunctionDef, S.ClassDef)):
        return [syn.body]
    return []


def _statements(top: list, lines: list[str]) -> list[_Entry]:
    """Every statement with a known position, in source order (an explicit stack: the depth of
    nesting is the input's)."""
    entries: list[_Entry] = []
    never = len(lines) + 1
    stack: list[tuple[list, int, _Entry | None, int]] = [(top, 0, None, never)]
    while stack:
        body, i, parent, fence = stack.pop()
        if i >= len(body):
            continue
        stack.append((body, i + 1, parent, fence))
        syn = body[i]
        if not getattr(syn, "line", 0):
            continue  # (imports carry no position)
        first = min([syn.line] + [d.line for d in getattr(syn, "decorators", ()) if d.line])
        indent = _indentation(lines, _first_line(body))
        entry = _Entry(first, (syn.line, syn.col), id(body), indent, parent, fence)
        entries.append(entry)
        inner = _bodies(syn)
        if len(inner) == 2:  # an if with an else: its body ends at the `else:` line
            stack.append((inner[1], 0, entry, never))
            stack.append((inner[0], 0, entry, _else_line(lines, inner[0][-1].end_line, _first_line(inner[1]))))
        elif inner:
            stack.append((inner[0], 0, entry, never))
    return entries


def _else_line(lines: list[str], after: int, before: int) -> int:
    """The line of the ``else:`` (or ``elif``) between an if's body and its else branch."""
    for line in range(after + 1, before):
        code = lines[line - 1].lstrip()
        if code.startswith(("else", "elif")):
            return line
    return before


def _first_line(body: list) -> int:
    for syn in body:
        if getattr(syn, "line", 0):
            return min([syn.line] + [d.line for d in getattr(syn, "decorators", ()) if d.line])
    return 0


def _indentation(lines: list[str], line: int) -> int:
    """The column where the code of a line starts."""
    text = lines[line - 1] if 0 < line <= len(lines) else ""
    return len(text) - len(text.lstrip(" \t")) + 1


def _closing_block_end(entries: list[_Entry], prev_i: int, nxt: _Entry | None, line: int,
                       col: int) -> _Entry | None:
    """For a comment at ``line``, ``col`` after ``entries[prev_i]``: the last statement of the innermost
    block that ends before ``nxt`` and is indented no deeper than the comment, or None (the
    comment then goes before ``nxt``)."""
    open_bodies = set()
    e = nxt
    while e is not None:
        open_bodies.add(e.body)
        e = e.parent
    e = entries[prev_i]
    while e is not None and e.body not in open_bodies:
        if e.indent <= col and line < e.fence:
            return e
        e = e.parent
    return None
