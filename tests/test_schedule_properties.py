"""Random sequences of schedule primitives keep what a function computes.

Hypothesis draws primitives (loops, reductions, rfactor, inlining, caches, compute_at, layouts,
blockize) and their arguments on a matmul, a conv2d, a row reduction, an elementwise chain and a
crop of groups of lanes (a grouped conv's padded output cropped). A primitive either succeeds, or
raises ScheduleError and leaves the schedule exactly as it was. After every step the printed
module parses back to the same text (both dialects); at the end the reference executor gives the
original's results, also once each buffer is allocated where it is used (plan and compact buffer
allocation, where a block that reads what another iteration produced sees a fresh buffer), and
the printed trace replays to the same module.
"""
from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tvms
from tvms.ir.stmt import BlockRealize
from tvms.ir.visitor import collect
from tvms.lowering.tir.compact_buffer_allocation import compact_buffer_allocation
from tvms.lowering.tir.plan_buffer_allocation import plan_buffer_allocation
from tvms.runtime.reference import run_prim_func
from tvms.tir import Schedule, ScheduleError, apply_trace_text

MATMUL = """
@I.ir_module
class Module:
    @T.prim_func
    def main(A: T.Buffer((12, 8), "float32"), B: T.Buffer((8, 6), "float32"), C: T.Buffer((12, 6), "float32")):
        for i, j, k in T.grid(12, 6, 8):
            with T.block("C"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    C[vi, vj] = T.float32(0.0)
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
"""
ROW_SUM = """
@I.ir_module
class Module:
    @T.prim_func
    def main(A: T.Buffer((10, 16), "float32"), C: T.Buffer((10,), "float32")):
        for i, k in T.grid(10, 16):
            with T.block("C"):
                vi, vk = T.axis.remap("SR", [i, k])
                with T.init():
                    C[vi] = T.float32(0.0)
                C[vi] = C[vi] + A[vi, vk]
"""
CHAIN = """
@I.ir_module
class Module:
    @T.prim_func
    def main(A: T.Buffer((8, 12), "float32"), C: T.Buffer((8, 12), "float32")):
        B = T.alloc_buffer((8, 12))
        for i, j in T.grid(8, 12):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = A[vi, vj] * T.float32(2.0)
        for i, j in T.grid(8, 12):
            with T.block("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = B[vi, vj] + T.float32(1.0)
"""
CONV2D = """
@I.ir_module
class Module:
    @T.prim_func
    def main(X: T.Buffer((1, 2, 6, 6), "float32"), W: T.Buffer((3, 2, 3, 3), "float32"), Y: T.Buffer((1, 3, 6, 6), "float32")):
        for n, f, h, w, rc, rh, rw in T.grid(1, 3, 6, 6, 2, 3, 3):
            with T.block("conv"):
                vn, vf, vh, vw, vrc, vrh, vrw = T.axis.remap("SSSSRRR", [n, f, h, w, rc, rh, rw])
                with T.init():
                    Y[vn, vf, vh, vw] = T.float32(0.0)
                Y[vn, vf, vh, vw] = Y[vn, vf, vh, vw] + T.if_then_else(1 <= vh + vrh and vh + vrh < 7 and 1 <= vw + vrw and vw + vrw < 7, X[vn, vrc, vh + vrh - 1, vw + vrw - 1], T.float32(0.0)) * W[vf, vrc, vrh, vrw]
"""
def crop_pair(groups: int, width: int, lanes: int, stride: int, offset: int, fused: tuple) -> str:
    """A producer of ``groups`` groups of ``width`` lanes and a consumer that reads ``lanes`` of
    each group at ``g * width + l * stride + offset`` (a crop, as a grouped conv's output is
    cropped), each over a grid of (group, lane) or one fused loop."""
    n, m = groups * width, groups * lanes
    if fused[0]:
        producer = f"""for f in range({n}):
            with T.block("B"):
                vf = T.axis.spatial({n}, f)
                B[vf] = A[vf] * T.float32(2.0)"""
    else:
        producer = f"""for g, l in T.grid({groups}, {width}):
            with T.block("B"):
                vg, vl = T.axis.remap("SS", [g, l])
                B[vg * {width} + vl] = A[vg * {width} + vl] * T.float32(2.0)"""
    if fused[1]:
        consumer = f"""for f in range({m}):
            with T.block("C"):
                vf = T.axis.spatial({m}, f)
                C[vf] = B[vf // {lanes} * {width} + vf % {lanes} * {stride} + {offset}] + T.float32(1.0)"""
    else:
        consumer = f"""for g, l in T.grid({groups}, {lanes}):
            with T.block("C"):
                vg, vl = T.axis.remap("SS", [g, l])
                C[vg * {lanes} + vl] = B[vg * {width} + vl * {stride} + {offset}] + T.float32(1.0)"""
    return f"""
@I.ir_module
class Module:
    @T.prim_func
    def main(A: T.Buffer(({n},), "float32"), C: T.Buffer(({m},), "float32")):
        B = T.alloc_buffer(({n},))
        {producer}
        {consumer}
"""


MODULES = {"matmul": MATMUL, "row_sum": ROW_SUM, "chain": CHAIN, "conv2d": CONV2D,
           "crop": crop_pair(3, 6, 4, 1, 1, (False, True))}
OPS = ["split", "fuse", "reorder", "parallel", "vectorize", "unroll", "annotate", "decompose",
       "compute_inline", "reverse_compute_inline", "cache_read", "cache_write", "compute_at",
       "reverse_compute_at", "rfactor", "transform_layout", "blockize", "sampled_compute_at"]


def block_names(sch: Schedule) -> list[str]:
    return [r.block.name_hint for r in collect(sch.mod["main"].body, BlockRealize)
            if r.block.name_hint != "root"]


BLOCK_OPS = ["compute_inline", "reverse_compute_inline", "cache_read", "cache_write", "sampled_compute_at"]


def is_local_matrix(sch: Schedule, buffer) -> bool:
    return len(buffer.shape) == 2 and all(b is not buffer for b in sch.mod["main"].buffer_map.values())


def apply_random_step(sch: Schedule, data: st.DataObject) -> None:
    block = sch.get_block(data.draw(st.sampled_from(block_names(sch))))
    loops = sch.get_loops(block)
    op = data.draw(st.sampled_from(OPS if loops else BLOCK_OPS))  # a block may have no loops left
    pick = lambda: data.draw(st.sampled_from(loops))  # noqa: E731
    if op == "split":
        loop = pick()
        n = data.draw(st.integers(2, 3))
        factors: list = [data.draw(st.integers(1, 8)) for _ in range(n)]
        if data.draw(st.booleans()):
            factors[data.draw(st.integers(0, n - 1))] = None
        sch.split(loop, factors, preserve_unit_iters=data.draw(st.booleans()))
    elif op == "fuse" and len(loops) > 1:
        start = data.draw(st.integers(0, len(loops) - 2))
        sch.fuse(*loops[start:start + data.draw(st.integers(2, len(loops) - start))])
    elif op == "reorder":
        chosen = data.draw(st.permutations(loops))[:data.draw(st.integers(1, len(loops)))]
        sch.reorder(*chosen)
    elif op in ("parallel", "vectorize", "unroll"):
        getattr(sch, op)(pick())
    elif op == "annotate":
        target = data.draw(st.sampled_from([block, pick()]))
        sch.annotate(target, data.draw(st.sampled_from(["pragma_a", "pragma_b"])), data.draw(st.integers(0, 9)))
    elif op == "decompose" and sch.get(block).init is not None:
        sch.decompose_reduction(block, pick())
    elif op in ("compute_inline", "reverse_compute_inline"):
        getattr(sch, op)(block)
    elif op == "transform_layout" and is_local_matrix(sch, sch.get(block).writes[0].buffer):
        sch.transform_layout(block, ("write", 0), lambda a, b: (b, a))  # keeps the signature
    elif op == "sampled_compute_at":
        sch.compute_at(block, sch.sample_compute_location(block, decision=None))
    elif op == "blockize":
        sch.blockize(pick())
    elif op == "rfactor":
        sch.rfactor(pick(), factor_axis=data.draw(st.integers(0, 1)))
    elif op in ("compute_at", "reverse_compute_at"):
        other_loops = sch.get_loops(sch.get_block(data.draw(st.sampled_from(block_names(sch)))))
        if other_loops:
            getattr(sch, op)(block, data.draw(st.sampled_from(other_loops)))
    elif op in ("cache_read", "cache_write"):
        regions = sch.get(block).reads if op == "cache_read" else sch.get(block).writes
        index = data.draw(st.integers(0, len(regions)))  # one past the end: an error case
        getattr(sch, op)(block, index, data.draw(st.sampled_from(["local", "shared"])))


def check_reparses(sch: Schedule) -> None:
    for dialect in ("classic", "tvm-0.27"):
        text = sch.mod.script(dialect=dialect)
        assert tvms.script.from_source(text).script(dialect=dialect) == text


def run(mod: tvms.IRModule, inputs: list) -> list:
    arrays = [a.copy() for a in inputs]
    run_prim_func(mod["main"], *arrays)
    return arrays


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(MODULES)), st.data())
def test_random_legal_schedules_keep_results(name: str, data: st.DataObject) -> None:
    original = tvms.script.from_source(MODULES[name])
    sch = Schedule(original, seed=data.draw(st.integers(0, 1000)))  # samplers replay with hypothesis
    for _ in range(data.draw(st.integers(1, 6))):
        before_text, before_len = sch.mod.script(), len(sch.trace.insts)
        try:
            apply_random_step(sch, data)
        except ScheduleError:
            assert sch.mod.script() == before_text
            assert len(sch.trace.insts) >= before_len  # lookups before the failure stay recorded
            continue
        check_reparses(sch)
    func = original["main"]
    rng = np.random.default_rng(0)
    inputs = [rng.random([s.value for s in func.buffer_map[p].shape], dtype=np.float32) for p in func.params]
    compacted = tvms.IRModule({"main": compact_buffer_allocation(plan_buffer_allocation(sch.mod["main"]))})
    for mod in (sch.mod, compacted):
        for expected, got in zip(run(original, inputs), run(mod, inputs)):
            np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    replay = Schedule(original)
    apply_trace_text(str(sch.trace), replay)
    assert replay.mod.script() == sch.mod.script()


@st.composite
def crops(draw: st.DrawFn) -> tuple:
    groups, width = draw(st.integers(1, 4)), draw(st.integers(2, 6))
    stride = draw(st.integers(1, 2))
    lanes = draw(st.integers(1, (width - 1) // stride + 1))
    offset = draw(st.integers(0, width - 1 - (lanes - 1) * stride))
    return groups, width, lanes, stride, offset, (draw(st.booleans()), draw(st.booleans()))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(crops(), st.data())
def test_compute_at_of_a_crop_refuses_or_keeps_results(crop: tuple, data: st.DataObject) -> None:
    """compute_at / reverse_compute_at at any loop of a producer and a cropping consumer either
    raise ScheduleError or compute the crop, also once each buffer is allocated where it is used
    (as the CPU pipeline does): a region that covers more than the loop's iteration produces
    reads elements of other iterations that such a buffer no longer holds."""
    groups, width, lanes, stride, offset, _ = crop
    original = tvms.script.from_source(crop_pair(*crop))
    sch = Schedule(original)
    for name in ("B", "C"):  # a loop split, as a tile of the producer or the consumer
        if data.draw(st.booleans()):
            loop = data.draw(st.sampled_from(sch.get_loops(sch.get_block(name))))
            sch.split(loop, [None, data.draw(st.integers(2, 4))])
    reverse = data.draw(st.booleans())
    moved, other = ("C", "B") if reverse else ("B", "C")
    loop = data.draw(st.sampled_from(sch.get_loops(sch.get_block(other))))
    before = sch.mod.script()
    try:
        getattr(sch, "reverse_compute_at" if reverse else "compute_at")(sch.get_block(moved), loop)
    except ScheduleError:
        assert sch.mod.script() == before
        return
    a = np.random.default_rng(0).random(groups * width, dtype=np.float32)
    picks = (np.arange(groups)[:, None] * width + np.arange(lanes)[None, :] * stride + offset).ravel()
    for func in (sch.mod["main"], compact_buffer_allocation(plan_buffer_allocation(sch.mod["main"]))):
        c = np.zeros(groups * lanes, dtype=np.float32)
        run_prim_func(func, a.copy(), c)
        np.testing.assert_allclose(c, a[picks] * 2 + 1, rtol=1e-6)
