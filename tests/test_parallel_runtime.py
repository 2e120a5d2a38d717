"""Parallel loops at run time: the thread count follows ``TVM_NUM_THREADS`` (read at each call)
or the target's ``-num-cores``; loops with little work run in the caller's thread; results at
any thread count equal numpy. The split into tasks is observed on libgomp's pool
(``TVMS_THREAD_POOL=gomp``; exported libraries run on it too) from inside the kernel: each
iteration records ``omp_get_thread_num`` and ``omp_get_num_threads`` of the region running it.
tvms's own pool (``TVMS_THREAD_POOL=tvms``, ``runtime/thread_pool_ir.py``) is observed through
``pthread_self``; it is the default; ``mixed`` puts a loop on one or the other by its work."""
from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("llvmlite")

import tvms  # noqa: E402
from tvms.lowering.codegen import llvm_parallel  # noqa: E402
from tvms.ir.errors import TVMSError  # noqa: E402
from tvms.runtime.thread_pool import set_pool_spin, thread_pool_kind  # noqa: E402
from tvms.script import from_source  # noqa: E402

pytestmark = pytest.mark.skipif(thread_pool_kind() == "pthread", reason="libgomp is not installed")

HEADER = "# from tvm.script import ir as I\n# from tvm.script import tir as T\n\n@I.ir_module\nclass Module:\n"
# Each iteration adds A[i] to S[i] WORK times: one iteration is worth a task of its own, so the
# number of tasks is min(extent, threads); then it records which thread of how many ran it.
WORK = llvm_parallel.MIN_TASK_WORK
TRACED = """
    @T.prim_func
    def main(a: T.handle, s: T.handle, tid: T.handle, nt: T.handle):
        n = T.int32()
        A = T.match_buffer(a, (n,), "float32")
        S = T.match_buffer(s, (n,), "float32")
        Tid = T.match_buffer(tid, (n,), "int32")
        Nt = T.match_buffer(nt, (n,), "int32")
        for i in T.parallel({extent}):
            for j in range({work}):
                S[i] = S[i] + A[i]
            Tid[i] = T.call_extern("int32", "omp_get_thread_num")
            Nt[i] = T.call_extern("int32", "omp_get_num_threads")
"""
# The same, also recording which OS thread ran each iteration (pthread_self).
TRACED_BY_THREAD = (TRACED.replace("nt: T.handle)", "nt: T.handle, who: T.handle)")
                    .replace("        Nt = ", '        Who = T.match_buffer(who, (n,), "uint64")\n        Nt = ')
                    + '            Who[i] = T.call_extern("uint64", "pthread_self")\n')
# The same record with almost no work per iteration: never worth a second thread.
LIGHT = """
    @T.prim_func
    def main(a: T.handle, nt: T.handle):
        n = T.int32()
        A = T.match_buffer(a, (n,), "float32")
        Nt = T.match_buffer(nt, (n,), "int32")
        for i in T.parallel(n):
            A[i] = A[i] * T.float32(2.0)
            Nt[i] = T.call_extern("int32", "omp_get_num_threads")
"""
# The same with a store of 9 float operations (a transform's): it counts as two stores.
HEAVY = LIGHT.replace("A[i] = A[i] * T.float32(2.0)",
                      "A[i] = (A[i] * T.float32(2.0) + A[i] * T.float32(3.0)) * (A[i] - T.float32(1.0)) "
                      "+ A[i] * A[i] + A[i] * T.float32(0.5)")
# An inner loop of symbolic extent: its work is unknown at compile time, so the threads are used.
SYMBOLIC_INNER = """
    @T.prim_func
    def main(a: T.handle, nt: T.handle):
        n = T.int32()
        m = T.int32()
        A = T.match_buffer(a, (n, m), "float32")
        Nt = T.match_buffer(nt, (n,), "int32")
        for i in T.parallel(n):
            for j in range(m):
                A[i, j] = A[i, j] + T.float32(1.0)
            Nt[i] = T.call_extern("int32", "omp_get_num_threads")
"""
# Which OS thread ran each iteration (pthread_self), for the pool without libgomp.
THREAD_SELF = """
    @T.prim_func
    def main(a: T.handle, s: T.handle, who: T.handle):
        n = T.int32()
        A = T.match_buffer(a, (n,), "float32")
        S = T.match_buffer(s, (n,), "float32")
        Who = T.match_buffer(who, (n,), "uint64")
        for i in T.parallel(n):
            for j in range({work}):
                S[i] = S[i] + A[i]
            Who[i] = T.call_extern("uint64", "pthread_self")
"""
# Each iteration sleeps 5 ms (a call: worth a task of its own), then records its thread: a task
# lasts long enough that a woken worker takes part in the job, however loaded the machine.
SLEEPY = """
    @T.prim_func
    def main(who: T.handle):
        n = T.int32()
        Who = T.match_buffer(who, (n,), "uint64")
        for i in T.parallel(n):
            T.evaluate(T.call_extern("int32", "usleep", 5000))
            Who[i] = T.call_extern("uint64", "pthread_self")
"""
MATMUL = """
    @T.prim_func
    def main(A: T.Buffer((96, 96), "float32"), B: T.Buffer((96, 96), "float32"), C: T.Buffer((96, 96), "float32")):
        for i_0 in T.parallel(24):
            for i_1, j in T.grid(4, 96):
                C[i_0 * 4 + i_1, j] = T.float32(0.0)
                for k in range(96):
                    C[i_0 * 4 + i_1, j] = C[i_0 * 4 + i_1, j] + A[i_0 * 4 + i_1, k] * B[k, j]
"""


# the C functions the kernels observe their threads with (beyond libm: a script may call them only
# where the PassContext names them)
OBSERVERS = {"tvms.extern_functions": ["omp_get_thread_num", "omp_get_num_threads", "pthread_self", "usleep"]}


def build(body: str, target: str = "llvm", **fields):
    with tvms.transform.PassContext(config=OBSERVERS):
        return tvms.build(from_source(HEADER + body.format(**fields))["main"], target=target)


def traced(target: str = "llvm", extent: str = "n"):
    return build(TRACED, target, extent=extent, work=WORK)


def run_traced(lib, n: int, *records) -> tuple:
    """(thread id, thread count) per iteration, after checking the sums against numpy (``records``:
    more arrays the kernel fills)."""
    a = (np.arange(n) % 7 + 1).astype(np.float32)  # small integers: the sums are exact
    s = np.zeros(n, np.float32)
    tid, nt = np.full(n, -1, np.int32), np.full(n, -1, np.int32)
    lib(a, s, tid, nt, *records)
    np.testing.assert_array_equal(s, a * WORK)
    return tid, nt


def expected_threads(n: int, threads: int) -> tuple:
    """Contiguous chunks of ceil(n / tasks) iterations, tasks = min(n, threads)."""
    tasks = max(1, min(n, threads))
    chunk = -(-n // tasks) if n else 1
    return np.arange(n, dtype=np.int32) // chunk, np.full(n, tasks, np.int32)


@pytest.fixture
def no_thread_setting(monkeypatch):
    monkeypatch.delenv("TVM_NUM_THREADS", raising=False)
    monkeypatch.setenv("TVMS_THREAD_POOL", "gomp")
    return monkeypatch


@pytest.fixture
def own_pool(monkeypatch):
    monkeypatch.delenv("TVM_NUM_THREADS", raising=False)
    monkeypatch.setenv("TVMS_THREAD_POOL", "tvms")
    return monkeypatch


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_every_extent_up_to_40_runs_each_iteration_once_on_its_chunk(no_thread_setting, threads):
    no_thread_setting.setenv("TVM_NUM_THREADS", str(threads))
    lib = traced()
    for n in range(41):
        tid, nt = run_traced(lib, n)
        want_tid, want_nt = expected_threads(n, threads)
        np.testing.assert_array_equal(tid, want_tid, err_msg=f"extent {n}")
        np.testing.assert_array_equal(nt, want_nt, err_msg=f"extent {n}")


@pytest.mark.parametrize("extent", [0, 1, 2, 3, 5, 17, 40])
def test_constant_extents_split_as_symbolic_ones_do(no_thread_setting, extent):
    no_thread_setting.setenv("TVM_NUM_THREADS", "2")
    tid, nt = run_traced(traced(extent=str(extent)), extent)
    want_tid, want_nt = expected_threads(extent, 2)
    np.testing.assert_array_equal(tid, want_tid)
    np.testing.assert_array_equal(nt, want_nt)


def test_thread_count_is_read_at_each_call(no_thread_setting):
    lib = traced()
    for threads in (2, 1, 3, 2):
        no_thread_setting.setenv("TVM_NUM_THREADS", str(threads))
        _, nt = run_traced(lib, 12)
        assert set(nt) == {threads}


@pytest.mark.parametrize("cores", [1, 2, 3])
def test_thread_count_follows_num_cores_of_the_target(no_thread_setting, cores):
    _, nt = run_traced(traced(f"llvm -num-cores={cores}"), 12)
    assert set(nt) == {cores}


def run_python(script: str, **env: str) -> subprocess.CompletedProcess:
    """``script`` run by a fresh Python with ``env`` added to this process's environment."""
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], capture_output=True, text=True,
                          timeout=120, env={**os.environ, **env})
    assert done.returncode == 0, done.stderr
    return done


def test_environment_of_a_new_process_overrides_num_cores_and_libgomp_sleeps_when_idle():
    done = run_python(f"""
        import os, sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from test_parallel_runtime import run_traced, traced
        _, nt = run_traced(traced("llvm -num-cores=1"), 9)
        print(sorted(set(nt.tolist())), os.environ.get("OMP_WAIT_POLICY"))
    """, TVM_NUM_THREADS="3", OMP_DISPLAY_ENV="true", TVMS_THREAD_POOL="gomp")  # (libgomp prints
    assert done.stdout.split() == ["[3]", "None"]  # its settings when it loads)  # (the policy is not passed on to child processes)
    assert "OMP_WAIT_POLICY = 'PASSIVE'" in done.stderr


def test_a_wait_policy_the_user_chose_is_kept():
    script = "from tvms.runtime.thread_pool import load_thread_pool; load_thread_pool()"
    done = run_python(script, OMP_WAIT_POLICY="active", OMP_DISPLAY_ENV="true")
    assert "OMP_WAIT_POLICY = 'ACTIVE'" in done.stderr


def test_little_work_runs_in_the_callers_thread(no_thread_setting):
    no_thread_setting.setenv("TVM_NUM_THREADS", "2")
    lib = build(LIGHT)
    assert "GOMP_parallel" in lib.get_source("ll")  # the pool is there for larger extents
    for n in (0, 1, 2, 37, 40, 1000):
        a = np.arange(n, dtype=np.float32)
        nt = np.full(n, -1, np.int32)
        lib(a, nt)
        np.testing.assert_array_equal(a, np.arange(n, dtype=np.float32) * 2)
        assert set(nt.tolist()) <= {1}


def test_enough_light_work_is_shared_by_two_threads(no_thread_setting):
    no_thread_setting.setenv("TVM_NUM_THREADS", "2")
    n = WORK + 2  # two stores per iteration: just over two tasks' worth
    a, nt = np.ones(n, np.float32), np.zeros(n, np.int32)
    build(LIGHT)(a, nt)
    assert set(nt.tolist()) == {2}


def test_a_store_of_many_operations_counts_as_several(no_thread_setting):
    no_thread_setting.setenv("TVM_NUM_THREADS", "2")
    n = 2 * WORK // 3 + 2  # three stores' worth per iteration (two as stores go): two tasks' worth
    a, nt = np.ones(n, np.float32), np.zeros(n, np.int32)
    build(HEAVY)(a, nt)
    np.testing.assert_allclose(a, np.full(n, 1.5, np.float32))
    assert set(nt.tolist()) == {2}


def test_work_unknown_at_compile_time_is_shared(no_thread_setting):
    no_thread_setting.setenv("TVM_NUM_THREADS", "2")
    a, nt = np.zeros((4, 3), np.float32), np.zeros(4, np.int32)
    build(SYMBOLIC_INNER)(a, nt)
    np.testing.assert_array_equal(a, np.ones((4, 3), np.float32))
    assert set(nt.tolist()) == {2}


def test_pthread_pool_runs_chunks_on_separate_threads_and_task_0_on_the_caller(no_thread_setting):
    no_thread_setting.setenv("TVMS_THREAD_POOL", "pthread")
    no_thread_setting.setenv("TVM_NUM_THREADS", "3")
    lib = build(THREAD_SELF, work=WORK)
    assert "pthread_create" in lib.get_source("ll") and "GOMP_parallel" not in lib.get_source("ll")
    a, s, who = np.full(7, 2, np.float32), np.zeros(7, np.float32), np.zeros(7, np.uint64)
    lib(a, s, who)
    np.testing.assert_array_equal(s, a * WORK)
    chunks = [set(who[k:k + 3].tolist()) for k in (0, 3, 6)]  # ceil(7 / 3) = 3 iterations each
    assert all(len(c) == 1 for c in chunks) and len(set.union(*chunks)) == 3, who
    assert chunks[0] == {self_thread()}


def self_thread() -> int:
    libc = ctypes.CDLL(None)
    libc.pthread_self.restype = ctypes.c_uint64
    return libc.pthread_self()


def test_own_pool_runs_each_task_once_on_one_thread_task_0_on_the_caller(own_pool):
    """tvms's pool: TASKS_PER_THREAD tasks per thread of contiguous iterations, each run whole by
    one thread (the caller claims task 0 before any worker can), on at most the threads asked for."""
    own_pool.setenv("TVM_NUM_THREADS", "3")
    lib = build(THREAD_SELF, work=WORK)
    assert "tvms_parallel_run" in lib.get_source("ll") and "GOMP_parallel" in lib.get_source("ll")
    for n in (1, 2, 7, 12, 13, 40):
        a, s, who = np.full(n, 2, np.float32), np.zeros(n, np.float32), np.zeros(n, np.uint64)
        lib(a, s, who)
        np.testing.assert_array_equal(s, a * WORK)
        chunk = -(-n // min(n, 3 * llvm_parallel.TASKS_PER_THREAD))
        tasks = [set(who[k:k + chunk].tolist()) for k in range(0, n, chunk)]
        assert all(len(t) == 1 for t in tasks) and len(set.union(*tasks)) <= 3, who
        assert tasks[0] == {self_thread()}


def sleepy_threads(lib, n: int) -> int:
    """How many threads ran the ``n`` iterations of SLEEPY (the best of three calls)."""
    used = 0
    for _ in range(3):
        who = np.zeros(n, np.uint64)
        lib(who)
        used = max(used, len(set(who.tolist())))
    return used


def test_own_pool_uses_its_workers_but_only_as_many_as_a_job_asks_for(own_pool):
    """A call on 6 threads makes 5 workers; a later call on 2 threads runs on the caller and one
    of them (it used to run on every worker the pool had); ``-num-cores`` likewise."""
    lib = build(SLEEPY)
    own_pool.setenv("TVM_NUM_THREADS", "6")
    assert 2 <= sleepy_threads(lib, 24) <= 6
    own_pool.setenv("TVM_NUM_THREADS", "2")
    assert sleepy_threads(lib, 16) == 2
    own_pool.delenv("TVM_NUM_THREADS")
    assert sleepy_threads(build(SLEEPY, "llvm -num-cores=3"), 16) == 3


def test_own_pool_only_on_linux(own_pool):
    """tvms's pool relies on zeros being a valid pthread mutex and condition (glibc, musl)."""
    own_pool.setattr(sys, "platform", "darwin")
    assert thread_pool_kind() == "gomp"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="tvms's pool is Linux's")
def test_by_default_every_loop_runs_on_tvms_pool(monkeypatch):
    """Unless TVMS_THREAD_POOL says otherwise, every loop runs on tvms's pool, one larger than
    the "mixed" pool's POOL_WORK too (outside any OpenMP team: thread 0 of 1 each iteration)."""
    monkeypatch.delenv("TVMS_THREAD_POOL", raising=False)
    monkeypatch.setenv("TVM_NUM_THREADS", "2")
    assert thread_pool_kind() == "tvms"
    lib = build(TRACED_BY_THREAD, extent="n", work=WORK)
    n = -(-llvm_parallel.POOL_WORK // (WORK + 3)) * 4
    tid, nt = run_traced(lib, n, np.zeros(n, np.uint64))
    assert set(nt.tolist()) == {1} and set(tid.tolist()) == {0}


def test_on_the_mixed_pool_little_loops_run_on_tvms_pool_and_large_ones_on_libgomps(monkeypatch):
    """The "mixed" pool: a loop of fewer than POOL_WORK stores runs on tvms's pool (outside any
    OpenMP team: thread 0 of 1 each iteration), a larger one on libgomp's team of 2; both on two
    OS threads (seen in one of up to 20 calls: a worker may wake too late for a call's tasks)."""
    monkeypatch.setenv("TVMS_THREAD_POOL", "mixed")
    monkeypatch.setenv("TVM_NUM_THREADS", "2")
    assert thread_pool_kind() == "mixed"
    lib = build(TRACED_BY_THREAD, extent="n", work=WORK)
    assert "tvms_parallel_run" in lib.get_source("ll") and "GOMP_parallel" in lib.get_source("ll")
    most = -(-llvm_parallel.POOL_WORK // (WORK + 3)) - 1  # (an iteration: WORK + 3 stores)
    for n, team in ((most, 1), (most + 1, 2)):
        threads = set()
        for _ in range(20):
            who = np.zeros(n, np.uint64)
            tid, nt = run_traced(lib, n, who)
            assert set(nt.tolist()) == {team} and set(tid.tolist()) == set(range(team)), (n, tid, nt)
            threads |= set(who.tolist())
            if len(threads) > 1:
                break
        assert len(threads) == 2, (n, threads)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")
def test_a_forked_child_runs_large_loops_on_tvms_pool():
    """libgomp is not fork-safe: a child forked after its parent ran a loop on libgomp's team hung
    in its first such loop. In a forked child the "mixed" pool runs every loop on tvms's pool
    (outside any OpenMP team: 1 thread in each iteration's eyes)."""
    done = run_python(f"""
        import os, signal, sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from test_parallel_runtime import WORK, run_traced, traced
        from tvms.lowering.codegen.llvm_parallel import POOL_WORK
        lib, n = traced(), -(-POOL_WORK // (WORK + 2))  # (the smallest loop on libgomp's team)
        print(sorted(set(run_traced(lib, n)[1].tolist())), flush=True)
        pid = os.fork()
        if pid == 0:
            signal.alarm(30)  # (a hung child dies)
            os._exit(0 if set(run_traced(lib, n)[1].tolist()) == {{1}} else 3)
        print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
    """, TVM_NUM_THREADS="2", TVMS_THREAD_POOL="mixed")
    assert done.stdout.split() == ["[2]", "0"]


def test_thread_pool_settings_are_checked(monkeypatch):
    """A misspelt TVMS_THREAD_POOL names the choices (it gave the default silently); the spin
    count is an int in [0, 2**31) (2**32 + 5 was cut to 5, 1.5 raised ctypes' ArgumentError)."""
    monkeypatch.setenv("TVMS_THREAD_POOL", "gmop")
    with pytest.raises(TVMSError, match="TVMS_THREAD_POOL='gmop': expected one of mixed, tvms, gomp, pthread"):
        thread_pool_kind()
    for bad in (2**32 + 5, -1, 1.5, "8", True):
        with pytest.raises(TVMSError, match=r"set_pool_spin: expected an int in \[0, 2\*\*31\)"):
            set_pool_spin(bad)
    previous = set_pool_spin(7)
    assert set_pool_spin(previous) == 7


def test_idle_pool_threads_sleep_after_a_short_wait():
    """After a call, tvms's pool's threads wait for more work by yielding for a bounded time,
    then sleep: idle for 0.3 s after their calls, they take (nearly) no CPU time in the next
    0.5 s; with the wait made practically endless they do take it (so the measure sees a
    spinning thread: within 5 s, since a yielding thread of a loaded machine runs seldom). The
    pool's own threads are measured (their CPU clocks; they are the threads the kernel records
    other than the caller)."""
    done = run_python(f"""
        import sys, threading, time
        import numpy as np
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from test_parallel_runtime import THREAD_SELF, WORK, build
        from tvms.runtime.thread_pool import set_pool_spin
        lib = build(THREAD_SELF, work=WORK)

        def run_calls():
            workers = set()  # (the caller may run every task of a call: called until a worker shows)
            for calls in range(2000):
                who = np.zeros(8, np.uint64)
                lib(np.ones(8, np.float32), np.zeros(8, np.float32), who)
                workers |= {{int(t) for t in who}} - {{threading.get_ident()}}
                if workers and calls >= 20:
                    return workers

        def cpu_while_idle(seconds, enough=None):
            clocks = [time.pthread_getcpuclockid(t) for t in run_calls()]
            assert clocks
            def cpu_time():
                return sum(time.clock_gettime(c) for c in clocks)
            time.sleep(0.3)
            used, start = cpu_time(), time.monotonic()
            while time.monotonic() - start < seconds and (enough is None or cpu_time() - used < enough):
                time.sleep(0.05)
            return cpu_time() - used

        print(cpu_while_idle(0.5))
        set_pool_spin(1 << 30)
        print(cpu_while_idle(5, enough=0.1))
    """, TVM_NUM_THREADS="2", TVMS_THREAD_POOL="tvms")
    idle, spinning = map(float, done.stdout.split())
    assert idle < 0.03 and spinning > max(0.002, 10 * idle), (idle, spinning)


def test_a_forked_child_gets_a_working_pool():
    """The child of a fork made while another thread runs a job (the pool busy, its lock taken
    at times) has none of the parent's workers: its pool starts afresh and uses 2 threads, when
    Python forks (os.fork) and when C code calls libc's fork (no Python fork handler runs: the
    pool's reset is libc's atfork handler; it ran on 1 thread before)."""
    done = run_python(f"""
        import ctypes, os, signal, sys, threading, time
        import numpy as np
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from test_parallel_runtime import SLEEPY, build, sleepy_threads
        lib = build(SLEEPY)
        sleepy_threads(lib, 16)  # (the workers exist before the fork)
        # (PyDLL: the GIL stays with this thread through the fork, as os.fork holds it)
        for fork in (os.fork, ctypes.PyDLL(None).fork):
            busy = threading.Thread(target=lambda: lib(np.zeros(64, np.uint64)))
            busy.start()
            time.sleep(0.02)
            pid = fork()
            if pid == 0:
                signal.alarm(60)  # (a child stuck on a lock dies)
                os._exit(sleepy_threads(lib, 16))
            busy.join()
            print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
    """, TVM_NUM_THREADS="2", TVMS_THREAD_POOL="tvms")
    assert done.stdout.split() == ["2", "2"]


def test_own_pool_takes_callers_from_several_threads_at_once(own_pool):
    """A call made while another runs its job runs its tasks in its own thread: every result of
    four Python threads calling one kernel at the same time is right."""
    own_pool.setenv("TVM_NUM_THREADS", "2")
    lib = build(MATMUL)
    rng = np.random.default_rng(3)
    pairs = [rng.standard_normal((2, 96, 96), dtype=np.float32) for _ in range(4)]
    wrong = []

    def calls(a, b) -> None:
        c = np.empty((96, 96), np.float32)
        for _ in range(10):
            c[...] = np.nan
            lib(a, b, c)
            if not np.allclose(c, a @ b, rtol=1e-4, atol=1e-4):
                wrong.append(c.copy())

    workers = [threading.Thread(target=calls, args=tuple(p)) for p in pairs]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert not wrong


@pytest.mark.parametrize("threads", ["1", "2", "3"])
def test_parallel_matmul_equals_numpy_at_each_thread_count(own_pool, threads):
    own_pool.setenv("TVM_NUM_THREADS", threads)
    rng = np.random.default_rng(7)
    a, b = rng.standard_normal((2, 96, 96), dtype=np.float32)
    c = np.full((96, 96), np.nan, np.float32)
    build(MATMUL)(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def test_a_loaded_library_also_lets_libgomp_sleep(tmp_path):
    """A library written by export_library and loaded alone (load_module, in a fresh process)
    brings libgomp in with the same passive waiting as JIT-built code (and not tvms's pool), and
    runs on 3 threads."""
    pytest.importorskip("llvmlite")
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("no C compiler to link the library")
    path = tmp_path / "traced.so"
    traced().export_library(str(path))
    done = run_python(f"""
        import sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from test_parallel_runtime import run_traced
        from tvms.runtime import load_module, thread_pool
        _, nt = run_traced(load_module({str(path)!r})["main"], 9)
        print(sorted(set(nt.tolist())), thread_pool._pool_engine)
    """, TVM_NUM_THREADS="3", OMP_DISPLAY_ENV="true")
    assert done.stdout.split() == ["[3]", "None"]  # (tvms's pool, which it cannot call, is not compiled)
    assert "OMP_WAIT_POLICY = 'PASSIVE'" in done.stderr


def test_the_compile_cache_keeps_one_program_per_thread_pool(monkeypatch) -> None:
    # the launch code of a parallel loop follows the pool (TVMS_THREAD_POOL): a program compiled
    # for one pool is not handed out for another
    mod = tvms.script.from_source("""
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((64, 64), dtype="float32")) -> R.Tensor((64, 64), dtype="float32"):
        with R.dataflow():
            y = R.exp(x)
            R.output(y)
        return y
""")
    monkeypatch.setenv("TVMS_THREAD_POOL", "gomp")
    first = tvms.compile(mod, "llvm")
    assert tvms.compile(mod, "llvm") is first
    monkeypatch.setenv("TVMS_THREAD_POOL", "tvms")
    assert tvms.compile(mod, "llvm") is not first
