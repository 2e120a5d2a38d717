"""TVM 0.27's PTX dialect (``T.ptx.<family>(...)``) in CUDA C: every instruction a helper with one
inline-asm statement, written as TVM's code generator writes it (fixtures/ptx_dialect, made by its
generate_with_tvm.py in a side virtualenv with TVM 0.27):

* ``helpers.json``: 3,162 helpers, a sample of every one of the 506 entries of TVM's table (tokens,
  operand dtypes, immediates, predication, kept destinations, sunk lanes, ``T.ptx.addr`` offsets),
  each rendered by tvms and compared with a digest of TVM's, byte for byte;
* kernels TVM printed in its tirx tests and Hopper ones (wgmma, TMA), each built by tvms for ``sm_100a`` (the
  Hopper ones for ``sm_90a``; NVRTC compiles them) and
  compared with the CUDA C TVM's ``tirx`` pipeline wrote: the same helpers, called with the same
  arguments.
"""
from __future__ import annotations

import hashlib
import json
import re

import pytest

import tvms
from tvms.ir import ptx
from tvms.ir.errors import TVMSError
from tvms.lowering.codegen.cuda_ptx_dialect import Variant, render
from tvms.script import from_source

from conftest import FIXTURES

GOLDEN = FIXTURES / "ptx_dialect"
ENTRIES = {e.name: e for e in ptx.ENTRIES.values()}
SM100 = {"kind": "cuda", "arch": "sm_100a"}


def target_of(case: str) -> dict:  # (tcgen05 is sm_100a's, wgmma sm_90a's alone)
    return {"kind": "cuda", "arch": "sm_90a" if case.startswith("hopper") else "sm_100a"}


def _variant(entry: ptx.Entry, tokens: str, dtypes: str, imms: str, flags: str, sinks: str, offsets: str) -> Variant:
    def split(text: str) -> tuple[str, ...]:
        return tuple(text.split("|")) if text else ()

    return Variant(tuple(tokens.split("|")) if entry.slots else (), split(dtypes), split(imms), "p" in flags,
                   "k" in flags, frozenset((s.split(":")[0], int(s.split(":")[1])) for s in sinks.split(",") if s),
                   tuple(tuple(int(x) for x in o.split(":")) for o in offsets.split(",") if o))


def test_every_entry_of_tvms_table_renders_as_tvm_renders_it() -> None:
    rows = json.loads((GOLDEN / "helpers.json").read_text())
    assert {row[0] for row in rows} == set(ENTRIES)  # (the table's 506 entries, each sampled)
    wrong = []
    for name, *choices, digest in (row[:8] for row in rows):
        entry = ENTRIES[name]
        _, source = render(entry, _variant(entry, *choices))
        if hashlib.sha256(source.encode()).hexdigest()[:16] != digest:
            wrong.append(f"{name} {choices}:\n{source}")
    assert not wrong, f"{len(wrong)} of {len(rows)} helpers differ from TVM's; the first:\n" + wrong[0]


def test_an_entrys_helper_is_tvms_text() -> None:  # (the whole text, where the digests only tell)
    rows = [row for row in json.loads((GOLDEN / "helpers.json").read_text()) if len(row) == 9]
    for name, *choices, _, source in rows[:: len(rows) // 40]:
        entry = ENTRIES[name]
        assert render(entry, _variant(entry, *choices))[1] == source


def helpers_and_calls(source: str) -> tuple[set[str], list[str]]:
    """The helper definitions (TVM writes them in a hash table's order: a set) and the lines of the
    kernels that call a PTX helper."""
    kernels = source.index('extern "C"')
    start = source.index("\n", source.index("#endif", source.index("#define ushort"))) + 1 \
        if "#define ushort" in source else 0
    helpers = {h.strip() for h in re.split(r"\n(?=__)", source[start:kernels]) if h.strip()}
    return helpers, [line.strip() for line in source[kernels:].splitlines() if "tvm_builtin_ptx_" in line]


KERNELS = sorted(p.stem for p in GOLDEN.glob("*.tvms"))
# (TVM's tirx pipeline simplifies the predicate `tx == 0` under `if tx == 0` to true; tvms's lowering
# of a kernel with scope ids does not: the same helper, called with the unsimplified predicate)
UNSIMPLIFIED = {"be7075dab686a324"}


@pytest.fixture(scope="module")
def built() -> dict[str, str]:
    """Each kernel's CUDA C as tvms builds it for sm_100a or sm_90a (NVRTC compiles it: a failure fails)."""
    sources = {}
    for case in KERNELS:
        lib = tvms.build(from_source((GOLDEN / f"{case}.tvms").read_text(), f"{case}.tvms"), target=target_of(case))
        sources[case] = lib.imported_modules[0].get_source()
    return sources


# (TVM fills a wgmma descriptor through a bitfield union it writes before its helpers; tvms's helper of
# the same name and signature computes the same bits with shifts)
DESCRIPTOR = "ptx_wgmma_encode_matrix_descriptor("


def _own_text(helpers: set[str]) -> set[str]:
    return {h for h in helpers if DESCRIPTOR not in h and "union GmmaDescriptor" not in h}


@pytest.mark.parametrize("case", KERNELS)
def test_kernels_call_tvms_helpers_as_tvm_does(case: str, built: dict[str, str]) -> None:
    ours, theirs = helpers_and_calls(built[case]), helpers_and_calls((GOLDEN / f"{case}.cu").read_text())
    assert _own_text(ours[0]) == _own_text(theirs[0])
    assert any(DESCRIPTOR in h for h in ours[0]) == any(DESCRIPTOR in h for h in theirs[0])
    if case not in UNSIMPLIFIED:
        assert ours[1] == theirs[1]
    else:
        assert [c.split("(")[0] for c in ours[1]] == [c.split("(")[0] for c in theirs[1]]


def test_hoppers_asynchronous_matmul_is_written(built: dict[str, str]) -> None:
    """wgmma (its fence, commit and wait), mbarriers and bulk copies, what a Hopper GEMM is made of:
    the fixture built them for sm_90a."""
    assert "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {%0, %1," in built["hopper_wgmma"]


KERNEL = """
# from tvm.script import tirx as T

@T.prim_func
def kernel(A: T.Buffer((64,), "uint32")):
    T.attr({{"tirx.device_entry": T.bool(True)}})
    v = T.cta_id([1])
    tx = T.thread_id([32])
    d: T.uint32
    {call}
    A[tx] = d
"""


@pytest.mark.parametrize("call, message", [
    ('T.ptx.ld(d, T.ptx.addr(A.data, tx * 4), "", "", "", "global", "", "", "", "", "", "b32", "")',
     "T.ptx.addr's byte offset must be a constant when CUDA code is generated (unroll the loop that gives it)"),
])
def test_what_cannot_become_an_instruction_is_a_clear_error(call: str, message: str) -> None:
    with pytest.raises(TVMSError, match=re.escape(message)):
        tvms.build(from_source(KERNEL.format(call=call)), target=SM100)


def test_a_kept_destination_that_rides_a_carrier_is_refused_as_tvm_refuses_it() -> None:
    entry = ENTRIES["ld"]
    tokens = ("", "", "", "global", "", "", "", "", "", "b8")
    with pytest.raises(TVMSError, match="read-write operand 'd' cannot be a uint8"):
        render(entry, Variant(tokens, ("uint8", "uint64"), predicated=True, keep=True))


def test_mbarrier_arrive_drop_compiles_with_nvrtc() -> None:
    """The forms of mbarrier.arrive_drop the reference executor runs, in one kernel built for
    sm_90a (NVRTC compiles it), each a helper as TVM's table writes it."""
    bar = "T.cuda.cvta_generic_to_shared(T.address_of(bar[0]))"
    calls = "\n    ".join([
        'bar = T.alloc_shared((1,), "uint64")',
        "state: T.uint64",
        f'T.ptx.mbarrier({bar}, T.uint32(32), "init", "", "shared", "b64", "")',
        f'T.ptx.mbarrier({bar}, "arrive_drop", "", "", "shared", "b64", "")',
        f'T.ptx.mbarrier({bar}, T.uint32(1), "arrive_drop", "release", "cta", "shared", "b64", "")',
        f'T.ptx.mbarrier({bar}, T.uint32(0), "arrive_drop", "expect_tx", "", "", "shared", "b64", "")',
        f'T.ptx.mbarrier(state, {bar}, "arrive_drop", "", "", "shared", "b64", "")',
        "d = T.Cast(\"uint32\", state)",
    ])
    source = tvms.build(from_source(KERNEL.format(call=calls)), target={"kind": "cuda", "arch": "sm_90a"}) \
        .imported_modules[0].get_source()
    for asm in ("mbarrier.arrive_drop.shared.b64 _, [%0];", "mbarrier.arrive_drop.release.cta.shared.b64 _, [%0], %1;",
                "mbarrier.arrive_drop.expect_tx.shared.b64 _, [%0], %1;", "mbarrier.arrive_drop.shared.b64 %0, [%1];"):
        assert asm in source
