"""Write ir/ptx_table.json: the facts of TVM 0.27's table-driven PTX dialect (``T.ptx.<family>``)
that reading and printing a call need, taken from TVM's own table.

    /work/tvm-venv/bin/python tools/gen_ptx_table.py [OUT]     # default: ir/ptx_table.json

Per family (as printed: ``and_``, ``ld``, ``cp``), its entries in TVM's order; per entry
``[name, slots, operands, has_dst, check, rendering]``:

- its name (the op is ``tirx.ptx.<name>``);
- its modifier slots, ``[name, token choices, may be omitted]``, and its operands as the caller
  passes them (literal immediates take no argument), ``[registers, is a .pred input, dtypes, space,
  choices, writes]``, both as indices into the shared lists ``slots`` and ``operands`` (entries share most of them);
  ``dtypes``: those TVM's coercion accepts where it looks at one (a register, an address, a
  pointer), else null; ``space``: ``shared`` for an address in a shared state space (TVM converts
  a pointer there with ``T.cuda.cvta_generic_to_shared``), ``generic`` for another address but
  tmem (TVM reinterprets a uint64 there as a handle), else null; ``choices``: the values an
  immediate takes where TVM lists them, else null; ``writes``: whether it is a destination;
- whether it writes a destination (what the marker's ``keep`` needs);
- TVM's cross-slot check of its modifiers, a list of parts ``{"by": slots, "ok": hex}`` that all
  pass: bit i says whether the i-th combination of those slots' tokens (``itertools.product``
  order, "" first where a slot may be omitted) passes; exact in one part where the entry has few
  enough combinations to write, else what the check says of each pair of slots (``_check``);
  null where the entry has none;
- how TVM's code generator renders it (``lowering/codegen/cuda_ptx_dialect.py``): ``[mnemonic,
  asm volatile, orders memory, operands]``, every operand this time (a literal immediate too), as
  indices into the list ``render``: ``[name, kind, rw, literal, group (written in braces), bracket, pipe, takes T.ptx.addr,
  registers, dtypes, bridge, space]``; ``dtypes``: a register's, canonical first (an index into ``dtype_sets``); ``bridge``: the
  register class inline asm cannot bind that a register is reached through (render.BRIDGE's key),
  else null; ``space``: an address's, ``shared``, ``tmem`` or ``other``.

A value that depends on the modifiers is a lookup, ``{"by": slots, "at": {"tok|tok": value}}``: the
slots found by watching which ones TVM's function reads, a combination it refuses left out.
``mnemonics``: each family's PTX spelling (``multimem.ld_reduce``), for messages.
"""
from __future__ import annotations

import functools
import itertools
import json
import keyword
import math
import pathlib
import sys

from tvm.backend.cuda.ptx.render import BRIDGE
from tvm.backend.cuda.ptx.table import TABLE, escape_token, lanes_of, operand_dtypes, operand_space, operand_type


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

    def _all(self):
        self.read |= set(self)

    def items(self):
        self._all()
        return super().items()

    def values(self):
        self._all()
        return super().values()


_FAILED = object()


def _watch(entry, fn, limit: int | None = None):
    """``(by, table)``: the slots ``fn(mod_map)`` depends on and its value for each combination of
    their tokens in ``itertools.product`` order (_FAILED where it raises: outside what TVM's
    function is total on, no legal call); None past ``limit`` combinations."""
    domains = {s.name: ("", *s.choices) if s.optional else s.choices for s in entry.slots}
    base = {s.name: domains[s.name][0] for s in entry.slots}
    by: list[str] = []
    while True:  # widen the slots watched until no combination reads another
        if limit is not None and math.prod(len(domains[n]) for n in by) > limit:
            return None
        table, read = {}, set()
        for combo in itertools.product(*(domains[n] for n in by)):
            mod_map = _Reads({**base, **dict(zip(by, combo))})
            try:
                table[combo] = fn(mod_map)
            except Exception:
                table[combo] = _FAILED
            read |= mod_map.read
        wider = [n for n in domains if n in read and n not in by]
        if not wider:
            return by, table
        by += wider


def _lookup(entry, fn, limit: int | None = None):
    """``fn(mod_map)`` as a constant, or as {"by": slots, "at": {"tok|tok": value}}; None past
    ``limit`` combinations."""
    watched = _watch(entry, fn, limit)
    if watched is None:
        return None
    by, table = watched
    values = set(table.values())
    if len(values) == 1 and _FAILED not in values:
        return values.pop()
    return {"by": by, "at": {"|".join(combo): v for combo, v in table.items() if v is not _FAILED}}


def _check(entry):
    """TVM's cross-slot check of the entry as a list of parts, each {"by": slots, "ok": bits}: bit i
    (of the hex number) says whether the i-th combination of their tokens (in product order, ""
    first where a slot may be omitted) passes. One exact part where the combinations are few
    enough to write; else one part per pair of slots that some pairs of tokens never pass, whatever
    the other slots hold (a necessary condition: what tells ld's 128-bit vectors from its 256-bit
    ones). None where the entry has no check."""
    if entry.check is None:
        return None
    watched = _watch(entry, lambda m: not entry.check(m), limit=_CHECK_LIMIT)
    if watched is not None:
        by, table = watched
        return [{"by": by, "ok": format(sum(1 << i for i, ok in enumerate(table.values()) if ok is True), "x")}]
    return _pair_parts(entry)


def _pair_parts(entry):
    domains = [("", *s.choices) if s.optional else s.choices for s in entry.slots]
    names = [s.name for s in entry.slots]
    passing = [tuple(d.index(t) for d, t in zip(domains, combo)) for combo in itertools.product(*domains)
               if not entry.check(dict(zip(names, combo)))]
    parts = []
    for i, j in itertools.combinations(range(len(names)), 2):
        seen = {(c[i], c[j]) for c in passing}
        if len(seen) < len(domains[i]) * len(domains[j]):
            bits = sum(1 << (a * len(domains[j]) + b) for a, b in seen)
            parts.append({"by": [names[i], names[j]], "ok": format(bits, "x")})
    return parts


_DTYPES_LIMIT = 1000  # (cvt's destination: tvms does not choose by its dtype)
_CHECK_LIMIT = 20000  # (ld, st's vectors and cvt have more: their pairs of modifiers only)


def _operand(entry, slot):
    def read_pred(m):
        return int(slot.kind == "reg" and slot.rw == "r" and operand_type(slot, m) == "pred")

    def dtypes(m):  # what TVM's coercion takes, where it looks at a dtype (ptx.py uses it to choose)
        if slot.kind == "reg" and operand_type(slot, m) == "pred":
            return None if slot.rw == "r" else ("uint32",)  # (an input: its marker says it)
        if slot.kind == "reg":
            return tuple(operand_dtypes(slot, m))
        if slot.kind == "addr":  # (what _coerce_address takes: a shared window's uint32, a generic uint64)
            space = operand_space(slot, m)
            return ("uint32",) if space == "tmem" else ("handle", "uint32") if space.startswith("shared") \
                else ("handle", "uint64")
        if slot.kind == "ptr":  # (a pointer only: mapa's generic form against its u64 one)
            return ("handle",)
        return None

    def address(m):  # how TVM's coercion rewrites a pointer or a uint64 passed for it (_coerce_address)
        if slot.kind != "addr" or operand_space(slot, m) == "tmem":
            return None
        return "shared" if operand_space(slot, m).startswith("shared") else "generic"

    # (the values an immediate takes: TVM picks swizzle_mode's entry by them)
    choices = [int(c) for c in slot.choices] if slot.kind == "imm" and slot.choices is not None else None
    writes = int(slot.kind == "reg" and slot.rw in ("w", "rw"))  # (TVM wants a scalar or a buffer element)
    return [_lookup(entry, functools.partial(lanes_of, slot)), _lookup(entry, read_pred), _lookup(entry, dtypes, limit=_DTYPES_LIMIT),
            _lookup(entry, address), choices, writes]


def _render_operand(entry, slot, dtype_sets):
    def dtypes(m):
        return dtype_sets.add(list(operand_dtypes(slot, m))) if slot.kind == "reg" else None

    def bridge(m):
        return operand_type(slot, m) if slot.kind == "reg" and operand_type(slot, m) in BRIDGE else None

    def space(m):
        if slot.kind != "addr":
            return None
        where = operand_space(slot, m)
        return "tmem" if where == "tmem" else "shared" if where.startswith(("shared", "tmem")) else "other"

    group = slot.vector if slot.vector is not None else callable(slot.lanes) or slot.lanes > 1
    return [slot.name, slot.kind, slot.rw, slot.literal, int(group), slot.bracket, slot.pipe, int(slot.allow_imm_offset),
            _lookup(entry, functools.partial(lanes_of, slot)), _lookup(entry, dtypes), _lookup(entry, bridge), _lookup(entry, space)]


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
    slots, operands, render, dtype_sets = _Pool(), _Pool(), _Pool(), _Pool()
    families: dict[str, list] = {}
    mnemonics: dict[str, str] = {}  # how PTX spells the family (multimem_ld_reduce: multimem.ld_reduce)
    for entry in TABLE.values():
        assert mnemonics.setdefault(escape_token(entry.family), entry.ptx_name) == entry.ptx_name
        families.setdefault(escape_token(entry.family), []).append([
            entry.name,
            [slots.add([s.name, list(s.choices), int(s.optional)]) for s in entry.slots],
            [operands.add(_operand(entry, s)) for s in entry.operands
             if not (s.kind == "imm" and s.literal is not None)],
            int(entry.has_dst),
            _check(entry),
            [entry.ptx_name, int(entry.asm_volatile), int(entry.orders_memory),
             [render.add(_render_operand(entry, s, dtype_sets)) for s in entry.operands]],
        ])
    assert all(not keyword.iskeyword(f) for f in families)
    data = {"slots": slots, "operands": operands, "render": render, "dtype_sets": dtype_sets, "mnemonics": mnemonics, "families": families}
    text = json.dumps(data, separators=(",", ":"))
    out.write_text(text + "\n")
    print(f"{out}: {len(families)} families, {len(TABLE)} entries, {len(text)} bytes")


if __name__ == "__main__":
    default = pathlib.Path(__file__).parent.parent / "ir" / "ptx_table.json"
    main(pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else default)
