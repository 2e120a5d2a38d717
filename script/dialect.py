"""The two spellings of TVMScript that tvms prints, and how to tell which one a text uses.

``classic`` is the seeds' dialect (``T.block``, ``"tir.noalias"``); ``tvm-0.27`` is what Apache
TVM 0.27 prints (``T.sblock``, ``"tirx.noalias"``, ``s_tir=True``, module-level ``TypeVar``).
The IR is the same for both: only names and a few layout rules differ.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from ..ir.errors import TVMSError


@dataclass(frozen=True)
class Dialect:
    name: str
    block: str  # the scope that makes a block
    block_attr: str
    block_alloc: str  # a buffer allocated by a block (and by the implicit root block)
    tir_module: str  # "tir" / "tirx": in the import header and attribute keys
    header: tuple[str, ...]
    typevar_header: str | None  # printed first when the module has TypeVar lines
    tvm_function_order: bool  # a module's functions print in TVM's order, not in insertion order
    flat_statements: bool  # a binding, assert or allocation ends without printing a no-op rest


CLASSIC = Dialect(
    name="classic", block="block", block_attr="block_attr", block_alloc="alloc_buffer",
    tir_module="tir",
    header=("# from tvm.script import ir as I", "# from tvm.script import tir as T"),
    typevar_header=None, tvm_function_order=False, flat_statements=False)

TVM_027 = Dialect(
    name="tvm-0.27", block="sblock", block_attr="sblock_attr", block_alloc="sblock_alloc_buffer",
    tir_module="tirx",
    header=("# from tvm.script import ir as I", "# from tvm.script import tirx as T",
            "# from tvm.tirx.layout import Axis"),
    typevar_header="# from typing import TypeVar", tvm_function_order=True,
    flat_statements=True)

DIALECTS = {d.name: d for d in (CLASSIC, TVM_027)}
RELAX_HEADER = "# from tvm.script import relax as R"  # (both dialects)


def get_dialect(name: "str | Dialect") -> Dialect:
    if isinstance(name, Dialect):
        return name
    try:
        return DIALECTS[name]
    except KeyError:
        raise TVMSError(f"unknown dialect {name!r}; choose one of {', '.join(DIALECTS)}") from None


# Spellings only TVM 0.27 prints (a Relax-only text can differ from the classic one in as little
# as an unset dtype: dtype=None / out_dtype=None where classic prints "void"). R.Callable's tuple of
# parameters is no marker: TVM printed it so before 0.27 too, and tvms prints it so in both. A
# "tirx." string marks 0.27 as an attribute key only: as a value (a kernel's launch parameter
# "tirx.use_dyn_shared_memory") it is data, which classic text shows as it is.
_TVM027_MARKERS = re.compile(
    r"\bT\.sblock|\bs_tir\s*=|\bTypeVar\(|\bimport TypeVar\b|import tirx\b|\"tirx\.[\w.]*\"\s*:|\bout_ty="
    r"|\bty_args=|\bR\.Any\b|ir\.GenericConst|\bT\.let\[|dtype=None\b")


def tvm027_marker(text: str) -> str | None:
    """The first TVM 0.27 spelling in a text (what makes :func:`detect_dialect` choose 0.27), or
    None when the text has none."""
    found = _TVM027_MARKERS.search(text)
    return found.group(0) if found else None


def detect_dialect(text: str) -> Dialect:
    """The dialect a text is written in: TVM 0.27 when it uses any of 0.27's spellings.

    The parser asks once per text and records the answer on the IR it builds
    (``IRModule.source_dialect``): nothing downstream looks at the text again."""
    return TVM_027 if tvm027_marker(text) is not None else CLASSIC


# TVM 0.27 reads a "tir." key as it is written: a key from before the renaming that none of its
# passes knows ("tir.noalias" in a text written for an older TVM), not its "tirx." namesake. The IR
# keeps such a key under this prefix, so that it neither means the classic key (no pass takes it
# for noalias, as none of TVM 0.27's does) nor collides with it; classic text shows it prefixed.
UNRENAMED_KEY_PREFIX = "tvm-0.27:"


def canonical_attr_key(key: str, dialect: "Dialect | None" = None) -> str:
    """Attribute keys are stored as the classic dialect spells them (``tir.noalias``); a ``tir.``
    key read from TVM 0.27's text keeps its own spelling (``UNRENAMED_KEY_PREFIX``)."""
    if key.startswith("tirx."):
        return "tir." + key[5:]
    if dialect is not None and dialect.tir_module == "tirx" and key.startswith("tir."):
        return UNRENAMED_KEY_PREFIX + key
    return key


def dialect_attr_key(key: str, dialect: Dialect) -> str:
    """``key`` as ``dialect`` spells it, whichever way the IR holds it (a schedule annotates with
    the key as given: DLight writes ``tirx.`` keys). Classic text must never show a ``"tirx.``
    key: the parser would read the whole text as TVM 0.27's, where ``T.alloc_buffer`` means
    another thing."""
    key = canonical_attr_key(key)
    if dialect.tir_module == "tirx" and key.startswith("tir."):
        return "tirx." + key[4:]
    if dialect.tir_module == "tirx" and key.startswith(UNRENAMED_KEY_PREFIX):
        return key[len(UNRENAMED_KEY_PREFIX):]
    return key
