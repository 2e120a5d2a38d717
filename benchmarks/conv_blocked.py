"""One convolution (+ bias + relu) on NCHW16c data beside the same one on NCHW, and, for a 3x3 of
stride 1, beside the same on NCHW16c by Winograd's F(4x4, 3x3) (WinogradConv2d), each through
``tvms.compile`` (default schedules: the Conv2DBlocked rule, the Conv2D rule, the Winograd
kernels' rule; GF/s counts the direct convolution's multiply-adds; on a host of 8 lanes the pass
refuses NCHW16c, and the Winograd column times the direct convolution again) with its weight
bound as a constant (so the NCHW side's weight packing runs at compile time, as in an imported
model) and called through the VM; the two timed in alternating blocks of calls in one process,
median (and best) GF/s of 9 rounds; the register tile each rule picked; the load average.
``--cpu-time``: on one thread (TVM_NUM_THREADS=1), the calling thread's CPU time instead of the
wall clock: the kernels' own work, which holds on a busy machine (not their parallel scaling).

    .venv/bin/python benchmarks/conv_blocked.py                  # the ResNet / SqueezeNet shapes below
    .venv/bin/python benchmarks/conv_blocked.py 16,64,55,1,1,0   # C,F,size,k,stride,pad (F: a multiple of 16)
    .venv/bin/python benchmarks/conv_blocked.py --plain 3,64,224,7,2,3   # a plain NCHW input (a first layer)
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

CASES = ["16,64,55,1,1,0", "64,256,56,1,1,0", "256,1024,14,1,1,0", "64,64,56,3,1,1", "256,256,14,3,1,1",
         "512,1008,13,1,1,0", "16,64,55,3,1,1", "128,128,28,3,1,1", "512,512,14,3,1,1"]
PLAIN_CASES = ["3,64,224,7,2,3"]
BLOCK = 16


def program(c: int, f: int, size: int, k: int, stride: int, pad: int, blocked: bool, plain: bool,
            winograd: bool = False):
    """The VM function of ``relu(conv2d(x, w) + b)`` with ``w`` a constant, and its arguments;
    ``winograd``: WinogradConv2d on (else off)."""
    import tvms
    from tvms.script import from_source

    out = (size + 2 * pad - k) // stride + 1
    if blocked:
        x = (1, c, size, size) if plain else (1, c // BLOCK, size, size, BLOCK)
        w = (f // BLOCK, c, k, k, BLOCK) if plain else (f // BLOCK, c // BLOCK, k, k, BLOCK, BLOCK)
        y, b = (1, f // BLOCK, out, out, BLOCK), (1, f // BLOCK, 1, 1, BLOCK)
        layouts = (f', data_layout="{"NCHW" if plain else "NCHW16c"}", '
                   f'kernel_layout="OIHW{"" if plain else "16i"}16o", out_layout="NCHW16c"')
    else:
        x, w, y, b, layouts = (1, c, size, size), (f, c, k, k), (1, f, out, out), (1, f, 1, 1), ""
    text = f"""# from tvm.script import ir as I
# from tvm.script import relax as R

@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor({x}, dtype="float32"), w: R.Tensor({w}, dtype="float32"),
             b: R.Tensor({b}, dtype="float32")) -> R.Tensor({y}, dtype="float32"):
        with R.dataflow():
            y = R.nn.conv2d(x, w, strides=[{stride}, {stride}], padding=[{pad}, {pad}, {pad}, {pad}]{layouts})
            z = R.add(y, b)
            u = R.nn.relu(z)
            R.output(u)
        return u
"""
    rng = np.random.default_rng(0)
    mod = tvms.relax.transform.BindParams("main", {"w": rng.standard_normal(w, dtype=np.float32)})(from_source(text))
    with tvms.transform.PassContext(config={"relax.WinogradConv2d.enable": winograd}):
        vm = tvms.relax.VirtualMachine(tvms.compile(mod, target="llvm"), tvms.cpu())
    return vm["main"], [tvms.nd.array(rng.standard_normal(shape, dtype=np.float32)) for shape in (x, b)]


def tiles(f: int, width: int) -> str:
    """The register tiles (pixels x vectors x lanes) the two rules pick on this host: NCHW16c / NCHW."""
    from tvms.lowering.dlight.analysis import vector_lanes
    from tvms.lowering.dlight.cpu_conv import channel_tile, vector_registers
    from tvms.lowering.dlight.cpu_conv_blocked import blocked_tiles
    from tvms.target import Target

    target = Target("llvm")
    plain = channel_tile(f, width, vector_lanes(target, 32), vector_registers(target))
    return " / ".join("x".join(map(str, tile)) for tile in (blocked_tiles(f, width, BLOCK, target)[0], plain))


def block_seconds(fn, args: list, clock=time.perf_counter, calls: int = 20) -> float:
    fn(*args)
    start = clock()
    for _ in range(calls):
        fn(*args)
    return (clock() - start) / calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("cases", nargs="*", help="C,F,size,k,stride,pad")
    parser.add_argument("--plain", action="store_true", help="the cases' input is plain NCHW (C not blocked)")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--cpu-time", action="store_true", help="one thread, timed by its CPU time")
    args = parser.parse_args()
    clock = time.perf_counter
    if args.cpu_time:
        os.environ["TVM_NUM_THREADS"] = "1"
        clock = time.thread_time
    cases = ([(case, args.plain) for case in args.cases]
             or [(case, False) for case in CASES] + [(case, True) for case in PLAIN_CASES])
    for case, plain in cases:
        c, f, size, k, stride, pad = map(int, case.split(","))
        sides = [program(c, f, size, k, stride, pad, blocked, plain) for blocked in (True, False)]
        if k == 3 and stride == 1 and not plain:
            sides.append(program(c, f, size, k, stride, pad, True, plain, winograd=True))
        times: list = [[] for _ in sides]
        for _ in range(args.rounds):  # (alternating: a load that comes and goes hits both sides)
            for (fn, fn_args), spent in zip(sides, times):
                spent.append(block_seconds(fn, fn_args, clock))
        out = (size + 2 * pad - k) // stride + 1
        flops = 2 * f * out * out * c * k * k
        cells = [f"{statistics.median(t) * 1e3:7.3f} ms {flops / statistics.median(t) / 1e9:4.0f} GF/s "
                 f"(best {flops / min(t) / 1e9:4.0f})" for t in times]
        speedup = statistics.median(times[1]) / statistics.median(times[0])
        winograd = (f" | Winograd {cells[2]} x{statistics.median(times[0]) / statistics.median(times[2]):.2f}"
                    if len(sides) > 2 else "")
        print(f"{c:>4}->{f:<5}{k}x{k}/{stride} @{size:<4}{'plain ' if plain else ''}NCHW16c {cells[0]} | "
              f"NCHW {cells[1]} | x{speedup:.2f}{winograd}  tiles {tiles(f, out)}"
              f"  load {os.getloadavg()[0]:.2f}", flush=True)


if __name__ == "__main__":
    main()
