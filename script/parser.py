"""Text -> syntax tree: the one Lark LALR grammar, the indenter, and parse-error messages."""
from __future__ import annotations

import ast as _pyast
import functools
import importlib.resources
import re
import warnings

from lark import Lark, Token
from lark.exceptions import (LarkError, UnexpectedCharacters, UnexpectedEOF, UnexpectedInput,
                             UnexpectedToken)
from lark.indenter import Indenter

from ..ir.errors import ScriptError, Source, Span
from . import syntax
from .diagnostics import SyntaxProblem, error, join_or
from .lexer import TVMScriptLexer


class _LayoutError(Exception):
    """A problem the indenter finds (indentation, brackets), at a 1-based line and column."""

    def __init__(self, line: int, col: int, message: str, width: int = 1):
        super().__init__(message)
        self.line, self.col, self.message, self.width = line, col, message, width


def _line_start(token: Token) -> tuple[int, int, str]:
    """(line, column, indentation) of the line a newline token leads to."""
    indent_str = token.rsplit("\n", 1)[1]
    return token.line + token.count("\n"), len(indent_str) + 1, indent_str


_CLOSER = {"(": ")", "[": "]", "{": "}"}
_COMMENT = re.compile(r"#[^\n]*")
_EOF = "<end of text>"  # the value of the _DEDENT tokens that close the blocks at the end


class TVMScriptIndenter(Indenter):
    """Python's indentation rule: _INDENT/_DEDENT tokens, suspended inside brackets.

    As in Python, a tab advances to the next multiple of 8 columns, and an indentation that
    would compare differently were a tab one column wide is an error (mixed tabs and spaces).
    _INDENT and _DEDENT tokens carry the position of the first character of the line they
    start, so that errors about them point there.
    """

    NL_type = "_NL"
    OPEN_PAREN_types = ["LPAR", "LSQB", "LBRACE"]
    CLOSE_PAREN_types = ["RPAR", "RSQB", "RBRACE"]
    INDENT_type = "_INDENT"
    DEDENT_type = "_DEDENT"
    tab_len = 8

    def process(self, stream):
        self.comments: list[tuple] = []  # (line, col, text, own_line, in_brackets), in order
        self.code_line = 0  # the last line that a token of code ends on
        self.paren_level = 0
        self.indent_level = [0]
        self.alt_level = [0]  # the same indentations measured with a tab one column wide
        self.brackets: list[Token] = []
        return self._process(stream)

    def _process(self, stream):
        token = None
        for token in stream:
            if token.type == self.NL_type:
                if "#" in token:
                    self.note_comments(token)
                yield from self.handle_NL(token)
                continue
            self.code_line = token.end_line
            if token.type in self.CLOSE_PAREN_types:
                if not self.brackets:
                    raise _LayoutError(token.line, token.column, f"unmatched {str(token)!r}: "
                                       f"there is no open bracket to close")
                opener = self.brackets[-1]
                if _CLOSER[str(opener)] != str(token):
                    raise _LayoutError(token.line, token.column,
                                       f"closing bracket {str(token)!r} does not match {str(opener)!r} "
                                       f"on line {opener.line}; expected {_CLOSER[str(opener)]!r}")
            yield token
            if token.type in self.OPEN_PAREN_types:
                self.brackets.append(token)
                self.paren_level += 1
            elif token.type in self.CLOSE_PAREN_types:
                self.brackets.pop()
                self.paren_level -= 1
        if self.brackets:
            opener = self.brackets[-1]
            raise _LayoutError(opener.line, opener.column,
                               f"{str(opener)!r} was never closed; expected {_CLOSER[str(opener)]!r}")
        end = _end_token(token)
        while len(self.indent_level) > 1:
            self.indent_level.pop()
            self.alt_level.pop()
            yield Token.new_borrow_pos(self.DEDENT_type, _EOF, end)

    def note_comments(self, token: Token) -> None:
        """Record the comments of a newline token (it holds the line breaks and comments
        between two lines of code); tvms.script.comments attaches them to statements."""
        for m in _COMMENT.finditer(token):
            start = m.start()
            newline = token.rfind("\n", 0, start)
            if newline >= 0:
                line, col, own_line = token.line + token.count("\n", 0, start), start - newline, True
            else:
                line, col = token.line, token.column + start
                own_line = line != self.code_line
            self.comments.append((line, col, m.group().rstrip(), own_line, self.paren_level > 0))

    def handle_NL(self, token: Token):
        if self.paren_level > 0:
            return
        yield token
        line, col, indent_str = _line_start(token)
        indent = alt = 0
        for ch in indent_str:
            if ch == "\t":
                indent = (indent // self.tab_len + 1) * self.tab_len
                alt += 1
            else:
                indent += 1
                alt += 1
        where = Token(self.INDENT_type, indent_str, token.end_pos, line, col, line, col + 1, token.end_pos)
        mixed = "inconsistent use of tabs and spaces in indentation"
        if indent > self.indent_level[-1]:
            if alt <= self.alt_level[-1]:
                raise _LayoutError(line, col, mixed)
            self.indent_level.append(indent)
            self.alt_level.append(alt)
            yield where
            return
        while indent < self.indent_level[-1]:
            self.indent_level.pop()
            self.alt_level.pop()
            yield Token.new_borrow_pos(self.DEDENT_type, indent_str, where)
        if indent != self.indent_level[-1]:
            raise _LayoutError(line, col, f"inconsistent indentation: this line is indented by {indent} "
                               f"columns, which matches no enclosing block "
                               f"(expected {self.indent_level[-1]})")
        if alt != self.alt_level[-1]:
            raise _LayoutError(line, col, mixed)


def _end_token(last: Token | None) -> Token:
    if last is None:
        return Token("$END", "", 0, 1, 1, 1, 1, 0)
    return Token("$END", "", last.end_pos, last.end_line, last.end_column, last.end_line,
                 last.end_column, last.end_pos)


_RAW_IN_STRING = re.compile("\r(?!\n)|\x00")
_RAW_NAMES = {"\r": ("carriage return", "\\r"), "\x00": ("NUL byte", "\\x00")}


def _check_string(tok: Token) -> Token:
    """Lexer callback: a string literal must be a plain (or raw) str with valid escapes."""
    text = str(tok)
    # Python ends a line at a lone carriage return and reads no NUL byte: in a literal they must
    # be escapes (the lexer's strings hold them, Python's would not)
    raw = _RAW_IN_STRING.search(text)
    if raw:
        what, escape = _RAW_NAMES[raw.group()]
        raise SyntaxProblem(f"a string literal holds a raw {what}; write {escape} instead", tok)
    if text[0] in "\"'" and "\\" not in text:
        return tok  # the common case: no prefix, no escapes
    prefix = re.match(r"[a-zA-Z]*", text).group(0).lower()
    if "b" in prefix:
        raise SyntaxProblem("bytes literals (b\"...\") are not TVMScript; write a plain string", tok)
    if "f" in prefix:
        raise SyntaxProblem("f-strings are not TVMScript; write a plain string", tok)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # "\\s" is a warning today and an error tomorrow
            _pyast.literal_eval(text)
    except (SyntaxError, ValueError, Warning) as e:
        detail = (getattr(e, "msg", None) or str(e)).replace("(unicode error) ", "")
        raise SyntaxProblem(f"invalid string literal: {detail}", tok) from None
    return tok


@functools.lru_cache(maxsize=None)
def _lark() -> Lark:
    grammar = importlib.resources.files("tvms.grammars").joinpath("tvmscript.lark").read_text()
    return Lark(grammar, parser="lalr", lexer=TVMScriptLexer, postlex=TVMScriptIndenter(),
                transformer=syntax.SyntaxBuilder(), maybe_placeholders=True, start="start",
                lexer_callbacks={"STRING": _check_string, "LONG_STRING": _check_string})


def parse_syntax(text: str, source: Source) -> syntax.Syn:
    """Parse TVMScript text into a syntax tree, or raise a ScriptError pointing at the problem."""
    if not text.endswith("\n"):
        text += "\n"
    try:
        tree = _lark().parse(text)
        tree.comments = _lark().options.postlex.comments
        return tree
    except _LayoutError as e:
        raise ScriptError(e.message, Span(source, e.line, e.col, e.line, e.col + e.width)) from None
    except SyntaxProblem as e:
        raise error(source, e.where, e.message) from None
    except UnexpectedInput as e:
        raise _convert(e, source, text) from None
    except LarkError as e:  # anything else Lark raises: still a ScriptError, placed at the start
        raise ScriptError(f"cannot parse this text: {e}", Span(source, 1, 1, 1, 2)) from None


# ---------------------------------------------------------------- describing what was expected
# Terminals that can start an expression, and the statement keywords.
_EXPR_START = {"NAME", "DEC_NUMBER", "RADIX_NUMBER", "FLOAT_NUMBER", "STRING", "LONG_STRING", "LPAR",
               "LSQB", "LBRACE", "NONE", "TRUE", "FALSE", "PREFIX", "NOT", "LAMBDA"}
_STMT_START = {"FOR", "IF", "WHILE", "WITH", "DEF", "CLASS", "AT", "RETURN", "PASS", "ASSERT",
               "IMPORT", "FROM"}
# After a complete expression: what may continue it.
_CONTINUE = {"BINOP", "AND", "OR", "IF", "DOT", "LPAR", "LSQB", "STAR", "__ANON_1", "IN", "NOT"}

_NAMES = {
    "_NL": "the end of the line", "$END": "the end of the text", "_INDENT": "an indented block",
    "_DEDENT": "the end of the block", "NAME": "a name", "DEC_NUMBER": "a number",
    "RADIX_NUMBER": "a number", "FLOAT_NUMBER": "a number", "STRING": "a string",
    "LONG_STRING": "a string", "COLON": "':'", "LPAR": "'('", "RPAR": "')'", "LSQB": "'['",
    "RSQB": "']'", "LBRACE": "'{'", "RBRACE": "'}'", "COMMA": "','", "EQUAL": "'='", "DOT": "'.'",
    "AUGOP": "an assignment operator such as '+='", "__ANON_0": "'->'", "__ANON_1": "'**'",
    "STAR": "'*'", "AT": "'@'", "BINOP": "an operator", "PREFIX": "an expression", "AND": "'and'",
    "OR": "'or'", "NOT": "'not'", "NONE": "an expression", "TRUE": "an expression",
    "FALSE": "an expression",
}

# Token types as they are named when they are the unexpected thing.
_FOUND = {"NAME": "name", "DEC_NUMBER": "number", "RADIX_NUMBER": "number", "FLOAT_NUMBER": "number",
          "STRING": "string", "LONG_STRING": "string"}


def _describe(expected: set[str]) -> str:
    """What the parser expected, in words: "an expression", "')' or ','", ..."""
    exp = set(expected)
    words: list[str] = []
    if exp & {"DEF", "FOR", "RETURN", "PASS"}:
        words.append("a statement")
        exp -= _STMT_START | _EXPR_START
    operator = "BINOP" in exp
    if operator:
        exp -= _CONTINUE | {"STRING", "LONG_STRING"}
    if len(exp & _EXPR_START) >= 4:
        words.append("an expression")
        exp -= _EXPR_START
    if operator:
        words.append("an operator")
    if "EQUAL" in exp:
        exp.discard("AUGOP")  # "'='" covers "+=" and friends
    if exp >= {"DEF", "CLASS"}:
        words.append("a 'def' or 'class'")
        exp -= {"DEF", "CLASS"}
    for t in sorted(exp, key=lambda t: (t in ("_NL", "$END", "_DEDENT", "_INDENT"), t)):
        if t == "_DEDENT" and words:
            continue  # "a statement or the end of the block" says no more than "a statement"
        name = _NAMES.get(t)
        if name is None:
            name = repr(t.lower()) if t.isalpha() and t.isupper() else "another token"
        if name not in words:
            words.append(name)
    return join_or(words) if words else "something else"


def _found(tok: Token) -> str:
    if tok.type in ("_NL",):
        return "end of line"
    if tok.type == "_DEDENT":
        return "end of the block"
    if tok.type == "_INDENT":
        return "indentation"
    kind = _FOUND.get(tok.type)
    text = str(tok)
    if len(text) > 30:
        text = text[:27] + "..."
    return f"{kind} {text!r}" if kind else repr(text)


def _previous(e: UnexpectedInput) -> Token | None:
    """The token just before the error, when the parser's stack still has it as a token."""
    stack = getattr(getattr(e, "state", None), "value_stack", None)
    if stack and isinstance(stack[-1], Token):
        return stack[-1]
    return None


def _end_of_text(text: str) -> tuple[int, int]:
    """The position just after the last character of the text that is not blank."""
    lines = text.rstrip().split("\n")
    return len(lines), len(lines[-1]) + 1


def _after_content(text: str, line: int, col: int) -> int:
    """Move a column that points at trailing blanks or a comment back to just after the code."""
    lines = text.split("\n")
    if not 0 < line <= len(lines):
        return col
    code = lines[line - 1][:col - 1]
    return len(code.rstrip()) + 1 if code.strip() else col


# Strings and comments (skipped) and brackets, for finding the bracket that was never closed.
_BRACKET_SCAN = re.compile(r"""(?ix) [ubfr]{0,2} (?: \"\"\"[\s\S]*?\"\"\" | '''[\s\S]*?''' | "(?:\\.|[^"\\\n])*"
                                                 | '(?:\\.|[^'\\\n])*' )
                               | \#[^\n]* | (?P<bracket>[][(){}])""")


def _unclosed_bracket(text: str) -> tuple[int, int, str] | None:
    """The innermost bracket of the text that is never closed: (offset, line, char), or None."""
    stack: list[tuple[int, str]] = []
    for m in _BRACKET_SCAN.finditer(text):
        ch = m.group("bracket")
        if ch is None:
            continue
        if ch in _CLOSER:
            stack.append((m.start(), ch))
        elif stack and _CLOSER[stack[-1][1]] == ch:
            stack.pop()
        else:
            return None  # a mismatch: the parser or the indenter reports it where it is
    if not stack:
        return None
    offset, ch = stack[-1]
    return offset, text.count("\n", 0, offset) + 1, ch


def _expected(e: UnexpectedToken) -> set[str]:
    """The terminals that could really come next (Lark's ``expected`` is the LALR lookahead set
    of the state, which holds terminals that only fit in other contexts)."""
    try:
        accepts = e.accepts
    except Exception:  # noqa: BLE001 - fall back to the lookahead set
        accepts = None
    return set(accepts) if accepts else set(e.expected)


def _convert(e: UnexpectedInput, source: Source, text: str) -> ScriptError:
    def at(line: int, col: int, message: str, width: int = 1) -> ScriptError:
        return ScriptError(message, Span(source, line, col, line, col + max(1, width)))

    if isinstance(e, UnexpectedCharacters):
        line, col = e.line, e.column
        rest = text[e.pos_in_stream:] if e.pos_in_stream is not None else ""
        ch = rest[:1]
        m = re.match(r"(?i)[ubfr]{0,2}(\"\"\"|'''|\"|')", rest)
        if m:
            quote = m.group(1)
            if len(quote) == 3:
                msg = f"unterminated string: the {quote} string starting here is never closed"
            else:
                msg = "unterminated string: the string starting here has no closing quote on this line"
        elif ch == "\\":
            msg = "unexpected '\\': a line continuation must be the last character of the line"
        elif ch.isprintable() and not ch.isspace():
            msg = f"unexpected character {ch!r}: it is not part of TVMScript"
        else:
            msg = f"unexpected character {ch!r} (U+{ord(ch):04X})" if ch else "unexpected character"
        return at(line, col, msg)

    end_line, end_col = _end_of_text(text)
    if isinstance(e, UnexpectedEOF):
        return at(end_line, end_col, f"unexpected end of text; expected {_describe(set(e.expected))}")

    assert isinstance(e, UnexpectedToken)
    tok = e.token
    unclosed = _unclosed_bracket(text)
    if unclosed is not None and (tok.type == "$END" or tok.start_pos is None
                                 or unclosed[0] < tok.start_pos and unclosed[1] < (tok.line or 0)):
        offset, line, ch = unclosed
        col = offset - (text.rfind("\n", 0, offset) + 1) + 1
        return at(line, col, f"{ch!r} was never closed; expected {_CLOSER[ch]!r}")
    expected = _expected(e)
    line = tok.line or end_line
    col = tok.column or end_col
    if tok.type == "_NL":
        col = _after_content(text, line, col)
    at_end = tok.type == "$END" or (line, col) > (end_line, end_col)
    if at_end:
        line, col = end_line, end_col
    if tok.type == "_INDENT":
        return at(line, col, "unexpected indentation: this line is indented more than the line "
                  "before, which does not open a block")
    if "_INDENT" in expected:
        return at(line, col, ("unexpected end of text; " if at_end else "") + "expected an indented block")
    if at_end:
        what = "end of text"
    elif tok.type == "_NL":
        if expected == {"COLON"} or "COLON" in expected and "EQUAL" not in expected \
                and not expected & {"RPAR", "RSQB", "RBRACE"}:
            return at(line, col, "expected ':' at the end of this line")
        what = "end of line"
    else:
        what = _found(tok)
    width = len(str(tok)) if tok.type not in ("_NL", "_INDENT", "_DEDENT", "$END") else 1
    prev = _previous(e)
    if prev is not None and prev.type in ("BINOP", "PREFIX", "NOT", "AND", "OR", "STAR", "__ANON_1") \
            and len(expected & _EXPR_START) >= 4:
        return at(line, col, f"unexpected {what}; expected an expression after {str(prev)!r}", width)
    if expected <= {"DEF", "CLASS", "AT"} and "DEF" in expected:
        return at(line, col, f"unexpected {what}; a decorator must be followed by a 'def' or a 'class'",
                  width)
    return at(line, col, f"unexpected {what}; expected {_describe(expected)}", width)
