"""PerStoreFeature: one row of numbers per store statement of the lowered TensorIR, in the spirit
of TVM's ``PerStoreFeature`` (the features the XGBoost cost model learns from).

The candidate's functions go through the CPU lowering pipeline up to (not including)
vectorization, so loops keep their kinds (parallel, vectorized, unrolled) and buffers are flat.
Each ``BufferStore`` gives a row of, in TVM's groups (counts on a ``slog`` scale,
``sign(x) * log2(|x| + 1)``):

1. arithmetic (16): float and int add/sub, mul, div/mod, comparisons, math and other calls,
   multiply-adds, boolean ops, selects, over every iteration of the surrounding loops; for the
   vectorized, unrolled and parallel loops around it (11 each): how many, their extents' product,
   the innermost's extent, and where they sit (innermost/middle/outermost spatial or reduction
   loop, or mixed); GPU thread extents (8);
2. buffer access (18 per buffer, ``buffers_per_store`` buffers, the stored one first): read /
   write / read-write, bytes touched, unique bytes, cache lines, unique lines, reuse kind (a loop
   that does not move the access, a serial read-modify-write, none), reuse distance in
   iterations and bytes, reuse count, the four sizes per reuse, the innermost stride;
3. arithmetic intensity curve (``arith_intensity_curve_num_samples``): float ops per byte touched
   as the loop nest grows from the innermost loop out, sampled at even shares of the work;
4. allocation (4): for a store into a buffer the function allocates, its bytes, bytes times the
   loops around the allocation, that product, and the loops' product per allocation;
5. outer scope (3): the product of the loop extents, the number of loops, the unroll pragma;
6. (``extract_workload=True``) the workload's kind from its block names (8).

A loop "moves" an access when its variable appears in the flattened index with a non-zero
coefficient; a loop is a reduction loop for a store when it does not move the stored element.
"""
from __future__ import annotations

from math import log2, prod
from typing import Any

import numpy as np

from ...ir.buffer import Buffer
from ...ir.expr import (EQ, GE, GT, LE, LT, NE, Add, And, BufferLoad, Call, Cast, Div, FloorDiv, FloorMod,
                        IntImm, Max, Min, Mod, Mul, Not, Or, Select, Sub, Var)
from ...ir.function import PrimFunc
from ...ir.module import IRModule
from ...ir.stmt import (PARALLEL, THREAD_BINDING, UNROLLED, VECTORIZED, AllocBuffer, AttrStmt, Block,
                        BufferStore, DeclBuffer, For)
from ...ir.visitor import walk
from ..schedule.tree import stmt_children
from ..tir.pipeline import CPU_PIPELINE
from ..tir.vectorize_loop import vectorize_loop
from .feature_extractor import FeatureExtractor
from .module_hash import module_hash

# the lowering steps before vectorization: blocks gone, buffers flat, loop kinds kept
FEATURE_PIPELINE = CPU_PIPELINE[:CPU_PIPELINE.index(vectorize_loop)]

ARITH = ("float_mad", "float_add_sub", "float_mul", "float_div_mod", "float_cmp", "float_math_func",
         "float_other_func", "int_mad", "int_add_sub", "int_mul", "int_div_mod", "int_cmp", "int_math_func",
         "int_other_func", "bool_op", "select_op")
_BINARY = {Add: "add_sub", Sub: "add_sub", Mul: "mul", Div: "div_mod", Mod: "div_mod", FloorDiv: "div_mod",
           FloorMod: "div_mod", Max: "cmp", Min: "cmp", EQ: "cmp", NE: "cmp", LT: "cmp", LE: "cmp", GT: "cmp",
           GE: "cmp"}
MATH_CALLS = ("exp", "exp2", "exp10", "log", "log2", "log10", "log1p", "sqrt", "rsqrt", "tanh", "sigmoid",
              "erf", "sin", "cos", "tan", "pow", "fabs", "floor", "ceil", "round", "trunc", "fma", "fmuladd")
THREAD_TAGS = ("blockIdx.x", "blockIdx.y", "blockIdx.z", "threadIdx.x", "threadIdx.y", "threadIdx.z", "vthread")
WORKLOAD_WORDS = (("softmax",), ("max", "min"), ("add",), ("batch_matmul",), ("matmul",), ("depthwiseconv2d",),
                  ("conv2d_winograd",), ("conv2d",))
CACHE_SIZE = 4096
UNROLL_PRAGMA = "pragma_auto_unroll_max_step"
READ, WRITE, READ_WRITE = 0, 1, 2
LOOP_REUSE, SERIAL_REUSE, NO_REUSE = 0, 1, 2


def slog(x: float) -> float:
    return float(np.sign(x) * log2(abs(x) + 1))


def lower_for_features(func: PrimFunc) -> PrimFunc:
    for step in FEATURE_PIPELINE:
        func = step(func)
    return func


def extent_of(loop: For) -> int:
    return loop.extent.value if isinstance(loop.extent, IntImm) else 1


def count_ops(expr: Any) -> dict[str, int]:
    """How many of each arithmetic operation ``expr`` computes (once)."""
    counts = dict.fromkeys(ARITH, 0)
    for node in walk(expr):
        kind = "float" if getattr(getattr(node, "dtype", None), "code", "") in ("float", "bfloat") else "int"
        name = _BINARY.get(type(node))
        if name is not None:
            counts[f"{kind}_{name}"] += 1
            if isinstance(node, Add) and (isinstance(node.a, Mul) or isinstance(node.b, Mul)):
                counts[f"{kind}_mad"] += 1
        elif isinstance(node, (And, Or, Not)):
            counts["bool_op"] += 1
        elif isinstance(node, Select):
            counts["select_op"] += 1
        elif isinstance(node, Call):
            op = getattr(node.op, "name", "").rsplit(".", 1)[-1]
            if op == "if_then_else":
                counts["select_op"] += 1
            else:
                counts[f"{kind}_{'math' if op in MATH_CALLS else 'other'}_func"] += 1
    return counts


def coefficients(index: Any, loop_vars: dict) -> dict[int, int]:
    """Loop position -> coefficient of that loop's variable in an index (non-zero only); a
    variable under a non-linear operation counts with coefficient 1."""
    def linear(e: Any) -> dict | None:
        if isinstance(e, IntImm):
            return {}
        if isinstance(e, Var):
            return {loop_vars[id(e)]: 1} if id(e) in loop_vars else {}
        if isinstance(e, Cast):
            return linear(e.value)
        if isinstance(e, (Add, Sub)):
            a, b = linear(e.a), linear(e.b)
            if a is None or b is None:
                return None
            sign = 1 if isinstance(e, Add) else -1
            return {k: a.get(k, 0) + sign * b.get(k, 0) for k in a.keys() | b.keys()}
        if isinstance(e, Mul):
            for x, y in ((e.a, e.b), (e.b, e.a)):
                if isinstance(y, IntImm):
                    inner = linear(x)
                    return None if inner is None else {k: v * y.value for k, v in inner.items()}
        return None

    found = linear(index)
    if found is None:
        found = {loop_vars[id(v)]: 1 for v in walk(index) if isinstance(v, Var) and id(v) in loop_vars}
    return {k: v for k, v in found.items() if v}


def access_coefficients(buffer: Buffer, indices: tuple, loop_vars: dict) -> dict[int, int]:
    """``coefficients`` of the row-major flat index of an access (buffers are flat by now; a
    multi-dimensional one is read as its flat view)."""
    total: dict[int, int] = {}
    stride = 1
    for index, dim in reversed(list(zip(indices, buffer.shape))):
        for k, c in coefficients(index, loop_vars).items():
            total[k] = total.get(k, 0) + c * stride
        stride *= dim.value if isinstance(dim, IntImm) else 1
    return {k: v for k, v in total.items() if v}


class PerStoreFeature(FeatureExtractor):
    """``PerStoreFeature(buffers_per_store=5, arith_intensity_curve_num_samples=10,
    cache_line_bytes=64, extract_workload=False)``: 164 columns with TVM's defaults."""

    def __init__(self, buffers_per_store: int = 5, arith_intensity_curve_num_samples: int = 10,
                 cache_line_bytes: int = 64, extract_workload: bool = False) -> None:
        self.buffers_per_store = buffers_per_store
        self.arith_intensity_curve_num_samples = arith_intensity_curve_num_samples
        self.cache_line_bytes = cache_line_bytes
        self.extract_workload = extract_workload
        self._cache: dict[int, np.ndarray] = {}

    @property
    def feature_vector_length(self) -> int:
        return len(self.feature_names)

    @property
    def feature_names(self) -> list[str]:
        """The name of each column, in order (``buffer0.stride``, ``parallel.prod``, ...)."""
        positions = ["none", "inner_spatial", "middle_spatial", "outer_spatial", "inner_reduce", "middle_reduce",
                     "outer_reduce", "mixed"]
        loop_kind = ["num", "prod", "len"] + [f"pos_{p}" for p in positions]
        buffer = ["read", "write", "read_write", "bytes", "unique_bytes", "lines", "unique_lines", "loop_reuse",
                  "serial_reuse", "no_reuse", "reuse_dis_iter", "reuse_dis_bytes", "reuse_ct", "bytes_d_reuse_ct",
                  "unique_bytes_d_reuse_ct", "lines_d_reuse_ct", "unique_lines_d_reuse_ct", "stride"]
        names = list(ARITH)
        names += [f"{kind}.{n}" for kind in ("vectorize", "unroll", "parallel") for n in loop_kind]
        names += ["is_gpu"] + [f"{tag}.len" for tag in THREAD_TAGS]
        names += [f"buffer{i}.{n}" for i in range(self.buffers_per_store) for n in buffer]
        names += [f"arith_intensity_curve{i}" for i in range(self.arith_intensity_curve_num_samples)]
        names += ["alloc_size", "alloc_prod", "alloc_outer_prod", "alloc_inner_prod", "outer_prod", "num_loops",
                  "auto_unroll_max_step"]
        names += [f"workload.{words[0]}" for words in WORKLOAD_WORDS] if self.extract_workload else []
        return names

    def extract_from(self, context: Any, candidates: list) -> list[np.ndarray]:
        return [self.features_of(candidate.sch.mod) for candidate in candidates]

    def features_of(self, mod: Any) -> np.ndarray:
        """The feature matrix of a scheduled module: one row per store. Matrices are kept by the
        module's structural hash: a search scores the same module many times, and lowering is
        most of the cost."""
        if isinstance(mod, PrimFunc):
            mod = IRModule({"main": mod})
        key = module_hash(mod)
        found = self._cache.pop(key, None)
        if found is None:
            found = self._compute(mod)
            if len(self._cache) >= CACHE_SIZE:
                self._cache.pop(next(iter(self._cache)))
        self._cache[key] = found  # (most recently used last)
        return found

    def _compute(self, mod: Any) -> np.ndarray:
        rows: list[list[float]] = []
        funcs = [mod[name] for name in mod if isinstance(mod[name], PrimFunc)]
        for func in funcs:
            rows.extend(_StoreCollector(self, lower_for_features(func)).rows)
        if self.extract_workload:
            embedding = workload_embedding(funcs)
            rows = [row + embedding for row in rows]
        return np.asarray(rows, dtype="float32").reshape(len(rows), self.feature_vector_length)


def workload_embedding(funcs: list) -> list[float]:
    """TVM's one-hot of the kinds of computation the block names mention."""
    names = [n.name_hint.lower() for f in funcs for n in walk(f.body) if isinstance(n, Block)]
    return [float(any(any(w in name for w in words) and not any(w in name for ws in WORKLOAD_WORDS[:k] for w in ws)
                      for name in names)) for k, words in enumerate(WORKLOAD_WORDS)]


class _StoreCollector:
    """Walks a lowered function, keeping the loops, pragmas and allocations around each store."""

    def __init__(self, extractor: PerStoreFeature, func: PrimFunc) -> None:
        self.x = extractor
        self.rows: list[list[float]] = []
        self.allocs: dict[int, tuple[Buffer, int]] = {}  # buffer data var -> (buffer, outer loops' product)
        self.params = {id(b.data) for b in func.buffer_map.values()}
        self.visit(func.body, [], 0)

    def visit(self, stmt: Any, loops: list, unroll: int) -> None:
        if isinstance(stmt, BufferStore):
            self.rows.append(self.row(stmt, loops, unroll))
            return
        if isinstance(stmt, For):
            loops = loops + [stmt]
        elif isinstance(stmt, AttrStmt) and stmt.attr_key == UNROLL_PRAGMA:
            unroll = getattr(stmt.value, "value", unroll)
        elif isinstance(stmt, (AllocBuffer, DeclBuffer)) and id(stmt.buffer.data) not in self.params:
            self.allocs[id(stmt.buffer.data)] = (stmt.buffer, prod(extent_of(l) for l in loops))
        for child in stmt_children(stmt):
            self.visit(child, loops, unroll)

    # ------------------------------------------------------------ one row
    def row(self, store: BufferStore, loops: list, unroll: int) -> list[float]:
        extents = [extent_of(loop) for loop in loops]
        total = prod(extents)
        loop_vars = {id(loop.loop_var): i for i, loop in enumerate(loops)}
        ops = count_ops(store.value)
        accesses = self.accesses(store, loop_vars)
        written = accesses[0][2]
        reduce_loops = {i for i in range(len(loops)) if i not in written}
        row = [slog(ops[name] * total) for name in ARITH]
        for kind in (VECTORIZED, UNROLLED, PARALLEL):
            row += self.loop_kind(loops, extents, kind, reduce_loops)
        row += self.gpu(loops)
        touched = [self.touched(buffer, coefs, extents) for buffer, _, coefs, _ in accesses]
        element_bytes = [eb for _, _, _, eb in accesses]
        subs = [self.buffer_features(a, t, extents, touched, element_bytes) for a, t in zip(accesses, touched)]
        write, reads = subs[0], sorted(subs[1:], key=lambda s: -s[3])
        for sub in ([write] + reads + [[0.0] * 18] * self.x.buffers_per_store)[:self.x.buffers_per_store]:
            row += sub
        float_ops = sum(ops[name] for name in ARITH[:7])
        row += self.intensity_curve(float_ops, extents, touched, element_bytes)
        row += self.allocation(store.buffer, total)
        row += [slog(total), slog(len(loops)), slog(unroll)]
        return row

    def accesses(self, store: BufferStore, loop_vars: dict) -> list[tuple]:
        """(buffer, access kind, coefficients by loop, element bytes), the stored buffer first;
        a buffer accessed several times merges its coefficients (largest magnitude)."""
        found: dict[int, list] = {}
        for buffer, indices, kind in ([(store.buffer, store.indices, WRITE)] +
                                      [(n.buffer, n.indices, READ) for n in walk(store.value)
                                       if isinstance(n, BufferLoad)]):
            coefs = access_coefficients(buffer, indices, loop_vars)
            key = id(buffer.data)
            if key not in found:
                found[key] = [buffer, kind, coefs, buffer.dtype.bits * buffer.dtype.lanes // 8 or 1]
                continue
            entry = found[key]
            entry[1] = entry[1] if entry[1] == kind else READ_WRITE
            for k, v in coefs.items():
                entry[2][k] = max(abs(v), abs(entry[2].get(k, 0)))
        return [tuple(entry) for entry in found.values()]

    @staticmethod
    def touched(buffer: Buffer, coefs: dict, extents: list) -> list[int]:
        """Elements touched by one run of the loops from position i inward, for each i (and 1
        past the innermost), capped at the buffer's size when it is static."""
        size = prod(d.value for d in buffer.shape) if all(isinstance(d, IntImm) for d in buffer.shape) else None
        out, running = [1] * (len(extents) + 1), 1
        for i in reversed(range(len(extents))):
            if i in coefs:
                running *= extents[i]
                running = running if size is None else min(size, running)
            out[i] = running
        return out

    def buffer_features(self, access: tuple, touched: list, extents: list, all_touched: list,
                        element_bytes: list) -> list[float]:
        _, kind, coefs, eb = access
        line = self.x.cache_line_bytes
        total = prod(extents)
        moving = sorted(coefs)
        stride = abs(coefs[moving[-1]]) if moving else 0
        non_strided = prod(extents[moving[-1] + 1:]) if moving else total
        bytes_ = total * eb
        unique_bytes = touched[0] * eb
        lines = total / non_strided * min(1.0, stride * eb / line) if moving else 1.0
        unique_lines = max(1.0, unique_bytes / line) if stride * eb < line else float(touched[0])
        still = [i for i in range(len(extents)) if i not in coefs and extents[i] > 1]
        if still:  # the innermost loop that does not move the access repeats it
            j = still[-1]
            reuse = LOOP_REUSE
            reuse_ct = extents[j]
            dis_iter = prod(extents[j + 1:])
            dis_bytes = sum(t[j + 1] * e for t, e in zip(all_touched, element_bytes))
        elif kind == READ_WRITE:
            reuse, reuse_ct, dis_iter, dis_bytes = SERIAL_REUSE, 1, 1, eb
        else:
            reuse, reuse_ct, dis_iter, dis_bytes = NO_REUSE, 0, 0, 0
        per = max(reuse_ct, 1)
        return ([float(kind == k) for k in (READ, WRITE, READ_WRITE)] +
                [slog(bytes_), slog(unique_bytes), slog(lines), slog(unique_lines)] +
                [float(reuse == k) for k in (LOOP_REUSE, SERIAL_REUSE, NO_REUSE)] +
                [slog(dis_iter), slog(dis_bytes), slog(reuse_ct)] +
                [slog(bytes_ / per), slog(unique_bytes / per), slog(lines / per), slog(unique_lines / per)] +
                [slog(stride)])

    @staticmethod
    def loop_kind(loops: list, extents: list, kind: str, reduce_loops: set) -> list[float]:
        """num, product, innermost extent, and position (one-hot of 8, TVM's order)."""
        marked = [i for i, loop in enumerate(loops) if loop.kind == kind]
        if not marked:
            return [0.0, 0.0, 0.0] + [1.0] + [0.0] * 7
        spatial = [i for i in range(len(loops)) if i not in reduce_loops]
        reduction = sorted(reduce_loops)
        if all(i in reduce_loops for i in marked):
            group, base = reduction, 4
        elif not any(i in reduce_loops for i in marked):
            group, base = spatial, 1
        else:
            group, base = None, 7
        pos = base
        if group is not None:
            at = group.index(marked[-1])
            pos = base if at == len(group) - 1 else base + 2 if at == 0 else base + 1
        head = [slog(len(marked)), slog(prod(extents[i] for i in marked)), slog(extents[marked[-1]])]
        return head + [float(pos == k) for k in range(8)]

    @staticmethod
    def gpu(loops: list) -> list[float]:
        tags = {loop.thread_binding.thread_tag: extent_of(loop) for loop in loops
                if loop.kind == THREAD_BINDING and loop.thread_binding is not None}
        return [float(bool(tags))] + [slog(tags.get(tag, 1)) for tag in THREAD_TAGS]

    def intensity_curve(self, float_ops: int, extents: list, touched: list, element_bytes: list) -> list[float]:
        """Float ops per byte as the loop nest grows from the innermost loop out, sampled at
        ``n`` even shares of the total work (linear between loop levels), as TVM's."""
        n = self.x.arith_intensity_curve_num_samples
        levels = list(reversed(range(len(extents))))  # innermost first
        if float_ops <= 0 or not levels:
            return [0.0] * n
        compute = [float_ops * prod(extents[i:]) for i in levels]
        memory = [max(1, sum(t[i] * e for t, e in zip(touched, element_bytes))) for i in levels]
        curve, p = [], 0
        for k in range(n):
            target = (k + 1) / n * compute[-1]
            while p < len(levels) - 1 and compute[p] < target - 1e-4:
                p += 1
            if p == 0 or compute[p] == compute[p - 1]:
                curve.append(slog(compute[p] / memory[p]))
            else:
                base = compute[p - 1] / memory[p - 1]
                slope = (compute[p] / memory[p] - base) / (compute[p] - compute[p - 1])
                curve.append(slog(base + slope * (target - compute[p - 1])))
        return curve

    def allocation(self, buffer: Buffer, total: int) -> list[float]:
        found = self.allocs.get(id(buffer.data))
        if found is None:
            return [0.0, 0.0, slog(1), slog(total)]
        alloc, outer = found
        numel = prod(d.value if isinstance(d, IntImm) else 1 for d in alloc.shape)
        size = numel * (alloc.dtype.bits * alloc.dtype.lanes // 8 or 1)
        return [slog(size), slog(numel * outer), slog(outer), slog(total / max(outer, 1))]
