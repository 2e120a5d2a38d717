"""PTX's memory instructions for the reference executor: addresses, ld/st, atom/red, cvta.

An address is an ``Address``: a memory (a ``reference_gpu.Shared`` root for shared memory, else
the flat numpy array of a buffer) and a byte offset in it. Pointers (``A.data``,
``T.address_of(A[i])``, ``T.tvm_access_ptr``) are addresses as they are; ``T.ptx.addr(base,
bytes)`` adds to one. Integer addresses are numbers in two windows the executor lays out as the
memories are first asked for: the block's shared window (``T.cuda.cvta_generic_to_shared``,
``cvta.to.shared``: a uint32, from 1024, each allocation 1024-byte aligned) and the generic one
of the launch (``cvta.to.global``, ``cvta.shared``: a uint64, from 2**40, each allocation 1 MiB
aligned). An integer outside every allocation of its window is refused, and so is an access out
of its memory's bounds or not aligned to its size (a vector's: the whole vector's), as PTX
requires.

Each thread runs alone between its waits (reference_gpu), so an atom or red is whole: it is the
old value and the update, in the order the executor runs the threads. A float add rounds to
nearest; ``.add.f32`` in global memory (without ``.noftz``) flushes subnormal inputs and results
to zero, as PTX's does, and in shared memory keeps them. Accesses to shared memory are
race-checked as buffer accesses are, but for atomics (no race, as T.cuda.atomic_add).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from tvms.ir.errors import TVMSError

from . import ptx_arithmetic, reference_async
from .ptx_values import as_int, is_float, width
from .reference_gpu import Shared


@dataclass(frozen=True)
class Address:
    memory: Any  # a Shared root, or a flat numpy array
    byte: int

    def __add__(self, nbytes: int) -> "Address":
        return Address(self.memory, self.byte + int(nbytes))


def pointer_address(pointer: tuple) -> Address:
    """A pointer as the kernel code generator gives it, (memory, offset in its elements)."""
    memory, offset = pointer
    if isinstance(memory, Shared):
        return Address(memory.root, int(offset) * memory.itemsize)
    return Address(memory, int(offset) * memory.dtype.itemsize)


def offset_address(base: Address | NumberAddress, nbytes: int) -> Address | NumberAddress:
    """``T.ptx.addr(base, bytes)``."""
    return base + nbytes


def _nbytes(memory: Any) -> int:
    return memory.data.nbytes if isinstance(memory, Shared) else memory.nbytes


class _Window:
    """Integer addresses of memories: each its base, in the order they are first asked for."""

    def __init__(self, start: int, align: int) -> None:
        self.next, self.align = start, align
        self.bases: list = []  # (base, memory)

    def address(self, address: Address) -> int:
        for base, memory in self.bases:
            if memory is address.memory:
                return base + address.byte
        base = self.next
        self.bases.append((base, address.memory))
        self.next = -(-(base + _nbytes(address.memory) + 1) // self.align) * self.align
        return base + address.byte

    def find(self, number: int) -> Address | None:
        for base, memory in self.bases:
            if base <= number <= base + _nbytes(memory):
                return Address(memory, number - base)
        return None


def _shared_window(block: Any) -> _Window:
    # (1024-byte aligned: the period of the 128-byte swizzle, which TMA copies and wgmma operands
    # apply to the address bits, so a buffer's swizzle starts at its first byte as on a GPU)
    return block.memory.setdefault("ptx.shared_window", _Window(1024, 1024))


def shared_window_address(block: Any, address: Address) -> int:
    """The number of a shared-memory ``address`` in the block's shared window."""
    return _shared_window(block).address(address)


def swizzled(address: Any, width: int) -> Any:
    """The physical byte of a logical shared address under a swizzle of ``width`` bytes (32, 64,
    128): its 16-byte chunk within the width XORed with the address's 128-byte row (bits 7..)."""
    return address ^ ((address >> 7 & (width // 16 - 1)) << 4)


def _generic_window(block: Any) -> _Window:
    return block.grid.setdefault("ptx.generic_window", _Window(1 << 40, 1 << 20))


def shared_address(block: Any, pointer: tuple) -> int:
    """``T.cuda.cvta_generic_to_shared(ptr)``: the pointer's address in the block's shared window."""
    address = pointer_address(pointer)
    if not isinstance(address.memory, Shared):
        raise TVMSError("T.cuda.cvta_generic_to_shared of a pointer that is not into shared memory")
    return _shared_window(block).address(address)


@dataclass(frozen=True)
class NumberAddress:
    """An address operand given as a number (and ``T.ptx.addr``'s bytes past it): found in its
    window as the instruction runs, so that a number in no allocation is an error of the
    instruction's (reference_ptx_dialect.memory: by which thread, at which statement)."""
    number: int
    space: str
    byte: int = 0

    def __add__(self, nbytes: int) -> "NumberAddress":
        return NumberAddress(self.number, self.space, self.byte + int(nbytes))

    def found(self, block: Any) -> Address:
        return integer_address(block, self.number, self.space) + self.byte


def integer_address(block: Any, number: int, space: str) -> Address:
    """An address operand given as a number: a shared-window address where the operand is in a
    shared state space, else a generic one."""
    window = _shared_window(block) if space == "shared" else _generic_window(block)
    found = window.find(int(number))
    if found is None:
        raise TVMSError(f"the {'shared' if space == 'shared' else 'generic'} address {int(number):#x} is in no "
                        f"allocation the reference executor has given an address")
    return found


# ---------------------------------------------------------------- accesses
def _check(address: Address, space: str, size: int, what: str) -> None:
    memory = address.memory
    if space.startswith("shared") and not isinstance(memory, Shared):
        raise TVMSError(f"{what} at an address that is not in shared memory")
    if space == "global" and isinstance(memory, Shared):
        raise TVMSError(f"{what} at an address in shared memory")
    if not 0 <= address.byte <= _nbytes(memory) - size:
        raise TVMSError(f"{what} of {size} bytes at byte {address.byte} is out of the bounds of its memory "
                        f"({_nbytes(memory)} bytes)")
    if address.byte % size:
        raise TVMSError(f"{what} of {size} bytes at byte {address.byte} is not aligned to {size} bytes, as PTX "
                        f"requires")


def _raw(memory: Any) -> np.ndarray:
    return (memory.data if isinstance(memory, Shared) else memory).reshape(-1).view(np.uint8)


def _unit(bits: int, what: str) -> int:
    if bits not in (8, 16, 32, 64):
        raise TVMSError(f"the reference executor does not run {what}: it has no {bits}-bit registers")
    return bits // 8


def read(ctx: tuple, address: Address, bits: int, count: int, space: str, what: str) -> list[int]:
    """``count`` elements of ``bits`` bits from ``address`` (unsigned)."""
    block, me, stmt = ctx
    size = _unit(bits, what)
    _check(address, space, size * count, what)
    dtype = np.dtype(f"uint{bits}")
    memory = address.memory
    if isinstance(memory, Shared):
        first = address.byte // size
        values = memory.view(dtype).load(np.arange(first, first + count), me, stmt)
    else:
        values = _raw(memory)[address.byte:address.byte + size * count].view(dtype)
    return [int(v) for v in np.atleast_1d(values)]


def write(ctx: tuple, address: Address, bits: int, values: list[int], space: str, what: str) -> None:
    block, me, stmt = ctx
    size = _unit(bits, what)
    _check(address, space, size * len(values), what)
    dtype = np.dtype(f"uint{bits}")
    array = np.array([v & ((1 << bits) - 1) for v in values], dtype)
    memory = address.memory
    if isinstance(memory, Shared):
        first = address.byte // size
        memory.view(dtype).store(np.arange(first, first + len(values)), array, me, stmt)
    else:
        _raw(memory)[address.byte:address.byte + size * len(values)] = array.view(np.uint8)


def _name(m: dict, mnemonic: str) -> str:
    return ".".join([mnemonic, *(t for t in m.values() if t)])


def _extend(x: int, t: str) -> int:
    """A loaded value: sign-extended where the type is signed (ld.s8 into a wider register)."""
    return as_int(x, t) if t.startswith("s") else x


def ld(ctx: tuple, m: dict, address: Address, *_: Any) -> tuple:
    t, count = m["type"], int(m.get("vec", "v1")[1:] or 1)
    values = read(ctx, address, width(t), count, m.get("space", ""), _name(m, "ld"))
    return tuple(_extend(v, t) for v in values)


def st(ctx: tuple, m: dict, address: Address, *values: Any) -> tuple:
    t, count = m["type"], int(m.get("vec", "v1")[1:] or 1)
    write(ctx, address, width(t), list(values[:count]), m.get("space", ""), _name(m, "st"))
    return ()


def _atomic_value(m: dict, old: int, b: int, c: int | None) -> int:
    """The new value of an atom/red of ``op`` on ``old`` with operands ``b`` (and cas's ``c``)."""
    t, op = m["type"], m["op"]
    if op == "exch":
        return b
    if op == "cas":
        return c if old == as_int(b, "u" + t[1:]) else old
    if op in ("and", "or", "xor"):
        return ptx_arithmetic.ARITHMETIC[op]({"type": "b" + t[1:]}, old, b)
    if op == "inc":
        return 0 if old >= as_int(b, "u32") else old + 1
    if op == "dec":
        return as_int(b, "u32") if old == 0 or old > as_int(b, "u32") else old - 1
    if op == "add" and is_float(t):  # (add.rn, .ftz where atom says: module docstring)
        return ptx_arithmetic.ARITHMETIC["add"]({"type": t, "ftz": m.get("ftz", "")}, old, b)
    if op == "add":
        return as_int(old + as_int(b, t), t)
    pick = min if op == "min" else max
    return pick(as_int(old, t), as_int(b, t)) if not is_float(t) else \
        ptx_arithmetic.ARITHMETIC[op]({"type": t}, old, b)


def atom(ctx: tuple, m: dict, address: Address, b: Any, c: Any = None, *_: Any) -> tuple:
    """atom (and red, which keeps no old value): whole, in the executor's order (module docstring)."""
    t = m["type"]
    bits = width(t)
    what = _name(m, "atom")
    _check(address, m.get("space", ""), _unit(bits, what), what)
    raw = _raw(address.memory)[address.byte:address.byte + bits // 8]
    cell = raw.view(np.dtype(f"uint{bits}"))
    old = int(cell[0])
    # (.add.f32 in global memory flushes subnormals: module docstring)
    flushes = t == "f32" and m["op"] == "add" and not m.get("noftz") and not isinstance(address.memory, Shared)
    new = _atomic_value({**m, "ftz": "ftz" if flushes else ""}, old, b, c if m["op"] == "cas" else None)
    cell[0] = new & ((1 << bits) - 1)
    return (_extend(old, t),)


def generic_address(block: Any, address: Any) -> int:
    """A pointer as a number in a register (mov.b64 d, ptr): its generic address."""
    if isinstance(address, NumberAddress):
        if address.space != "shared":  # (a generic number is its own generic address, in an allocation or not)
            return (address.number + address.byte) & (1 << 64) - 1
        address = address.found(block)
    return _generic_window(block).address(address)


def cvta(ctx: tuple, m: dict, a: Any) -> tuple:
    """``cvta.to.<space>``: a generic address (a pointer, or a number) as the space's (a shared
    one's in the block's window; global and local ones are generic addresses in the executor);
    ``cvta.<space>``: an address of the space as a generic one."""
    block = ctx[0]
    space = m["space"]
    shared = space in ("shared", "shared::cta")
    if not (shared or space in ("global", "local")):
        raise TVMSError(f"the reference executor does not run {_name(m, 'cvta')}: it has no .{space} state space")
    if m.get("dir") == "to":
        address = a if isinstance(a, Address) else integer_address(block, a, "generic")
        if shared and not isinstance(address.memory, Shared):
            raise TVMSError(f"{_name(m, 'cvta')} of an address that is not in shared memory")
        return ((_shared_window(block) if shared else _generic_window(block)).address(address),)
    address = a if isinstance(a, Address) else integer_address(block, a, "shared" if shared else "generic")
    return (_generic_window(block).address(address),)


def cp_async(ctx: tuple, m: dict, dst: Address, src: Address, size: int, *_: Any) -> tuple:
    """``cp.async.ca``/``.cg`` of ``size`` bytes into shared memory, in the thread's open group
    (reference_async: it lands at the ``wait_group`` that completes its group)."""
    return cp_async_src_size(ctx, m, dst, src, size, size)


def cp_async_src_size(ctx: tuple, m: dict, dst: Address, src: Address, size: int, read: int, *_: Any) -> tuple:
    """The ``src_size`` form: ``read`` bytes of the source, the rest of the ``size`` zeros."""
    block, me, stmt = ctx
    what = _name(m, "cp")
    size, read = int(size), int(read)
    if not isinstance(dst.memory, Shared) or isinstance(src.memory, Shared):
        raise TVMSError(f"{what}: it copies from global into shared memory")
    if not 0 <= read <= size:
        raise TVMSError(f"{what}: its src-size {read} is not within its cp-size {size} (PTX leaves that undefined)")
    source = _raw(src.memory)
    if read and not 0 <= src.byte <= len(source) - read:  # (src-size 0 reads nothing: a tile edge's zeros)
        raise TVMSError(f"{what} reads bytes {src.byte} to {src.byte + read - 1} of a source of {len(source)} bytes: "
                        f"out of its bounds")
    if read and src.byte % size:
        raise TVMSError(f"{what} of {size} bytes from byte {src.byte} of its source: PTX needs the address aligned "
                        f"to the copy size")
    chunk = np.zeros(size, np.uint8)  # (the bytes past src-size are zeros)
    chunk[:read] = source[src.byte:src.byte + read]
    reference_async.cp_async(block, me, dst.memory.view(np.dtype(np.uint8)), dst.byte, chunk, 0, size, True, stmt)
    return ()


def no_op(ctx: tuple, m: dict, *_: Any) -> tuple:
    """prefetch, prefetchu, applypriority, a plain fence: nothing a single-stream executor can see."""
    return ()


MEMORY = {
    "ld": ld, "ld_vec": ld, "ld_vec256": ld, "ldu": ld, "ldu_vec": ld, "ld_proxy_readonly": ld,
    "st": st, "st_vec": st, "st_vec256": st,
    "atom": atom, "atom_cas": atom, "atom_exch": atom, "atom_half": atom, "atom_f32_noftz": atom,
    "atom_bitbucket": atom, "atom_cas_bitbucket": atom, "atom_exch_bitbucket": atom,
    "atom_half_bitbucket": atom, "atom_f32_noftz_bitbucket": atom,
    "red": atom, "red_half": atom, "red_f32_noftz": atom,
    "cvta": cvta, "cvta_generic": cvta,
    "prefetch": no_op, "prefetchu": no_op, "prefetch_valid_addr": no_op, "applypriority": no_op, "fence": no_op,
    # (one proxy in the executor: fence.proxy.async orders nothing it could see)
    "fence_proxy": no_op,
    "cp_async_ca": cp_async, "cp_async_cg": cp_async, "cp_async_ca_src_size": cp_async_src_size,
    "cp_async_cg_src_size": cp_async_src_size,
}
