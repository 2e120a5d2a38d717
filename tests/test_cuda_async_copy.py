"""cp.async: InjectPTXAsyncCopy (lowering/tir/gpu/inject_ptx_async_copy.py), its CUDA code
(lowering/codegen/cuda_async.py) and its semantics in the reference executor
(runtime/reference_async.py), against Apache TVM 0.27.

fixtures/async_copy (generate_with_tvm.py) holds two software pipelines whose global-to-shared
stage is asynchronous, lowered by TVM for sm_80 under ``tirx.use_async_copy``: the module before
and after InjectPTXAsyncCopy, TVM's SplitHostDevice stage, its kernels after the device passes
and the CUDA C TVM renders. ``predicated`` is TVM's own test_cp_async_in_if_then_else (4-byte
copies, zero-filled out of range), ``vectorized`` copies 16 bytes (8 float16) into dynamic shared
memory, merged into one byte buffer. Every kernel tvms renders here is compiled by NVRTC for sm_80
and sm_90; nothing runs on a GPU.
"""
from __future__ import annotations

import numpy as np
import pytest

from tvms.ir.errors import TVMSError
from tvms.ir.module import IRModule
from tvms.ir.target import Target
from tvms.lowering.codegen.cuda import cuda_source, kernels_of
from tvms.lowering.pass_registry import get_pass
from tvms.lowering.tir.gpu import pipeline
from tvms.lowering.tir.gpu.pipeline import lower_for_cuda
from tvms.lowering.transform import PassContext
from tvms.runtime.reference import run_prim_func
from tvms.script import from_source

from conftest import FIXTURES
from cuda_support import assert_compiles

HERE = FIXTURES / "async_copy"
CASES = ("predicated", "vectorized")


def fixture(case: str, stage: str):
    return from_source((HERE / f"{case}.{stage}.tvms" if stage else HERE / f"{case}.tvms").read_text())


def test_inject_ptx_async_copy_prints_what_tvm_prints():
    """4-byte copies, predicated ones (``if_then_else(c, load, 0)``) and 16-byte vector copies."""
    for case in CASES:
        got = get_pass("InjectPTXAsyncCopy")(fixture(case, "before")).script(dialect="tvm-0.27")
        assert got == (HERE / f"{case}.after.tvms").read_text(), case


def test_what_stays_a_store():
    """Copies cp.async cannot make (2 bytes, from local memory, a non-zero fill, a 16-byte gather of
    elements 64 apart, a 16-byte scatter) stay stores and the async scope goes; a nested async scope
    is refused."""
    text = '''
# from tvm.script import tir as T

@T.prim_func
def main(A: T.Buffer((512,), "float16"), B: T.Buffer((64,), "float32")):
    with T.launch_thread("threadIdx.x", 32) as tx:
        S = T.alloc_buffer((512,), "float16", scope="shared")
        R = T.alloc_buffer((64,), scope="shared")
        L = T.alloc_buffer((1,), scope="local")
        with T.attr(0, "async_scope", 1):
            S[tx] = A[tx]
        with T.attr(0, "async_scope", 1):
            R[tx] = L[0]
        with T.attr(0, "async_scope", 1):
            R[tx] = T.if_then_else(tx < 16, B[tx], T.float32(1.0))
        with T.attr(0, "async_scope", 1):
            S[T.Ramp(tx * 8, 1, 8)] = A[T.Ramp(tx, 64, 8)]
        with T.attr(0, "async_scope", 1):
            S[T.Ramp(tx, 64, 8)] = A[T.Ramp(tx * 8, 1, 8)]
'''
    out = get_pass("InjectPTXAsyncCopy")(IRModule({"main": from_source(text)}))["main"].script()
    assert "cp_async" not in out and "async_scope" not in out and out.count("] = ") == 5
    nested = text.replace('            S[tx] = A[tx]\n', '            with T.attr(0, "async_scope", 1):\n'
                                                            '                S[tx] = A[tx]\n')
    with pytest.raises(TVMSError, match="nested async scopes"):
        get_pass("InjectPTXAsyncCopy")(IRModule({"main": from_source(nested)}))


def test_cuda_source_is_tvms_byte_for_byte():
    """The cp.async, commit and wait helpers as TVM writes them (after the preamble, in the reverse
    order of their first use) and their calls, from TVM's device stage."""
    for case in CASES:
        got = cuda_source(kernels_of(fixture(case, "device")))
        assert got == (HERE / f"{case}.cu").read_text(), case


def test_the_groups_written_in_the_ptx_dialect_render_as_tvm_renders_them():
    """``T.ptx.cp("async", "commit_group", "")``, ``T.ptx.cp(2, "async", "wait_group", "")`` and the
    bulk commit, written by hand: the same helpers, byte for byte, which compile (for sm_90: the
    bulk commit needs it)."""
    func = fixture("ptx_groups", "input")
    got = cuda_source(kernels_of(lower_for_cuda(func, Target("cuda -arch=sm_80"))))
    assert got == (HERE / "ptx_groups.cu").read_text()
    assert_compiles(got, archs=("sm_90",))


def test_tvms_stages_read_back_as_printed():
    """TVM's SplitHostDevice and device stages print back byte for byte: each ``B.data``
    argument names the buffer it was written with (the kernel's ``A``, not its ``A_ptr``
    parameter; ``B_shared``, not the other view ``A_shared`` of the same merged memory)."""
    for case in CASES:
        for stage in ("", "device"):
            assert fixture(case, stage).script(dialect="tvm-0.27") == (HERE / f"{case}.{stage}.tvms".replace("..", ".")).read_text()
    # (and a parameter used by its own name stays so, as TVM 0.27 prints this kernel back)
    kernel = """# from tvm.script import tirx as T
# from tvm.tirx.layout import Axis

@T.prim_func(s_tir=True)
def k(A_ptr: T.handle("float32", "global"), B_ptr: T.handle("float32", "global")):
    A = T.decl_buffer((16,), data=A_ptr)
    B = T.decl_buffer((16,), data=B_ptr)
    T.call_extern("int32", "f", A_ptr, B.data)
    B[0] = A[1]"""
    assert from_source(kernel).script(dialect="tvm-0.27") == kernel


def _lowered(case: str) -> IRModule:
    func = fixture(case, "input")[case].with_attr("global_symbol", case)
    with PassContext(config={"tirx.use_async_copy": True}):
        return lower_for_cuda(func, Target("cuda -arch=sm_80"))


def _as_main(mod: IRModule, case: str) -> IRModule:
    return IRModule({("main" if gv.name_hint == case else gv.name_hint): f for gv, f in mod.functions_items()})


def test_lowered_with_async_copies_compiles_and_computes():
    """tvms's lowering under ``tirx.use_async_copy`` (InjectPTXAsyncCopy before
    MergeSharedMemoryAllocations, a barrier after each wait as TVM's ThreadSync places it): the same
    copies, groups, waits and barriers as TVM's stage; NVRTC compiles both kernels; the vectorized
    one computes as numpy through the reference executor, which sees each copy land only at the
    wait that completes it."""
    mods = {case: _lowered(case) for case in CASES}
    for case, mod in mods.items():
        ours, tvms_stage = mod.script(dialect="tvm-0.27"), (HERE / f"{case}.tvms").read_text()
        for needle in ("T.s_tir.cp_async_raw(", '"async_commit_queue_scope": 0', '"async_wait_queue_scope": 0',
                       'T.tvm_storage_sync("shared")'):
            # (TVM's StmtSimplify folds the first iteration's predicate, false, into two stores of
            # zero: tvms's keeps two zero-filling copies, T.LE(1, 0) and ...)
            extra = 2 if (case, needle) == ("predicated", "T.s_tir.cp_async_raw(") else 0
            assert ours.count(needle) == tvms_stage.count(needle) + extra, (case, needle)
        # (the kernel's parameters and declarations: a buffer used only as cp.async's source too)
        declarations = [line for line in tvms_stage.splitlines() if "_kernel(" in line or "decl_buffer" in line]
        assert [line for line in ours.splitlines() if "_kernel(" in line or "decl_buffer" in line] == declarations
    # (the copies of the vectorized kernel as TVM prints them: A.data and B_shared.data named)
    with PassContext(config={"tirx.use_async_copy": True}):
        split = pipeline.split_for_cuda(fixture("vectorized", "input")["vectorized"], Target("cuda -arch=sm_80"))
    copies = [line for line in (HERE / "vectorized.tvms").read_text().splitlines() if "cp_async_raw" in line]
    assert [line for line in split.script(dialect="tvm-0.27").splitlines() if "cp_async_raw" in line] == copies
    source = cuda_source([k for mod in mods.values() for k in kernels_of(mod)])
    # (one helper per wait count, shared by the kernels: 0, 1, 2 and 5)
    assert source.count("cp.async.wait_group") == 4 and "cp.async.cg.shared.global" in source
    assert_compiles(source)
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((32, 256)).astype("float16"), rng.standard_normal((32, 256)).astype("float16")
    c = np.zeros((32, 256), "float16")
    run_prim_func(_as_main(mods["vectorized"], "vectorized"), a, b, c)
    np.testing.assert_array_equal(c, a * np.roll(b, -1, axis=0))


def test_a_read_before_its_wait_is_an_error():
    """TVM 0.27's pipeline of ``predicated`` commits the two copies of a stage in two groups and
    waits for all but 5 in flight, which holds from the third iteration on: in the second, TVM's own
    kernel (its SplitHostDevice stage, read back) reads A_shared[16] while the copy of it may still be
    in flight, and so does tvms's lowering (whose first iteration's zero-filling copies, which TVM
    folds into stores, store their zeros at once as the CUDA code's ``@!p st.shared`` does)."""
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((16, 14)).astype("float32"), rng.standard_normal((16, 14)).astype("float32")
    c = np.zeros((16, 16), "float32")
    for mod in (_as_main(fixture("predicated", ""), "predicated"), _as_main(_lowered("predicated"), "predicated")):
        with pytest.raises(TVMSError, match=r"reads element 16 of the shared buffer 'A_shared' .* while a "
                                            r"cp.async copy into it is in flight"):
            run_prim_func(mod, a, b, c)


ONE_THREAD = '''
# from tvm.script import tir as T

@T.prim_func
def main(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
    with T.launch_thread("threadIdx.x", 1) as tx:
        S = T.alloc_buffer((8,), scope="shared")
        with T.attr(0, "async_commit_queue_scope", 0):
            T.s_tir.cp_async_raw("float32", S.data, 0, A.data, 0, 16)
        with T.attr(0, "async_commit_queue_scope", 0):
            T.s_tir.cp_async_raw("float32", S.data, 4, A.data, 4, 16, tx > 0)
        with T.attr(0, "async_wait_queue_scope", 0):
            with T.attr(0, "async_wait_inflight_count", 0):
                for i in range(8):
                    B[i] = S[i]
'''


def test_copy_semantics():
    """One thread's copies land at the wait that completes their group: read after it, they are
    there; read before it, the read is an error; a predicated-off copy stores its zeros at once
    (no wait needed); never waited for, the thread's end says so; a copy from outside its source,
    or from or to an address not aligned to its size, is refused."""
    text = ONE_THREAD
    a, b = np.arange(1, 9, dtype="float32"), np.zeros(8, "float32")
    run_prim_func(from_source(text), a, b)
    np.testing.assert_array_equal(b, [1, 2, 3, 4, 0, 0, 0, 0])
    b[:] = 0
    run_prim_func(from_source(text.replace('"async_wait_inflight_count", 0', '"async_wait_inflight_count", 1')), a, b)
    np.testing.assert_array_equal(b, [1, 2, 3, 4, 0, 0, 0, 0])
    with pytest.raises(TVMSError, match=r"reads element 0 of the shared buffer 'S' .* in flight"):
        run_prim_func(from_source(text.replace('inflight_count", 0', 'inflight_count", 2')), a, b)
    unwaited = text.replace('''                for i in range(8):
                    B[i] = S[i]
''', '''                B[0] = S[0]
        T.s_tir.cp_async_raw("float32", S.data, 0, A.data, 0, 4)
''')
    with pytest.raises(TVMSError, match=r"ends with 1 cp.async copies it never waited for .*, nor committed"):
        run_prim_func(from_source(unwaited), a, b)
    past_the_end = text.replace("A.data, 0, 16)", "A.data, 6, 16)")
    with pytest.raises(TVMSError, match=r"cp.async of 16 bytes from element 6 is out of the bounds of its source"):
        run_prim_func(from_source(past_the_end), a, b)
    for misaligned in (text.replace("S.data, 0, A.data, 0, 16)", "S.data, 2, A.data, 0, 16)"),
                       text.replace("S.data, 0, A.data, 0, 16)", "S.data, 0, A.data, 2, 16)")):
        with pytest.raises(TVMSError, match=r"PTX needs both addresses aligned to the copy size"):
            run_prim_func(from_source(misaligned), a, b)


def test_a_wait_or_queue_cuda_has_not_is_refused():
    """An async_wait_queue_scope without its inner async_wait_inflight_count, and a queue other than
    0 (InjectSoftwarePipeline numbers the queues by stage: a second async stage's), are TVMSErrors of
    the code generator (TVM 0.27's CUDA code generator refuses both). The reference executor needs
    the count; for it another queue holds no cp.async copy (a pipeline's second async stage of
    plain copies runs): copies committed there are an error, and a wait there leaves queue 0's
    copies in flight. ThreadSync, like TVM's, takes any queue but needs the count."""
    device = (HERE / "predicated.device.tvms").read_text()
    counted = '"async_wait_queue_scope": 0, "async_wait_inflight_count": 2'
    uncounted = (device.replace(counted, '"async_wait_queue_scope": 0'),
                 ONE_THREAD.replace('"async_wait_inflight_count", 0', '"pragma_unroll", 1'))
    second_queue = ((device.replace(counted, counted.replace(": 0", ": 1")),
                     ONE_THREAD.replace('"async_wait_queue_scope", 0', '"async_wait_queue_scope", 1')),
                    (device.replace('"async_commit_queue_scope": 0', '"async_commit_queue_scope": 1', 1),
                     ONE_THREAD.replace('"async_commit_queue_scope", 0', '"async_commit_queue_scope", 1', 1)))
    a, b = np.arange(1, 9, dtype="float32"), np.zeros(8, "float32")
    executor_says = ("the reference executor: an async_wait_queue_scope holds an async_wait_inflight_count "
                     "attribute, not", "reads element 0 of the shared buffer 'S' .* while a cp.async copy into "
                     "it is in flight", "cp.async copies committed to the async queue 1: CUDA has one queue")
    for (kernel, one_thread), message, executor in zip(
            (uncounted, *second_queue), ("holds an async_wait_inflight_count attribute, not",
                                         *["the index of an async queue must be 0"] * 2), executor_says):
        with pytest.raises(TVMSError, match=f"the cuda code generator: .*{message}"):
            cuda_source(kernels_of(from_source(kernel)))
        with pytest.raises(TVMSError, match=executor):
            run_prim_func(from_source(one_thread), a, b)
    with pytest.raises(TVMSError, match="ThreadSync: an async_wait_queue_scope holds an async_wait_inflight_count"):
        get_pass("ThreadSync")(IRModule({"main": from_source(uncounted[1])}))
    get_pass("ThreadSync")(IRModule({"main": from_source(second_queue[0][1])}))


def test_async_copies_are_injected_just_before_the_merge(monkeypatch):
    """InjectPTXAsyncCopy runs right before MergeSharedMemoryAllocations wherever that stands in the
    pipeline, not merely second to last."""
    ran = []

    def recorded(name, step):
        return lambda func: ran.append(name) or step(func)
    merge = recorded("merge", pipeline.merge_shared_memory_allocations)
    monkeypatch.setattr(pipeline, "merge_shared_memory_allocations", merge)
    monkeypatch.setattr(pipeline, "inject_ptx_async_copy", recorded("inject", pipeline.inject_ptx_async_copy))
    monkeypatch.setattr(pipeline, "BEFORE_SPLIT", pipeline.BEFORE_SPLIT[:-1] + (merge, recorded("last", lambda f: f)))
    _lowered("vectorized")
    assert ran == ["inject", "merge", "last"]


def test_a_copy_of_no_constant_size_is_refused():
    kernel = (HERE / "predicated.device.tvms").read_text().replace("threadIdx_x * 14, 4)",
                                                                   "threadIdx_x * 14, threadIdx_x)", 1)
    with pytest.raises(TVMSError, match="cp.async copies a constant 4, 8 or 16 bytes, not threadIdx_x"):
        cuda_source(kernels_of(from_source(kernel)))


# cp.async written in TVM 0.27's PTX dialect, on the reference executor: the same queue of copies
DIALECT = """
# from tvm.script import tirx as T

@T.prim_func
def copies(A: T.Buffer((16,), "float32"), B: T.Buffer((32,), "float32")):
    T.attr({{"tirx.device_entry": T.bool(True)}})
    v = T.cta_id([1])
    tx = T.thread_id([4])
    S = T.alloc_shared((32,))
    {copy}
    T.ptx.cp("async", "commit_group", "")
    {between}
    T.ptx.cp(0, "async", "wait_group", "")
    T.cuda.cta_sync()
    for i in range(8):
        B[tx * 8 + i] = S[tx * 8 + i]
"""
_COPY = ('T.ptx.cp(T.cuda.cvta_generic_to_shared(T.address_of(S[tx * 8])), T.address_of(A[{src}]), 16, {size}'
         '"async", "cg", "shared", "global", "", "", "")')


def _dialect(src: str = "tx * 4", size: str = "", between: str = "") -> tuple:
    text = DIALECT.format(copy=_COPY.format(src=src, size=size), between=between or "T.evaluate(0)")
    b = np.full(32, -1, "float32")
    a = np.arange(16, dtype="float32")
    run_prim_func(from_source(text), a, b)
    return a, b


def test_dialect_copies_land_at_their_wait():
    a, b = _dialect()
    assert b.reshape(4, 8)[:, :4].tolist() == a.reshape(4, 4).tolist()


def test_dialect_src_size_fills_the_rest_with_zeros():
    _, b = _dialect(size="T.uint32(8), ")  # (2 of the 4 floats read, 2 zeros)
    assert b.reshape(4, 8)[:, :4].tolist() == [[4 * t, 4 * t + 1, 0, 0] for t in range(4)]


def test_dialect_src_size_zero_reads_nothing_past_the_end():
    """A tile's edge: src-size 0 from an address past the source, 16 bytes of zeros."""
    _, b = _dialect(src="16 + tx * 4", size="T.uint32(0), ")
    assert b.reshape(4, 8)[:, :4].tolist() == [[0, 0, 0, 0]] * 4


@pytest.mark.parametrize("src, size, between, message", [
    ("tx * 4", "", "S[tx] = S[tx]", "while a cp.async copy into it is in flight"),
    ("16", "T.uint32(8), ", "", "reads bytes 64 to 71 of a source of 64 bytes: out of its bounds"),
    ("tx * 4", "T.uint32(32), ", "", "its src-size 32 is not within its cp-size 16"),
])
def test_dialect_copies_refuse_what_ptx_leaves_undefined(src: str, size: str, between: str, message: str):
    with pytest.raises(TVMSError, match=message):
        _dialect(src, size, between)
