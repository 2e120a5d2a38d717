"""TVM 0.27's table-driven PTX dialect: which instruction a printed ``T.ptx.<family>(...)`` is.

TVM prints every call of it in one flat form,
``T.ptx.<family>(operands..., [pred], tokens in slot order ("" = omitted)..., marker)``, where the
marker is a comma-joined flag set: ``pred`` (the last operand is a predicate), ``keep`` (the
destination keeps its value when the predicate is false), ``p<i>`` (operand ``i`` is a ``.pred``
register), ``s<i>`` (operand ``i`` is the sink ``_`` and has no argument). A family holds several
entries (one per syntax shape: ``mov`` packs or unpacks); TVM picks the one that takes the tokens
and the operands. ``resolve`` does the same from the facts of TVM's table (ptx_table.json, written
by tools/gen_ptx_table.py): by the tokens (in their slots, and passing the entry's cross-slot
check), the operand count and the ``.pred`` markers, the immediates' values and the destinations
(a scalar or a buffer element), then, among the entries left, by the dtypes of the register and
address operands (``mov(lo, hi, packed)`` unpacks, ``mov(packed, lo, hi)`` packs). Where that
leaves several (an operand whose dtypes the table does not give: cvt's destination; a call TVM
refuses as ambiguous), the call records its family only.

``resolve_chain`` reads the spellings users type, ``T.ptx.ld.global_.b32(d, p, pred=c)`` and
``T.ptx["ld.global.b32"](d, p)``, into the same printed form, as TVM does (``address`` converts a
pointer into a shared state space, a uint64 into a handle elsewhere).

The table also holds how TVM's code generator writes each entry (``Entry.rendering``), which
lowering/codegen/cuda_ptx_dialect.py follows.

What tvms does not check: the operands' dtypes beyond that choice, the storage scope of pointer
operands, the modifiers of the entries whose checks are too large to write (ld, st's vectors, cvt)
beyond what TVM's check says of each pair of them (enough to tell ld_vec from ld_vec256).
"""
from __future__ import annotations

import json
import keyword
import pathlib
import re
from dataclasses import dataclass

from . import op as op_registry
from .errors import TVMSError
from .dtype import DataType, handle
from .expr import Call, PrimExpr, is_tensor_map

ADDR_OP = "tirx.ptx.addr"  # T.ptx.addr(base, byte_offset): a pure address expression
_FLAG = re.compile(r"pred|keep|[ps]\d+")


@dataclass(frozen=True)
class Slot:
    name: str
    choices: tuple[str, ...]
    optional: bool

    @property
    def domain(self) -> tuple[str, ...]:
        return ("", *self.choices) if self.optional else self.choices


@dataclass(frozen=True)
class Operand:
    """Each a value, or a lookup by modifiers ({"by": slots, "at": {"tok|tok": value}})."""
    lanes: object  # registers (call arguments) it takes
    pred: object  # 1 where it is a .pred input (the marker's p<i>)
    dtypes: object  # the dtypes TVM accepts for it, or None where it looks at none
    space: object  # an address's: "shared" (a shared state space), "generic" (another but tmem), or None
    choices: list[int] | None  # the values an immediate takes, where TVM lists them
    writes: bool  # a destination register


@dataclass(frozen=True)
class RenderOperand:
    """An operand as TVM's code generator writes it (every one, a literal immediate too); the
    values that depend on the modifiers are lookups (``_at``)."""
    name: str
    kind: str  # reg, addr, ptr or imm
    rw: str  # r, w or rw
    literal: str | None  # an immediate the table fixes
    group: bool  # written as a brace-enclosed group of registers
    bracket: str | None  # adjacent operands of one bracket are one memory operand
    pipe: str | None  # adjacent operands of one pipe are one operand written p|q
    takes_addr: bool  # may be T.ptx.addr(base, byte_offset)
    lanes: object
    dtypes: object  # a register's dtypes, canonical first
    bridge: object  # the register class a register is reached through (``.pred``), else None
    space: object  # an address's: shared, tmem or other


@dataclass(frozen=True)
class Rendering:
    mnemonic: str
    volatile: bool  # asm volatile
    orders_memory: bool  # a "memory" clobber without an address (fences, barriers)
    operands: tuple[RenderOperand, ...]


@dataclass(frozen=True)
class Entry:
    name: str  # TVM's table key; its op is tirx.ptx.<name>
    family: str  # as printed after "T.ptx.": the mnemonic, dots as "_", a Python keyword with "_"
    slots: tuple[Slot, ...]
    operands: tuple[Operand, ...]
    has_dst: bool
    # TVM's check of its modifiers, in parts that all pass: (slots, bit per combination of their tokens)
    check: tuple[tuple[tuple[str, ...], int], ...]
    rendering: Rendering

    @property
    def op_name(self) -> str:
        return f"tirx.ptx.{self.name}"

    @property
    def argument_operands(self) -> tuple[RenderOperand, ...]:
        """The rendered operands a call passes (a literal immediate is the table's: it takes none),
        in the order of ``operands``."""
        return tuple(o for o in self.rendering.operands if not (o.kind == "imm" and o.literal is not None))

    def modifiers(self, tokens: tuple[str, ...]) -> dict[str, str]:
        """{slot: token} of these tokens ("" where omitted)."""
        return {slot.name: token for slot, token in zip(self.slots, tokens)}

    def spells(self, tokens: tuple[str, ...]) -> bool:
        """Whether each token is one of its slot's choices ("" where it may be omitted)."""
        return len(tokens) == len(self.slots) and all(t in s.domain for s, t in zip(self.slots, tokens))

    def passes_check(self, tokens: tuple[str, ...]) -> bool:
        slots = {s.name: (s, t) for s, t in zip(self.slots, tokens)}
        for names, bits in self.check:
            index = 0
            for name in names:  # (the combination's place in itertools.product order)
                slot, token = slots[name]
                index = index * len(slot.domain) + slot.domain.index(token)
            if not bits >> index & 1:
                return False
        return True

    def layout(self, tokens: tuple[str, ...]) -> list[tuple[int, bool, tuple | None]] | None:
        """(registers, is a .pred input, dtypes) per operand under these tokens; None where TVM's
        table has no legal call with them."""
        mods = self.modifiers(tokens)
        out = []
        for o in self.operands:
            lanes, pred = at_modifiers(o.lanes, mods), at_modifiers(o.pred, mods)
            if lanes is None or pred is None:
                return None
            dtypes = at_modifiers(o.dtypes, mods)
            out.append((lanes, bool(pred), tuple(dtypes) if dtypes is not None else None))
        return out


def at_modifiers(spec, mods: dict):
    """A table value under these modifiers (``{slot: token}``): itself, or its lookup's (None where
    the lookup has no value for them)."""
    if not isinstance(spec, dict):
        return spec
    return spec["at"].get("|".join(mods[name] for name in spec["by"]))


_DATA = json.loads((pathlib.Path(__file__).parent / "ptx_table.json").read_text())


def _load(data: dict) -> dict[str, tuple[Entry, ...]]:
    slots = [Slot(name, tuple(choices), bool(optional)) for name, choices, optional in data["slots"]]
    operands = [Operand(*o) for o in data["operands"]]
    rendered = [RenderOperand(*r) for r in data["render"]]

    def rendering(mnemonic, volatile, orders_memory, indices):
        return Rendering(mnemonic, bool(volatile), bool(orders_memory), tuple(rendered[i] for i in indices))

    return {family: tuple(Entry(name, family, tuple(slots[i] for i in s), tuple(operands[i] for i in o),
                                bool(dst), tuple((tuple(part["by"]), int(part["ok"], 16)) for part in check or ()),
                                rendering(*render))
                          for name, s, o, dst, check, render in entries)
            for family, entries in data["families"].items()}


FAMILIES: dict[str, tuple[Entry, ...]] = _load(_DATA)
MNEMONICS: dict[str, str] = _DATA["mnemonics"]
DTYPE_SETS: list[tuple[str, ...]] = [tuple(d) for d in _DATA["dtype_sets"]]  # (RenderOperand.dtypes' values)
ENTRIES: dict[str, Entry] = {e.op_name: e for entries in FAMILIES.values() for e in entries}


def family_op_name(family: str) -> str:
    """The op of a call that its tokens, operands and dtypes leave between entries (resolve): its
    family only (no entry of TVM's table is named "family")."""
    return f"tirx.ptx.family.{family}"


def family_of(op_name: str) -> str | None:
    """The family of a ``T.ptx.<family>`` instruction's op, None for any other op."""
    entry = ENTRIES.get(op_name)
    if entry is not None:
        return entry.family
    return op_name.removeprefix("tirx.ptx.family.") if op_name.startswith("tirx.ptx.family.") else None


def is_address(e: object) -> bool:
    """Whether ``e`` is ``T.ptx.addr(base, byte_offset)``."""
    return isinstance(e, Call) and getattr(e.op, "name", "") == ADDR_OP


def spelled(family: str, tokens) -> str:
    """An instruction as PTX spells it: ``ld.global.b32``."""
    return ".".join([MNEMONICS[family], *(t for t in tokens if t)])


def not_compiled(call: object, who: str, why: str = "tvms compiles the T.ptx dialect in CUDA kernels only") \
        -> TVMSError | None:
    """The error that ``who`` ("the llvm code generator does not compile", "the reference
    executor does not run") gives for a call of the PTX dialect, which ``why`` explains (a code
    generator asks only for what it does not render: the cuda one renders every instruction in a
    kernel, none in the host function); None for any other call."""
    name = getattr(getattr(call, "op", None), "name", "")
    if name == ADDR_OP:
        return TVMSError(f"{who} T.ptx.addr (outside a PTX instruction)")
    family = family_of(name)
    if family is None:
        return None
    tokens = [a.value for a in getattr(call, "args", ()) if isinstance(getattr(a, "value", None), str)][:-1]
    text = spelled(family, tokens)
    return TVMSError(f"{who} TVM 0.27's PTX instruction T.ptx.{family} ({text}): {why}")


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


@dataclass(frozen=True)
class Chained:
    """An argument of a call: its dtype (None: a literal number), whether it is tagged
    ``T.ptx.pred(x)`` in the attribute-chain form (a .pred register whatever its dtype)."""
    dtype: str | None
    tagged: bool = False
    value: int | None = None  # a constant integer's
    writable: bool = False  # a scalar or a buffer element, which a destination must be


def resolve(family: str, args: list[Chained], strings: tuple[str, ...]) -> tuple[Entry, ...]:
    """The entries of ``family`` that a printed call takes: expression arguments (operands and
    predicate; ``tagged`` unused), then ``strings`` (the tokens and the marker, at least the
    marker). One entry when the call decides it; several where it does not (see the module's
    docstring). TVMSError otherwise."""
    entries = FAMILIES.get(family)
    if entries is None:
        raise TVMSError(f"'T.ptx.{family}' is not a PTX instruction family of TVM 0.27")
    *tokens, marker = strings
    tokens = tuple(tokens)
    flags = parse_marker(marker)
    counts = sorted({len(e.slots) for e in entries})
    if len(tokens) not in counts:
        raise TVMSError(f"T.ptx.{family} takes {_or(counts)} modifier token{'s' if counts != [1] else ''} "
                        f"before its marker, got {len(tokens)}")
    known = {t for e in entries for s in e.slots for t in s.choices}
    for token in tokens:
        if token and token not in known:
            raise TVMSError(f"{token!r} is a modifier of no slot of T.ptx.{family}")
    spelling = [e for e in entries if e.spells(tokens)]
    if not spelling:
        e = next(e for e in entries if len(e.slots) == len(tokens))
        raise TVMSError(f"T.ptx.{family} takes no modifiers {tokens} in this order; its slots: "
                        + "; ".join(f"{s.name}{'?' if s.optional else ''}={{{','.join(s.choices)}}}"
                                    for s in e.slots))
    legal = [e for e in spelling if e.passes_check(tokens)]
    if not legal:
        raise TVMSError(f"TVM's PTX table refuses the modifiers {tokens} of T.ptx.{family} together")
    given = list(args[:len(args) - flags.pred])
    for i in sorted(flags.sunk):  # (a sunk lane has no argument: put its place back, as TVM does)
        given.insert(min(i, len(given)), Chained(None, writable=True))
    operands = [a.dtype for a in given]
    hits = [(e, layout) for e in legal if (layout := e.layout(tokens)) is not None
            and _takes(e, layout, len(operands), flags)]
    if not hits:
        takes = sorted({sum(n for n, _, _ in layout) for e in legal if (layout := e.layout(tokens))})
        n = len(operands)
        raise TVMSError(f"no instruction of T.ptx.{family} takes {n} operand{'s' if n != 1 else ''} with "
                        f"the marker {marker!r} and these modifiers" + (f" (it takes {_or(takes)})" if takes else ""))
    misfits = [_misfit(e, layout, given) for e, layout in hits]
    if all(misfits):
        raise TVMSError(f"T.ptx.{family}: {misfits[0]}")
    hits = [hit for hit, misfit in zip(hits, misfits) if not misfit]
    typed = [e for e, layout in hits if _typed(layout, operands, flags.sunk)]
    return (typed[0],) if len(hits) > 1 and len(typed) == 1 else tuple(e for e, _ in hits)


def _takes(entry: Entry, layout: list, n_operands: int, flags: Marker) -> bool:
    """The operand count and the marker's .pred inputs and ``keep`` fit the entry."""
    if sum(n for n, _, _ in layout) != n_operands:
        return False
    starts = [sum(n for n, _, _ in layout[:i]) for i in range(len(layout))]
    preds = {start for start, (n, pred, _) in zip(starts, layout) if n and pred}
    return preds == flags.pred_operands and (not flags.keep or (flags.pred and entry.has_dst))


def _misfit(entry: Entry, layout: list, args: list[Chained]) -> str | None:
    """Why the arguments do not fit the entry's immediates (each one of the values TVM lists for
    it, which is how it tells swizzle_mode 4 from 0 to 3) or destinations (each a scalar or a
    buffer element, as TVM requires); None where they do."""
    start = 0
    for i, ((lanes, _, _), operand) in enumerate(zip(layout, entry.operands)):
        group = args[start:start + lanes]
        start += lanes
        if operand.choices is not None and any(a.value not in operand.choices for a in group):
            got = ", ".join("a non-constant" if a.value is None else str(a.value) for a in group)
            return f"its operand {i + 1} is an immediate, one of {_or([str(c) for c in operand.choices])}, not {got}"
        if operand.writes and not all(a.writable for a in group):
            return f"its operand {i + 1} is a destination: a scalar or a buffer element"
    return None


def _typed(layout: list, operands: list, sunk: frozenset[int]) -> bool:
    """The operands' dtypes are what TVM's coercion takes: one dtype per register group (a literal
    has no say), one of those the operand accepts."""
    start = 0
    for lanes, _, accepted in layout:
        named = {operands[i] for i in range(start, start + lanes) if i not in sunk and operands[i] is not None}
        start += lanes
        if accepted is not None and (len(named) > 1 or (named and not named <= set(accepted))):
            return False
    return True


# ---------------------------------------------------------------- the spellings users type
def escape(token: str) -> str:
    """A PTX token as a Python attribute: ``::`` as ``__``, a lone ``:`` as ``__colon__``, a
    Python keyword with a trailing ``_`` (``shared::cta``: ``shared__cta``, ``global``: ``global_``)."""
    name = token.replace("::", "__").replace(":", "__colon__")
    return name + "_" if keyword.iskeyword(name) else name


def unescape(name: str) -> str:
    return name.replace("__colon__", "\0").replace("__", "::").replace("\0", ":").removesuffix("_")


@dataclass(frozen=True)
class ChainReading:
    """The printed form of an attribute-chain call, and how its operands are coerced."""
    entry: Entry | None  # None: the family, where two entries print alike
    tokens: tuple[str, ...]  # in slot order
    marker: str
    literal: list[str]  # per operand, the dtype it takes where it is a literal number
    spaces: list[str | None]  # per operand, its address space for ``address`` (Operand.space)


def resolve_chain(family: str, words: tuple[str, ...], operands: list[Chained], pred: bool,
                  keep: bool) -> ChainReading:
    """TVM's attribute-chain spelling, ``T.ptx.<family>.<token>...(operands..., pred=p,
    preserve_dst=k)`` (and the string one, ``T.ptx["family.token..."]``): each token fills the
    first open slot that lists it, in each entry of the family; the entry is the one that takes
    the operands. A literal number takes TVM's coercion's dtype: a .pred register's uint32
    carrier, its register group's dtype, else the operand's first; an immediate's int32."""
    entries = FAMILIES.get(family)
    if entries is None:
        raise TVMSError(f"'T.ptx.{family}' is not a PTX instruction family of TVM 0.27")
    cands = [(e, (None,) * len(e.slots)) for e in entries]
    for word in words:
        filled = [(e, f[:i] + (word,) + f[i + 1:]) for e, f in cands
                  if (i := _first_open(e, f, word)) is not None]
        if not filled:
            e, f = cands[0]
            open_slots = "; ".join(f"{s.name}={{{','.join(s.choices)}}}" for s, t in zip(e.slots, f) if t is None)
            raise TVMSError(f"{word!r} is not a modifier of T.ptx.{family} here; open slots: {open_slots or '(none)'}")
        cands = filled
    hits, why = [], []
    for e, f in cands:
        missing = [s.name for s, t in zip(e.slots, f) if t is None and not s.optional]
        tokens = tuple(t or "" for t in f)
        layout = None if missing or not e.passes_check(tokens) else e.layout(tokens)
        if layout is None:
            why.append(f"{e.name}: " + (f"missing modifier(s) {', '.join(missing)}" if missing
                                         else "TVM's table refuses these modifiers together"))
            continue
        starts = [sum(n for n, _, _ in layout[:i]) for i in range(len(layout))]
        preds = {start for start, (n, p, _) in zip(starts, layout) if n and p}
        if sum(n for n, _, _ in layout) != len(operands):
            why.append(f"{e.name}: takes {sum(n for n, _, _ in layout)} operands, got {len(operands)}")
        elif any(o.tagged != (i in preds) and not (i in preds and o.dtype == "bool") for i, o in enumerate(operands)):
            why.append(f"{e.name}: its .pred operands are {sorted(preds) or 'none'} (a bool, or T.ptx.pred(x))")
        elif keep and not (pred and e.has_dst):
            why.append(f"{e.name}: preserve_dst=True needs pred= and a destination")
        elif misfit := _misfit(e, layout, operands):
            why.append(f"{e.name}: {misfit}")
        else:
            flags = ["pred"] * pred + ["keep"] * keep + [f"p{i}" for i in sorted(preds)]
            hits.append((e, tokens, layout, ",".join(flags)))
    if len(hits) > 1:
        dtypes = [None if o.tagged else o.dtype for o in operands]
        hits = [h for h in hits if _typed(h[2], dtypes, frozenset())] or hits
    if not hits:
        raise TVMSError(f"no instruction of T.ptx.{family} takes these operands: " + "; ".join(why))
    if len({(t, m) for _, t, _, m in hits}) > 1:
        raise TVMSError(f"T.ptx.{family}: the entries {', '.join(e.name for e, *_ in hits)} take this call "
                        f"and print otherwise; write the printed form")
    entry, tokens, layout, marker = hits[0]
    literal, spaces = [], []
    mods = entry.modifiers(tokens)
    for (n, is_pred, accepted), operand in zip(layout, entry.operands):
        group = operands[len(literal):len(literal) + n]
        named = [o.dtype for o in group if o.dtype is not None and not o.tagged]
        dtype = "uint32" if is_pred else (named[0] if named else accepted[0]) if accepted else "int32"
        literal += [dtype] * n
        spaces += [at_modifiers(operand.space, mods)] * n
    return ChainReading(entry if len(hits) == 1 else None, tokens, marker, literal, spaces)


def address(space: str, value: PrimExpr, what: str) -> PrimExpr:
    """An address operand as TVM's coercion of the attribute-chain form passes it (``what`` names
    the operand in errors): in a shared state space, a pointer converted to its 32-bit shared
    window address (a uint32 is one already); elsewhere a pointer as it is, a uint64 handle
    reinterpreted as one. ``T.ptx.addr``'s base likewise."""
    if is_address(value):
        base = address(space, value.args[0], what)
        return Call(base.dtype, value.op, (base, *value.args[1:]))
    dtype = str(value.dtype)
    if space == "shared":
        if dtype == "handle":
            return Call(DataType("uint32"), op_registry.get_op("tir.cuda.cvta_generic_to_shared"), (value,))
        if dtype == "uint32":
            return value
        raise TVMSError(f"{what} is a shared-memory address: a pointer or a uint32 shared address, not {dtype}")
    if dtype == "uint64" or _tensor_map_address(value):  # (TVM's T.address_of(A_map) is a uint64)
        return Call(handle, op_registry.get_op("tir.reinterpret"), (value,))
    if dtype == "handle":
        return value
    if dtype == "uint32":
        raise TVMSError(f"{what} is a uint32, an address of the shared state space only")
    raise TVMSError(f"{what} is an address: a pointer or a uint64 handle, not {dtype}")


def _tensor_map_address(value: PrimExpr) -> bool:
    """Whether ``value`` is ``T.address_of(A_map)`` of a tensor map (TVM types it uint64; tvms's
    address_of is a handle whatever it points to)."""
    return (isinstance(value, Call) and getattr(value.op, "name", "") == "tir.address_of"
            and is_tensor_map(value.args[0]))


def argument_spaces(entry: Entry, strings: tuple[str, ...]) -> list[str | None]:
    """Per expression argument of a printed call of ``entry`` (``strings``: its tokens and marker),
    the address space of the operand it is (None: not an address, or the predicate), for
    ``address``: TVM's reading coerces the printed form's addresses as the chain form's."""
    *tokens, marker = strings
    flags, mods = parse_marker(marker), entry.modifiers(tuple(tokens))
    spaces = []
    for (n, _, _), operand in zip(entry.layout(tuple(tokens)) or (), entry.operands):
        spaces += [at_modifiers(operand.space, mods)] * n
    return [space for i, space in enumerate(spaces) if i not in flags.sunk] + [None] * flags.pred


def _first_open(entry: Entry, filled: tuple, word: str) -> int | None:
    """The first slot still open that lists ``word`` (TVM's order-free filling)."""
    return next((i for i, s in enumerate(entry.slots) if filled[i] is None and word in s.choices), None)


def _or(numbers: list[int]) -> str:
    words = [str(n) for n in numbers]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]
