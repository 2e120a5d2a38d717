"""tvms on a CUDA GPU beside its peers (issue 16): DLight's default schedules, tuned schedules and
the cuBLAS dispatch, against cuBLAS as cupy or torch call it, side by side in one run.

* matmul 4096^3 in fp32 and fp16 (fp16 accumulating in fp16, as the legalized matmul has it): the
  ``R.matmul`` of a Relax function through ``tvms.compile(target=Target.from_device(dev))`` (the
  zero pipeline, then ``tvms.dlight.gpu``'s Matmul rule: tvms's plans for large matmuls, fp32 in
  64 x 128 tiles, fp16 (on compute capability 7.0 and newer) on tensor cores, WMMA tiles staged
  in dynamic shared memory; and beside each, TVM's own schedule, ``Matmul(large_tiles=False)``),
  its time per call from the VM's ``time_evaluator`` (CUDA events), in TFLOPS and as a ratio to
  cuBLAS;
* the same after ``partition_for_cublas`` (tvms's own cuBLAS dispatch; needs ``tvms[cublas]``);
* fp16 on a Hopper GPU (compute capability 9.0): ``benchmarks/wgmma_gemm.py``'s kernel (wgmma from
  swizzled shared memory fed by cp.async; B given transposed), each tile's wgmmas waited for before
  the next copies, and overlapped with them;
* with ``--trials N``: the matmul tuned by the meta-schedule under the cuda target, in TVM's
  space and in the "tiles" space (``tile_space``: one candidate per shape of the large plans;
  its target allows the shared memory a kernel may opt in to, which tvms's runtime asks for; fp16
  on compute capability 8.0 and newer under ``tirx.use_async_copy``, each shape also with
  cp.async copies; every candidate's time is printed, fastest first);
* seed 000's MLP (1x784 -> 128 -> 10, fp32) through the VM on the GPU, beside the same model as
  torch or cupy expressions.

cuBLAS's figure comes from cupy (``cupy.matmul``) or torch (``torch.matmul``), whichever is
installed; neither is a dependency. A step that fails is printed with its reason and the others
are still measured; the exit status is then 1. Without a CUDA device the script says what is missing and
that the device figures are not measured, and exits 1.

    .venv/bin/python benchmarks/gpu.py                 # about a minute on a GPU
    .venv/bin/python benchmarks/gpu.py --n 1024        # a smaller matmul
    .venv/bin/python benchmarks/gpu.py --trials 64     # also tune the matmul (minutes)
    .venv/bin/python benchmarks/gpu.py --trials 24 --spaces tiles    # in the tiles space only
    .venv/bin/python benchmarks/gpu.py --dtypes float16              # one type
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time

import numpy as np
from seed_mlp import MLP
from wgmma_gemm import kernel_text

MATMUL = """@I.ir_module
class Module:
    @R.function
    def main(a: R.Tensor((N, N), dtype="DT"), b: R.Tensor((N, N), dtype="DT")) -> R.Tensor((N, N), dtype="DT"):
        with R.dataflow():
            c = R.matmul(a, b)
            R.output(c)
        return c
"""


class Peer:
    """cuBLAS and the MLP as cupy or torch run them: ``name`` (None: neither is installed), and
    the seconds per call of ``matmul(a, b)`` and ``mlp(args)`` on copies of host arrays."""

    def __init__(self) -> None:
        try:
            import cupy

            self.name, self.xp, self.sync = "cupy", cupy, cupy.cuda.Device().synchronize
            self.put = cupy.asarray
            return
        except Exception:
            pass
        try:
            import torch

            if not torch.cuda.is_available():
                raise ImportError
            self.name, self.xp, self.sync = "torch", torch, torch.cuda.synchronize
            self.put = lambda x: torch.from_numpy(x).cuda()
        except Exception:
            self.name = None

    def timed(self, fn) -> float:
        return median_secs(fn, self.sync)

    def matmul(self, a: np.ndarray, b: np.ndarray) -> float:
        da, db = self.put(a), self.put(b)
        return self.timed(lambda: self.xp.matmul(da, db))

    def mlp(self, args: list) -> float:
        x, w0, b0, w1, b1 = (self.put(v) for v in args)
        relu = (lambda v: self.xp.maximum(v, 0)) if self.name == "cupy" else self.xp.relu
        return self.timed(lambda: relu(x @ w0.T + b0) @ w1.T + b1)


def median_secs(fn, sync, repeat: int = 5, min_secs: float = 0.2) -> float:
    fn()
    sync()
    times = []
    for _ in range(repeat):
        number, start = 0, time.perf_counter()
        while time.perf_counter() - start < min_secs:
            fn()
            number += 1
        sync()
        times.append((time.perf_counter() - start) / number)
    return statistics.median(times)


def vm_secs(mod, dev, args: list, check) -> float:
    """Compile ``mod`` for the GPU (or take it compiled), check its result, and time ``main``
    with CUDA events."""
    import tvms
    from tvms import relax

    compiled = tvms.compile(mod, target=tvms.target.Target.from_device(dev)) if isinstance(mod, tvms.IRModule) else mod
    vm = relax.VirtualMachine(compiled, dev)
    inputs = [tvms.nd.array(a, device=dev) for a in args]
    check(vm["main"](*inputs).numpy())
    timer = vm.time_evaluator("main", dev, number=10, repeat=5, min_repeat_ms=200)
    return statistics.median(timer(*inputs).results)


class MatmulCase:
    """One matmul of ``benchmarks/gpu.py``: the Relax module, its inputs, its check against
    numpy, and cuBLAS's time for it (None without a peer)."""

    def __init__(self, n: int, dtype: str, dev, peer: Peer) -> None:
        import tvms

        self.n, self.dtype, self.dev = n, dtype, dev
        self.mod = tvms.script.from_source(MATMUL.replace("N", str(n)).replace("DT", dtype))
        self.args = [np.random.rand(n, n).astype(dtype) for _ in range(2)]
        self.expect = self.args[0].astype("float32") @ self.args[1].astype("float32")
        self.cublas = peer.matmul(*self.args) if peer.name else None
        self.peer = peer.name
        self.failures: list[str] = []

    def check(self, out) -> None:
        tol = 1e-2 if self.dtype == "float16" else 1e-3
        np.testing.assert_allclose(out.astype("float32"), self.expect, rtol=tol, atol=tol * self.n)

    def row(self, label: str, make) -> None:
        """Time what ``make()`` gives (a module or an executable) through the VM and print its row."""
        self.timed_row(label, lambda: vm_secs(make(), self.dev, self.args, self.check))

    def timed_row(self, label: str, measure) -> None:
        """Print the row of ``measure()``'s seconds; a step that fails (a wrong result included) is
        printed and counted in ``failures``, and the rows after it are still measured."""
        try:
            secs = measure()
        except Exception as err:  # noqa: BLE001 - a benchmark reports every failure and goes on
            self.failures.append(label)
            print(f"{label + f' ({self.dtype})':48} FAILED: {type(err).__name__}: {str(err)[:300]}", flush=True)
            return
        self.print_row(label, secs)

    def print_row(self, label: str, secs: float) -> None:
        """One row, printed at once (a later step that runs out of time leaves it in the log)."""
        ratio = f"{self.cublas / secs:9.2f}" if self.cublas else ""
        print(f"{label + f' ({self.dtype})':48} {secs * 1e3:9.3f} {2 * self.n ** 3 / secs / 1e12:8.2f} {ratio}",
              flush=True)


def default_rows(case: MatmulCase) -> None:
    """DLight (tvms's plans), TVM's schedule, the cuBLAS dispatch, cuBLAS itself."""
    import tvms
    import tvms.dlight as dl
    from tvms import relax

    def tvm_schedule():  # (tvms's plan for large matmuls above; TVM's schedule here)
        with tvms.target.Target.from_device(case.dev):
            return dl.ApplyDefaultSchedule(dl.gpu.Matmul(large_tiles=False))(relax.get_pipeline("zero")(case.mod))

    def cublas_dispatch():  # (as seed 000: the composite functions become calls of cuBLAS only through RunCodegen)
        from tvms.relax.backend.cuda.cublas import partition_for_cublas

        return relax.transform.RunCodegen()(partition_for_cublas(case.mod))

    case.row("tvms DLight", lambda: case.mod)
    case.row("tvms DLight, TVM's schedule", tvm_schedule)
    case.row("tvms cuBLAS dispatch", cublas_dispatch)
    if case.dtype == "float16" and case.dev.compute_version == "9.0":
        wgmma_row(case, overlap=False)
        wgmma_row(case, overlap=True)
    if case.cublas:
        case.print_row(f"cuBLAS via {case.peer}", case.cublas)


def wgmma_row(case: MatmulCase, overlap: bool) -> None:
    """benchmarks/wgmma_gemm.py's Hopper kernel (C = A @ B.T: B is given transposed, as a linear
    layer's weight is; its time excludes the transposition), checked against numpy."""
    import tvms

    def measure() -> float:
        n = case.n
        lib = tvms.build(tvms.script.from_source(kernel_text(n, n, n, overlap)),
                         target={"kind": "cuda", "arch": "sm_90a"})
        args = [tvms.nd.array(case.args[0], device=case.dev),
                tvms.nd.array(np.ascontiguousarray(case.args[1].T), device=case.dev),
                tvms.nd.array(np.zeros((n, n), case.dtype), device=case.dev)]
        lib(*args)
        case.check(args[2].numpy())
        timer = lib.time_evaluator("wgmma_gemm", case.dev, number=10, repeat=5, min_repeat_ms=200)
        return statistics.median(timer(*args).results)

    case.timed_row(f"tvms wgmma{' overlapped' if overlap else ''} (B.T given)", measure)


def tuned_rows(case: MatmulCase, trials: int, spaces: list) -> None:
    """The matmul tuned in the tiles space and in TVM's (MetaScheduleTuneTIR), ``trials`` each."""
    import tvms
    from tvms import relax

    def in_tvms_space():
        with tempfile.TemporaryDirectory() as work, tvms.target.Target.from_device(case.dev):
            return tvms.transform.Sequential([
                relax.get_pipeline("zero"),
                relax.transform.MetaScheduleTuneTIR(work_dir=work, max_trials_global=trials),
                relax.transform.MetaScheduleApplyDatabase(work_dir=work),
            ])(case.mod)

    if "tiles" in spaces:
        async_copy = case.dtype == "float16" and float(case.dev.compute_version) >= 8.0
        case.row(f"tvms tuned, tiles space{' + cp.async' if async_copy else ''}, {trials} trials",
                 lambda: tiles_tuned(case.mod, case.dev, trials, async_copy))
    if "default" in spaces:
        case.row(f"tvms tuned, TVM's space, {trials} trials", in_tvms_space)


def tiles_tuned(mod, dev, trials: int, async_copy: bool = False):
    """``mod`` tuned in the tiles space (``trials`` at most; a large matmul's space ends after its
    shapes) and compiled with the best schedules; ``async_copy``: both under
    ``tirx.use_async_copy`` (float16 shapes with cp.async copies as well)."""
    import tvms
    from tvms import meta_schedule as ms
    from tvms.lowering.build import run_relax_pipeline
    from tvms.lowering.tune.tile_space import tile_space
    from tvms.target import Target

    target = Target({"kind": "cuda", **Target.from_device(dev).attrs,
                     "max_shared_memory_per_block": dev.max_shared_memory_per_block_optin})
    lowered = run_relax_pipeline(mod, "zero", True, target)
    config = {"tirx.use_async_copy": True} if async_copy else {}
    with tempfile.TemporaryDirectory() as work, tvms.transform.PassContext(config=config):
        db = ms.relax_integration.tune_relax(lowered, None, target, work, trials, trials, space=tile_space(target),
                                             strategy="replay-trace", progress="none")
        print_candidates(db)
        return ms.relax_integration.compile_relax(db, lowered, target)


def shape_of(trace) -> str:
    """A candidate told apart by its trace's constant split factors (its tiles), loop by loop, and
    ", async" where its pipeline copies asynchronously (``WarpTiles.async_copy``)."""
    splits = [inst.inputs[1:] for inst in trace.insts if inst.kind == "Split"]
    asynchronous = any(inst.kind == "Annotate" and "software_pipeline_async_stages" in inst.attrs
                       for inst in trace.insts)
    return " ".join("x".join("?" if f is None else str(f) for f in factors) for factors in splits) \
        + (", async" if asynchronous else "")


def print_candidates(db) -> None:
    """Every candidate the tuning measured, fastest first: which shapes win is the next step's guide."""
    from tvms.lowering.tune.database import ranked

    records = db.get_all_tuning_records()
    valid = ranked(records)
    print(f"    {len(records)} measurements of {len(valid)} valid schedules (a schedule measured again counts by"
          " its last), fastest first (ms: splits):", flush=True)
    for record in valid:
        print(f"    {record.mean_secs() * 1e3:8.3f}: {shape_of(record.trace)}", flush=True)
    for record in records:
        if not record.is_valid():
            print(f"    failed: {shape_of(record.trace)}", flush=True)


def print_mlp(dev, peer: Peer) -> None:
    import tvms

    shapes = [(1, 784), (128, 784), (128,), (10, 128), (10,)]
    mlp_args = [np.random.rand(*s).astype("float32") for s in shapes]
    x, w0, b0, w1, b1 = mlp_args
    expect = np.maximum(x @ w0.T + b0, 0) @ w1.T + b1
    ours = vm_secs(tvms.script.from_source(MLP), dev, mlp_args,
                   lambda out: np.testing.assert_allclose(out, expect, rtol=1e-4, atol=1e-4))
    print(f"\nseed MLP (1x784 -> 128 -> 10): tvms {ours * 1e6:.1f} us", end="")
    if peer.name:
        theirs = peer.mlp(mlp_args)
        print(f", {peer.name} {theirs * 1e6:.1f} us, tvms / {peer.name} = {ours / theirs:.2f} (goal <= 1.2)")
    else:
        print()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--trials", type=int, default=0, help="also tune the matmul (trials)")
    ap.add_argument("--spaces", default="tiles,default",
                    help="the tuning spaces, in this order (default: tiles,default)")
    ap.add_argument("--dtypes", default="float32,float16", help="the matmuls' types (default: float32,float16)")
    args = ap.parse_args()
    import tvms

    dev = tvms.cuda(0)
    if not dev.exist:
        print(f"no CUDA device ({dev.missing_reason}): the device figures are not measured", file=sys.stderr)
        return 1
    peer = Peer()
    print(f"device: {dev.device_name}, compute {dev.compute_version}; cuBLAS peer: {peer.name or 'none installed'}")
    failed = []
    try:
        print_mlp(dev, peer)
    except Exception as err:  # noqa: BLE001 - reported, and the matmuls are still measured
        print(f"\nseed MLP: FAILED: {type(err).__name__}: {str(err)[:300]}", file=sys.stderr)
        failed.append("seed MLP")
    print(f"\nmatmul {args.n}^3{'':36} {'ms':>9} {'TFLOPS':>8} {'x cuBLAS':>9}")
    cases = [MatmulCase(args.n, dtype, dev, peer) for dtype in args.dtypes.split(",")]
    for case in cases:  # (every default schedule first: the tuning may run out of the time given)
        default_rows(case)
    if args.trials:
        for case in cases:
            tuned_rows(case, args.trials, args.spaces.split(","))
    failed += [f"{label} ({case.dtype})" for case in cases for label in case.failures]
    if failed:
        print(f"\nnot measured: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
