"""LowerWarpMemory: a ``"warp"``-scope buffer becomes per-lane registers read through shuffles.

As TVM 0.27 does it: a warp buffer allocated in a kernel whose ``threadIdx.x`` extent (the
width) divides the warp size is stored by each lane at ``index = coeff * threadIdx.x + ...``.
Each lane keeps its own elements in a ``"local"`` buffer (the size divided by the width), a
store writes the lane's local slot, and a load of another lane's element becomes
``T.tvm_warp_shuffle(T.tvm_warp_activemask(), local[slot], lane, width, warp_size)``.
"""
from __future__ import annotations

from ....ir.analysis import substitute
from ....ir.arith.analyzer import CANONICAL, Analyzer
from ....ir.buffer import Buffer, pointer_data
from ....ir.dtype import DataType
from ....ir.errors import TVMSError
from ....ir.expr import BufferLoad, Call, FloorDiv, FloorMod, IntImm, PointerType, PrimExpr, Ramp, Var, const
from ....ir.function import PrimFunc
from ....ir.op import get_op
from ....ir.stmt import AllocBuffer, AttrStmt, BufferStore, For, Stmt
from ....ir.structural import structural_equal
from ....ir.visitor import Mutator, walk
from ..tir_pass import define_tir_pass
from .threads import target_attr


def _ranges(body: Stmt) -> Analyzer:
    """An analyzer that knows the ranges of ``body``'s loops and thread indices."""
    analyzer = Analyzer(CANONICAL)
    for node in walk(body):
        if isinstance(node, For) and isinstance(node.min, IntImm) and isinstance(node.extent, IntImm):
            analyzer.bind(node.loop_var, node.min.value, node.extent.value)
        elif (isinstance(node, AttrStmt) and node.attr_key in ("thread_extent", "virtual_thread")
              and isinstance(node.value, IntImm)):
            analyzer.bind(node.node.var, 0, node.value.value)
    return analyzer


def _lane_index(body: Stmt, enclosing: list, warp_size: int) -> tuple[Var, int]:
    """``threadIdx.x`` launched around or inside the warp buffer's scope, and its extent (the
    width)."""
    found = None
    for node in [*enclosing, *walk(body)]:
        if isinstance(node, AttrStmt) and node.attr_key == "thread_extent" and node.node.thread_tag == "threadIdx.x":
            extent = node.value.value if isinstance(node.value, IntImm) else None
            if extent is None or extent > warp_size or warp_size % extent:
                raise TVMSError(f"LowerWarpMemory: threadIdx.x's extent must divide the warp size "
                                f"({warp_size}) to use warp memory, not {node.value}")
            if found is not None and found[0] is not node.node.var:
                raise TVMSError("LowerWarpMemory: two threadIdx.x launches in one kernel")
            found = (node.node.var, extent)
    if found is None:
        raise TVMSError("LowerWarpMemory: no threadIdx.x launched within the scope of warp memory")
    return found


# the PTX tensor intrinsics' fragment arguments (pointer positions; the offset follows each)
_FRAGMENT_POINTERS = {"tir.ptx_legacy.mma": (6, 8, 10), "tir.ptx_legacy.ldmatrix": (3,),
                      "tir.mma_store_legacy": (3,), "tir.mma_fill_legacy": (1,)}
_FRAGMENT_WRITES = {"tir.ptx_legacy.ldmatrix": 3, "tir.mma_fill_legacy": 1}  # (what fills a fragment)


def _agreed(coeff: int, step: int) -> int:
    if coeff and coeff != step:
        raise TVMSError("LowerWarpMemory: two stores with different coefficients of threadIdx.x")
    return step


def _base(index: PrimExpr, lanes: int) -> PrimExpr:
    if lanes == 1:
        return index
    if not (isinstance(index, Ramp) and isinstance(index.stride, IntImm) and index.stride.value == 1):
        raise TVMSError(f"LowerWarpMemory: a vector access to warp memory must be contiguous, not {index}")
    return index.base


class _WarpAccess(Mutator):
    def __init__(self, buffer: Buffer, body: Stmt, enclosing: list, warp_size: int, analyzer: Analyzer) -> None:
        self.buffer = buffer
        self.warp_size = warp_size
        self.analyzer = analyzer
        self.lane, self.width = _lane_index(body, enclosing, warp_size)
        self.coeff = self._store_coefficient(body)
        size = 1
        for dim in buffer.shape:
            if not isinstance(dim, IntImm):
                raise TVMSError("LowerWarpMemory: warp memory must have a constant size")
            size *= dim.value
        size *= buffer.dtype.lanes
        factor = self.width * self.coeff
        self.groups = -(-size // factor)
        data = Var(buffer.data.name, buffer.data.dtype, PointerType(buffer.dtype, "local"))
        self.local = buffer.with_changes(data=data, shape=(const(self.groups * factor // self.width, "int32"),),
                                         strides=(), elem_offset=None)

    def _store_coefficient(self, body: Stmt) -> int:
        coeff = 0
        for node in walk(body):
            if isinstance(node, Call) and getattr(node.op, "name", None) in _FRAGMENT_WRITES:
                at = _FRAGMENT_WRITES[node.op.name]
                if pointer_data(node.args[at]) is not self.buffer.data:
                    continue
                if node.op.name == "tir.mma_fill_legacy":  # (each lane fills local_size elements)
                    if not isinstance(node.args[0], IntImm):
                        raise TVMSError(f"LowerWarpMemory: T.cuda.mma_fill_legacy's size (the elements each "
                                        f"lane fills) must be a constant integer, not {node.args[0].script()}")
                    coeff = _agreed(coeff, node.args[0].value)
                else:
                    coeff = _agreed(coeff, self._lane_step(node.args[at + 1]))
            elif isinstance(node, BufferStore) and node.buffer.data is self.buffer.data:
                if len(node.indices) != 1:
                    raise TVMSError("LowerWarpMemory: expects flattened warp memory (run FlattenBuffer first)")
                coeff = _agreed(coeff, self._lane_step(_base(node.indices[0], node.value.dtype.lanes)))
        if not coeff:
            raise TVMSError(f"LowerWarpMemory: warp buffer {self.buffer.name!r} is never stored")
        return coeff

    def _lane_step(self, index: PrimExpr) -> int:
        """The coefficient of threadIdx.x in a store's index (a positive constant)."""
        at = [self.analyzer.simplify(substitute(index, {self.lane: const(v, self.lane.dtype)})) for v in (0, 1, 2)]
        step = self.analyzer.simplify(at[1] - at[0])
        if (not isinstance(step, IntImm) or step.value <= 0
                or not structural_equal(self.analyzer.simplify(at[2] - at[1]), step)):
            raise TVMSError(f"LowerWarpMemory: the store index {index} must be a positive "
                            f"multiple of threadIdx.x plus terms without it")
        return step.value

    def split(self, index: PrimExpr) -> tuple[PrimExpr, PrimExpr]:
        """(the slot in the lane's local buffer, the lane holding the element)."""
        if index.dtype.lanes != 1:
            slot, lane = self.split(_base(index, index.dtype.lanes))
            return Ramp(slot, const(1, slot.dtype), index.dtype.lanes), lane
        m = const(self.coeff, index.dtype)
        slot = self.analyzer.simplify(FloorMod(index, m))
        if self.groups == 1:
            return slot, self.analyzer.simplify(FloorDiv(index, m))
        row = const(self.coeff * self.width, index.dtype)
        return (self.analyzer.simplify(FloorDiv(index, row) * m + slot),
                self.analyzer.simplify(FloorDiv(FloorMod(index, row), m)))

    def visit_Call(self, call: Call) -> PrimExpr:
        call = self.generic_visit(call)
        name = getattr(call.op, "name", None)
        args = list(call.args)
        for at in _FRAGMENT_POINTERS.get(name, ()):  # (a PTX intrinsic's fragment pointer and offset)
            if pointer_data(args[at]) is self.buffer.data:
                args[at], args[at + 1] = self.local.data, self.split(args[at + 1])[0]
        return call if args == list(call.args) else call.with_changes(args=tuple(args))

    def visit_BufferStore(self, store: BufferStore) -> Stmt:
        store = self.generic_visit(store)
        if store.buffer.data is not self.buffer.data:
            return store
        return store.with_changes(buffer=self.local, indices=(self.split(store.indices[0])[0],))

    def visit_BufferLoad(self, load: BufferLoad) -> PrimExpr:
        load = self.generic_visit(load)
        if load.buffer.data is not self.buffer.data:
            return load
        slot, lane = self.split(load.indices[0])
        if any(node is self.lane for node in walk(slot)):
            raise TVMSError(f"LowerWarpMemory: cannot read warp memory at {load.indices[0]} with a shuffle")
        local = load.with_changes(buffer=self.local, indices=(slot,))
        if structural_equal(lane, self.lane):
            return local
        mask = Call(DataType("uint32"), get_op("tir.tvm_warp_activemask"), ())
        return Call(load.dtype, get_op("tir.tvm_warp_shuffle"),
                    (mask, local, lane, const(self.width, "int32"), const(self.warp_size, "int32")))


class _WarpMemory(Mutator):
    def __init__(self, warp_size: int, analyzer: Analyzer) -> None:
        self.warp_size = warp_size
        self.analyzer = analyzer
        self.launches: list = []  # the thread launches around what is visited

    def visit_AttrStmt(self, attr: AttrStmt) -> Stmt:
        self.launches.append(attr)
        result = self.generic_visit(attr)
        self.launches.pop()
        return result

    def visit_AllocBuffer(self, alloc: AllocBuffer) -> Stmt:
        if alloc.buffer.scope != "warp":
            return self.generic_visit(alloc)
        rewriter = _WarpAccess(alloc.buffer, alloc.body, self.launches, self.warp_size, self.analyzer)
        # (TVM 0.27 rewrites the first warp buffer of a sequence and hands the rest of it to that
        # rewrite alone: a warp buffer allocated in another's scope stays as it is, each thread's own
        # array in CUDA, which the PTX fragments' index arithmetic keeps correct)
        return AllocBuffer(rewriter.local, rewriter.visit(alloc.body), alloc.annotations)


def lower_warp_memory(func: PrimFunc) -> PrimFunc:
    """``func`` with its warp buffers lowered to registers and shuffles."""
    warp_size = target_attr(func.attrs.get("target"), "thread_warp_size", 1)
    if warp_size == 1:
        return func
    body = _WarpMemory(warp_size, _ranges(func.body)).visit(func.body)
    return func if body is func.body else func.with_changes(body=body)


LowerWarpMemory = define_tir_pass("LowerWarpMemory", lower_warp_memory)

__all__ = ["LowerWarpMemory", "lower_warp_memory"]
