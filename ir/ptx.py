"""TVM 0.27's table-driven PTX dialect: which instruction a printed ``T.ptx.<family>(...)`` is.

TVM prints every call of it in one flat form,
``T.ptx.<family>(operands..., [pred], tokens in slot order ("" = omitted)..., marker)``, where the
marker is a comma-joined flag set: ``pred`` (the last operand is a predicate), ``keep`` (the
destination keeps its value when the predicate is false), ``p<i>`` (operand ``i`` is a ``.pred``
register), ``s<i>`` (operand ``i`` is the sink ``_`` and has no argument). A family holds several
entries (one per syntax shape: ``mov`` packs or unpacks); TVM picks the one that takes the tokens
and the operands. ``resolve`` does the same from the facts of TVM's table (ptx_table.json, written
by tools/gen_ptx_table.py): by the tokens, the operand count and the ``.pred`` markers. Where TVM
also looks at the operands' dtypes (``mov(lo, hi, packed)`` unpacks, ``mov(packed, lo, hi)``
packs: the same count) every entry left is returned, and the call records its family only.
"""
from __future__ import annotations

import json
import pathlib
import re
from dataclasses import dataclass

from . import op as op_registry
from .errors import TVMSError

ADDR_OP = "tirx.ptx.addr"  # T.ptx.addr(base, byte_offset): a pure address expression
_FLAG = re.compile(r"pred|keep|[ps]\d+")


@dataclass(frozen=True)
class Slot:
    name: str
    choices: tuple[str, ...]
    optional: bool


@dataclass(frozen=True)
class Entry:
    name: str  # TVM's table key; its op is tirx.ptx.<name>
    family: str  # as printed after "T.ptx.": the mnemonic, dots as "_", a Python keyword with "_"
    slots: tuple[Slot, ...]
    operands: tuple[tuple, ...]  # (registers, is a .pred input): a value, or {"by": slots, "at": ...}
    has_dst: bool

    @property
    def op_name(self) -> str:
        return f"tirx.ptx.{self.name}"

    def layout(self, tokens: tuple[str, ...]) -> list[tuple[int, bool]] | None:
        """(registers, is a .pred input) per operand under these tokens; None where TVM's table
        has no legal call with them."""
        mods = {slot.name: token for slot, token in zip(self.slots, tokens)}
        out = []
        for lanes, pred in self.operands:
            lanes, pred = _at(lanes, mods), _at(pred, mods)
            if lanes is None or pred is None:
                return None
            out.append((lanes, bool(pred)))
        return out


def _at(spec, mods: dict):
    if not isinstance(spec, dict):
        return spec
    return spec["at"].get("|".join(mods[name] for name in spec["by"]))


def _load() -> dict[str, tuple[Entry, ...]]:
    data = json.loads((pathlib.Path(__file__).parent / "ptx_table.json").read_text())
    slots = [Slot(name, tuple(choices), bool(optional)) for name, choices, optional in data["slots"]]
    operands = [tuple(o) for o in data["operands"]]
    return {family: tuple(Entry(name, family, tuple(slots[i] for i in s), tuple(operands[i] for i in o),
                                bool(dst)) for name, s, o, dst in entries)
            for family, entries in data["families"].items()}


FAMILIES: dict[str, tuple[Entry, ...]] = _load()
ENTRIES: dict[str, Entry] = {e.op_name: e for entries in FAMILIES.values() for e in entries}


def family_op_name(family: str) -> str:
    """The op of a call whose entry TVM would choose by its operands' dtypes: its family only
    (no entry of TVM's table is named "family")."""
    return f"tirx.ptx.family.{family}"


def family_of(op_name: str) -> str | None:
    """The family of a ``T.ptx.<family>`` instruction's op, None for any other op."""
    entry = ENTRIES.get(op_name)
    if entry is not None:
        return entry.family
    return op_name.removeprefix("tirx.ptx.family.") if op_name.startswith("tirx.ptx.family.") else None


# every instruction is a void statement printed T.ptx.<family>(...); the arguments are checked by
# resolve, not by the registry
for _family, _entries in FAMILIES.items():
    for _op in (*(e.op_name for e in _entries), family_op_name(_family)):
        op_registry.register(f"ptx.{_family}", "void", (0, None), name=_op)
op_registry.register("ptx.addr", "arg0", (2, 2), name=ADDR_OP)


@dataclass(frozen=True)
class Marker:
    pred: bool
    keep: bool
    pred_operands: frozenset[int]
    sunk: frozenset[int]


def parse_marker(marker: str) -> Marker:
    flags = marker.split(",") if marker else []
    bad = [f for f in flags if not _FLAG.fullmatch(f)]
    if bad or len(set(flags)) != len(flags):
        raise TVMSError(f"malformed T.ptx marker {marker!r}: a comma-joined set of 'pred', 'keep', "
                        f"'p<i>' and 's<i>' flags, or \"\"")
    return Marker("pred" in flags, "keep" in flags,
                  frozenset(int(f[1:]) for f in flags if f[0] == "p" and f != "pred"),
                  frozenset(int(f[1:]) for f in flags if f[0] == "s"))


def resolve(family: str, n_args: int, strings: tuple[str, ...]) -> tuple[Entry, ...]:
    """The entries of ``family`` that a printed call takes: ``n_args`` expression arguments
    (operands and predicate), then ``strings`` (the tokens and the marker). One entry when the
    call decides it; several where TVM would look at the operands' dtypes. TVMSError otherwise."""
    entries = FAMILIES.get(family)
    if entries is None:
        raise TVMSError(f"'T.ptx.{family}' is not a PTX instruction family of TVM 0.27")
    if not strings:
        raise TVMSError(f"T.ptx.{family}(...) ends with its modifier tokens and marker as TVM prints it, "
                        f"e.g. T.ptx.{family}(..., \"\"): tvms reads that form only")
    *tokens, marker = strings
    flags = parse_marker(marker)
    counts = sorted({len(e.slots) for e in entries})
    shaped = [e for e in entries if len(e.slots) == len(tokens)]
    if not shaped:
        raise TVMSError(f"T.ptx.{family} takes {_or(counts)} modifier token{'s' if counts != [1] else ''} "
                        f"before its marker, got {len(tokens)}")
    known = {t for e in entries for s in e.slots for t in s.choices}
    for token in tokens:
        if token and token not in known:
            raise TVMSError(f"{token!r} is a modifier of no slot of T.ptx.{family}")
    spelled = [e for e in shaped if all(t in s.choices or (t == "" and s.optional)
                                        for s, t in zip(e.slots, tokens))]
    if not spelled:
        e = shaped[0]
        raise TVMSError(f"T.ptx.{family} takes no modifiers {tuple(tokens)} in this order; its slots: "
                        + "; ".join(f"{s.name}{'?' if s.optional else ''}={{{','.join(s.choices)}}}"
                                    for s in e.slots))
    n_operands = n_args - flags.pred + len(flags.sunk)
    hits = []
    for e in spelled:
        layout = e.layout(tuple(tokens))
        if layout is None or sum(n for n, _ in layout) != n_operands:
            continue
        starts = [sum(n for n, _ in layout[:i]) for i in range(len(layout))]
        preds = {start for start, (n, pred) in zip(starts, layout) if n and pred}
        if preds == flags.pred_operands and (not flags.keep or (flags.pred and e.has_dst)):
            hits.append(e)
    if not hits:
        takes = sorted({sum(n for n, _ in lay) for e in spelled if (lay := e.layout(tuple(tokens)))})
        raise TVMSError(f"no instruction of T.ptx.{family} takes {n_operands} operand"
                        f"{'s' if n_operands != 1 else ''} with the marker {marker!r} and these modifiers"
                        + (f" (it takes {_or(takes)})" if takes else ""))
    return tuple(hits)


def _or(numbers: list[int]) -> str:
    words = [str(n) for n in numbers]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]
