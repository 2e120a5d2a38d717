"""Text -> syntax tree: the one Lark LALR grammar, the indenter, and parse-error messages."""
from __future__ import annotations

import functools
import importlib.resources

from lark import Lark, Token
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken
from lark.indenter import Indenter

from ..ir.errors import ScriptError, Source, Span
from . import syntax
from .diagnostics import SyntaxProblem, error


class _IndentError(Exception):
    def __init__(self, token: Token, message: str):
        super().__init__(message)
        self.token, self.message = token, message


class TVMScriptIndenter(Indenter):
    """Python's indentation rule: _INDENT/_DEDENT tokens, suspended inside brackets."""

    NL_type = "_NL"
    OPEN_PAREN_types = ["LPAR", "LSQB", "LBRACE"]
    CLOSE_PAREN_types = ["RPAR", "RSQB", "RBRACE"]
    INDENT_type = "_INDENT"
    DEDENT_type = "_DEDENT"
    tab_len = 8

    def handle_NL(self, token: Token):
        if self.paren_level > 0:
            return
        yield token
        indent_str = token.rsplit("\n", 1)[1]
        indent = indent_str.count(" ") + indent_str.count("\t") * self.tab_len
        if indent > self.indent_level[-1]:
            self.indent_level.append(indent)
            yield Token.new_borrow_pos(self.INDENT_type, indent_str, token)
        else:
            while indent < self.indent_level[-1]:
                self.indent_level.pop()
                yield Token.new_borrow_pos(self.DEDENT_type, indent_str, token)
            if indent != self.indent_level[-1]:
                raise _IndentError(token, f"inconsistent indentation: this line is indented by {indent} "
                                   f"columns, which matches no enclosing block "
                                   f"(expected {self.indent_level[-1]})")


@functools.lru_cache(maxsize=None)
def _lark() -> Lark:
    grammar = importlib.resources.files("tvms.grammars").joinpath("tvmscript.lark").read_text()
    return Lark(grammar, parser="lalr", lexer="contextual", postlex=TVMScriptIndenter(),
                transformer=syntax.SyntaxBuilder(), maybe_placeholders=True, start="start")


# Friendlier names for the terminals Lark reports as expected.
_TERMINAL_NAMES = {
    "_NL": "a new line", "_INDENT": "an indented block", "_DEDENT": "the end of the block",
    "NAME": "a name", "COLON": "':'", "LPAR": "'('", "RPAR": "')'", "LSQB": "'['", "RSQB": "']'",
    "LBRACE": "'{'", "RBRACE": "'}'", "COMMA": "','", "EQUAL": "'='", "DEC_NUMBER": "a number",
    "STRING": "a string", "DOT": "'.'", "IN": "'in'", "ADD_OP": "an operator",
    "MUL_OP": "an operator", "COMP_OP": "a comparison", "$END": "the end of the text",
}


def _describe(expected: set[str]) -> str:
    names = sorted({_TERMINAL_NAMES.get(t, repr(t.lower()) if t.isupper() else t) for t in expected})
    if len(names) > 6:
        names = names[:6] + ["..."]
    return ", ".join(names)


def parse_syntax(text: str, source: Source) -> syntax.Syn:
    """Parse TVMScript text into a syntax tree, or raise a ScriptError pointing at the problem."""
    if not text.endswith("\n"):
        text += "\n"
    try:
        return _lark().parse(text)
    except _IndentError as e:
        tok = e.token
        line = tok.line + tok.count("\n")
        col = len(tok.rsplit("\n", 1)[1]) + 1
        raise ScriptError(e.message, Span(source, line, col, line, col + 1)) from None
    except SyntaxProblem as e:
        raise error(source, e.where, e.message) from None
    except UnexpectedInput as e:
        raise _convert(e, source, text) from None


def _convert(e: UnexpectedInput, source: Source, text: str) -> ScriptError:
    if isinstance(e, UnexpectedCharacters):
        line, col = e.line, e.column
        ch = text[e.pos_in_stream] if e.pos_in_stream < len(text) else ""
        if ch in "\"'":
            msg = "unterminated string: the string starting here has no closing quote on this line"
        else:
            msg = f"unexpected character {ch!r}"
        return ScriptError(msg, Span(source, line, col, line, col + 1))
    if isinstance(e, UnexpectedEOF):
        lines = text.rstrip("\n").split("\n")
        line = len(lines)
        col = len(lines[-1]) + 1
        return ScriptError(f"unexpected end of text; expected {_describe(set(e.expected))}",
                           Span(source, line, col, line, col + 1))
    assert isinstance(e, UnexpectedToken)
    tok = e.token
    expected = set(e.expected)
    if tok.type == "$END":
        lines = text.rstrip("\n").split("\n")
        line, col = len(lines), len(lines[-1]) + 1
        return ScriptError(f"unexpected end of text; expected {_describe(expected)}",
                           Span(source, line, col, line, col + 1))
    line = tok.line or 1
    col = tok.column or 1
    if tok.type == "_NL":
        # the newline token starts at the end of the offending line
        what = "end of line"
        if "COLON" in expected:
            return ScriptError("expected ':' at the end of this line", Span(source, line, col, line, col + 1))
        if {"RPAR", "RSQB", "RBRACE"} & expected:
            return ScriptError("unclosed bracket: expected " + _describe(expected & {"RPAR", "RSQB", "RBRACE", "COMMA"}),
                               Span(source, line, col, line, col + 1))
    elif tok.type == "_INDENT":
        what = "indentation"
        return ScriptError("unexpected indentation", Span(source, line + 1, 1, line + 1, 2))
    elif tok.type == "_DEDENT":
        what = "end of block"
    else:
        what = repr(str(tok))
    width = max(1, len(str(tok))) if tok.type not in ("_NL", "_INDENT", "_DEDENT") else 1
    if "_INDENT" in expected and tok.type in ("_NL", "_DEDENT") or (expected == {"_INDENT"}):
        return ScriptError("expected an indented block", Span(source, line, col, line, col + width))
    return ScriptError(f"unexpected {what}; expected {_describe(expected)}",
                       Span(source, line, col, line, col + width))
