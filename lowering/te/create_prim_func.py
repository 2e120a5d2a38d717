"""``te.create_prim_func``: the schedulable PrimFunc of a TE graph, as Apache TVM builds it.

One block per compute operation, named after it, inside the loops over its axes (spatial axes,
then reduce axes); block iterators ``v_<axis>`` bound by ``T.axis.remap``; ``T.reads``/``T.writes``
inferred as TVM's script completion infers them; reductions get ``T.init`` with the reducer's
identity. Argument tensors become buffer parameters, the other computed tensors ``T.alloc_buffer``
of the root block. The attributes are ``{"global_symbol": "main", "tir.noalias": True}``.
"""
from __future__ import annotations

from typing import Any

from ...ir.analysis import infer_block_regions, substitute
from ...ir.buffer import Buffer
from ...ir.dtype import handle
from ...ir.errors import TVMSError
from ...ir.expr import (COMM_REDUCE, DATA_PAR, GE, GT, LE, LT, Add, BufferLoad, IntImm, IterVar, Mul,
                        PrimExpr, Range, Sub, Var, const, is_const_int)
from ...ir.function import PrimFunc
from ...ir.node import FrozenDict
from ...ir.arith import simplify as _fold_affine
from ...ir.stmt import SERIAL, Block, BlockRealize, BufferStore, For, LetStmt, seq
from ...ir.visitor import Mutator
from .tensor import ComputeOp, MultiReduce, Reduce, Tensor


class _Simplify(Mutator):
    """The part of TVM's ``Analyzer.Simplify`` that TE bodies meet: ``a >= b`` becomes ``b <= a``,
    ``a > b`` becomes ``b < a``, and integer affine index forms fold (``yy * 1 + ry * 1``)."""

    def visit_Buffer(self, b: Buffer) -> Buffer:
        return b  # (a buffer's shape is the placeholder's: rebuilding it would make a new buffer)

    def visit(self, node: Any) -> Any:
        node = super().visit(node)
        if isinstance(node, GE):
            return LE(node.b, node.a)
        if isinstance(node, GT):
            return LT(node.b, node.a)
        if isinstance(node, (Add, Sub, Mul)) and node.dtype.is_integer:
            return _fold_affine(node)
        return node


def simplify(expr: PrimExpr) -> PrimExpr:
    return _Simplify().visit(expr)


def _post_dfs(args: list) -> list:
    """The tensors the arguments depend on, inputs before their readers (TVM's PostDFSOrder)."""
    order: list = []
    seen: set = set()

    def visit(t: Tensor) -> None:
        if id(t.op) in seen:
            return
        seen.add(id(t.op))
        for i in getattr(t.op, "inputs", ()):
            visit(i)
        order.append(t)

    for a in args:
        if isinstance(a, Tensor):
            visit(a)
    return order


def _fresh(name: str, used: set) -> str:
    fresh, i = name, 0
    while fresh in used:
        i += 1
        fresh = f"{name}_{i}"
    used.add(fresh)
    return fresh



def _buffers_of(value: Any) -> Any:
    """An attribute naming tensors (``layout_free_placeholders``) names their buffers."""
    if isinstance(value, Tensor):
        return value.buffer
    if isinstance(value, (list, tuple)):
        return tuple(_buffers_of(v) for v in value)
    return value

def _block(op: ComputeOp, outs: tuple, block_name: str, index_dtype: str = "int32") -> Any:
    var_map: dict = {}
    iter_vars, loop_vars = [], []
    for axis in op.axis + op.reduce_axis:
        v = Var("v_" + axis.var.name, axis.var.dtype)
        var_map[axis.var] = v
        dom = Range(simplify(axis.dom.min), simplify(axis.dom.extent))
        iter_vars.append(IterVar(dom, v, COMM_REDUCE if axis.iter_type == COMM_REDUCE else DATA_PAR))
        loop_vars.append(Var(axis.var.name, axis.var.dtype))
    indices = tuple(var_map[a.var] for a in op.axis)
    init, out = None, outs[0]
    if isinstance(op.body, MultiReduce):
        init, body = _multi_reduce(op.body, outs, indices, var_map)
    elif isinstance(op.body, Reduce):
        rhs = simplify(substitute(op.body.source, var_map))
        init = BufferStore(out, op.body.identity(), indices)
        body = BufferStore(out, op.body.combine(BufferLoad(out, indices), rhs), indices)
    else:
        body = BufferStore(out, simplify(substitute(op.body, var_map)), indices)
    axes = op.axis + op.reduce_axis
    if init is not None and any(is_const_int(simplify(a.dom.extent), 0) for a in op.reduce_axis):
        # a reduction over nothing is its identity (TVM keeps the reduction, whose init never
        # runs in a loop of no iterations, and leaves the output unwritten)
        body, init, axes = init, None, op.axis
        iter_vars, loop_vars = iter_vars[:len(axes)], loop_vars[:len(axes)]
    bindings = list(loop_vars)
    if not iter_vars:  # a scalar output: TVM gives the block one unit iterator
        iter_vars.append(IterVar(Range(const(0, index_dtype), const(1, index_dtype)),
                                 Var("vi", index_dtype), DATA_PAR))
        bindings.append(const(0, index_dtype))
    annotations = FrozenDict({k: _buffers_of(v) for k, v in op.attrs.items()})
    block = Block(tuple(iter_vars), (), (), (), (), block_name, init, body, annotations)
    reads, writes = infer_block_regions(block)
    stmt: Any = BlockRealize(tuple(bindings), const(True), block.with_changes(reads=reads, writes=writes))
    for axis, lv in reversed(list(zip(axes, loop_vars))):
        lo = axis.dom.min  # TVM's For gives a constant start the loop variable's type
        lo = IntImm(lv.dtype, lo.value) if isinstance(lo, IntImm) else lo
        stmt = For(lv, lo, simplify(axis.dom.extent), SERIAL, stmt)  # TVM simplifies extents too
    return stmt


def _multi_reduce(red: MultiReduce, outs: tuple, indices: tuple, var_map: dict) -> tuple:
    """The ``T.init`` and the update of a block reducing several values together, as TVM writes
    them: each combined value is first bound to ``v_<buffer>``, then all are stored."""
    rhs = tuple(simplify(substitute(s, var_map)) for s in red.sources)
    init = seq([BufferStore(b, ident, indices) for b, ident in zip(outs, red.identity)])
    combined = red.combine(tuple(BufferLoad(b, indices) for b in outs), rhs)
    lets = [Var("v_" + b.name, b.dtype) for b in outs]
    body: Any = seq([BufferStore(b, v, indices) for b, v in zip(outs, lets)])
    for v, value in reversed(list(zip(lets, combined))):
        body = LetStmt(v, value, body)
    return init, body


def create_prim_func(args: Any, index_dtype_override: str | None = None) -> PrimFunc:
    """The PrimFunc computing the tensors of ``args`` from the other tensors of ``args``.

    >>> A = te.placeholder((10,), name="A")
    >>> B = te.compute((10,), lambda i: A[i] + 1.0, name="B")
    >>> f = te.create_prim_func([A, B])     # def main(A: T.Buffer((10,), "float32"), B: ...)

    ``index_dtype_override="int64"`` (as Relax legalization asks) makes the unit iterator of a
    scalar block int64.
    """
    args = list(args) if isinstance(args, (list, tuple)) else [args]
    for a in args:
        if not isinstance(a, (Tensor, Var)):
            raise TVMSError(f"create_prim_func takes tensors (and scalar Vars), got {a!r}")
    arg_buffers = {id(a.buffer) for a in args if isinstance(a, Tensor)}
    allocs, stmts, used = [], [], set()
    for out in _post_dfs(args):
        outs = getattr(out.op, "buffers", ()) or (out.buffer,)
        allocs += [b for b in outs if id(b) not in arg_buffers]
        if isinstance(out.op, ComputeOp):
            stmts.append(_block(out.op, outs, _fresh(out.op.name, used), index_dtype_override or "int32"))
    root = Block((), tuple(allocs), (), (), (), "root", None, seq(stmts))
    params, buffer_map = [], {}
    for a in args:
        if isinstance(a, Var):
            params.append(a)
            continue
        p = Var("var_" + a.name, handle)
        params.append(p)
        buffer_map[p] = a.buffer
    attrs = FrozenDict({"global_symbol": "main", "tir.noalias": True})
    return PrimFunc(tuple(params), FrozenDict(buffer_map), BlockRealize((), const(True), root),
                    None, attrs, True)
