"""Blocks: ``T.block`` (classic) / ``T.sblock`` (TVM 0.27) with their header: ``T.axis.spatial``
/ ``reduce`` / ``scan`` / ``opaque`` and ``T.axis.remap``, ``T.where``, ``T.reads``/``T.writes``,
``T.block_attr``/``T.sblock_attr``, ``T.init``; and the implicit root block that TVM elides when
printing. (The buffers a block allocates or matches are in buffers.py.)"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from ...ir import arith
from ...ir.analysis import infer_block_regions
from ...ir.dtype import DataType
from ...ir.expr import (COMM_REDUCE, DATA_PAR, OPAQUE, ORDERED, Add, IntImm, IterVar, PrimExpr,
                        Range, Var, const)
from ...ir.node import EMPTY
from ...ir.stmt import Block, BlockRealize, Stmt
from ...ir.visitor import walk
from .. import syntax as S
from .. import comments  # (a module: it is still loading when the printer side loads)
from .evaluator import _describe, arith_extent
from .attrs import norm_attrs
from .rules import Header, call_args, parses, prints
from .text import display_add, is_zero, quote

_AXIS_KINDS = {"spatial": DATA_PAR, "reduce": COMM_REDUCE, "scan": ORDERED, "opaque": OPAQUE}
_REMAP_KINDS = {"S": DATA_PAR, "R": COMM_REDUCE}
_AXIS_NAMES = {kind: name for name, kind in _AXIS_KINDS.items()}


@dataclass
class BlockFrame:
    name: str
    iter_vars: list = field(default_factory=list)
    iter_values: list = field(default_factory=list)
    predicate: PrimExpr | None = None
    reads: list | None = None
    writes: list | None = None
    annotations: dict = field(default_factory=dict)
    alloc_buffers: list = field(default_factory=list)
    match_buffers: list = field(default_factory=list)
    init: Stmt | None = None
    header_done: bool = False


class BlockParsing:
    """Reading blocks (mixed into the TIRBuilder)."""

    @parses("with", "block", "sblock")
    def with_block(self, syn: S.With, call: S.Call) -> Stmt:
        args = [self.ev(a) for a in call.args]
        kwargs = {k: self.ev(v) for k, v in call.kwargs}
        name = args[0] if args else kwargs.get("name_hint", "")
        if not isinstance(name, str):
            raise self.error(call, "a block's name is a string")
        frame = BlockFrame(name)
        self.blocks.append(frame)
        try:
            body = self.scoped(lambda: self.body(syn.body, syn))
        finally:
            self.blocks.pop()
        block = Block(tuple(frame.iter_vars), tuple(frame.alloc_buffers), tuple(frame.match_buffers),
                      tuple(frame.reads or ()), tuple(frame.writes or ()), name, frame.init, body,
                      norm_attrs(frame.annotations, self.dialect) if frame.annotations else EMPTY, span=self.span(call))
        if frame.reads is None or frame.writes is None:
            reads, writes = infer_block_regions(block)
            block = block.with_changes(reads=reads if frame.reads is None else block.reads,
                                       writes=writes if frame.writes is None else block.writes)
        if kwargs.get("no_realize"):
            return block
        predicate = frame.predicate if frame.predicate is not None else const(True)
        return BlockRealize(tuple(frame.iter_values), predicate, block, span=self.span(call))

    def current_block(self, syn: Any, what: str) -> BlockFrame:
        if not self.blocks:
            raise self.error(syn, f"{what} is only allowed inside a block")
        return self.blocks[-1]

    @parses("with", "init")
    def with_init(self, syn: S.With, call: S.Call) -> Any:
        frame = self.current_block(call, "T.init()")
        comments.carry(self.source, syn, syn.body[0])  # comments before `with T.init():` go inside
        frame.init = self.scoped(lambda: self.body(syn.body))
        return Header()


@parses("call", "where")
def _where(b: Any, call: S.Call, rest: list) -> Any:
    frame = b.current_block(call, "T.where")
    frame.predicate = b.ev_expr(call.args[0])
    return Header()


def _regions(kind: str) -> Callable:
    def build(b: Any, call: S.Call, rest: list) -> Any:
        frame = b.current_block(call, f"T.{kind}")
        values = [b.ev(a) for a in call.args]
        if len(values) == 1 and isinstance(values[0], (list, tuple)):
            values = list(values[0])
        regions = [b.to_region(v, a) for v, a in zip(values, call.args if len(call.args) == len(values) else [call] * len(values))]
        setattr(frame, kind, regions)
        return Header()
    return build


@parses("call", "block_attr", "sblock_attr")
def _block_attr(b: Any, call: S.Call, rest: list) -> Any:
    frame = b.current_block(call, "T.block_attr")
    args, _ = call_args(b, call)
    if len(args) != 1 or not isinstance(args[0], dict):
        raise b.error(call, "T.block_attr takes one dict")
    frame.annotations.update(args[0])
    return Header()


def _new_axis(b: Any, name: str, kind: str, dom: Any, binding: Any, call: S.Call,
              dtype: Any = None) -> None:
    frame = b.current_block(call, "T.axis")
    if frame.header_done:
        raise b.error(call, "block iterators must be declared at the top of the block")
    if isinstance(dom, (tuple, list)) and len(dom) == 2:
        lo, hi = arith.match_types(b.int_expr(dom[0], call), b.int_expr(dom[1], call))
        rng = Range(lo, arith_extent(lo, hi))
    else:
        extent = b.int_expr(dom, call)
        rng = Range(const(0, extent.dtype), extent)
    value = b.int_expr(binding, call)
    # TVM's rule: the iterator has the widest of the domain's types and ``dtype`` (int32 unless
    # given); its binding keeps its own type (T.axis.spatial(1, T.int64(0)) binds an int32 to an
    # int64: ConvertBlocksToOpaque casts it where it substitutes it)
    declared = b.dtype_of(dtype, call) if dtype is not None else DataType("int32")
    bits = max(rng.min.dtype.bits, rng.extent.dtype.bits, declared.bits)
    var = Var(name, DataType(f"{declared.code}{bits}"))
    frame.iter_vars.append(IterVar(rng, var, kind, span=b.span(call)))
    frame.iter_values.append(value)
    b.define(name, var)


def _axis(kind: str) -> Callable:
    def build(b: Any, target: Any, call: S.Call, rest: list) -> Any:
        args, kwargs = call_args(b, call)
        if len(args) < 2 and "binding" not in kwargs:
            raise b.error(call, f"T.axis.{kind} takes a domain and a binding: T.axis.{kind}(128, i)")
        binding = args[1] if len(args) > 1 else kwargs["binding"]
        _new_axis(b, b.target_name(target), _AXIS_KINDS[kind], args[0], binding, call, kwargs.get("dtype"))
        return Header()
    return build


@parses("assign", "axis.remap")
def _axis_remap(b: Any, target: Any, call: S.Call, rest: list) -> Any:
    args, _ = call_args(b, call)
    if len(args) != 2 or not isinstance(args[0], str) or not isinstance(args[1], (list, tuple)):
        raise b.error(call, "T.axis.remap takes a kinds string and a list of loop variables: "
                      "T.axis.remap(\"SSR\", [i, j, k])")
    kinds, loops = args
    targets = target.elts if isinstance(target, S.TupleExpr) else [target]
    if not (len(kinds) == len(loops) == len(targets)):
        raise b.error(call, f"T.axis.remap: {len(kinds)} kinds, {len(loops)} loop variables and "
                      f"{len(targets)} names must match")
    for kind, loop, t in zip(kinds, loops, targets):
        if kind not in _REMAP_KINDS:
            raise b.error(call, f"T.axis.remap: unknown iterator kind {kind!r}; use 'S' (spatial) or 'R' (reduce)")
        if not isinstance(loop, Var) or loop not in b.loop_doms:
            raise b.error(call, f"T.axis.remap binds loop variables, got {_describe(loop)}")
        lo, extent = b.loop_doms[loop]
        dom = extent if isinstance(lo, IntImm) and lo.value == 0 else (lo, arith.binary(Add, lo, extent))
        _new_axis(b, b.target_name(t), _REMAP_KINDS[kind], dom, loop, call)
    return Header()


for _kind in _AXIS_KINDS:
    parses("assign", f"axis.{_kind}")(_axis(_kind))
parses("call", "reads")(_regions("reads"))
parses("call", "writes")(_regions("writes"))


class BlockPrinting:
    """Printing blocks (mixed into the TIRPrinter)."""

    @prints(BlockRealize)
    def st_block_realize(self, s: BlockRealize, concise: bool, top: bool) -> None:
        self.block(s.block, s)

    @prints(Block)
    def st_block(self, s: Block, concise: bool, top: bool) -> None:
        self.block(s, None)

    def block(self, b: Block, realize: BlockRealize | None) -> None:
        extra = "" if realize is not None else ", no_realize=True"
        self.emit(f"with T.{self.d.block}({quote(b.name_hint)}{extra}):")
        self.indent += 1
        self.namer.push()
        remap: list[int] = []

        def flush() -> None:
            if len(remap) == 1:
                single(remap[0])
            elif remap:
                kinds = "".join("S" if b.iter_vars[i].iter_type == DATA_PAR else "R" for i in remap)
                values = ", ".join(self.expr(realize.iter_values[i]) for i in remap)
                names = ", ".join(self.namer.define(b.iter_vars[i].var, b.iter_vars[i].var.name) for i in remap)
                self.emit(f"{names} = T.axis.remap({quote(kinds)}, [{values}])")
            remap.clear()

        def single(i: int) -> None:
            iv = b.iter_vars[i]
            dom = iv.dom
            if is_zero(dom.min):
                dom_text = self.expr(dom.extent)
            else:
                dom_text = f"({self.expr(dom.min)}, {self.expr(display_add(dom.min, dom.extent))})"
            args = [dom_text]
            if realize is not None:
                args.append(self.expr(realize.iter_values[i]))
            kind = _AXIS_NAMES[iv.iter_type]
            self.emit(f"{self.namer.define(iv.var, iv.var.name)} = T.axis.{kind}({', '.join(args)})")

        def lines() -> None:  # (each line a statement of the block's frame)
            line = self.top_level
            for i, iv in enumerate(b.iter_vars):
                if realize is not None and self.remappable(iv, realize.iter_values[i]):
                    remap.append(i)
                else:
                    line(flush)
                    line(lambda i=i: single(i))
            line(flush)
            if realize is not None and not (isinstance(realize.predicate, IntImm) and realize.predicate.value == 1):
                line(lambda: self.emit(f"T.where({self.expr(realize.predicate)})"))
            line(lambda: self.emit(f"T.reads({', '.join(self.region(r) for r in b.reads)})"))
            line(lambda: self.emit(f"T.writes({', '.join(self.region(r) for r in b.writes)})"))
            if b.annotations:
                line(lambda: self.emit(f"T.{self.d.block_attr}({self.attr_dict(b.annotations)})"))
            for buf in b.alloc_buffers:
                line(lambda buf=buf: self.emit(
                    f"{self.define_buffer(buf)} = {self.buffer_decl(buf, self.d.block_alloc, [])}"))
            for m in b.match_buffers:
                line(lambda m=m: self.emit(f"{self.define_buffer(m.buffer)} = "
                                           f"{self.buffer_decl(m.buffer, 'match_buffer', [self.region(m.source)])}"))
            if b.init is not None:
                line(lambda: (self.emit("with T.init():"), self.nested(b.init)))
            self.body(b.body, top=True)

        self.framed(b, lines)  # (keyed by the block: a free variable of the realize is defined outside)
        self.namer.pop()
        self.indent -= 1

    def remappable(self, iv: IterVar, value: PrimExpr) -> bool:
        if iv.iter_type not in (DATA_PAR, COMM_REDUCE) or not isinstance(value, Var):
            return False
        dom = self.loop_doms.get(id(value))
        if dom is None or self.namer.get(value) is None:
            return False
        from ...ir.structural import structural_equal

        return structural_equal(dom[0], iv.dom.min) and structural_equal(dom[1], iv.dom.extent)


def implicit_root(body: Stmt) -> Block | None:
    """The root block TVM elides when printing (shown as ``# with T.block("root"):``)."""
    if not (isinstance(body, BlockRealize) and not body.iter_values
            and isinstance(body.predicate, IntImm) and body.predicate.value == 1):
        return None
    root = body.block
    if root.annotations or root.match_buffers or root.reads or root.writes or root.init is not None:
        return None
    inner = root.body
    if root.alloc_buffers or (isinstance(inner, BlockRealize) and inner.block.iter_vars) or (
            not isinstance(inner, BlockRealize) and any(isinstance(n, BlockRealize) for n in walk(inner))):
        return root
    return None
