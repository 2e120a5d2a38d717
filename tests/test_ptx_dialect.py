"""TVM 0.27's table-driven PTX dialect (``T.ptx.<family>(operands..., tokens..., marker)``, ir/ptx.py):
read as TVM reads it (the entry its tokens, operand count and marker choose, the family where TVM
looks at dtypes too), printed back byte for byte (the goldens are fixtures/tvm027_printing/ptx_*.tvms,
which TVM 0.27 prints so: test_tvm027_printing.py), refused with a located error when malformed,
and refused outside a CUDA kernel (compiled in one: test_cuda_ptx_dialect.py)."""
from __future__ import annotations

import re

import numpy as np
import pytest
from conftest import FIXTURES
from test_errors import assert_error

import tvms
from tvms.ir import ptx, structural_equal
from tvms.ir.errors import TVMSError
from tvms.ir.expr import Call
from tvms.ir.visitor import collect
from tvms.runtime.reference import run_prim_func
from tvms.script import from_source

GOLDENS = FIXTURES / "tvm027_printing"


def ptx_ops(name: str) -> list[str]:
    func = from_source((GOLDENS / name).read_text())
    return [c.op.name for c in collect(func, Call) if c.op.name.startswith("tirx.ptx.") and c.op.name != ptx.ADDR_OP]


def test_a_call_records_the_entry_tvm_chooses() -> None:
    """The entries TVM 0.27 records for these calls (its IR, read in the side virtualenv): by the
    tokens (``vote.sync.ballot``), the operand count (``match.all.sync`` with a predicate
    destination) and the ``.pred`` markers (``bar.red.popc`` against ``bar.red.and``)."""
    assert ptx_ops("ptx_warp_atomics_barriers.tvms") == [f"tirx.ptx.{n}" for n in (
        "vote_sync", "vote_sync_ballot", "match_any_sync", "match_all_sync_p", "activemask", "elect_sync",
        "redux_sync", "redux_sync_bitwise", "atom", "atom_cas", "atom_exch", "atom_half", "bar_red_popc",
        "bar_red_pred")]
    assert ptx_ops("ptx_compare_select.tvms") == [f"tirx.ptx.{n}" for n in (
        "setp", "setp_pq", "setp_bool", "setp_bool_pq", "set", "selp", "slct")]  # (set: by its check)
    assert ptx_ops("ptx_logic_keyword_families.tvms") == [f"tirx.ptx.{n}" for n in (
        "and", "or", "xor", "and", "not", "not", "cnot", "lop3", "lop3_bool", "shf", "shl", "shr")]


def test_the_dtypes_choose_where_the_tokens_and_the_count_do_not() -> None:
    """``mov(packed, lo, hi)`` packs and ``mov(lo, hi, packed)`` unpacks (one count, one set of
    tokens): TVM, and tvms, tell them by the operands' dtypes (a b64 destination or a b32 pair);
    so a tcgen05.mma whose A is a uint64 shared-memory descriptor, not a uint32 tmem address."""
    assert ptx_ops("ptx_mov_pack_unpack.tvms") == ["tirx.ptx.mov_pack_b32x2", "tirx.ptx.mov_unpack_b32x2"]
    assert ptx_ops("ptx_tcgen05_mma.tvms") == ["tirx.ptx.tcgen05_mma_block_scale_block_ss"]


@pytest.mark.parametrize("form", [
    'T.ptx.tensormap_replace(T.address_of(A[0]), {}, "tile", "swizzle_mode", "", "b1024", "b32", "")',
    'T.ptx["tensormap_replace.tile.swizzle_mode.b1024.b32"](T.address_of(A[0]), {})'])
def test_an_immediates_value_chooses_the_entry(form: str) -> None:
    """TVM's table has two entries for ``tensormap.replace.tile.swizzle_mode.b1024.b32``, one for
    the values 0 to 3 and one (sm_103a) for 4: TVM, and tvms, choose by the value."""
    for value, entry in (("0", "tensormap_replace_swizzle_mode"),
                         ("T.int32(4)", "tensormap_replace_swizzle_mode_sm103a")):
        func = from_source(_kernel(form.format(value)))
        assert [c.op.name for c in collect(func, Call) if c.op.name.startswith("tirx.ptx.t")] == [f"tirx.ptx.{entry}"]
    assert_error(_kernel(form.format("d")), 6, 5, re.escape("is an immediate, one of 0, 1, 2 or 3, not a non-constant"))


def test_the_pairs_of_modifiers_tell_the_vector_entries_apart() -> None:
    """``ld...v4.u64`` and ``st...v4.s64`` are 256-bit accesses: TVM's check refuses them to the
    128-bit entries (ld_vec, st_vec) whatever the other modifiers, so TVM, and tvms, pick the
    256-bit ones; ``mapa.u64`` on a uint64 is the raw entry (the generic one takes a pointer)."""
    src = _kernel('T.ptx["ld.weak.global.ca.L2::cache_hint.L2::64B.v4.u64"](q, q, q, q, T.address_of(A[1]), q)\n'
                  '    T.ptx["st.release.cta.v4.s64"](T.address_of(A[1]), s, s, s, s)\n'
                  '    T.ptx["mapa.u64"](q, q, d)')
    src = src.replace("    d: T.uint32\n", "    d: T.uint32\n    q: T.uint64\n    s: T.int64\n")
    assert [c.op.name for c in collect(from_source(src), Call) if c.op.name.startswith("tirx.ptx.")] == [
        "tirx.ptx.ld_vec256", "tirx.ptx.st_vec256", "tirx.ptx.mapa_u64_raw"]


def test_an_address_operand_takes_what_tvm_takes_for_it() -> None:
    """In the printed form, ``mbarrier.arrive.release.cta.shared.b64`` on (a uint64, a shared
    address) is the entry that returns the state: an address in shared memory is a pointer or a
    uint32, not a uint64, so the entry whose address comes first does not take it (TVM 0.27 reads
    its printed form so)."""
    src = _kernel('T.ptx.mbarrier(q, T.cuda.cvta_generic_to_shared(T.address_of(A[0])), "arrive", "release", '
                  '"cta", "shared", "b64", "")').replace("    d: T.uint32\n", "    q: T.uint64\n")
    assert [c.op.name for c in collect(from_source(src), Call) if c.op.name.startswith("tirx.ptx.m")] == [
        "tirx.ptx.mbarrier_arrive_state"]


def test_a_destination_is_a_scalar_or_a_buffer_element() -> None:
    """``mbarrier.try_wait.parity`` on (d, a shared address, d, d): the entry whose second operand
    is a destination does not take the address there (TVM 0.27 reads its printed form so)."""
    src = _kernel('T.ptx.mbarrier(d, T.cuda.cvta_generic_to_shared(T.address_of(A[0])), d, d, "try_wait", "parity", '
                  '"phase_type::primary", "acquire", "cta", "shared", "b64", "")')
    assert [c.op.name for c in collect(from_source(src), Call) if c.op.name.startswith("tirx.ptx.m")] == [
        "tirx.ptx.mbarrier_try_wait_parity"]
    assert_error(_kernel("T.ptx.mov.b32(T.uint32(1), d)"), 6, 5,
                 re.escape("mov: its operand 1 is a destination: a scalar or a buffer element"))


def test_tokens_marker_and_addr_are_kept_and_compared() -> None:
    func = from_source((GOLDENS / "ptx_predicate_keep.tvms").read_text())
    ld = next(c for c in collect(func, Call) if c.op.name == "tirx.ptx.ld")
    assert [a.value for a in ld.args[-3:]] == ["", "f32", "pred,keep"]
    other = from_source((GOLDENS / "ptx_predicate_keep.tvms").read_text().replace('"pred,keep")\n    T.ptx.ex2',
                                                                                     '"pred")\n    T.ptx.ex2'))
    assert not structural_equal(func, other)
    addr = [c for c in collect(from_source((GOLDENS / "ptx_address_offsets.tvms").read_text()), Call)
            if c.op.name == ptx.ADDR_OP]
    assert [str(a.dtype) for a in addr] == ["handle", "handle"] and [a.args[1].value for a in addr] == [-16, 16]


def test_the_attribute_chain_and_string_spellings_read_as_tvm_reads_them() -> None:
    """They print in the flat form (the golden's source is fixtures/tvm027_printing/sources/, which
    TVM prints as the golden): the tokens fill their slots in any order, ``pred=`` and
    ``preserve_dst=`` become the marker, ``T.ptx.pred(x)`` a ``p<i>``, a literal takes its
    operand's dtype (``T.uint32(1)``), a pointer into shared memory its 32-bit window address, a
    uint64 address a handle; a call with no tokens (``T.ptx.elect_sync(...)``, no marker) or with
    ``pred=`` is the form with none; the entries are those TVM 0.27's IR records."""
    assert ptx_ops("sources/ptx_chain_and_string_spellings.tvms") == [f"tirx.ptx.{n}" for n in (
        "ld", "st", "red", "mov_pack_b32x2", "mov_unpack_b32x2", "not", "ex2", "ld", "not", "not", "st", "ld", "st",
        "ld", "ld", "elect_sync", "st_bulk", "st_bulk")]


def test_the_cp_async_groups_still_read_as_the_instructions_tvms_compiles() -> None:
    src = _kernel('T.ptx.cp("async", "commit_group", "")\n    T.ptx.cp(0, "async", "wait_group", "")\n'
                  '    T.ptx.cp("async", "bulk", "commit_group", "")\n    T.ptx.cp.async_.wait_group(1)')
    func = from_source(src)
    assert [c.op.name for c in collect(func, Call)] == [
        "tir.ptx.cp_async_commit_group", "tir.ptx.cp_async_wait_group", "tirx.ptx.cp_async_bulk_commit_group",
        "tir.ptx.cp_async_wait_group"]
    assert func.script(dialect="tvm-0.27").endswith('    T.ptx.cp(1, "async", "wait_group", "")')


def _kernel(body: str) -> str:
    return ('# from tvm.script import tirx as T\n\n@T.prim_func\ndef f(A: T.Buffer((8,), "uint32")):\n'
            f'    d: T.uint32\n    {body}\n')


@pytest.mark.parametrize("call, col, message", [
    ('T.ptx.lld(d, A[0], "b32", "")', 5, "unknown builtin 'T.ptx.lld'; did you mean 'T.ptx.ld'?"),
    ('T.ptx.mov(d, A[0], "b33", "")', 5, "'b33' is a modifier of no slot of T.ptx.mov"),
    ('T.ptx.mov(d, A[0], "", "b32", "")', 5, "T.ptx.mov takes 1 modifier token before its marker, got 2"),
    ('T.ptx.mov(d, A[0], "b32", "pred;p1")', 5, "malformed T.ptx marker 'pred;p1'"),
    ('T.ptx.mov(d, A[0], "b32", "p1,p1")', 5, "malformed T.ptx marker 'p1,p1'"),
    ('T.ptx.mov(d, "b32", "")', 5, "no instruction of T.ptx.mov takes 1 operand with the marker '' and these "
                                   "modifiers (it takes 2 or 3)"),
    ('T.ptx.mov(d, A[0], "b32", "p1")', 5, "no instruction of T.ptx.mov takes 2 operands with the marker 'p1'"),
    ('T.ptx.mov(d, A[0])', 5,
     "no instruction of T.ptx.mov takes these operands: mov_pack_b16x2: missing modifier(s) type"),
    ('T.ptx.mov(d, "b32", A[0], "")', 5, "the operands of T.ptx.mov come before its modifier tokens"),
    ('T.ptx.mov(d, A[0], "b32", "", pred=True)', 5, "T.ptx.mov(...) takes no keyword arguments"),
    # the attribute-chain and string spellings
    ('T.ptx.mov.b33(d, A[0])', 5, "'b33' is not a modifier of T.ptx.mov here; open slots: type={b32}"),
    ('T.ptx.ld.global_.global_.b32(d, T.address_of(A[0]))', 5, "'global' is not a modifier of T.ptx.ld here"),
    ('T.ptx.mov.b32(d, A[0], "x")', 5, "T.ptx.mov.b32(...) takes operands only; its modifiers are in its name"),
    ('T.ptx.mov.b32(d, A[0], foo=1)', 5, "T.ptx.mov.b32(...) takes the operands, pred= and preserve_dst=True|False"),
    ('T.ptx[1](d)', 5, "T.ptx[...] takes an instruction's PTX text"),
    ('T.ptx["st.global.b32"](T.address_of(A[0]))', 5,
     "no instruction of T.ptx.st takes these operands: st: takes 2 operands, got 1; st_vec: missing modifier(s) vec"),
    ('T.ptx.not_.b32(d, T.ptx.pred(d))', 5, "not: its .pred operands are none (a bool, or T.ptx.pred(x))"),
    ('T.ptx.ld.global_.b32(d, d)', 5,
     "T.ptx.ld.global_.b32's operand 2 is a uint32, an address of the shared state space only"),
    ('T.ptx.ld.shared.b32(d, A[0] + T.float32(1))', 5,
     "T.ptx.ld.shared.b32's operand 2 is a shared-memory address: a pointer or a uint32 shared address, not float32"),
    ('T.ptx.mov.b64(d, T.ptx.SINK, A[0])', 5, "tvms reads the sink T.ptx.SINK in the printed form only"),
    ('T.ptx.cp("async", "bulk_group", "")', 5, "T.ptx.cp takes no modifiers ('async', 'bulk_group') in this order"),
    ('T.ptx.set(d, d, d, "lo", "", "u32", "f32", "")', 5,
     "TVM's PTX table refuses the modifiers ('lo', '', 'u32', 'f32') of T.ptx.set together"),
    ('d = T.ptx.addr(A.data)', 9, "T.ptx.addr takes a base address and a byte offset"),
])
def test_a_malformed_call_is_a_located_error(call: str, col: int, message: str) -> None:
    assert_error(_kernel(call), 6, col, re.escape(message))


@pytest.mark.parametrize("golden, family, text", [
    ("ptx_address_offsets.tvms", "ld", "ld.global.b32"),  # (no thread launched: in the host function)
    ("ptx_tcgen05_mma.tvms", "tcgen05", "tcgen05.mma.cta_group::1.kind::mxf4.block_scale.block32"),  # (in a kernel)
])
def test_what_is_neither_compiled_nor_run_is_refused_by_name(golden: str, family: str, text: str) -> None:
    """Outside a kernel, or an instruction the reference executor does not model: not a crash, not
    wrong code; each names the instruction as PTX spells it."""
    func = from_source((GOLDENS / golden).read_text())
    what = re.escape(f"TVM 0.27's PTX instruction T.ptx.{family} ({text})")
    if family == "ld":  # (no kernel: the cuda code generator compiles PTX in kernels, test_cuda_ptx_dialect.py)
        cuda = re.escape("the cuda code generator does not compile (in the host function) ")
        with pytest.raises(TVMSError, match=cuda + what + re.escape(": tvms compiles the T.ptx dialect in CUDA kernels only")):
            tvms.build(func, target="cuda")
        with pytest.raises(TVMSError, match=re.escape("the llvm code generator does not compile ") + what):
            tvms.build(func, target="llvm")
    args = [np.zeros([n.value for n in b.shape], str(b.dtype)) for b in func.buffer_map.values()]
    with pytest.raises(TVMSError, match=re.escape("the reference executor does not run ") + what):
        run_prim_func(func, *args)
