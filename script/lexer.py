"""A dedicated tokenizer for the TVMScript grammar: one regular expression, one pass.

Lark's own contextual lexer is general and correct but spends about as much time as the LALR
parser itself; this one produces the same token stream for ``grammars/tvmscript.lark`` at a
fraction of the cost (the indenter in ``parser.py`` then turns newlines into blocks). Terminal
names come from the grammar, so the two cannot drift apart. Where one character sequence can be two terminals (``-`` as a
binary or a prefix operator, ``*`` as multiplication or a star argument), the previous token
decides, as in Python's own tokenizer.
"""
from __future__ import annotations

import re
from typing import Any, Iterator

from lark import Token
from lark.lexer import Lexer
from lark.exceptions import UnexpectedCharacters

_MASTER = re.compile(r"""
 (?P<ws>[ \t\f]+)
|(?P<nl>(?:\r?\n[\t ]*|\#[^\n]*)+)
|(?P<cont>\\[ \t\f]*\r?\n)
|(?P<float>(?:\d(?:_?\d)*\.(?:\d(?:_?\d)*)?|\.\d(?:_?\d)*)(?:[eE][-+]?\d(?:_?\d)*)?|\d(?:_?\d)*[eE][-+]?\d(?:_?\d)*)
|(?P<radix>0(?:[xX](?:_?[0-9a-fA-F])+|[oO](?:_?[0-7])+|[bB](?:_?[01])+))
|(?P<dec>0(?:_?0)*|[1-9](?:_?\d)*)
|(?P<long_string>[ubfUBF]?[rR]?(?:\"\"\"[\s\S]*?(?<!\\)(?:\\\\)*?\"\"\"|'''[\s\S]*?(?<!\\)(?:\\\\)*?'''))
|(?P<string>[ubfUBF]?[rR]?(?:"(?!"").*?(?<!\\)(?:\\\\)*?"|'(?!'').*?(?<!\\)(?:\\\\)*?'))
|(?P<name>[^\W\d]\w*)
|(?P<op>\*\*=|//=|>>=|<<=|->|\*\*|//|<<|>>|<=|>=|==|!=|[-+*/%@&|^]=|[-+*/%@<>&|^~=.,:()\[\]{}])
""", re.VERBOSE)

_BINARY = frozenset("/ // % < > <= >= == != & | ^ << >>".split())
# Every augmented assignment of Python is one token, as the grammar's AUGOP: what the parser does
# not support it refuses with a position (a token the grammar does not know would escape it).
_AUGMENTED = frozenset("+= -= *= /= //= %= **= @= &= |= ^= <<= >>=".split())
# After these token types an operator is binary: they end an operand.
_OPERAND_END = frozenset({"NAME", "DEC_NUMBER", "RADIX_NUMBER", "FLOAT_NUMBER", "STRING", "LONG_STRING",
                          "RPAR", "RSQB", "RBRACE", "NONE", "TRUE", "FALSE"})


class TVMScriptLexer(Lexer):
    """Lark custom lexer (interface 0): ``lex(text)`` yields the grammar's tokens."""

    __future_interface__ = 0

    def __init__(self, lexer_conf: Any):
        literal = {t.pattern.value: t.name for t in lexer_conf.terminals if t.pattern.type == "str"}
        self.keywords = {v: n for v, n in literal.items() if v.isidentifier()}
        self.punct = {v: n for v, n in literal.items() if not v.isidentifier()}
        self.callbacks = dict(lexer_conf.callbacks or {})

    def lex(self, text: str) -> Iterator[Token]:
        keywords, callbacks = self.keywords, self.callbacks
        match = _MASTER.match
        pos, end = 0, len(text)
        line, line_start = 1, 0
        prev = ""  # type of the previous token
        depth = 0  # open brackets: a line break inside them continues the expression
        while pos < end:
            m = match(text, pos)
            if m is None:
                raise UnexpectedCharacters(text, pos, line, pos - line_start + 1)
            kind = m.lastgroup
            value = m.group()
            new_pos = m.end()
            col = pos - line_start + 1
            if kind == "ws":
                pos = new_pos
                continue
            if kind == "nl" or kind == "cont":
                breaks = value.count("\n")
                if kind == "nl":
                    # newlines and comments; the indenter turns them into block structure
                    last = text.rfind("\n", pos, new_pos)
                    end_col = new_pos - last if breaks else col + len(value)
                    yield Token("_NL", value, pos, line, col, line + breaks, end_col, new_pos)
                    if not depth:
                        prev = "_NL"
                if breaks:
                    line += breaks
                    line_start = text.rfind("\n", pos, new_pos) + 1
                pos = new_pos
                continue
            if kind == "name":
                ttype = keywords.get(value, "NAME")
            elif kind == "op":
                ttype = _OP_TYPES.get(value) or self.operator(value, prev)
                if ttype in _BRACKETS:
                    depth += _BRACKETS[ttype]
            else:
                ttype = _KIND_TYPES[kind]
            breaks = value.count("\n") if kind == "long_string" else 0
            if breaks:
                end_line, end_col = line + breaks, new_pos - text.rfind("\n", pos, new_pos)
            else:
                end_line, end_col = line, col + len(value)
            tok = Token(ttype, value, pos, line, col, end_line, end_col, new_pos)
            if ttype in callbacks:
                tok = callbacks[ttype](tok)
            yield tok
            if breaks:
                line, line_start = end_line, text.rfind("\n", pos, new_pos) + 1
            prev = ttype
            pos = new_pos

    def operator(self, value: str, prev: str) -> str:
        """The terminal of an operator whose meaning depends on what precedes it."""
        if value in ("+", "-"):
            return "BINOP" if prev in _OPERAND_END else "PREFIX"
        if value in ("*", "**", "@"):
            return "BINOP" if prev in _OPERAND_END else self.punct[value]
        return self.punct.get(value) or "BINOP"


_BRACKETS = {"LPAR": 1, "LSQB": 1, "LBRACE": 1, "RPAR": -1, "RSQB": -1, "RBRACE": -1}
_KIND_TYPES = {"dec": "DEC_NUMBER", "float": "FLOAT_NUMBER", "radix": "RADIX_NUMBER", "string": "STRING",
               "long_string": "LONG_STRING"}
_OP_TYPES = {"(": "LPAR", "[": "LSQB", "{": "LBRACE", ")": "RPAR", "]": "RSQB", "}": "RBRACE",
             "~": "PREFIX", **{op: "BINOP" for op in _BINARY}, **{op: "AUGOP" for op in _AUGMENTED}}
