"""TVM 0.27's PTX dialect (``T.ptx.<family>(...)``) in CUDA C, as TVM's code generator writes it: each
instruction a call of a ``__forceinline__ __device__`` helper holding one inline-asm statement, the
helper written from the facts of TVM's table (ir/ptx_table.json's ``render``; ir/ptx.py resolves the
call to its entry).

The helper's name is ``tvm_builtin_ptx_`` and the entry's name, the tokens written, the immediates,
the ``T.ptx.addr`` byte offsets and the sunk lanes, then (only where an operand takes another dtype
than its first) every register's dtype. Its parameters are the PTX operands in order: a destination
by reference (``"="``, or ``"+"`` for an accumulator or under ``keep``), an input by value, an
address as a 32-bit window address (shared memory, tensor memory) or a pointer. A register class
inline asm cannot bind (``.pred``, the byte registers) is declared in the asm block and converted
from and to its carrier there; a value whose C type binds no constraint (``__half``, 8-bit) rides a
carrier and is bit-punned. A predicated call gains a last ``uint32_t __pred`` and runs under ``@p``.
The asm is ``volatile`` as the table says; it clobbers ``"memory"`` where it names an address outside
tensor memory or orders other accesses (fences, barriers).

What TVM checks here and tvms leaves to ptxas: an open immediate's range (tcgen05's offsets).
"""
from __future__ import annotations

import itertools
from typing import NamedTuple

from ...ir import expr as E
from ...ir import ptx
from ...ir.errors import TVMSError


class Binding(NamedTuple):
    """A dtype at the inline-asm boundary: its C type, constraint letter, and the carrier it rides
    (with its bit puns) where it cannot bind a register itself."""
    c_type: str
    constraint: str
    carrier: str
    into: str  # the C value -> the carrier
    out_of: str  # the carrier -> the C value
    suffix: str  # its name in a helper's name


def _plain(c_type: str, constraint: str, suffix: str) -> Binding:
    return Binding(c_type, constraint, c_type, "{}", "{}", suffix)


BINDINGS = {
    "uint8": Binding("uint8_t", "h", "uint16_t", "(uint16_t){}", "(uint8_t){}", "u8"),
    "int8": Binding("int8_t", "h", "int16_t", "(int16_t){}", "(int8_t){}", "s8"),
    "uint16": _plain("uint16_t", "h", "u16"), "int16": _plain("int16_t", "h", "s16"),
    "float16": Binding("__half", "h", "uint16_t", "__half_as_ushort({})", "__ushort_as_half({})", "f16"),
    "bfloat16": Binding("__nv_bfloat16", "h", "uint16_t", "__bfloat16_as_ushort({})", "__ushort_as_bfloat16({})",
                        "bf16"),
    "uint32": _plain("uint32_t", "r", "u32"), "int32": _plain("int32_t", "r", "s32"),
    "float32": _plain("float", "f", "f32"), "uint64": _plain("uint64_t", "l", "u64"),
    "int64": _plain("int64_t", "l", "s64"), "float64": _plain("double", "d", "f64"),
    "uint128": _plain("__uint128_t", "q", "u128"), "int128": _plain("__int128_t", "q", "s128"),
}


class Bridge(NamedTuple):
    """A register class inline asm has no constraint for: declared in the asm block (``read`` /
    ``write`` name it), converted from the bound carrier before the instruction and back after."""
    reg_class: str
    read: str
    write: str
    into: str
    out_of: str


_BYTE = Bridge(".b8", "raw_{slot}", "raw_{slot}", "cvt.u8.u16 {reg}, %{idx};", "cvt.u16.u8 %{idx}, {reg};")
BRIDGES = {
    "pred": Bridge(".pred", "ps{n}", "pd{n}", "setp.ne.b32 {reg}, %{idx}, 0;", "selp.b32 %{idx}, 1, 0, {reg};"),
    "e2m1x2": _BYTE, "cvt_scale_ue8m0": _BYTE, "st_async_b8reg": _BYTE, "mbarrier_report_b8reg": _BYTE,
    "tma_size_b8": _BYTE._replace(read="raw_{slot}_{n}", write="raw_{slot}_{n}"),
}

_INT32 = (-(1 << 31), (1 << 31) - 1)


class Variant(NamedTuple):
    """One rendering of an entry: the choices a call makes beyond its tokens."""
    tokens: tuple[str, ...]
    dtypes: tuple[str, ...]  # per register operand
    imms: tuple[str, ...] = ()  # per immediate the caller gives
    predicated: bool = False
    keep: bool = False
    sinks: frozenset = frozenset()  # (operand name, lane)
    addr_offsets: tuple[tuple[int, int], ...] = ()  # (address operand's number, byte offset), nonzero


def _value(entry: ptx.Entry, spec: object, mods: dict, what: str | None) -> object:
    """A table value under these modifiers; ``what`` names it where it cannot be missing."""
    value = ptx.at_modifiers(spec, mods)
    if value is None and isinstance(spec, dict) and what is not None:
        raise TVMSError(f"tirx.ptx.{entry.name}: TVM's table has no {what} under these modifiers")
    return value


def accepted(entry: ptx.Entry, operand: ptx.RenderOperand, mods: dict) -> tuple[str, ...]:
    """The dtypes a register operand takes under these modifiers, its canonical one first."""
    return ptx.DTYPE_SETS[_value(entry, operand.dtypes, mods, f"dtype of operand {operand.name!r}")]


def helper_name(entry: ptx.Entry, variant: Variant) -> str:
    mods = entry.modifiers(variant.tokens)
    registers = [o for o in entry.rendering.operands if o.kind == "reg"]
    present = [(dtype, accepted(entry, o, mods)[0]) for o, dtype in zip(registers, variant.dtypes)
               if _value(entry, o.lanes, mods, "lanes")]
    sunk = [f"sink_{name}" + "".join(str(lane) for _, lane in sorted(group))
            for name, group in itertools.groupby(sorted(variant.sinks), key=lambda pair: pair[0])]
    offsets = [f"addr{slot}_{'p' if offset > 0 else 'm'}{abs(offset)}" for slot, offset in variant.addr_offsets]
    parts = [entry.name, *(t for t in variant.tokens if t), *variant.imms, *offsets, *sunk]
    if any(dtype != canonical for dtype, canonical in present):
        parts += [BINDINGS[dtype].suffix for dtype, _ in present]
    name = "tvm_builtin_ptx_" + "_".join(parts)
    name = name.replace("::", "__").replace(":", "_").replace(".", "_").replace("-", "m")
    if not variant.predicated:
        return name
    return name + ("_pred_keep" if variant.keep else "_pred_undef" if entry.has_dst else "_pred")


class _Helper:
    """A helper's pieces as its operands are written: C parameters, asm outputs and inputs, C
    statements around the asm (carriers), and inside the asm block the bridged registers'
    declarations and conversions."""

    def __init__(self) -> None:
        self.params, self.inputs, self.outputs = [], [], []
        self.before, self.after = [], []
        self.declared, self.asm_before, self.asm_after = [], [], []
        self.bridged: dict[str, int] = {}

    def address(self, param: str, window: bool) -> None:
        """An address: a 32-bit window address (shared or tensor memory) or a pointer."""
        self.params.append(f"uint32_t {param}" if window else f"const void* {param}")
        self.inputs.append(f'"r"({param})' if window else f'"l"({param})')

    def register(self, entry: ptx.Entry, operand: ptx.RenderOperand, dtype: str, param: str, keep: bool) -> None:
        """A register operand's parameter and constraint: read-write ("+"), written ("=", through a
        carrier where its C type binds none), or read."""
        binding = BINDINGS[dtype]
        if operand.rw == "rw" or (keep and operand.rw == "w"):
            if binding.carrier != binding.c_type:
                raise TVMSError(f"tirx.ptx.{entry.name}: its read-write operand {operand.name!r} cannot "
                                f"be a {dtype} (it rides a carrier register)")
            self.params.append(f"{binding.c_type}& {param}")
            self.outputs.append(f'"+{binding.constraint}"({param})')
        elif operand.rw == "w":
            self.params.append(f"{binding.c_type}& {param}")
            if binding.carrier == binding.c_type:
                self.outputs.append(f'"={binding.constraint}"({param})')
            else:
                self.before.append(f"{binding.carrier} {param}_reg;")
                self.outputs.append(f'"={binding.constraint}"({param}_reg)')
                self.after.append(f"{param} = {binding.out_of.format(param + '_reg')};")
        else:
            self.params.append(f"{binding.c_type} {param}")
            self.inputs.append(f'"{binding.constraint}"({binding.into.format(param)})')

    def bridge(self, bridge: Bridge, operand: ptx.RenderOperand, index: int, keep: bool) -> str:
        """The block-local register of the class the instruction names, converted from and to the
        bound carrier ``%index``."""
        template = bridge.read if operand.rw == "r" else bridge.write
        register = template.format(slot=operand.name, n=self.bridged.get(template, 0))
        self.bridged[template] = self.bridged.get(template, 0) + 1
        self.declared.append(f".reg {bridge.reg_class} {register};")
        if operand.rw in ("r", "rw") or (keep and operand.rw == "w"):
            self.asm_before.append(bridge.into.format(reg=register, idx=index))
        if operand.rw in ("w", "rw"):
            self.asm_after.append(bridge.out_of.format(reg=register, idx=index))
        return register


def _operand_texts(written: list) -> list[str]:
    """The PTX operands: adjacent operands of one pipe are one ``p|q``, then those of one bracket
    one ``[a, b]``."""
    piped = []
    for pipe, members in itertools.groupby(written, key=lambda pair: pair[0].pipe):
        members = list(members)
        if pipe is None:
            piped += [(operand.bracket, text) for operand, text in members]
        else:
            piped.append((members[0][0].bracket, "|".join(text for _, text in members)))
    texts = []
    for bracket, members in itertools.groupby(piped, key=lambda pair: pair[0]):
        members = [text for _, text in members]
        texts += members if bracket is None else [f"[{', '.join(members)}]"]
    return texts


def render(entry: ptx.Entry, variant: Variant) -> tuple[str, str]:
    """(helper name, helper source) of one variant, as TVM writes it."""
    mods = entry.modifiers(variant.tokens)
    rendering = entry.rendering
    name = helper_name(entry, variant)
    dtype_of = dict(zip((o.name for o in rendering.operands if o.kind == "reg"), variant.dtypes))
    imm_of = dict(zip((o.name for o in rendering.operands if o.kind == "imm" and o.literal is None), variant.imms))
    offset_of = dict(variant.addr_offsets)
    helper, written = _Helper(), []
    index = address_number = 0
    for operand in rendering.operands:
        if operand.kind == "imm":
            written.append((operand, operand.literal if operand.literal is not None else imm_of[operand.name]))
            continue
        lanes = _value(entry, operand.lanes, mods, "lanes")
        registers = []
        for lane in range(lanes):
            param = f"__{operand.name}{lane}" if operand.group else f"__{operand.name}"
            if (operand.name, lane) in variant.sinks:
                registers.append("_")
                continue
            if operand.kind == "reg":
                helper.register(entry, operand, dtype_of[operand.name], param, variant.keep)
                bridge = BRIDGES.get(_value(entry, operand.bridge, mods, None))
                registers.append(f"%{index}" if bridge is None else helper.bridge(bridge, operand, index, variant.keep))
            elif operand.kind == "addr":
                helper.address(param, _value(entry, operand.space, mods, "state space") in ("shared", "tmem"))
                offset = offset_of.get(address_number)
                registers.append(f"%{index}" if operand.bracket is not None
                                 else f"[%{index}{f'+{offset}' if offset is not None else ''}]")
            else:  # (a pointer)
                helper.address(param, window=False)
                registers.append(f"%{index}")
            index += 1
        if lanes:
            written.append((operand, "{" + ", ".join(registers) + "}" if operand.group else registers[0]))
        address_number += operand.kind == "addr" and lanes > 0
    texts = _operand_texts(written)
    opcode = ptx.spelled(entry.family, variant.tokens)
    instruction = f"{opcode} {', '.join(texts)};" if texts else f"{opcode};"
    if variant.predicated:
        helper.params.append("uint32_t __pred")
        helper.inputs.append('"r"(__pred)')
        helper.declared.append(".reg .pred p;")
        helper.asm_before.append(f"setp.ne.b32 p, %{index}, 0;")
        instruction = f"@p {instruction}"
    asm = " ".join([*helper.declared, *helper.asm_before, instruction, *helper.asm_after])
    asm = "{ " + asm + " }" if helper.declared else instruction
    touches_memory = rendering.orders_memory or any(
        o.kind == "addr" and _value(entry, o.space, mods, "state space") != "tmem" for o in rendering.operands)
    volatile = " volatile" if rendering.volatile else ""
    clobber = ' : "memory"' if touches_memory else ""
    statement = f'asm{volatile}("{asm}" : {", ".join(helper.outputs)} : {", ".join(helper.inputs)}{clobber});'
    body = "\n".join(f"  {line}" for line in [*helper.before, statement, *helper.after])
    return name, f"__forceinline__ __device__ void {name}({', '.join(helper.params)}) {{\n{body}\n}}\n"


def _constant(value: object, what: str, entry: ptx.Entry) -> int:
    if not isinstance(value, E.IntImm):
        raise TVMSError(f"T.ptx.{entry.family}: {what} must be a constant when CUDA code is generated "
                        f"(unroll the loop that gives it)")
    return value.value


def call_of(call: E.Call) -> tuple[str, str, list]:
    """(helper name, helper source, the arguments passed) of a resolved ``T.ptx`` call."""
    entry = ptx.ENTRIES.get(call.op.name)
    if entry is None:
        raise TVMSError(f"the cuda code generator cannot tell which instruction of T.ptx.{ptx.family_of(call.op.name)} "
                        f"this call is (TVM's table leaves several): give its operands the dtypes of one")
    strings = len(entry.slots) + 1
    *token_args, marker_arg = call.args[len(call.args) - strings:]
    tokens = tuple(t.value for t in token_args)
    flags = ptx.parse_marker(marker_arg.value)
    layout = entry.layout(tokens)
    lanes = [n for n, _, _ in layout] if layout is not None else []
    operands = list(call.args[:len(call.args) - strings])
    expected = sum(lanes) - len(flags.sunk) + flags.pred
    if layout is None or len(operands) != expected:
        raise TVMSError(f"T.ptx.{entry.family}: {entry.name} takes {expected} operands here, the call has "
                        f"{len(operands)}")
    guard = [operands.pop()] if flags.pred else []
    for i in sorted(flags.sunk):  # (a sunk lane has no argument: its place back, empty)
        operands.insert(i, None)
    mods = entry.modifiers(tokens)
    dtypes, imms, offsets, sinks = [], [], [], set()
    start = address_number = 0
    for operand, count in zip(entry.argument_operands, lanes):
        places = range(start, start + count)
        start += count
        sinks |= {(operand.name, i - places.start) for i in places if operands[i] is None}
        live = [operands[i] for i in places if operands[i] is not None]
        if operand.kind == "reg":
            choices = accepted(entry, operand, mods)
            dtype = str(live[0].dtype) if live and len(choices) > 1 else choices[0]
            if dtype not in BINDINGS:
                raise TVMSError(f"T.ptx.{entry.family}: its operand {operand.name!r} cannot be a {dtype}")
            dtypes.append(dtype)
        elif operand.kind == "imm":  # (in the instruction's text, not passed)
            imms.append(str(_constant(operands[places.start], f"its immediate {operand.name!r}", entry)))
            operands[places.start] = None
        elif operand.kind == "addr" and count:
            value = operands[places.start]
            if ptx.is_address(value):
                if not operand.takes_addr:
                    raise TVMSError(f"T.ptx.{entry.family}: its operand {operand.name!r} takes no T.ptx.addr")
                base, offset = value.args
                offset = _constant(offset, "T.ptx.addr's byte offset", entry)
                if not _INT32[0] <= offset <= _INT32[1]:
                    raise TVMSError(f"T.ptx.{entry.family}: T.ptx.addr's byte offset {offset} is not an int32")
                operands[places.start] = base
                if offset:
                    offsets.append((address_number, offset))
            address_number += 1
    variant = Variant(tokens, tuple(dtypes), tuple(imms), flags.pred, flags.keep, frozenset(sinks), tuple(offsets))
    name, source = render(entry, variant)
    return name, source, [a for a in operands if a is not None] + guard


class PtxDialect:
    """The ``T.ptx.<family>`` side of ``CudaSource``."""

    def ptx_instruction(self, call: E.Call) -> str:
        name, source, passed = call_of(call)
        self.helpers.setdefault(name, source)
        return f"{name}({', '.join(self.expr(a) for a in passed)})"
