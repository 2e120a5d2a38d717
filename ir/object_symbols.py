"""The symbols an object file leaves for the linker to find: what the JIT must resolve before it
loads code (``runtime/llvm_jit.py``), and what tells the llvm code generator that a name it was
given as an LLVM intrinsic is none (LLVM leaves a call of an unknown ``llvm.*`` name as a call of
an outside function of that name, ``lowering/codegen/llvm_intrinsic_check.py``)."""
from __future__ import annotations

import struct
from typing import Any


def undefined_symbols(obj: Any) -> list:
    """The names an ELF64 little-endian object file (llvmlite's ``ObjectFileRef``) uses but does
    not define (others: [])."""
    sections = {s.name(): s.data() for s in obj.sections()}
    symtab, strtab = sections.get(b".symtab"), sections.get(b".strtab")
    if not symtab or not strtab:
        return []
    names = []
    for (name, info, _other, shndx, _value, _size) in struct.iter_unpack("<IBBHQQ", symtab):
        if name and shndx == 0 and info >> 4 != 0:  # undefined, and not local (binding 0)
            names.append(strtab[name:strtab.index(b"\0", name)].decode())
    return names


__all__ = ["undefined_symbols"]
