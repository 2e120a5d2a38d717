"""TVM 0.27's PTX dialect (``T.ptx.<family>(...)``) in the reference executor's GPU kernels.

A call (ir/ptx.py reads it into an entry of TVM's table) runs per thread, in the kernel's
generated code, as one statement:

* its operands, by the entry's layout: each register a value (``ptx_values``), a ``.pred``
  input (the marker's ``p<i>``) a bool (nonzero is true), an address operand (one in a state
  space, or any pointer) an ``ptx_memory.Address``; a sunk lane (``s<i>``) takes no argument and
  its result goes nowhere;
* then what the entry computes: ``ptx_arithmetic.ARITHMETIC`` (per thread), ``ptx_memory.MEMORY``
  (ld, st, atom, red, cvta; prefetches and plain fences do nothing), ``WARP`` (shfl.sync,
  vote.sync, match.sync, redux.sync, elect.sync: answered in lock-step once every lane of the
  membermask is there, as the T.cuda votes are), activemask, bar/barrier.sync (barrier 0 of
  the whole block, as ``T.cuda.cta_sync``: a thread count, if given, must be the block's;
  bar.red.popc/and/or answer with the block's vote), bar.warp.sync;
* then its destinations are written (each a scalar or a buffer element, ``register_value``).

Predication: where the marker says ``pred``, the last argument guards the whole instruction: a
false one reads nothing, writes nothing and takes no part in a collective. So the destination
keeps its value whether the marker says ``keep`` or not (without it, TVM binds the destination
write-only and leaves it undefined: keeping the old value is one of the values it may have).

cp.async (``.ca``/``.cg``, with or without src-size) goes into the thread's queue of copies, as
TVM's cp.async builtin does (reference_async: it lands at the ``cp.async.wait_group`` or
``wait_all`` that completes its group, and a read of it before is an error); the group operations
are that queue's. wgmma's matrix multiply of two shared-memory operands, its fence, commit and
wait, and ``T.cuda.wgmma.encode_matrix_descriptor`` are reference_wgmma's; fence.proxy orders
nothing the executor could see (it has one proxy).

mbarrier's init, arrive and arrive_drop (their ``state`` forms too), expect_tx, ``try_wait`` (on a
state token or a parity) and ``T.cuda.mbarrier_wait``, and the TMA's tensor copies
(``cp.async.bulk.tensor``, its bulk groups and prefetch) are reference_tma's.

Everything else -- a call its family only names (where the table leaves entries open), tcgen05,
wgmma's other forms, mbarrier's test_wait (a non-blocking test a thread spins on:
the executor switches threads only where they wait), the non-tensor bulk copies,
multimem, named barriers, isspacep -- is refused by the name PTX spells it (``refusal``).
"""
from __future__ import annotations

from typing import Any, Callable

from tvms.ir import expr as E
from tvms.ir import ptx
from tvms.ir import stmt as S
from tvms.ir.errors import TVMSError

from . import ptx_memory, reference_async, reference_tma, reference_wgmma
from . import reference_gpu as gpu
from .ptx_arithmetic import ARITHMETIC
from .ptx_values import as_float, as_int, bits_of, float_bits, register_value
from .reference_kernel import is_pointer


def refusal(family: str, tokens: tuple, why: str = "") -> TVMSError:
    return TVMSError(f"the reference executor does not run TVM 0.27's PTX instruction T.ptx.{family} "
                     f"({ptx.spelled(family, tokens)}){why}")


# ---------------------------------------------------------------- warp collectives
def _shfl(m: dict, lane: int, voters: dict) -> tuple:
    """shfl.sync as the PTX ISA defines it (c: the clamp in bits 0-4, the segment mask in 8-12);
    a source lane outside the membermask gives the lane's own value (PTX: undefined)."""
    a, b, c = voters[lane]
    bval, cval, segmask = b & 31, c & 31, (c >> 8) & 31
    max_lane, min_lane = (lane & segmask) | (cval & ~segmask & 31), lane & segmask
    mode = m["mode"]
    if mode == "up":
        j, ok = lane - bval, lane - bval >= max_lane
    elif mode == "down":
        j, ok = lane + bval, lane + bval <= max_lane
    elif mode == "bfly":
        j, ok = lane ^ bval, lane ^ bval <= max_lane
    else:
        j = min_lane | (bval & ~segmask & 31)
        ok = j <= max_lane
    if not ok:
        j = lane
    return (voters[j][0] if j in voters else a, int(ok))


def _vote(m: dict, lane: int, voters: dict) -> tuple:
    votes = {other: bool(v[0]) for other, v in voters.items()}
    if m["mode"] == "ballot":
        return (sum(1 << other for other, v in votes.items() if v),)
    return (int({"all": all, "any": any}[m["mode"]](votes.values()) if m["mode"] != "uni"
                else len(set(votes.values())) == 1),)


def _match(m: dict, lane: int, voters: dict) -> tuple:
    values = {other: as_int(v[0], m["type"]) for other, v in voters.items()}
    if m["mode"] == "any":
        return (sum(1 << other for other, v in values.items() if v == values[lane]),)
    same = len(set(values.values())) == 1
    return (sum(1 << other for other in values) if same else 0, int(same))


def _redux(m: dict, lane: int, voters: dict) -> tuple:
    op, t = m["op"], m["type"]
    if t == "f32":
        values = [float(as_float(v[0], "f32")) for v in voters.values()]
        if m.get("abs"):
            values = [abs(v) for v in values]
        numbers = [v for v in values if v == v]
        if not numbers or m.get("nan") and len(numbers) < len(values):
            return (float_bits(float("nan"), "f32"),)
        return (float_bits((min if op == "min" else max)(numbers), "f32"),)
    values = [as_int(v[0], t) for v in voters.values()]
    if op in ("and", "or", "xor"):
        result = values[0]
        for v in values[1:]:
            result = {"and": result & v, "or": result | v, "xor": result ^ v}[op]
        return (result,)
    return ({"add": sum, "min": min, "max": max}[op](values) & 0xFFFFFFFF,)


def _elect(m: dict, lane: int, voters: dict) -> tuple:
    """elect.sync: the lowest lane of the membermask that is there leads (PTX picks one)."""
    leader = min(voters)
    return (leader, int(lane == leader))


# entry -> the lane's answer from the lanes of the membermask (the last source operand), each
# with its other sources
WARP: dict[str, Callable] = {
    "shfl_sync": lambda m, lane, voters: _shfl(m, lane, voters)[:1], "shfl_sync_p": _shfl,
    "vote_sync": _vote, "vote_sync_ballot": _vote,
    "match_any_sync": _match, "match_all_sync": lambda m, lane, voters: _match(m, lane, voters)[:1],
    "match_all_sync_p": _match,
    "redux_sync": _redux, "redux_sync_bitwise": _redux, "redux_sync_f32": _redux,
    "elect_sync": _elect,
}
# bar/barrier .sync and .red, with or without a thread count
_BARRIERS = tuple(f"{b}_sync{c}" for b in ("bar", "barrier") for c in ("", "_count"))
_BARRIER_VOTES = tuple(f"{b}_red_{k}{c}" for b in ("bar", "barrier") for k in ("popc", "pred") for c in ("", "_count"))
# the entries the executor runs (the waits besides WARP: the code generator's)
RUNS = frozenset({*ARITHMETIC, *ptx_memory.MEMORY, *reference_tma.ASYNC, *reference_tma.WAITS, *WARP, *_BARRIERS,
                  *_BARRIER_VOTES,
                  "bar_warp_sync", "activemask", "cp_async_wait_all", *reference_wgmma.MMA, *reference_wgmma.ORDERING})
# the cp.async group operations (read as their own ops, ir/op.py PTX_CP): the thread's queue of copies
_GROUPS = {"tir.ptx.cp_async_commit_group": "commit", "tir.ptx.cp_async_wait_group": "wait"}
# T.cuda's waits for an mbarrier phase (the acquire at cluster scope: the executor's one block is the cluster)
_MBARRIER_WAITS = ("tir.cuda.mbarrier_wait", "tir.cuda.mbarrier_wait_acquire_cluster")
# why some neighbours of what it runs are refused
_WHY = {"bar_arrive": ": its barriers take every thread of the block, each waiting",
        "barrier_arrive": ": its barriers take every thread of the block, each waiting",
        "isspacep": ": it does not tell global from local memory",
        **{f"mbarrier_test_wait{form}": ": a non-blocking test that a thread spins on, and the executor switches "
                                        "threads only where they wait (mbarrier.try_wait runs)"
           for form in ("", "_parity", "_report", "_report_value", "_parity_report", "_parity_report_value")}}


def _results(value: Any) -> tuple:
    return value if isinstance(value, tuple) else (value,)


def arithmetic(fn: Callable, name: str, mods: dict, *reads: Any) -> tuple:
    """A per-thread instruction (``name`` as PTX spells it, for errors)."""
    try:
        return _results(fn(mods, *reads))
    except (ArithmeticError, TypeError, ValueError) as e:  # (operands it cannot take: an error, no traceback)
        raise TVMSError(f"the reference executor cannot run {name} on these operands: {e}") from None


def memory(fn: Callable, name: str, mods: dict, block: Any, me: int, stmt: Any, *reads: Any) -> tuple:
    """A memory instruction (its addresses given as numbers found first); its errors say which
    thread ran which statement."""
    try:
        reads = tuple(r.found(block) if isinstance(r, ptx_memory.NumberAddress) else r for r in reads)
        return _results(fn((block, me, stmt), mods, *reads))
    except TVMSError as e:
        raise TVMSError(f"{e} (by {block.who(me)} at {gpu.describe(stmt)})") from None
    except (ArithmeticError, TypeError, ValueError) as e:  # (a memory it cannot view so: an error)
        raise TVMSError(f"the reference executor cannot run {name} on these operands ({e}), by {block.who(me)} "
                        f"at {gpu.describe(stmt)}") from None


def warp_answer(fn: Callable, mods: dict) -> Callable:
    """The ``op`` of a WARP_VOTE wait (reference_gpu._vote): the lane's answer."""
    return lambda lane, voters: fn(mods, lane, voters)


class PtxDialectCodegen:
    """The kernel code generator's part for ``T.ptx.*`` calls (a mixin of ``reference._Codegen``
    before ``KernelCodegen``, whose ``wait``, ``_ptx_pointer`` and ``store`` it uses)."""

    def s_Evaluate(self, s: S.Evaluate) -> None:
        v = s.value
        if isinstance(v, E.Call) and ptx.family_of(getattr(v.op, "name", "")) is not None:
            return self.ptx_instruction(v)
        super().s_Evaluate(s)

    def e_Call(self, e: E.Call) -> str:
        name = getattr(e.op, "name", None)
        if name == "tir.cuda.cvta_generic_to_shared" and self.kernel is not None:
            return self._call(ptx_memory.shared_address, "_blk", self._pointer_source(e.args[0]))
        if name in _GROUPS and self.kernel is not None:
            if _GROUPS[name] == "commit":
                return self._call(reference_async.commit_group, "_blk", "_me", "0")
            return self._call(reference_async.wait_group, "_blk", "_me", self.src(e.args[0]))
        if name in _MBARRIER_WAITS and self.kernel is not None:  # (blocks until the phase completes)
            ready = self._call(reference_tma.waiter, "_blk", self._address_source(e.args[0], "shared"),
                               self.src(e.args[1]), "_me")
            return self.wait(gpu.MBARRIER, self.kernel.current, (ready,))
        if name == "tir.cuda.wgmma_encode_matrix_descriptor" and self.kernel is not None:
            desc, addr, *fields = e.args
            return self._call(reference_wgmma.encode_descriptor, "_blk", self._pointer_source(desc),
                              self._pointer_source(addr), *(self.src(f) for f in fields))
        return super().e_Call(e)

    def ptx_instruction(self, call: E.Call) -> None:
        family = ptx.family_of(call.op.name)
        strings = []
        for a in reversed(call.args):
            if not isinstance(a, E.StringImm):
                break
            strings.insert(0, a.value)
        tokens, marker = tuple(strings[:-1]), ptx.parse_marker(strings[-1] if strings else "")
        entry = ptx.ENTRIES.get(call.op.name)
        if self.kernel is None:
            raise refusal(family, tokens, " outside a GPU kernel (no thread launch encloses it)")
        if entry is None or entry.name not in RUNS:
            raise refusal(family, tokens, _WHY.get(entry.name, "") if entry is not None else
                          ": its call leaves TVM's table between entries (it records the family only)")
        mods = entry.modifiers(tokens)
        exprs: list = list(call.args[:len(call.args) - len(strings)])
        guard = exprs.pop() if marker.pred else None
        for i in sorted(marker.sunk):  # (a sunk lane has no argument: its place back)
            exprs.insert(i, None)
        reads, writes = self._operands(entry, mods, tokens, exprs)
        source = self._instruction_source(entry, family, tokens, mods, reads)
        if guard is not None:
            self.emit(f"if {self.src(guard)}:")
            self.depth += 1
        result = self.fresh("ptx")
        self.emit(f"{result} = {source}")
        for i, dst in enumerate(writes):
            if dst is not None:
                value = self._call(register_value, f"{result}[{i}]", self.name(dst.dtype, "_t"))
                self.emit(self.store(S.BufferStore(dst.buffer, dst, dst.indices), value))
        if guard is not None:
            self.depth -= 1

    def _operands(self, entry: ptx.Entry, mods: dict, tokens: tuple, exprs: list) -> tuple[list, list]:
        """(the sources' code, the destinations: buffer elements, None where sunk)."""
        reads, writes, start = [], [], 0
        for (lanes, is_pred, _), operand, render in zip(entry.layout(tokens), entry.operands,
                                                        entry.argument_operands):
            space = ptx.at_modifiers(operand.space, mods)
            for e in exprs[start:start + lanes]:
                if operand.writes:
                    if e is not None and not isinstance(e, E.BufferLoad):
                        raise TVMSError(f"T.ptx.{entry.family}'s destination {e.script()} is not a scalar or "
                                        f"a buffer element")
                    writes.append(e)
                    if render.rw == "rw":  # (an accumulator: read too)
                        reads.append(self._call(bits_of, self.src(e), self.name(str(e.dtype), "_s")))
                elif e is None:
                    reads.append("None")
                elif is_pred:
                    reads.append(f"bool({self.src(e)})")
                elif space is not None or ptx.is_address(e) or e.dtype.is_handle and entry.name in ptx_memory.MEMORY:
                    reads.append(self._address_source(e, space or "generic"))
                elif e.dtype.is_handle:  # (a pointer in a register: its generic address)
                    reads.append(self._call(ptx_memory.generic_address, "_blk", self._address_source(e, "generic")))
                else:
                    reads.append(self._call(bits_of, self.src(e), self.name(str(e.dtype), "_s")))
            start += lanes
        return reads, writes

    def _instruction_source(self, entry: ptx.Entry, family: str, tokens: tuple, mods: dict, reads: list) -> str:
        k = self.kernel
        name, mods_src = entry.name, self.name(mods, "_m")
        text = self.name(ptx.spelled(family, tokens), "_s")
        if name in ARITHMETIC:
            return self._call(arithmetic, self.name(ARITHMETIC[name], "_f"), text, mods_src, *reads)
        if name in ptx_memory.MEMORY or name in reference_tma.ASYNC:
            fn = ptx_memory.MEMORY.get(name) or reference_tma.ASYNC[name]
            return self._call(memory, self.name(fn, "_f"), text, mods_src, "_blk", "_me", k.stmt_ref, *reads)
        if name in reference_tma.WAITS:  # (waitComplete once the phase of the token's parity has completed)
            ready = self._call(reference_tma.waiter, "_blk", reads[0], reads[1], "_me")
            return f"({self.wait(gpu.MBARRIER, k.current, (ready,))}, True)[1:]"
        if name in WARP:  # (the membermask last; the lane's other sources travel with its vote)
            answer = self.name(warp_answer(WARP[name], mods), "_f")
            values = "(" + "".join(r + ", " for r in reads[:-1]) + ")"
            return self.wait(gpu.WARP_VOTE, k.current, (answer, reads[-1], values, "32"))
        if name == "activemask":
            return f"({self.wait(gpu.ACTIVEMASK, k.current)},)"
        if name in reference_wgmma.MMA:
            return self._call(reference_wgmma.mma_async, f"(_blk, _me, {k.stmt_ref})", repr(name), mods_src, "_me",
                              *reads)
        if name in reference_wgmma.ORDERING:  # (mma_async computes when issued: reference_wgmma)
            return "()"
        if name == "cp_async_wait_all":
            return f"({self._call(reference_async.wait_group, '_blk', '_me', '0')},)[:0]"
        if name == "bar_warp_sync":
            return f"({self.wait(gpu.WARP_SYNC, k.current)},)[:0]"
        # bar/barrier .sync and .red: the barrier's index first, then the thread count; a vote's predicate last
        count = reads[1] if name.endswith("_count") else "None"
        check = self._call(_whole_block, reads[0], count, "len(_blk.threads)", text)
        if name in _BARRIERS:
            return f"({check}, {self.wait(gpu.BARRIER, k.current)})[:0]"
        op = repr("popc" if "popc" in name else mods["op"])
        return f"({check}, {self.wait(gpu.BARRIER, k.current, (op, reads[-1]))})[1:]"

    def _address_source(self, e: Any, space: str) -> str:
        """An address operand's code: a pointer, ``T.ptx.addr(base, bytes)``, or a number in the
        shared window (a uint32 of a shared state space) or the generic one (ptx_memory)."""
        if ptx.is_address(e):
            return self._call(ptx_memory.offset_address, self._address_source(e.args[0], space), self.src(e.args[1]))
        if isinstance(e, E.Call) and getattr(e.op, "name", None) == "tir.reinterpret" and e.dtype.is_handle:
            return self._address_source(e.args[0], space)
        if (isinstance(e, E.Call) and getattr(e.op, "name", None) == "tir.address_of"
                and E.is_tensor_map(e.args[0])):  # (a tensor map parameter: the encoded map itself)
            return self.src(e.args[0])
        if e.dtype.is_handle:
            return self._call(ptx_memory.pointer_address, self._pointer_source(e))
        return self._call(ptx_memory.NumberAddress, self.src(e),
                          self.name("shared" if space == "shared" else "generic", "_s"))

    def _pointer_source(self, e: Any) -> str:
        if not is_pointer(e):
            raise TVMSError(f"the reference executor follows a pointer only as a buffer's data, T.address_of(...) "
                            f"or T.tvm_access_ptr(...), not {e.script()}")
        return self._ptx_pointer(e)


def _whole_block(index: Any, count: Any, threads: int, name: str) -> None:
    """The executor's barrier is the block's, barrier 0 of all its threads (__syncthreads)."""
    if int(index) != 0:
        raise TVMSError(f"{name} {int(index)}: the reference executor runs barrier 0 only (the block's "
                        f"__syncthreads), not a named barrier")
    if count is not None and int(count) != threads:
        raise TVMSError(f"{name} 0, {int(count)}: the reference executor's barrier takes every thread of the "
                        f"block ({threads}), not {int(count)}")
