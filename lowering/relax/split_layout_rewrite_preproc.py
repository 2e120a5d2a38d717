"""``relax.transform.SplitLayoutRewritePreproc``: a kernel that repacks a weight at every call is
split in two, so that LiftTransformParams can run the repacking once.

A PrimFunc whose root block starts with blocks annotated
``meta_schedule.layout_rewrite_preproc`` (each reads one parameter buffer and writes one buffer
the function allocates: a weight copied into the layout the compute wants) becomes
``<f>_weight_prepack`` (those blocks; parameters: the buffers read, then the buffers written) and
``<f>_prepacked`` (the rest, taking the rewritten buffers in place of the originals). Each
``R.call_tir(f, args)`` becomes a call of the first on the weights and a call of the second on
its result; the original function goes with dead-code elimination. As TVM 0.27 does it:

    gv = R.call_tir(f, (x, w))  ->  lv = R.call_tir(f_weight_prepack, (w,)); lv1 = R.call_tir(f_prepacked, (x, lv)); gv = lv1
"""
from __future__ import annotations

from typing import Any

from ...ir import relax as rx
from ...ir.dtype import DataType
from ...ir.errors import TVMSError
from ...ir.expr import IntImm, Var as TirVar
from ...ir.function import PrimFunc
from ...ir.module import GlobalVar, IRModule
from ...ir.name_supply import NameSupply
from ...ir.node import FrozenDict
from ...ir.relax_op import make_call
from ...ir.stmt import Block, BlockRealize, SeqStmt, seq
from ...ir.struct_info import TensorStructInfo
from ...ir.visitor import collect
from ..pass_registry import register_pass
from ..transform import module_pass
from .passes import _relax_funcs, remove_unused_bindings, tvm_print_order, _reachable

PREPROC = "meta_schedule.layout_rewrite_preproc"
_CALL_TIR = ("relax.call_tir", "relax.call_tir_inplace")


def _is_preproc(block: Block) -> bool:
    mark = block.annotations.get(PREPROC)
    return mark is not None and bool(getattr(mark, "value", mark))


def _unmarked(stmt: Any) -> Any:
    """``stmt`` with the preprocessing mark taken off its blocks."""
    from ...ir.visitor import Mutator

    class _Unmark(Mutator):
        def visit_Block(self, block: Block) -> Any:
            block = self.generic_visit(block)
            if PREPROC in block.annotations:
                block = block.with_changes(annotations=FrozenDict(
                    {k: v for k, v in block.annotations.items() if k != PREPROC}))
            return block

    return _Unmark().visit(stmt)


class CannotSplit(TVMSError):
    """A function with layout rewrite blocks in a form the split does not take."""


def split_prim_func(func: PrimFunc, name: str) -> tuple | None:
    """``(preprocessing function, compute function, [(parameter index, buffer read, buffer
    written)])`` of ``func``, or None when no top-level subtree of its root block is
    preprocessing; ``CannotSplit`` when the marked blocks are not in a form to split."""
    realize = func.body
    if not isinstance(realize, BlockRealize):
        return None
    root = realize.block
    stmts = root.body.seq if isinstance(root.body, SeqStmt) else (root.body,)
    preproc, compute, rewrites = [], [], []
    params_by_buffer = {id(buf): i for i, p in enumerate(func.params)
                        for buf in [func.buffer_map.get(p)] if buf is not None}
    for stmt in stmts:
        blocks = collect(stmt, Block)
        marked = [_is_preproc(b) for b in blocks]
        if not blocks or not any(marked):
            compute.append(stmt)
            continue
        if not all(marked):
            raise CannotSplit(f"SplitLayoutRewritePreproc: in {name}, a subtree mixes layout "
                            f"rewrite blocks with other blocks")
        for b in blocks:
            if len(b.reads) != 1 or len(b.writes) != 1 or b.alloc_buffers or b.match_buffers:
                raise CannotSplit(f"SplitLayoutRewritePreproc: the layout rewrite block {b.name_hint!r} "
                                  f"of {name} must read one buffer and write one, allocating none")
            index = params_by_buffer.get(id(b.reads[0].buffer))
            written = b.writes[0].buffer
            if index is None or not any(a is written for a in root.alloc_buffers):
                raise CannotSplit(f"SplitLayoutRewritePreproc: the layout rewrite block {b.name_hint!r} "
                                  f"of {name} must read a parameter and write a buffer of the root block")
            if not all(isinstance(d, IntImm) for d in written.shape):
                raise CannotSplit(f"SplitLayoutRewritePreproc: {name} rewrites into {written.name}, "
                                  f"whose shape is not constant")
            rewrites.append((index, b.reads[0].buffer, written))
        preproc.append(_unmarked(stmt))
    if not preproc:
        return None
    if not compute:
        raise CannotSplit(f"SplitLayoutRewritePreproc: {name} has layout rewrite blocks and no compute")

    def make(params: list, body: list, alloc: tuple) -> PrimFunc:
        handles = [p if isinstance(p, TirVar) else TirVar(p.name, DataType("handle")) for p in params]
        buffer_map = {h: (func.buffer_map[p] if p in func.buffer_map else p) for h, p in zip(handles, params)}
        new_root = root.with_changes(body=seq(body), alloc_buffers=alloc)
        attrs = {k: v for k, v in func.attrs.items() if k != "layout_free_buffers"}
        return func.with_changes(params=tuple(handles), buffer_map=FrozenDict(buffer_map),
                                 body=realize.with_changes(block=new_root), attrs=FrozenDict(attrs))

    written = {id(w) for _, _, w in rewrites}
    pre_params = [func.params[i] for i, _, _ in rewrites] + [w for _, _, w in rewrites]
    compute_params = list(func.params)
    for i, _, w in rewrites:
        compute_params[i] = w
    return (make(pre_params, preproc, ()),
            make(compute_params, compute, tuple(b for b in root.alloc_buffers if id(b) not in written)),
            rewrites)


@module_pass(opt_level=0, name="SplitLayoutRewritePreproc")
class SplitLayoutRewritePreproc:
    """Splits each PrimFunc's layout rewrite blocks into a function of their own and calls it
    before the rest (TVM's pass of this name), then removes what is left unused."""

    def transform_module(self, mod: IRModule, ctx: Any) -> IRModule:
        return split_layout_rewrite_preproc(mod, strict=True)


def split_layout_rewrite_preproc(mod: IRModule, strict: bool) -> IRModule:
    """The pass on ``mod`` (changed in place); not ``strict`` (as tvms.compile runs it), a
    function whose marked blocks cannot be split is left whole instead of failing."""
    splits = {}
    for gv, func in list(mod.functions_items()):
        if isinstance(func, PrimFunc):
            try:
                found = split_prim_func(func, gv.name_hint)
            except CannotSplit:
                if strict:
                    raise
                found = None
            if found is not None:
                splits[gv.name_hint] = found
    if not splits:
        return mod
    calls = _SplitCalls(mod, splits)
    for gv, func in _relax_funcs(mod):
        blocks = []
        for blk in func.body.blocks:
            dataflow = isinstance(blk, rx.DataflowBlock)
            blocks.append(type(blk)(tuple(new for b in blk.bindings for new in calls.rewrite(b, dataflow)),
                                    span=blk.span))
        mod[gv] = func.with_changes(body=func.body.with_changes(blocks=tuple(blocks)))
    # (then TVM's DeadCodeElimination: the split functions are no longer called)
    keep = _reachable(mod, [gv.name_hint for gv, f in mod.functions_items() if not getattr(f, "is_private", True)])
    for gv, func in list(mod.functions_items()):
        if gv.name_hint not in keep:
            del mod[gv]
        elif isinstance(func, rx.Function):
            mod[gv] = remove_unused_bindings(func, mod)
    return tvm_print_order(mod)


class _SplitCalls:
    """Rewrites the bindings that call a split function into the two calls."""

    def __init__(self, mod: IRModule, splits: dict) -> None:
        self.mod, self.splits = mod, splits
        self.names = NameSupply()  # (lv, lv1, ...: TVM's builder names them so, module-wide)
        self.functions = NameSupply("_")  # (a name the module has already is not taken over)
        for gv in mod.get_global_vars():
            self.functions.reserve(gv.name_hint)
        self.added: dict = {}

    def _global(self, name: str, func: PrimFunc) -> GlobalVar:
        if name not in self.added:
            self.added[name] = GlobalVar(self.functions.fresh(name))
            if "global_symbol" in func.attrs:  # (a public callee's parts are public under their own names, as in TVM)
                func = func.with_attr("global_symbol", self.added[name].name_hint)
            self.mod[self.added[name]] = func
        return self.added[name]

    def rewrite(self, binding: Any, dataflow: bool) -> list:
        call = binding.value
        if not (isinstance(call, rx.Call) and getattr(call.op, "name", None) in _CALL_TIR
                and isinstance(call.args[0], GlobalVar) and call.args[0].name_hint in self.splits):
            return [binding]
        name = call.args[0].name_hint
        pre, compute, rewrites = self.splits[name]
        make_var = rx.DataflowVar if dataflow else rx.Var
        args = list(call.args[1].fields)
        outs = []
        for _, _, buf in rewrites:
            dims = tuple(IntImm(DataType("int64"), d.value) for d in buf.shape)  # (a shape is int64)
            outs.append(TensorStructInfo(rx.ShapeExpr(dims), buf.dtype, len(dims)))
        pre_call = make_call("call_tir", [self._global(name + "_weight_prepack", pre),
                                          rx.Tuple(tuple(args[i] for i, _, _ in rewrites))], {}, tuple(outs))
        packed = make_var(self.names.fresh("lv"), pre_call.struct_info)
        out = [rx.VarBinding(pre_call, packed)]
        if len(rewrites) == 1:
            args[rewrites[0][0]] = packed
        else:
            for k, (i, _, _) in enumerate(rewrites):
                item = make_var(self.names.fresh("lv"), outs[k])
                out.append(rx.VarBinding(rx.TupleGetItem(packed, k, outs[k]), item))
                args[i] = item
        main_call = make_call(call.op.name[len("relax."):], [self._global(name + "_prepacked", compute),
                                                             rx.Tuple(tuple(args)), *call.args[2:]],
                              dict(call.attrs or {}), call.sinfo_args)  # (an in-place call keeps its indices)
        result = make_var(self.names.fresh("lv"), main_call.struct_info)
        return out + [rx.VarBinding(main_call, result), binding.with_changes(value=result)]


register_pass(factory=SplitLayoutRewritePreproc)

__all__ = ["CannotSplit", "SplitLayoutRewritePreproc", "split_layout_rewrite_preproc", "split_prim_func"]
