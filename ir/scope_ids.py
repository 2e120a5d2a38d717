"""Scope ids to thread launches: what TVM 0.27's LowerTIRx makes of a tirx kernel's ids.

A device region (``T.device_entry()``, the attribute ``tirx.device_entry``) declares which block,
warp or thread runs with ``bx = T.cta_id([4])``, ``tx = T.thread_id([128])``, ``w = T.warp_id([4])``
... (``ScopeIdDef``). Its launch is read from them: the grid from ``cta_id`` (x, y, z), the block
from ``thread_id``, or from ids whose extents multiply to it (``warp_id([4])`` and ``lane_id([32])``
make 128 threads). Each id is then a value of the thread indices, with ``tid`` the linear thread
index: ``warp_id = tid // 32``, ``lane_id = tid % 32``, ``warpgroup_id = tid // 128``,
``warp_id_in_wg = tid // 32 % 4``, ``thread_id_in_wg = tid % 128`` (TVM's formulas, whose 32, 4 and
128 do not depend on the declared extents; TVM broadcasts ``tid // 32`` from lane 0 with a warp
shuffle, the same value). The region becomes ``T.launch_thread``s over ``T.let`` bindings of the
ids, ready for the GPU pipeline and the reference executor. With ``warp_helper`` (the tirx
pipeline's LowerTIRx, as TVM's) the region first binds ``warp_id_in_cta`` to that shuffle,
``T.tvm_warp_shuffle(mask, tid // 32, 0, 32, 32)``, whenever it launches threads, and the warp
ids are made of it (``warp_id = warp_id_in_cta``, ``warpgroup_id = warp_id_in_cta // 4``,
``warp_id_in_wg = warp_id_in_cta % 4``), as TVM prints them.

TVM's checks are made: extents that contradict each other, one that another does not divide, a
thread count that is no multiple of 32 where warps are named, none at all. Cluster ids
(``cluster_id``, ``cta_id_in_cluster``, ``cta_id_in_pair``) are refused: tvms does not launch
clusters yet.
"""
from __future__ import annotations

from typing import Any

from . import arith
from .dtype import DataType, int32
from .errors import ScriptError, TVMSError
from .expr import (THREAD_INDEX, Add, Call, Cast, FloorDiv, FloorMod, IntImm, IterVar, Mul, PrimExpr, Range, Var,
                   const)
from .op import get_op
from .function import PrimFunc
from .stmt import AttrStmt, LetStmt, ScopeIdDef, Stmt
from .visitor import Mutator, collect

DEVICE_ENTRY = "tirx.device_entry"
CLUSTER_KINDS = ("cluster_id", "cta_id_in_cluster", "cta_id_in_pair")
WARP_KINDS = ("warpgroup_id", "warp_id", "warp_id_in_wg", "lane_id", "thread_id_in_wg")
# the fused extents that multiply: whole = part * part (TVM composes and divides the same ones)
PRODUCTS = (("thread_id", "warp_id", "lane_id"), ("warp_id", "warpgroup_id", "warp_id_in_wg"),
            ("thread_id", "warpgroup_id", "thread_id_in_wg"), ("thread_id_in_wg", "warp_id_in_wg", "lane_id"))


def has_scope_ids(func: PrimFunc) -> bool:
    return bool(collect(func.body, ScopeIdDef))


def resolve_scope_ids(func: PrimFunc, warp_helper: bool = False) -> PrimFunc:
    """``func`` with each device region's scope ids made its thread launches (see the module)."""
    if not has_scope_ids(func):
        return func
    body = _Regions(warp_helper).visit(func.body)
    stray = collect(body, ScopeIdDef)
    if stray:
        raise _error(stray[0], f"T.{stray[0].kind} outside a device region: write T.device_entry() before "
                               f"the ids of a kernel")
    return func.with_changes(body=body)


def _error(node: Any, message: str) -> TVMSError:
    return ScriptError(message, node.span) if getattr(node, "span", None) is not None else TVMSError(message)


class _Regions(Mutator):
    def __init__(self, warp_helper: bool) -> None:
        self.warp_helper = warp_helper

    def visit_AttrStmt(self, s: AttrStmt) -> Stmt:
        if s.attr_key != DEVICE_ENTRY:
            return self.generic_visit(s)
        return _launch(s, self.warp_helper)


class _Unwrap(Mutator):
    """The region's body without its ScopeIdDefs (TVM hoists them to the launch)."""

    def visit_ScopeIdDef(self, s: ScopeIdDef) -> Stmt:
        return self.visit(s.body)


def _launch(region: AttrStmt, warp_helper: bool = False) -> Stmt:
    defs = collect(region.body, ScopeIdDef)
    for d in defs:
        if d.kind in CLUSTER_KINDS:
            raise _error(d, f"T.{d.kind}: tvms does not launch thread-block clusters yet")
    extents = _extents(region, defs)
    threads = extents.get("thread_id")
    if threads is None:
        raise _error(region, "the kernel has no thread count: declare T.thread_id([n]), or ids whose "
                             "extents give it (T.warp_id([w]) with T.lane_id([32]))")
    if any(d.kind in WARP_KINDS for d in defs) and isinstance(threads, int) and threads % 32:
        raise _error(region, f"the kernel names warps but has {threads} threads, not a multiple of 32")
    grid = _shape(defs, "cta_id") or []  # (no cta_id: one block)
    block = _shape(defs, "thread_id") or [threads]
    launches, blocks, tids = [], [], []
    for dims, tag, out in ((grid, "blockIdx", blocks), (block, "threadIdx", tids)):
        for axis, extent in zip("xyz", dims):
            extent = _int_expr(extent)
            var = Var(f"{tag}_{axis}", extent.dtype)
            launches.append(IterVar(Range(const(0, extent.dtype), extent), var, THREAD_INDEX, f"{tag}.{axis}"))
            out.append(var)
    tid, stride = tids[0], 1
    for k in range(1, len(tids)):  # (threadIdx.x + threadIdx.y * Dx + threadIdx.z * Dx * Dy)
        stride = _times(stride, block[k - 1])
        tid = Add(tid, Mul(tids[k], _int_expr(stride)))
    warp: PrimExpr = FloorDiv(tid, const(32))
    helper = Var("warp_id_in_cta", int32) if warp_helper else None
    if helper is not None:
        shuffled = Call(int32, get_op("tir.tvm_warp_shuffle"),
                        (const(0xFFFFFFFF, DataType("uint32")), warp, const(0), const(32), const(32)))
        warp = helper
    values = {"cta_id": blocks, "thread_id": tids, "warp_id": [warp],
              "warpgroup_id": [FloorDiv(warp, const(4)) if helper is not None else FloorDiv(tid, const(128))],
              "warp_id_in_wg": [FloorMod(warp, const(4))],
              "lane_id": [FloorMod(tid, const(32))], "thread_id_in_wg": [FloorMod(tid, const(128))]}
    body = _Unwrap().visit(region.body)
    for d in reversed(defs):
        for var, value in reversed(list(zip(d.ids, values[d.kind]))):
            body = LetStmt(var, value if value.dtype == var.dtype else Cast(var.dtype, value), body)
    if helper is not None:
        body = LetStmt(helper, shuffled, body)
    for iv in reversed(launches):
        body = AttrStmt(iv, "thread_extent", iv.dom.extent, body, span=region.span)
    return body


def _int_expr(extent: Any) -> PrimExpr:
    return const(extent) if isinstance(extent, int) else extent


def _shape(defs: list, kind: str) -> list | None:
    """The extents of the first ``kind`` declared with them (a later one must agree in size)."""
    for d in defs:
        if d.kind == kind and d.extents is not None:
            if len(d.extents) > 3:
                raise _error(d, f"T.{kind} has at most 3 dimensions (x, y, z), got {len(d.extents)}")
            return [e.value if isinstance(e, IntImm) else e for e in d.extents]
    return None


def _extents(region: AttrStmt, defs: list) -> dict:
    """Each kind's fused extent (the product of its dimensions): as declared, or composed and
    divided out of the others (PRODUCTS); contradictions refused."""
    known: dict = {}
    shapes: dict = {}
    for d in defs:
        if d.extents is None:
            continue
        wide = next((e for e in d.extents if e.dtype != int32), None)
        if wide is not None:
            raise _error(d, f"the extents of T.{d.kind} are int32, as the thread indices it is made of; got "
                            f"{wide.dtype}")
        if d.kind in shapes and len(shapes[d.kind]) != len(d.extents):
            raise _error(d, f"T.{d.kind} is declared with {len(d.extents)} dimensions here and "
                            f"{len(shapes[d.kind])} before")
        shapes.setdefault(d.kind, d.extents)
        if d.kind in WARP_KINDS and len(d.extents) != 1:  # (made of the linear thread index)
            raise _error(d, f"T.{d.kind} has one dimension, got {len(d.extents)}")
        size = _product(d.extents)
        if d.kind in known and not _same(known[d.kind], size):
            raise _error(d, f"T.{d.kind} is declared with {size} here and {known[d.kind]} before")
        known[d.kind] = size
    changed = True
    while changed:
        changed = False
        for whole, a, b in PRODUCTS:
            have = [k in known for k in (whole, a, b)]
            if all(have):
                if all(isinstance(known[k], int) for k in (whole, a, b)) and known[whole] != known[a] * known[b]:
                    raise _error(region, f"inconsistent extents: {known[whole]} for {whole} is not "
                                         f"{known[a]} ({a}) x {known[b]} ({b})")
            elif have == [False, True, True]:
                known[whole] = _times(known[a], known[b])
                changed = True
            elif have[0] and have.count(True) == 2:
                part, other = (a, b) if have[1] else (b, a)
                if isinstance(known[whole], int) and isinstance(known[part], int):
                    if known[part] <= 0 or known[whole] % known[part]:
                        raise _error(region, f"the extents do not divide: {known[whole]} ({whole}) by "
                                             f"{known[part]} ({part})")
                    known[other] = known[whole] // known[part]
                    changed = True
    for d in defs:
        if d.extents is None and d.kind not in known:
            raise _error(d, f"cannot tell the extent of T.{d.kind}(): declare it, or ids that give it")
    return known


def _product(extents: tuple) -> Any:
    size: Any = 1
    for e in extents:
        size = _times(size, e.value if isinstance(e, IntImm) else e)
    return size


def _times(a: Any, b: Any) -> Any:
    """``a * b`` of two extents (Python ints, or int32 expressions), folded."""
    if isinstance(a, int) and isinstance(b, int):
        return a * b
    return arith.binary(Mul, _int_expr(a), _int_expr(b))


def _same(a: Any, b: Any) -> bool:
    from .structural import structural_equal

    return a == b if isinstance(a, int) and isinstance(b, int) else structural_equal(_int_expr(a), _int_expr(b))
