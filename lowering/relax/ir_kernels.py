"""TensorIR kernels written as topi writes them with its IR builder (``te.extern``), rather than
as TE computations: the generic scan (cumsum / cumprod), the binary search of ``searchsorted`` and
the generic ``get_sample_index`` of multinomial sampling.

Each is one opaque block named after the kernel around a parallel loop, indexing its buffers by
flat positions spelled as the IR builder spells them (``v // 4 * 3 * 4 + v % 4``); the buffers
te.extern declares carry an element offset of their own (printed by TVM as module TypeVars), so
that the PrimFuncs print as TVM 0.27's.
"""
from __future__ import annotations

from typing import Any

from ...ir import arith
from ...ir import relax as rx
from ...ir.arith import bitwise_binary
from ...ir.buffer import BufferRegion, decl_buffer
from ...ir.dtype import DataType, handle
from ...ir.expr import (DATA_PAR, EQ, GE, LE, LT, Add, BufferLoad, Call, Cast, FloorDiv, FloorMod, IntImm, IterVar,
                        Mul, Or, PrimExpr, Range, Sub, Var, const)
from ...ir.function import PrimFunc
from ...ir.node import FrozenDict
from ...ir.relax_op import make_call
from ...ir.stmt import (PARALLEL, SERIAL, AllocBuffer, Block, BlockRealize, BufferStore, For, IfThenElse,
                        While, seq)
from ...ir.struct_info import TensorStructInfo

_I64 = DataType("int64")


def _times(a: Any, b: Any) -> Any:
    """``a * b`` where a Python 1 (topi's starting product) folds away."""
    if isinstance(a, int) and a == 1:
        return b
    if isinstance(b, int) and b == 1:
        return a
    return arith.binary(Mul, a, b)


def product(dims: Any) -> Any:
    out: Any = 1
    for d in dims:
        out = _times(out, d)
    return out


def _unravel(flat: PrimExpr, shape: tuple) -> tuple:
    """The indices of flat position ``flat`` in a buffer of ``shape`` (the IR builder's form:
    the innermost index ``flat % d``, the outermost the remaining quotient)."""
    indices = []
    for i, d in enumerate(reversed(shape)):
        if i == len(shape) - 1:
            indices.append(flat)
        else:
            indices.append(arith.binary(FloorMod, flat, d))
            flat = arith.binary(FloorDiv, flat, d)
    return tuple(reversed(indices))


def scan_kernel(data: Any, out_shape: tuple, out_dtype: DataType, axis: int | None, exclusive: bool,
                 combine: type, identity: int, name: str) -> PrimFunc:
    """topi's ``scanop`` kernel for ``data`` (a buffer) into a new buffer ``out_buf``."""
    shape = tuple(data.shape)
    if axis is None:  # over the flattened input
        length, before, after = product(shape), 1, 1
    else:
        length, before, after = shape[axis], product(shape[:axis]), product(shape[axis + 1:])
    out = decl_buffer(out_shape, out_dtype, "out_buf")

    def load(buf: Any, flat: PrimExpr) -> BufferLoad:
        return BufferLoad(buf, _unravel(flat, tuple(buf.shape)))

    def store(flat: PrimExpr, value: PrimExpr) -> BufferStore:
        return BufferStore(out, value, _unravel(flat, out_shape))

    def cast(value: PrimExpr) -> PrimExpr:
        return value if value.dtype == out_dtype else arith.cast(out_dtype, value)

    fused, k0 = Var("v", _I64), Var("v", _I64)
    i = fused if isinstance(after, int) else arith.binary(FloorDiv, fused, after)
    j = None if isinstance(after, int) else arith.binary(FloorMod, fused, after)
    base = _times(_times(i, length), after)
    base = base if j is None else arith.binary(Add, base, j)
    k = arith.binary(Add, k0, IntImm(_I64, 1))
    cur = arith.binary(Add, base, _times(k, after))
    prev = arith.binary(Add, base, _times(Sub(k, IntImm(_I64, 1)), after))  # (k - 1 left unfolded, as topi's)
    first = const(identity, str(out_dtype)) if exclusive else cast(load(data, base))
    step = combine(load(out, prev), cast(load(data, prev if exclusive else cur)))
    extent = arith.binary(Sub, length, IntImm(_I64, 1))
    body = For(fused, IntImm(_I64, 0), _as_i64(_times(before, after)), PARALLEL,
               seq([store(base, first), For(k0, IntImm(_I64, 0), extent, SERIAL, store(cur, step))]))
    return _extern_func(f"{name}_generic", body, (data, out))


def _extern_func(name: str, body: Any, buffers: tuple) -> PrimFunc:
    """The PrimFunc of an extern kernel: its body in one opaque block, a handle per buffer."""
    params = tuple(Var("var_" + b.name, handle) for b in buffers)
    block = Block((), name_hint=name, body=body)
    return PrimFunc(params, FrozenDict(zip(params, buffers)), BlockRealize((), const(True), block), None,
                    FrozenDict({"tir.noalias": True}), True)


def _as_i64(extent: Any) -> PrimExpr:
    return IntImm(_I64, extent) if isinstance(extent, int) else extent




def _index64(e: PrimExpr) -> PrimExpr:
    """An int32 expression used as an index, as TVM's int64 index normalization rewrites it: sums
    taken apart, a call's operands and any other term cast whole."""
    if e.dtype == _I64:
        return e
    if isinstance(e, IntImm):
        return IntImm(_I64, e.value)
    if isinstance(e, Add):
        return Add(_index64(e.a), _index64(e.b))
    if isinstance(e, Call):
        return Call(_I64, e.op, tuple(_index64(a) if isinstance(a, IntImm) else Cast(_I64, a) for a in e.args))
    return Cast(_I64, e)


def searchsorted_kernel(sorted_seq: Any, values: Any, out: Any, right: bool) -> PrimFunc:
    """topi's ``searchsorted``: for each value, a binary search of the innermost sequence of
    ``sorted_seq`` (the first index where the value fits: before equal elements, or after them
    when ``right``) stored in ``out``."""
    dtype = out.dtype
    length = sorted_seq.shape[-1]
    i = Var("v", _I64)
    if len(sorted_seq.shape) == 1:
        offset = None
    else:
        offset = arith.binary(Mul, arith.binary(FloorDiv, i, values.shape[-1]), length)
    one = (IntImm(_I64, 1),)
    low = decl_buffer(one, dtype, "buffer", scope="local")
    high = decl_buffer(one, dtype, "buffer_1", scope="local")
    zero = (IntImm(_I64, 0),)
    lo, hi = BufferLoad(low, zero), BufferLoad(high, zero)
    mid = arith.binary(Add, lo, bitwise_binary(">>", Sub(hi, lo), 1))
    at = _index64(mid) if offset is None else arith.binary(Add, offset, _index64(mid))
    probe = BufferLoad(sorted_seq, _unravel(at, tuple(sorted_seq.shape)))
    fits = (LE if right else LT)(probe, BufferLoad(values, _unravel(i, tuple(values.shape))))
    search = seq([
        BufferStore(low, const(0, str(dtype)), zero),
        BufferStore(high, arith.cast(dtype, length) if not isinstance(length, IntImm) else const(length.value, str(dtype)),
                    zero),
        While(LT(lo, hi), IfThenElse(fits, BufferStore(low, arith.binary(Add, mid, const(1, str(dtype))), zero),
                                     BufferStore(high, mid, zero))),
        BufferStore(out, lo, _unravel(i, tuple(out.shape))),
    ])
    body = For(i, IntImm(_I64, 0), _as_i64(product(tuple(values.shape))), PARALLEL,
               AllocBuffer(low, AllocBuffer(high, search)))
    return _extern_func("searchsorted", body, (sorted_seq, values, out))


def extern_buffers(args: list, out_shape: tuple, out_dtype: Any, out_name: str) -> list:
    """The buffers te.extern declares for tensor arguments ``(name, struct info)`` and its output:
    each with an element offset of its own, named as TVM prints them (the output's first)."""
    names = ["elem_offset"] + [f"elem_offset_{k}" for k in range(1, len(args) + 1)]
    out = decl_buffer(out_shape, out_dtype, out_name, elem_offset=Var(names[0], _I64))
    ins = [decl_buffer(s.dims, s.dtype, n, elem_offset=Var(names[len(args) - k], _I64))
           for k, (n, s) in enumerate(args)]
    return ins + [out]


def call_kernel(bb: Any, func: PrimFunc, name: str, inputs: list, out: Any) -> Any:
    """Add the kernel to the module (with its own copy of each symbolic size, as call_te makes
    it) and return the ``R.call_tir`` of it on ``inputs``, giving ``out``."""
    from .legalize import _OwnSizes, _size_vars  # (legalize imports the legalizations that use this module)

    func = _OwnSizes(list(_size_vars(list(func.buffer_map.values())).values())).visit(func)
    gv = bb.add_func(func, name)
    out_sinfo = TensorStructInfo(rx.ShapeExpr(tuple(out.shape)), out.dtype)
    return make_call("call_tir", [gv, rx.Tuple(tuple(inputs))], {}, (out_sinfo,))


def sample_index_kernel(prob_dtype: Any, sample_dtype: Any, index_dtype: Any, out_dtype: Any) -> PrimFunc:
    """TVM's generic ``get_sample_index``: for each row ``i``, the first column ``j`` of the
    cumulative probabilities ``prob[sample_indices[i, 0]]`` above ``usample[i, 0]`` (the last
    column when none is): the sample of a multinomial distribution."""
    batch, vocab, out_batch = (Var(n, _I64) for n in ("batch", "vocab_size", "out_batch"))
    one32 = IntImm(DataType("int32"), 1)
    prob = decl_buffer((batch, vocab), prob_dtype, "prob")
    usample = decl_buffer((out_batch, one32), sample_dtype, "usample")
    indices = decl_buffer((out_batch, one32), index_dtype, "sample_indices")
    out = decl_buffer((out_batch, one32), out_dtype, "output_index")
    ax0, ax1 = Var("ax0", _I64), Var("ax1", _I64)
    i, j = Var("v_ax0", _I64), Var("v_ax1", _I64)
    zero, one = IntImm(_I64, 0), IntImm(_I64, 1)
    u = BufferLoad(usample, (i, zero))
    row = BufferLoad(indices, (i, zero))
    found = Or(LT(u, BufferLoad(prob, (row, j))), EQ(Add(j, one), vocab))
    store_at = (i, IntImm(DataType("int32"), 0))  # (the kernel's source writes a plain 0 here)

    def write(value: PrimExpr) -> BufferStore:
        return BufferStore(out, value, store_at)

    previous = Sub(j, one)
    body = IfThenElse(found, IfThenElse(EQ(j, zero), write(const(0, str(out_dtype))),
                                        IfThenElse(GE(u, BufferLoad(prob, (row, previous))),
                                                   write(arith.cast(out_dtype, j)))))

    def point(buf: Any, *starts: PrimExpr) -> BufferRegion:
        return BufferRegion(buf, tuple(Range(s, IntImm(s.dtype if s.dtype.is_int else _I64, 1)) for s in starts))

    reads = (point(usample, i, zero),
             BufferRegion(prob, (Range(row, one), Range(previous, IntImm(_I64, 2)))),
             point(indices, i, zero))
    writes = (BufferRegion(out, (Range(i, one), Range(IntImm(DataType("int32"), 0), one32))),)
    iters = (IterVar(Range(zero, out_batch), i, DATA_PAR), IterVar(Range(zero, vocab), j, DATA_PAR))
    block = Block(iters, (), (), reads, writes, "T_get_sample_index", None, body)
    loops = For(ax0, zero, out_batch, SERIAL,
                For(ax1, zero, vocab, SERIAL, BlockRealize((ax0, ax1), const(True), block)))
    root = Block((), name_hint="root", body=loops)
    buffers = (prob, usample, indices, out)
    params = tuple(Var("var_" + b.name, handle) for b in buffers)
    return PrimFunc(params, FrozenDict(zip(params, buffers)), BlockRealize((), const(True), root), None,
                    FrozenDict(), True)
