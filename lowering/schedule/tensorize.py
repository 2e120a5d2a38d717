"""tensorize: a block (or the subtree under a loop, blockized first) whose computation matches a
tensor intrinsic's description becomes the intrinsic's implementation.

A ``TensorIntrin`` is a pair of PrimFuncs over the same parameters: ``desc`` says what is computed
(a root block over its buffers, with the loops and blocks inside), ``impl`` how (usually a call of
an external kernel on ``T.match_buffer`` views declared with ``offset_factor``, reading their
``elem_offset``). The block's body is matched against the description, modulo buffers: each
description buffer stands for a region of a buffer of the function, whose minimums (the block's
read and write regions) are the base its accesses are relative to. The block then keeps its
iterators and regions, takes the implementation's body, and binds the implementation's buffers to
those regions with ``T.match_buffer`` (as TVM 0.27's Tensorize does).
"""
from __future__ import annotations

from typing import Any, Callable

from ...ir.arith import Analyzer
from ...ir.buffer import Buffer, BufferRegion, MatchBufferRegion
from ...ir.errors import TVMSError
from ...ir.expr import BinaryOp, BufferLoad, Cast, IntImm, PrimExpr, Range, Sub, Var, const
from ...ir.function import PrimFunc
from ...ir.node import Node, walk_fields
from ...ir.stmt import Block, BlockRealize, BufferStore, For, SeqStmt, Stmt
from ...ir.visitor import Mutator
from ...script import from_source
from .errors import ScheduleError
from .tree import find_block, replace_stmts


class TensorIntrin:
    """``TensorIntrin(desc, impl)``; ``TensorIntrin.register(name, desc, impl)`` names one for
    ``Schedule.tensorize`` and ``TensorIntrin.get(name)`` looks it up (TVM's registry).
    ``register_lazy(name, build)`` names one built on its first lookup (families of intrinsics
    written as TVMScript, whose parsing would slow the import down)."""

    _REGISTRY: dict[str, "TensorIntrin"] = {}
    _LAZY: dict[str, Callable[[], "TensorIntrin"]] = {}

    def __init__(self, desc: PrimFunc, impl: PrimFunc):
        for what, f in (("desc", desc), ("impl", impl)):
            if not (isinstance(f, PrimFunc) and isinstance(f.body, BlockRealize)):
                raise TVMSError(f"TensorIntrin: {what} must be a PrimFunc whose body is one block")
        if len(desc.params) != len(impl.params):
            raise TVMSError(f"TensorIntrin: desc takes {len(desc.params)} parameters, impl {len(impl.params)}")
        if not all(p in f.buffer_map for f in (desc, impl) for p in f.params):
            raise TVMSError("TensorIntrin: every parameter of desc and impl must be a buffer")
        self.desc, self.impl = desc, impl

    @staticmethod
    def register(name: str, desc: PrimFunc, impl: PrimFunc, override: bool = False) -> None:
        if (name in TensorIntrin._REGISTRY or name in TensorIntrin._LAZY) and not override:
            raise TVMSError(f"the tensor intrinsic {name!r} is already registered (pass override=True)")
        TensorIntrin._LAZY.pop(name, None)
        TensorIntrin._REGISTRY[name] = TensorIntrin(desc, impl)

    @staticmethod
    def register_lazy(name: str, build: Callable[[], "TensorIntrin"]) -> None:
        if name in TensorIntrin._REGISTRY or name in TensorIntrin._LAZY:
            raise TVMSError(f"the tensor intrinsic {name!r} is already registered")
        TensorIntrin._LAZY[name] = build

    @staticmethod
    def get(name: str, allow_missing: bool = False) -> "TensorIntrin | None":
        if name not in TensorIntrin._REGISTRY and name in TensorIntrin._LAZY:
            # (built first: one that fails stays lazy, and fails again with its own error)
            TensorIntrin._REGISTRY[name] = TensorIntrin._LAZY[name]()
            del TensorIntrin._LAZY[name]
        intrin = TensorIntrin._REGISTRY.get(name)
        if intrin is None and not allow_missing:
            raise TVMSError(f"no tensor intrinsic named {name!r} is registered (TensorIntrin.register; the CUDA "
                            f"WMMA ones, wmma_*, register when tvms.lowering.schedule.tensor_intrin_cuda is imported)")
        return intrin


def tensorize(func: PrimFunc, block_name: str, intrin: TensorIntrin) -> PrimFunc:
    realize, _ = find_block(func, block_name)
    match = _Match(realize.block.name_hint)
    match.scope(realize, intrin.desc.body)
    # A fresh copy of the implementation per use: its buffers and variables are defined anew in
    # each block it lands in. (Printing and parsing back is tvms' exact deep copy.)
    impl = from_source(intrin.impl.script())
    bits = max(r.min.dtype.bits for region in (*realize.block.reads, *realize.block.writes) for r in region.region)
    if bits != 32:  # (TVM's IndexDataTypeNormalizer: the implementation indexes as the block does)
        impl = _Widen(f"int{bits}").func(impl)
    impl_block = impl.body.block
    regions: dict[int, tuple] = {}
    for r in (*impl_block.reads, *impl_block.writes):
        regions.setdefault(id(r.buffer), r.region)
    match_buffers = []
    for d, p in zip(intrin.desc.params, impl.params):
        desc_buf, impl_buf = intrin.desc.buffer_map[d], impl.buffer_map[p]
        cur = match.buffers.get(id(desc_buf))
        if cur is None or id(impl_buf) not in regions:
            raise ScheduleError(f"tensorize: buffer '{impl_buf.name}' of the intrinsic is not accessed by "
                                f"its root block")
        old, base = regions[id(impl_buf)], match.base[id(cur)]
        lead = len(base) - len(old)
        region = [Range(m, const(1, m.dtype)) for m in base[:lead]]
        region += [Range(m, _as_dtype(r.extent, m.dtype)) for m, r in zip(base[lead:], old)]
        match_buffers.append(MatchBufferRegion(impl_buf, BufferRegion(cur, tuple(region))))
    annotations = dict(realize.block.annotations)
    for key, value in impl_block.annotations.items():
        annotations.setdefault(key, value)  # (the schedule's value wins, as in TVM)
    block = realize.block.with_changes(body=impl_block.body, match_buffers=tuple(match_buffers),
                                       annotations=annotations)
    return replace_stmts(func, {id(realize): realize.with_changes(block=block)})


def _as_dtype(e: PrimExpr, dtype: Any) -> PrimExpr:
    return const(e.value, dtype) if isinstance(e, IntImm) else e


class _Match:
    """TVM's TensorizeComparator: the function's side (``a``) against the description's (``b``).
    ``vars`` maps description variables to the function's, bound where they are defined (loops,
    block iterators); ``buffers`` each description buffer to the function's; ``base`` each of the
    function's buffers to the minimums of its region in the matched block."""

    def __init__(self, block_name: str):
        self.block_name = block_name
        self.vars: dict[Var, Var] = {}
        self.buffers: dict[int, Buffer] = {}
        self.base: dict[int, list] = {}
        self.analyzer = Analyzer()

    def fail(self, what: str) -> ScheduleError:
        return ScheduleError(f"tensorize: block '{self.block_name}' does not match the tensor intrinsic's "
                             f"description: {what}")

    def scope(self, a: BlockRealize, b: BlockRealize) -> None:
        self.expr(a.predicate, b.predicate)
        self.regions(a.block, b.block, scope=True)
        self.stmt(a.block.body, b.block.body)

    def stmt(self, a: Stmt, b: Stmt) -> None:
        if type(a) is not type(b):
            raise self.fail(f"{type(a).__name__} where it computes a {type(b).__name__}")
        if isinstance(a, For):
            self.define(a.loop_var, b.loop_var)
            self.expr(a.min, b.min)
            self.expr(a.extent, b.extent)
            if a.kind != b.kind or (a.thread_binding is None) != (b.thread_binding is None):
                raise self.fail(f"loop '{a.loop_var.name}' is {a.kind}, the description's {b.kind}")
            self.stmt(a.body, b.body)
        elif isinstance(a, SeqStmt):
            if len(a.seq) != len(b.seq):
                raise self.fail(f"{len(a.seq)} statements where it has {len(b.seq)}")
            for x, y in zip(a.seq, b.seq):
                self.stmt(x, y)
        elif isinstance(a, BlockRealize):
            if len(a.iter_values) != len(b.iter_values):
                raise self.fail(f"block '{a.block.name_hint}' has {len(a.iter_values)} iterators, "
                                f"the description's {len(b.iter_values)}")
            for x, y in zip(a.iter_values, b.iter_values):
                self.expr(x, y)
            self.expr(a.predicate, b.predicate)
            for x, y in zip(a.block.iter_vars, b.block.iter_vars):
                if x.iter_type != y.iter_type:
                    raise self.fail(f"iterator '{x.var.name}' of block '{a.block.name_hint}' is of another kind")
                self.define(x.var, y.var)
            if len(a.block.alloc_buffers) != len(b.block.alloc_buffers):
                raise self.fail(f"block '{a.block.name_hint}' allocates other buffers")
            for x, y in zip(a.block.alloc_buffers, b.block.alloc_buffers):
                self.buffer(x, y)
            self.regions(a.block, b.block, scope=False)
            self.stmt(a.block.body, b.block.body)
        elif isinstance(a, BufferStore):
            self.access(a, b)
            self.expr(a.value, b.value)
        else:
            self.fields(a, b)

    def define(self, a: Var, b: Var) -> None:
        # (index variables of other widths match, as in TVM: an int64 loop and an int32 one)
        if a.dtype.code != b.dtype.code:
            raise self.fail(f"'{a.name}' is {a.dtype}, the description's '{b.name}' {b.dtype}")
        self.vars[b] = a

    def expr(self, a: Any, b: Any) -> None:
        if isinstance(b, Var):
            mapped = self.vars.get(b)
            if mapped is None and isinstance(a, Var) and a.dtype.code == b.dtype.code:
                self.vars[b] = mapped = a
            if a is not mapped:
                raise self.fail(f"{_text(a)} where it has {_text(b)}")
        elif isinstance(b, IntImm) and isinstance(a, IntImm):
            if a.value != b.value or a.dtype.code != b.dtype.code:
                raise self.fail(f"{_text(a)} where it has {_text(b)}")
        elif isinstance(b, BufferLoad):
            if not isinstance(a, BufferLoad):
                raise self.fail(f"{_text(a)} where it loads {_text(b)}")
            self.access(a, b)
        elif isinstance(a, Node) or isinstance(b, Node):
            if type(a) is not type(b):
                raise self.fail(f"{_text(a)} where it has {_text(b)}")
            if isinstance(a, PrimExpr) and a.dtype.code != b.dtype.code:
                raise self.fail(f"{_text(a)} is {a.dtype}, the description's {_text(b)} {b.dtype}")
            self.fields(a, b)
        elif isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)) and len(a) == len(b):
            for x, y in zip(a, b):
                self.expr(x, y)
        elif a != b:
            raise self.fail(f"{a!r} where it has {b!r}")

    def fields(self, a: Node, b: Node) -> None:
        for name, _, structural in walk_fields(type(a)):
            if structural:
                self.expr(getattr(a, name), getattr(b, name))

    def buffer(self, a: Buffer, b: Buffer) -> None:
        mapped = self.buffers.get(id(b))
        if mapped is None:
            if a.dtype != b.dtype or a.scope != b.scope:
                raise self.fail(f"buffer '{a.name}' ({a.dtype}, {a.scope}) where it has '{b.name}' "
                                f"({b.dtype}, {b.scope})")
            if any(x is a for x in self.buffers.values()):
                raise self.fail(f"buffer '{a.name}' stands for two buffers of the description")
            self.buffers[id(b)] = mapped = a
        if mapped is not a:
            raise self.fail(f"buffer '{a.name}' where it has '{b.name}'")

    def equal(self, a: PrimExpr, b: PrimExpr) -> bool:
        """Index ``a`` of the function equals index ``b`` of the description, whose variables
        stand for the function's and whose constants take ``a``'s width."""
        diff = self.analyzer.canonical(Sub(a, _Indices(self.vars, a.dtype).visit(b)))
        return not diff.terms and diff.base == 0

    def regions(self, a: Block, b: Block, scope: bool) -> None:
        for kind in ("writes", "reads"):
            xs, ys = getattr(a, kind), getattr(b, kind)
            if len(xs) != len(ys):
                raise self.fail(f"block '{a.name_hint}' {kind} {len(xs)} regions, the description's {len(ys)}")
            for x, y in zip(xs, ys):
                self.region(x, y, scope)

    def region(self, a: BufferRegion, b: BufferRegion, scope: bool) -> None:
        self.buffer(a.buffer, b.buffer)
        lead = len(a.region) - len(b.region)
        if lead < 0:
            raise self.fail(f"buffer '{a.buffer.name}' has fewer dimensions than the description's")
        if any(not _is_one(r.extent) for r in a.region[:lead]):
            raise self.fail(f"the region of '{a.buffer.name}' is more than element-wise in its leading dimensions")
        base = self.base.get(id(a.buffer))
        if base is None:
            if not scope:
                raise self.fail(f"buffer '{a.buffer.name}' is not in the block's regions")
            self.base[id(a.buffer)] = base = [r.min for r in a.region]
            for r, s in zip(a.region[lead:], b.region):
                if not self.equal(r.extent, s.extent):
                    raise self.fail(f"the region of '{a.buffer.name}' has extent {_text(r.extent)}, the "
                                    f"description's {_text(s.extent)}")
            return
        for r, m in zip(a.region[:lead], base):
            if not self.equal(Sub(r.min, m), const(0, m.dtype)):
                raise self.fail(f"the region of '{a.buffer.name}' moves in a leading dimension")
        for r, s, m in zip(a.region[lead:], b.region, base[lead:]):
            if not (self.equal(r.extent, s.extent) and self.equal(Sub(r.min, m), s.min)):
                raise self.fail(f"the region of '{a.buffer.name}' is not the description's, relative to the block")

    def access(self, a: Any, b: Any) -> None:
        self.buffer(a.buffer, b.buffer)
        base = self.base.get(id(a.buffer))
        lead = len(a.indices) - len(b.indices)
        if base is None or lead < 0:
            raise self.fail(f"'{a.buffer.name}' is accessed outside the block's regions")
        for i, m, j in zip(a.indices[lead:], base[lead:], b.indices):
            if not self.equal(Sub(i, m), j):
                raise self.fail(f"{_text(a)} is not the description's {_text(b)} relative to the block")


class _Indices(Mutator):
    """A description's index expression in the function's terms: its variables mapped, its
    integer constants of the function's index width."""

    def __init__(self, variables: dict, dtype: Any):
        self.variables, self.dtype = variables, dtype

    def visit_Var(self, v: Var) -> Any:
        return self.variables.get(v, v)

    def visit_IntImm(self, e: IntImm) -> Any:
        return const(e.value, self.dtype) if e.dtype.code == self.dtype.code else e


class _Widen(Mutator):
    """An implementation's index arithmetic in another integer type: its buffers' shapes,
    strides and offsets, and the operations on them (the constants beside them converted)."""

    def __init__(self, dtype: str):
        self.dtype = dtype
        self.vars: dict[Var, Var] = {}
        self.buffers: dict[int, Buffer] = {}

    def func(self, f: PrimFunc) -> PrimFunc:
        for b in f.buffer_map.values():  # (first: the body refers to their variables)
            self.visit_Buffer(b)
        return self.visit(f)

    def index(self, e: Any) -> Any:
        if isinstance(e, IntImm):
            return const(e.value, self.dtype)
        if isinstance(e, Var) and e.dtype.is_integer:
            return self.vars.setdefault(e, Var(e.name, self.dtype))
        return e if e is None else self.visit(e)

    def visit_Buffer(self, b: Buffer) -> Buffer:
        new = self.buffers.get(id(b))
        if new is None:
            new = self.buffers[id(b)] = b.with_changes(
                shape=tuple(map(self.index, b.shape)), strides=tuple(map(self.index, b.strides)),
                elem_offset=self.index(b.elem_offset))
        return new

    def visit_Var(self, v: Var) -> Var:
        return self.vars.get(v, v)

    def visit_BinaryOp(self, e: BinaryOp) -> PrimExpr:
        a, b = self.visit(e.a), self.visit(e.b)
        if a is e.a and b is e.b:
            return e
        if a.dtype != b.dtype and a.dtype.is_integer and b.dtype.is_integer:
            wide = max(a.dtype, b.dtype, key=lambda t: t.bits)
            a, b = (x if x.dtype == wide else const(x.value, wide) if isinstance(x, IntImm) else Cast(wide, x)
                    for x in (a, b))
        return type(e)(a, b)


def _text(e: Any) -> str:
    return e.script() if isinstance(e, PrimExpr) else repr(e)


def _is_one(e: PrimExpr) -> bool:
    return isinstance(e, IntImm) and e.value == 1
