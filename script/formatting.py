"""Formatting: the canonical text of a TVMScript file, or of the TVMScript inside a Python file.

In a ``.py`` file only the decorated definitions (``@I.ir_module`` classes, ``@T.prim_func`` and
``@R.function`` functions, at the top level or nested) are formatted; every other line stays byte
for byte as it was, and so do a definition's decorator lines, its indentation and its class name.
Python's ``ast`` only finds the definitions' lines: nothing of the file is executed.

``verify=True`` (before a write) parses the formatted text back and refuses, with a
``FormatRefused`` error, a text that does not give the same IR: a printer bug never reaches a file.
"""
from __future__ import annotations

import ast
import re
import textwrap
from typing import Any

from ..ir.errors import ScriptError, Source, Span, TVMSError
from ..ir.structural import first_mismatch
from .module_parser import ModuleParser, from_source
from .printer import PrintedDefinition, print_definition

# The last parts of the decorators whose definitions are TVMScript (``I.ir_module``,
# ``tvm.script.ir_module``, ``T.prim_func(private=True)``, ``R.function``, ...).
_SCRIPT_DECORATOR = re.compile(r"(^|\.)(ir_module|prim_func)$|(^|\.)(R|relax)\.function$")


_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")


class FormatRefused(TVMSError):
    """The formatted text would not parse back to the same IR (a printer bug): nothing is written."""


def format_script(text: str, name: str, dialect: str | None = None, verify: bool = False) -> str:
    """The canonical text of a TVMScript source (ends with a newline exactly when ``text`` does)."""
    node = from_source(text, name)
    # show_meta: constants written inline (R.const([...])) print as a metadata section; without
    # it their values would be lost ("# Metadata omitted")
    out = node.script(dialect=dialect or node.source_dialect, show_meta=True)
    if verify:
        _verify(node, out, Source(out, name), name)
    return out + "\n" if text.endswith("\n") else out


def format_python(text: str, name: str, dialect: str | None = None, verify: bool = False) -> str:
    """``text`` (a Python file) with its TVMScript definitions formatted, the rest unchanged."""
    lines = _LINE.findall(text)  # (not splitlines: a form feed or U+2028 ends no line for ast)
    out: list[str] = []
    done = 0  # lines[:done] are in out
    file_source = Source(text, name)
    for definition in _definitions(_python_tree(text, file_source)):
        first = definition.decorator_list[0].lineno - 1
        head = definition.lineno - 1  # the `class`/`def` line: the decorators before it stay as written
        last = definition.end_lineno
        out += lines[done:head]
        out += _format_definition(lines[first:last], head - first, first, definition, file_source,
                                  dialect, verify)
        done = last
    out += lines[done:]
    return "".join(out)


def _python_tree(text: str, source: Source) -> ast.Module:
    try:
        return ast.parse(text, filename=source.name)
    except SyntaxError as err:
        line, col = err.lineno or 1, err.offset or 1
        raise ScriptError(f"not valid Python: {err.msg}", Span(source, line, col, line, col + 1)) from None
    except ValueError as err:  # NUL bytes
        raise ScriptError(f"not valid Python: {err}", Span(source, 1, 1, 1, 2)) from None


def _definitions(tree: ast.AST) -> list:
    """The outermost TVMScript definitions, in file order (a module's functions are its own)."""
    found = []
    stack = [tree]
    while stack:
        node = stack.pop()
        for child in reversed(list(ast.iter_child_nodes(node))):
            if isinstance(child, (ast.ClassDef, ast.FunctionDef)) and any(
                    _SCRIPT_DECORATOR.search(_dotted(d)) for d in child.decorator_list):
                found.append(child)
            else:
                stack.append(child)
    return sorted(found, key=lambda d: d.lineno)


def _dotted(expr: ast.expr) -> str:
    if isinstance(expr, ast.Call):
        expr = expr.func
    parts = []
    while isinstance(expr, ast.Attribute):
        parts.append(expr.attr)
        expr = expr.value
    if isinstance(expr, ast.Name):
        parts.append(expr.id)
    return ".".join(reversed(parts))


def _format_definition(raw: list[str], n_decorators: int, first: int, definition: Any,
                       file_source: Source, dialect: str | None, verify: bool) -> list[str]:
    """The lines of one definition from its `class`/`def` line on, formatted and re-indented."""
    name = file_source.name
    indent = raw[0][:len(raw[0]) - len(raw[0].lstrip())]
    newline = "\r\n" if raw[0].endswith("\r\n") else "\n"
    piece = textwrap.dedent("".join(raw))
    source = Source(piece, name, line_offset=first, col_offset=len(indent))
    node = ModuleParser(piece, name, source=source).parse()
    # (the class keeps the name its author chose, the function its own)
    printed = print_definition(node, dialect or node.source_dialect, definition.name)
    body = _printed_definition(printed, definition, file_source)
    decorators = [line.rstrip("\r\n") for line in raw[:n_decorators]]
    decorators = [line[len(indent):] if line.startswith(indent) else line.lstrip() for line in decorators]
    if verify:
        kept = "\n".join(decorators + body) + "\n"
        _verify(node, kept, Source(kept, name, line_offset=first, col_offset=len(indent)), name)
    ends = raw[-1].endswith(("\n", "\r"))
    return [(indent + line if line else "") + (newline if ends or k < len(body) - 1 else "")
            for k, line in enumerate(body)]


def _printed_definition(printed: PrintedDefinition, definition: Any, file_source: Source) -> list[str]:
    """The printed `class`/`def` line and what follows it, without the import comments and the
    decorators before it; refused when the printer needs more than the definition (module-level
    TypeVar declarations, a metadata section), which a Python file holds elsewhere."""
    outside = printed.declarations + printed.footer
    if outside:
        extra = outside[0]
        raise ScriptError(f"cannot format {definition.name!r} inside a Python file: its text needs "
                          f"'{extra}' outside the definition; format it as a .tvms file",
                          Span(file_source, definition.lineno, definition.col_offset + 1,
                               definition.lineno, definition.col_offset + 2))
    return printed.definition[printed.head:]


def _verify(node: Any, out: str, source: Source, name: str) -> None:
    try:
        again = ModuleParser(source.text, name, source=source).parse()
    except ScriptError as err:
        raise FormatRefused(f"{name}: not written: the formatted text does not parse "
                            f"({err.message}); this is a bug in tvms, please report it") from None
    found = first_mismatch(node, again)
    if found is not None:
        path, a, b = found
        raise FormatRefused(f"{name}: not written: the formatted text parses to different IR (at "
                            f"{path or 'the root'}: {a!r} became {b!r}); this is a bug in tvms, "
                            f"please report it")
