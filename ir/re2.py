"""RE2 regular expressions (ONNX's ``RegexFullMatch``), matched in linear time.

A model's pattern is data: it is parsed here by RE2's syntax (not Python's: ``$`` is the end of
the text, ``\\w``/``\\d``/``\\s``/``\\b`` are ASCII, ``a{,3}`` is literal text, ``\\z`` ends the
text) into a Thompson automaton, whose states are followed all at once over the text: the time is
at most (text length) x (automaton size), whatever the pattern, so no pattern can hang the process
(a backtracking matcher such as Python's ``re`` takes exponential time on ``(a*)*b``). The bound is
concrete: a pattern's automaton has at most MAX_SIZE states plus class ranges (each class's
ranges sorted and merged, so testing a character is a binary search), and each character of the
text visits each state at most once. A full match needs no captures, so only the set of states is
kept. What RE2 refuses is refused (backreferences, lookaround, possessive or atomic forms, repeat
counts over 1000, nested counted repeats whose counts multiply past 1000, groups nested past
MAX_DEPTH); what RE2 reads in a way not written here (case-insensitive matching, Unicode classes
``\\p``, POSIX classes, octal escapes) is refused too, rather than matched differently.
"""
from __future__ import annotations

import bisect
import functools
from typing import Callable

from .errors import TVMSError

MAX_REPEAT = 1000  # RE2's bound on a repeat count, and on the product of nested counts
MAX_SIZE = 10_000  # the automaton's states plus its classes' ranges
MAX_DEPTH = 100  # groups nested in groups
_WORD = ((48, 57), (65, 90), (95, 95), (97, 122))
_CLASSES = {"d": ((48, 57),), "w": _WORD, "s": ((9, 10), (12, 13), (32, 32))}  # (RE2's \s has no \v)
_ESCAPES = {"n": 10, "t": 9, "r": 13, "f": 12, "v": 11, "a": 7}
_NOT_IN_RE2 = {"=": "lookahead", "!": "negative lookahead", "<=": "lookbehind", "<!": "negative lookbehind",
               ">": "atomic groups", "#": "comments", "(": "conditionals"}


class PatternError(TVMSError):
    pass


def _merged(ranges) -> tuple:
    """``ranges`` sorted, overlapping or adjacent ones joined."""
    out: list = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return tuple(out)


def _in(ranges: tuple, code: int) -> bool:
    """Whether ``code`` is in the merged ``ranges`` (a binary search)."""
    k = bisect.bisect_right(ranges, (code, 0x10FFFF + 1)) - 1
    return k >= 0 and code <= ranges[k][1]


class _Parser:
    """Recursive descent over RE2's grammar; nodes: ("set", ranges, negated), ("cat", [..]),
    ("alt", [..]), ("rep", node, min, max or None), ("count", rep, its count) around a ``{n,m}``
    rep, ("assert", kind); ranges are sorted and merged."""

    def __init__(self, pattern: str):
        self.text, self.at = pattern, 0
        self.dotall = self.multiline = False
        self.depth, self.names = 0, set()

    def fail(self, what: str) -> PatternError:
        return PatternError(f"the regular expression {self.text!r}: {what} (at offset {self.at})")

    def peek(self, ahead: int = 0) -> str:
        k = self.at + ahead
        return self.text[k] if k < len(self.text) else ""

    def take(self) -> str:
        c = self.peek()
        if not c:
            raise self.fail("unexpected end")
        self.at += 1
        return c

    def parse(self):
        node = self.alternation()
        if self.at < len(self.text):
            raise self.fail("unbalanced ')'")
        if _count_budget(node, MAX_REPEAT) == 0:
            raise self.fail(f"nested repeat counts multiply past {MAX_REPEAT} (RE2's bound)")
        return node

    def alternation(self):
        saved = (self.dotall, self.multiline)  # (flags set inside a group end with it)
        branches = [self.sequence()]
        while self.peek() == "|":
            self.at += 1
            branches.append(self.sequence())
        self.dotall, self.multiline = saved
        return branches[0] if len(branches) == 1 else ("alt", branches)

    def sequence(self):
        items = []
        while self.peek() not in ("", "|", ")"):
            atom = self.atom()
            if atom is None:
                continue
            if atom[0] == "quote":  # (a repeat after \Q...\E repeats its last character)
                if not atom[1]:
                    continue
                items += atom[1][:-1]
                atom = atom[1][-1]
            items.append(self.repeats(atom))
        return ("cat", items)

    def repeats(self, atom):
        while True:
            c = self.peek()
            counted = c == "{" and (counts := self.counts()) is not None
            if c in ("*", "+", "?"):
                self.at += 1
                low, high = {"*": (0, None), "+": (1, None), "?": (0, 1)}[c]
            elif counted:
                low, high = counts
            else:
                return atom
            if self.peek() == "?":  # (lazy: the same language, so the same full match)
                self.at += 1
            if self.peek() in ("*", "+", "?") or (self.peek() == "{" and self.counts(peek=True)):
                raise self.fail("RE2 refuses a repeat of a repeat (possessive or doubled quantifiers)")
            atom = ("rep", atom, low, high)
            if counted:  # (marked for RE2's bound on nested counts)
                atom = ("count", atom, low if high is None else high)

    def counts(self, peek: bool = False):
        """(min, max) of a ``{n}``, ``{n,}`` or ``{n,m}`` here, None when the brace is literal text."""
        end = self.text.find("}", self.at)
        body = self.text[self.at + 1:end] if end > 0 else ""
        low, comma, high = body.partition(",")
        if not _decimal(low) or not (_decimal(high) or not high):
            return None
        if peek:
            return True
        low_n, high_n = int(low), (int(high) if high else None) if comma else int(low)
        if low_n > MAX_REPEAT or (high_n or 0) > MAX_REPEAT or (high_n is not None and high_n < low_n):
            raise self.fail(f"a bad repeat count {{{body}}} (RE2 allows 0 to {MAX_REPEAT}, min <= max)")
        self.at = end + 1
        return low_n, high_n

    def atom(self):
        c = self.take()
        if c == "(":
            return self.group()
        if c == "[":
            return self.char_class()
        if c == ".":
            return ("set", () if self.dotall else ((10, 10),), True)
        if c == "^":
            return ("assert", "bol" if self.multiline else "start")
        if c == "$":
            return ("assert", "eol" if self.multiline else "end")
        if c == "\\":
            node = self.escape(in_class=False)
            return ("set",) + node[1:] if node[0] == "class" else node
        if c in ("*", "+", "?"):
            raise self.fail("a repeat of nothing")
        return ("set", ((ord(c), ord(c)),), False)

    def group(self):
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise self.fail(f"groups nested more than {MAX_DEPTH} deep")
        if self.peek() != "?":
            node = self.alternation()
        elif self.text.startswith(("?P<", "?<"), self.at) and self.peek(2) not in ("=", "!"):
            end = self.text.find(">", self.at)
            name = self.text[self.at + (3 if self.peek(1) == "P" else 2):end]
            if end < 0 or not name.isidentifier():
                raise self.fail("a bad group name")
            if name in self.names:
                raise self.fail(f"a duplicate group name {name!r}")
            self.names.add(name)
            self.at = end + 1
            node = self.alternation()
        else:
            self.at += 1
            for head, what in sorted(_NOT_IN_RE2.items(), key=lambda kv: -len(kv[0])):
                if self.text.startswith(head, self.at):
                    raise self.fail(f"RE2 has no {what}")
            flags = ""
            while self.peek() and self.peek() in "imsU-":
                flags += self.take()
            if "i" in flags:
                raise self.fail("case-insensitive matching (?i) is not supported (RE2 folds case by "
                                "Unicode rules this matcher does not implement)")
            on = flags.split("-")[0]
            # ((?:...) and (?) set no flag; a '-' must be followed by a flag)
            if flags.count("-") > 1 or flags.endswith("-") or self.peek() not in (")", ":"):
                raise self.fail("a bad flag group")
            dotall, multiline = "s" in on or (self.dotall and "s" not in flags), \
                "m" in on or (self.multiline and "m" not in flags)
            if self.take() == ")":  # (?s): to the end of the enclosing group
                self.dotall, self.multiline = dotall, multiline
                self.depth -= 1
                return None
            saved = (self.dotall, self.multiline)
            self.dotall, self.multiline = dotall, multiline
            node = self.alternation()
            self.dotall, self.multiline = saved
        if self.take() != ")":
            raise self.fail("missing ')'")
        self.depth -= 1
        return node

    def escape(self, in_class: bool):
        c = self.take()
        if c.lower() in _CLASSES:
            return ("class", _CLASSES[c.lower()], c.isupper())
        if c in _ESCAPES:
            return _char(_ESCAPES[c])
        if c == "x":  # \xHH or \x{H...}
            braced = self.peek() == "{"
            end = self.text.find("}", self.at) if braced else self.at + 2
            if end < 0:
                raise self.fail("missing '}' of a \\x{...} escape")
            digits = self.text[self.at + braced:end]
            self.at = end + braced
            if not (0 < len(digits) <= 6 and all(d in "0123456789abcdefABCDEF" for d in digits)
                    and (braced or len(digits) == 2) and int(digits, 16) <= 0x10FFFF):
                raise self.fail("a bad \\x escape")
            return _char(int(digits, 16))
        if not in_class:
            kinds = {"b": "word", "B": "not_word", "A": "start", "z": "end"}
            if c in kinds:
                return ("assert", kinds[c])
            if c == "Q":  # literal text up to \E
                end = self.text.find("\\E", self.at)
                end = len(self.text) if end < 0 else end
                literal, self.at = self.text[self.at:end], min(end + 2, len(self.text))
                return ("quote", [_char(ord(ch)) for ch in literal])
        if c.isalnum() or c == "_" or not c.isascii():
            what = {"p": "Unicode classes", "P": "Unicode classes", "C": "\\C", "Z": "RE2 writes the end of text \\z"}
            raise self.fail(f"the escape \\{c} is not supported"
                            + (f" ({what[c]})" if c in what else " (RE2 has no backreferences)" if c.isdigit()
                               else "" if c.isascii() else " (RE2 escapes only ASCII punctuation)"))
        return _char(ord(c))  # (escaped punctuation stands for itself)

    def char_class(self):
        negated = self.peek() == "^"
        self.at += negated
        ranges, first = [], True
        while first or self.peek() != "]":
            if not self.peek():
                raise self.fail("missing ']'")
            if self.text.startswith("[:", self.at):
                raise self.fail("POSIX classes [:name:] are not supported")
            low = self.class_item()
            if low[0] == "class":
                if low[2]:
                    raise self.fail("a negated class (\\D, \\W, \\S) inside [...] is not supported")
                ranges.extend(low[1])
            elif self.peek() == "-" and self.peek(1) not in ("]", ""):
                self.at += 1
                high = self.class_item()
                if high[0] == "class" or high[1][0][0] < low[1][0][0]:  # ([0-\d] is refused by RE2 too)
                    raise self.fail("a bad range in [...]")
                ranges.append((low[1][0][0], high[1][0][0]))
            else:
                ranges.append(low[1][0])
            first = False
        self.at += 1
        return ("set", _merged(ranges), negated)

    def class_item(self):
        c = self.take()
        return self.escape(in_class=True) if c == "\\" else _char(ord(c))


def _decimal(text: str) -> bool:
    return text.isascii() and text.isdigit()


def _char(code: int):
    return ("set", ((code, code),), False)


def _count_budget(node, budget: int) -> int:
    """What is left of RE2's budget for nested repeat counts once ``node``'s innermost counts have
    divided it (RE2's RepetitionWalker: each ``{n,m}`` divides by m, or n when unbounded); 0 when
    the counts multiply past it."""
    kind = node[0]
    if kind == "count":
        return _count_budget(node[1], budget // node[2] if node[2] else budget)
    if kind == "rep":
        return _count_budget(node[1], budget)
    if kind in ("cat", "alt"):
        return min((_count_budget(item, budget) for item in node[1]), default=budget)
    return budget


class _Automaton:
    """Thompson's construction: state k is ("set", ranges, negated, next), ("split", a, b),
    ("assert", kind, next) or ("match",)."""

    def __init__(self, pattern: str):
        self.states: list = []
        self.size = 0
        self.start = self.build(_Parser(pattern).parse(), self.add(("match",)))

    def add(self, state) -> int:
        self.size += 1 + (len(state[1]) if state and state[0] == "set" else 0)
        if self.size > MAX_SIZE:
            raise PatternError(f"the regular expression is too large (over {MAX_SIZE} states and class ranges)")
        self.states.append(state)
        return len(self.states) - 1

    def build(self, node, after: int) -> int:
        """The start of ``node``'s states, which continue at ``after``."""
        kind = node[0]
        if kind == "set":
            return self.add(("set", node[1], node[2], after))
        if kind == "assert":
            return self.add(("assert", node[1], after))
        if kind == "count":
            return self.build(node[1], after)
        if kind == "cat":
            for item in reversed(node[1]):
                after = self.build(item, after)
            return after
        if kind == "alt":
            starts = [self.build(b, after) for b in node[1]]
            return functools.reduce(lambda a, b: self.add(("split", a, b)), starts)
        _, body, low, high = node
        if high is None:  # body{low,}: low copies, then a loop
            loop = self.add(None)
            self.states[loop] = ("split", self.build(body, loop), after)
            after = loop
        else:  # the optional copies nest: (body (body ...)?)?
            for _ in range(high - low):
                after = self.add(("split", self.build(body, after), after))
        for _ in range(low):
            after = self.build(body, after)
        return after

    def full_match(self, text: str) -> bool:
        current = self.closure({self.start}, text, 0)
        for at, ch in enumerate(text):
            code, moved = ord(ch), set()
            for k in current:
                state = self.states[k]
                if state[0] == "set" and _in(state[1], code) != state[2]:
                    moved.add(state[3])
            if not moved:
                return False
            current = self.closure(moved, text, at + 1)
        return any(self.states[k][0] == "match" for k in current)

    def closure(self, states: set, text: str, at: int) -> set:
        """``states`` and what they reach without reading a character at ``at``."""
        seen, todo = set(), list(states)
        while todo:
            k = todo.pop()
            if k in seen:
                continue
            seen.add(k)
            state = self.states[k]
            if state[0] == "split":
                todo += (state[1], state[2])
            elif state[0] == "assert" and _holds(state[1], text, at):
                todo.append(state[2])
        return seen


def _holds(kind: str, text: str, at: int) -> bool:
    before, after = text[at - 1:at], text[at:at + 1]
    if kind == "start":
        return at == 0
    if kind == "end":
        return at == len(text)
    if kind == "bol":
        return before in ("", "\n")
    if kind == "eol":
        return after in ("", "\n")
    boundary = _is_word(before) != _is_word(after)
    return boundary if kind == "word" else not boundary


def _is_word(ch: str) -> bool:
    return bool(ch) and _in(_WORD, ord(ch))


@functools.lru_cache(maxsize=64)
def compile_pattern(pattern: str) -> Callable[[str], bool]:
    """The full-match test of the RE2 ``pattern``; a PatternError names what is refused."""
    return _Automaton(pattern).full_match
