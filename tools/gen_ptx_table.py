"""Write ir/ptx_table.json: the facts of TVM 0.27's table-driven PTX dialect (``T.ptx.<family>``)
that reading and printing a call need, taken from TVM's own table.

    /work/tvm-venv/bin/python tools/gen_ptx_table.py [OUT]     # default: ir/ptx_table.json

Per family (as printed: ``and_``, ``ld``, ``cp``), its entries in TVM's order; per entry
``[name, slots, operands, has_dst]``: its name (the op is ``tirx.ptx.<name>``), its modifier slots
(``[name, token choices, may be omitted]``) and its operands as the caller passes them (literal
immediates take no argument: ``[registers, is a .pred input]``), both as indices into the shared
lists ``slots`` and ``operands`` (entries of one family share most of them), and whether it writes a
destination (what ``"keep"`` needs). An operand's
register count and whether it is a ``.pred`` input may depend on the modifiers; those are written
as a lookup: the slots the value depends on and the value per combination of their tokens
("" = omitted), found by watching which slots TVM's function reads. Each combination TVM's
function refuses is left out (no legal call has it).

The entry's cross-slot checks and the operands' dtypes are not written: tvms decides an entry by
its tokens, its operand count and its ``.pred`` markers (tvms/ir/ptx.py).
"""
from __future__ import annotations

import itertools
import json
import keyword
import pathlib
import sys

from tvm.backend.cuda.ptx.table import TABLE, escape_token, operand_type


class _Reads(dict):
    """A modifier map that remembers which slots a function looked at."""

    def __init__(self, *args):
        super().__init__(*args)
        self.read: set[str] = set()

    def __getitem__(self, key):
        self.read.add(key)
        return super().__getitem__(key)

    def get(self, key, default=None):
        self.read.add(key)
        return super().get(key, default)

    def __contains__(self, key):
        self.read.add(key)
        return super().__contains__(key)


def _lookup(entry, fn):
    """``fn(mod_map)`` as a constant, or as {"by": slots, "at": {"tok|tok": value}}."""
    domains = {s.name: ("", *s.choices) if s.optional else s.choices for s in entry.slots}
    base = {s.name: domains[s.name][0] for s in entry.slots}
    by: list[str] = []
    while True:  # widen the slots watched until no combination reads another
        table, read = {}, set()
        for combo in itertools.product(*(domains[n] for n in by)):
            mod_map = _Reads({**base, **dict(zip(by, combo))})
            try:
                table["|".join(combo)] = fn(mod_map)
            except Exception:  # (outside what TVM's function is total on: no legal call)
                pass
            read |= mod_map.read
        wider = [n for n in domains if n in read and n not in by]
        if not wider:
            break
        by += wider
    if not by:
        return table[""]
    values = set(table.values())
    if len(values) == 1 and len(table) == _count(domains, by):
        return values.pop()
    return {"by": by, "at": table}


def _count(domains, by):
    n = 1
    for name in by:
        n *= len(domains[name])
    return n


def _operand(entry, slot):
    def lanes(m):
        return slot.lanes(m) if callable(slot.lanes) else slot.lanes

    def read_pred(m):
        return int(slot.kind == "reg" and slot.rw == "r" and operand_type(slot, m) == "pred")

    return [_lookup(entry, lanes), _lookup(entry, read_pred)]


class _Pool(list):
    """Each distinct value once; an entry names it by its index (many entries share slots)."""

    def __init__(self):
        super().__init__()
        self.index: dict[str, int] = {}

    def add(self, value) -> int:
        key = json.dumps(value, sort_keys=True)
        if key not in self.index:
            self.index[key] = len(self)
            self.append(value)
        return self.index[key]


def main(out: pathlib.Path) -> None:
    slots, operands = _Pool(), _Pool()
    families: dict[str, list] = {}
    for entry in TABLE.values():
        families.setdefault(escape_token(entry.family), []).append([
            entry.name,
            [slots.add([s.name, list(s.choices), int(s.optional)]) for s in entry.slots],
            [operands.add(_operand(entry, s)) for s in entry.operands
             if not (s.kind == "imm" and s.literal is not None)],
            int(entry.has_dst),
        ])
    assert all(not keyword.iskeyword(f) for f in families)
    data = {"slots": slots, "operands": operands, "families": families}
    text = json.dumps(data, separators=(",", ":"))
    out.write_text(text + "\n")
    print(f"{out}: {len(families)} families, {len(TABLE)} entries, {len(text)} bytes")


if __name__ == "__main__":
    main(pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parent.parent / "ir" / "ptx_table.json"))
