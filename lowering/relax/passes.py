"""Relax passes shaped like TVM's ``relax.transform``: ToNonDataflow, ConvertToDataflow,
DeadCodeElimination, CanonicalizeBindings, BindParams, FoldConstant.

Each one reproduces the text TVM 0.27 prints for the same input (goldens in
tests/test_relax_passes.py). Rewrites work on the immutable IR directly: a variable
substitution by identity (``_substitute``) plus block-level rebuilding.
"""
from __future__ import annotations

from typing import Any, Iterable

import numpy as np

from ...ir import relax as rx
from ...ir.registry import get_global_func
from ...ir.relax import make_constant, merge_blocks
from ...ir.expr import IntImm, Var as TirVar
from ...ir.module import GlobalVar, IRModule
from ...ir.node import Node
from ...ir.struct_info import FuncStructInfo, TensorStructInfo, TupleStructInfo
from ...ir.structural import structural_equal
from ...ir.visitor import Mutator, walk
from ..pass_registry import register_pass
from ..transform import module_pass

# ops with side effects (TVM's FPurity false)
_IMPURE_OPS = {"relax.call_packed", "relax.print", "relax.assert_op", "relax.call_builtin_with_ctx",
               "relax.call_inplace_packed", "relax.memory.kill_storage", "relax.memory.kill_tensor",
               "relax.vm.kill_object", "relax.builtin.stop_lift_params", "relax.vm.call_tir_dyn",
               "relax.invoke_closure"}


# --------------------------------------------------------------------------- helpers


def _substitute(node: Any, mapping: dict) -> Any:
    """``node`` with every occurrence (by identity) of a key of ``mapping`` replaced."""
    if not mapping:
        return node

    memo: dict = {}  # one result per node, so that a variable stays one variable

    class _Sub(Mutator):
        def visit(self, n: Node) -> Any:
            hit = mapping.get(n)
            if hit is not None:
                return hit
            done = memo.get(n)
            if done is None:
                done = memo[n] = super().visit(n)
            return done

    return _Sub().visit(node)


def _is_pure(value: Any, mod: IRModule | None = None) -> bool:
    """Whether evaluating ``value`` has no side effect (TVM's purity of a binding's value)."""
    if isinstance(value, rx.Call):
        op = value.op
        name = getattr(op, "name", None)
        if isinstance(op, rx.ExternFunc):
            return False
        if isinstance(op, GlobalVar):
            if mod is not None and op.name_hint in mod:
                f = mod[op.name_hint]
                # a PrimFunc called directly writes its outputs: impure, as in TVM
                return f.is_pure if isinstance(f, rx.Function) else False
            return True
        if isinstance(op, rx.Var):
            s = op.struct_info
            return s.purity if isinstance(s, FuncStructInfo) else False
        if name is not None:
            return name not in _IMPURE_OPS
        return True
    if isinstance(value, rx.If):
        return _is_pure(value.true_branch, mod) and _is_pure(value.false_branch, mod)
    if isinstance(value, rx.SeqExpr):
        return all(_is_pure(b.value, mod) for blk in value.blocks for b in blk.bindings) \
            and _is_pure(value.body, mod)
    return True


def _uses(node: Any) -> set:
    """Relax variables used (not defined) anywhere under ``node``."""
    return {n for n in walk(node) if isinstance(n, rx.Var)}


def _binding_uses(b: Node) -> set:
    return _uses(b.value) | (_uses(b.struct_info) if isinstance(b, rx.MatchCast) else set())


def _vars_outside(root: Node, skip: Node) -> set:
    """Relax variables occurring under ``root`` outside the subtree ``skip``."""
    from ...ir.visitor import children

    found: set = set()
    stack = [root]
    while stack:
        n = stack.pop()
        if n is skip:
            continue
        if isinstance(n, rx.Var):
            found.add(n)
        stack.extend(children(n))
    return found


def _vars_needed_outside(root: Node, block: rx.DataflowBlock) -> set:
    """The variables of ``block`` that cannot be dataflow variables: those used under ``root``
    outside the block, and those a function defined in the block uses (a function body sees no
    dataflow variable: a local function that recurses stays a Var, as in TVM)."""
    inner = [n for b in block.bindings for n in walk(b.value) if isinstance(n, rx.Function)]
    return _vars_outside(root, block).union(*(_vars_outside(f.body, None) for f in inner))


def _relax_funcs(mod: IRModule) -> list:
    return [(gv, f) for gv, f in mod.functions_items() if isinstance(f, rx.Function)]


# --------------------------------------------------------------------------- ToNonDataflow


def tvm_print_order(mod: IRModule) -> IRModule:
    """The module with its functions in the order TVM prints a module (``ir/print_order.py``).
    (tvms prints a classic module in insertion order, so passes that add functions insert them in
    TVM's printing order.)"""
    from ...ir.print_order import tvm_function_order

    out = mod.empty_copy()
    for gv, func in tvm_function_order(mod.functions_items()):
        out[gv] = func
    return out


def to_non_dataflow(func: rx.Function) -> rx.Function:
    dvs = [n for n in walk(func) if isinstance(n, rx.DataflowVar)]
    mapping = {}
    for dv in dvs:
        if dv not in mapping:
            mapping[dv] = rx.Var(dv.name, dv.struct_info, span=dv.span)
    func = _substitute(func, mapping)

    class _Blocks(Mutator):
        def visit_SeqExpr(self, seq: rx.SeqExpr) -> Any:
            seq = self.generic_visit(seq)
            blocks = [rx.BindingBlock(b.bindings) if isinstance(b, rx.DataflowBlock) else b
                      for b in seq.blocks]
            return seq.with_changes(blocks=tuple(merge_blocks(blocks)))

    return _Blocks().visit(func)


@module_pass(opt_level=0, name="ToNonDataflow")
class ToNonDataflow:
    """Dataflow blocks become ordinary binding blocks; DataflowVars become Vars."""

    def transform_module(self, mod: IRModule, ctx: Any) -> IRModule:
        for gv, f in _relax_funcs(mod):
            mod[gv] = to_non_dataflow(f)
        return mod


# --------------------------------------------------------------------------- CanonicalizeBindings


def canonicalize_bindings(func: rx.Function) -> rx.Function:
    # 1. plan: trivial bindings y = x (and match_casts that change nothing) are dropped
    mapping: dict = {}
    dropped: set = set()
    renames: dict = {}  # DataflowVar -> output Var that takes over its definition
    local: dict = {}  # Var bound in a dataflow block and used only there -> its DataflowVar
    escapes: set = set()  # vars that a dropped binding's uses outside its block now read

    def resolve(v: Any) -> Any:
        while v in mapping:
            v = mapping[v]
        return v

    known: dict = {}  # var -> its value, as far as it is known (TVM's known_bindings)

    def plan(node: Any) -> None:
        for n in walk(node):
            if not isinstance(n, rx.SeqExpr):
                continue
            for blk in n.blocks:
                defined_here = {b.var for b in blk.bindings}
                outside = _vars_needed_outside(func, blk) if isinstance(blk, rx.DataflowBlock) else None
                for b in blk.bindings:
                    value = b.value
                    if isinstance(b, rx.MatchCast):
                        known[b.var] = _known_value(value, known)  # (as TVM, what a match_cast reads is known)
                        if not (isinstance(value, rx.Var) and structural_equal(
                                b.struct_info, value.struct_info, map_free_vars=False)):
                            continue
                    if isinstance(b, rx.VarBinding):
                        value = _known_value(value, known)  # t[i] of a known tuple, ...
                        known[b.var] = value
                    if not isinstance(value, rx.Var):
                        continue
                    src = resolve(value)
                    if not isinstance(src, rx.Var):
                        continue
                    # (a value known through earlier bindings, a tuple rebuilt from its own items, is
                    # the earlier one whatever its struct info, as in TVM)
                    if value is b.value and not structural_equal(b.var.struct_info, src.struct_info,
                                                                 map_free_vars=False):
                        continue
                    needed_outside = outside is not None and not isinstance(b.var, rx.DataflowVar) \
                        and b.var in outside
                    if isinstance(src, rx.DataflowVar) and needed_outside:
                        # gv = dv: gv takes over dv's definition when dv is bound in this block
                        if src in defined_here and src not in renames:
                            renames[src] = b.var
                            mapping[src] = b.var
                            dropped.add(b)
                        continue
                    mapping[b.var] = src
                    dropped.add(b)
                    if outside is None or needed_outside:
                        escapes.add(src)  # (read, through b.var, outside src's block)
                if outside is not None:  # (as TVM: an output nothing outside reads is not one)
                    local.update((b.var, rx.DataflowVar(b.var.name, b.var.struct_info, span=b.var.span))
                                 for b in blk.bindings if type(b.var) is rx.Var and b.var not in outside
                                 and b not in dropped)

    plan(func)
    local = {k: v for k, v in local.items() if k not in escapes}
    if not mapping and not local:
        return func
    final = {k: resolve(k) for k in mapping}
    final = {k: local.get(v, v) for k, v in final.items()}
    final.update((k, v) for k, v in local.items() if k not in final)

    class _Rewrite(Mutator):
        def visit_SeqExpr(self, seq: rx.SeqExpr) -> Any:
            blocks = []
            for blk in seq.blocks:
                new = []
                for b in blk.bindings:
                    if b in dropped:
                        continue
                    if b.var in renames:  # the definition of dv now defines gv
                        b = b.with_changes(var=renames[b.var])
                    elif b.var in local:
                        b = b.with_changes(var=local[b.var])
                    new.append(_substitute_value(b))
                blocks.append(type(blk)(tuple(new), span=blk.span))
            body = _substitute(seq.body, final)
            return seq.with_changes(blocks=tuple(merge_blocks(blocks)), body=body)

    def _substitute_value(b: Node) -> Node:
        value = _Rewrite().visit(b.value) if _has_seq(b.value) else b.value
        value = _substitute(value, final)
        return b.with_changes(value=value) if value is not b.value else b

    return func.with_changes(body=_Rewrite().visit(func.body))


def _unwrap(expr: Any, known: dict) -> Any:
    seen = 0
    while isinstance(expr, rx.Var) and expr in known and seen < 64:
        expr, seen = known[expr], seen + 1
    return expr


def _known_value(value: Any, known: dict) -> Any:
    """What ``value`` is known to be, as TVM's ``UnwrapKnownValue``: ``t[i]`` of a known tuple
    is its field ``i``; a tuple of ``t[0], ..., t[n-1]`` of one ``n``-tuple ``t`` is ``t``."""
    if isinstance(value, rx.TupleGetItem):
        tup = _unwrap(value.tuple_value, known)
        if isinstance(tup, rx.Tuple) and 0 <= value.index < len(tup.fields):
            return tup.fields[value.index]
    if isinstance(value, rx.Tuple) and value.fields:
        items = [_unwrap(f, known) for f in value.fields]
        if all(isinstance(item, rx.TupleGetItem) and item.index == i for i, item in enumerate(items)):
            source = _unwrap(items[0].tuple_value, known)
            sinfo = items[0].tuple_value.struct_info
            if isinstance(sinfo, TupleStructInfo) and len(sinfo.fields) == len(items) and \
                    all(_unwrap(item.tuple_value, known) is source for item in items):
                return source
    return value


def _has_seq(node: Any) -> bool:
    return any(isinstance(n, rx.SeqExpr) for n in walk(node))


@module_pass(opt_level=0, name="CanonicalizeBindings")
class CanonicalizeBindings:
    """Trivial bindings ``y = x`` are inlined; an output ``gv = dv`` of a dataflow block makes
    ``gv`` take over the definition of ``dv``, as TVM does."""

    def transform_module(self, mod: IRModule, ctx: Any) -> IRModule:
        for gv, f in _relax_funcs(mod):
            mod[gv] = canonicalize_bindings(f)
        return mod


# --------------------------------------------------------------------------- DeadCodeElimination


def remove_unused_bindings(func: rx.Function, mod: IRModule | None = None) -> rx.Function:
    """Bindings of pure values whose variables nothing uses are removed (to a fixed point)."""

    def shape_vars(sinfo: Any) -> bool:
        return any(isinstance(n, TirVar) for n in walk(sinfo))

    def dce_seq(seq: rx.SeqExpr, live: set) -> rx.SeqExpr:
        live = set(live) | _uses(seq.body)
        new_blocks = []
        for blk in reversed(seq.blocks):
            kept = []
            for b in reversed(blk.bindings):
                value = b.value
                keep = b.var in live or not _is_pure(value, mod) or (
                    isinstance(b, rx.MatchCast) and shape_vars(b.struct_info))
                if not keep:
                    continue
                if isinstance(value, rx.SeqExpr):
                    value = dce_seq(value, set())
                elif isinstance(value, rx.If):
                    value = value.with_changes(
                        true_branch=_dce_expr(value.true_branch),
                        false_branch=_dce_expr(value.false_branch))
                elif isinstance(value, rx.Function):
                    value = value.with_changes(body=dce_seq(value.body, set()))
                if value is not b.value:
                    b = b.with_changes(value=value)
                live |= _binding_uses(b)
                kept.append(b)
            new_blocks.append(type(blk)(tuple(reversed(kept)), span=blk.span))
        blocks = merge_blocks(list(reversed(new_blocks)))
        return seq.with_changes(blocks=tuple(blocks))

    def _dce_expr(e: Any) -> Any:
        return dce_seq(e, set()) if isinstance(e, rx.SeqExpr) else e

    while True:
        new = func.with_changes(body=dce_seq(func.body, set()))
        if structural_equal(new, func, map_free_vars=True):
            return func
        func = new


def _reachable(mod: IRModule, entries: Iterable[str]) -> set:
    todo = list(entries)
    seen: set = set()
    while todo:
        name = todo.pop()
        if name in seen or name not in mod:
            continue
        seen.add(name)
        for n in walk(mod[name]):
            if isinstance(n, GlobalVar):
                todo.append(n.name_hint)
    return seen


@module_pass(opt_level=0, name="DeadCodeElimination")
class DeadCodeElimination:
    """Removes unused bindings of pure values, then private functions that no entry function
    (public functions and ``entry_functions``) reaches."""

    def __init__(self, entry_functions: list | None = None):
        self.entry_functions = list(entry_functions or [])

    def transform_module(self, mod: IRModule, ctx: Any) -> IRModule:
        for gv, f in _relax_funcs(mod):
            mod[gv] = remove_unused_bindings(f, mod)
        entries = [gv.name_hint for gv, f in mod.functions_items()
                   if "global_symbol" in getattr(f, "attrs", {})]
        for name in self.entry_functions:
            if str(name) not in mod:
                raise ValueError(f'Cannot find global var "{name}" in the Module')
            entries.append(str(name))
        keep = _reachable(mod, entries)
        for gv, _ in list(mod.functions_items()):
            if gv.name_hint not in keep:
                del mod[gv]
        return mod


# --------------------------------------------------------------------------- ConvertToDataflow


def convert_to_dataflow(func: rx.Function, min_size: int, mod: IRModule | None = None) -> rx.Function:
    def pure_binding(b: Node) -> bool:
        v = b.value
        if isinstance(v, (rx.If, rx.SeqExpr)):
            return False
        return _is_pure(v, mod)

    def conv_seq(seq: rx.SeqExpr) -> rx.SeqExpr:
        # one sequence of (binding, can-be-dataflow, was-dataflow); runs of the first kind are
        # grouped, existing dataflow blocks joining the pure bindings around them (as TVM does)
        items = []
        for blk in seq.blocks:
            was_df = isinstance(blk, rx.DataflowBlock)
            for bd in blk.bindings:
                if isinstance(bd.value, rx.If):
                    bd = bd.with_changes(value=bd.value.with_changes(
                        true_branch=_conv(bd.value.true_branch),
                        false_branch=_conv(bd.value.false_branch)))
                elif isinstance(bd.value, rx.Function):
                    bd = bd.with_changes(value=bd.value.with_changes(body=_conv(bd.value.body)))
                items.append((bd, was_df or pure_binding(bd), was_df))
        runs: list = []
        for bd, flag, was_df in items:
            if runs and runs[-1][0] == flag:
                runs[-1][1].append(bd)
                runs[-1][2] = runs[-1][2] or was_df
            else:
                runs.append([flag, [bd], was_df])
        blocks = []
        for flag, bs, was_df in runs:
            if flag and (len(bs) >= min_size or was_df):
                blocks.append(rx.DataflowBlock(tuple(bs)))
            else:
                blocks.append(rx.BindingBlock(tuple(bs)))
        new = seq.with_changes(blocks=tuple(merge_blocks(blocks)))
        mapping: dict = {}
        for blk in new.blocks:
            if not isinstance(blk, rx.DataflowBlock):
                continue
            outside = _vars_needed_outside(new, blk)
            for bd in blk.bindings:
                v = bd.var
                if not isinstance(v, rx.DataflowVar) and v not in outside:
                    mapping[v] = rx.DataflowVar(v.name, v.struct_info, span=v.span)
        return _substitute(new, mapping)

    def _conv(e: Any) -> Any:
        return conv_seq(e) if isinstance(e, rx.SeqExpr) else e

    return func.with_changes(body=conv_seq(func.body))


@module_pass(opt_level=0, name="ConvertToDataflow")
class ConvertToDataflow:
    """Maximal runs of at least ``min_size`` (default 2) pure bindings become dataflow blocks;
    then CanonicalizeBindings, as TVM does."""

    def __init__(self, min_size: int = 2):
        self.min_size = min_size

    def transform_module(self, mod: IRModule, ctx: Any) -> IRModule:
        for gv, f in _relax_funcs(mod):
            mod[gv] = canonicalize_bindings(convert_to_dataflow(f, self.min_size, mod))
        return mod


# --------------------------------------------------------------------------- BindParams


def bind_params(func: rx.Function, params: dict) -> rx.Function:
    by_name = {}
    for key, value in params.items():
        by_name[key if isinstance(key, rx.Var) else str(key)] = value
    mapping: dict = {}
    sym: dict = {}
    kept = []
    for p in func.params:
        value = by_name.get(p, by_name.get(p.name))
        if value is None:
            kept.append(p)
            continue
        data = np.asarray(value.numpy() if hasattr(value, "numpy") else value)
        const = make_constant(data)
        sinfo = p.struct_info
        if isinstance(sinfo, TensorStructInfo) and isinstance(sinfo.shape, rx.ShapeExpr):
            for dim, size in zip(sinfo.shape.values, data.shape):
                if isinstance(dim, TirVar) and dim not in sym:
                    sym[dim] = IntImm(dim.dtype, int(size))
        mapping[p] = const
    if not mapping:
        return func
    body = _substitute(func.body, mapping)
    new = rx.Function(tuple(kept), body, func.ret_struct_info, func.is_pure, func.attrs, span=func.span,
                      source_dialect=func.source_dialect)
    return _substitute(new, sym) if sym else new


@module_pass(opt_level=0, name="BindParams")
class BindParams:
    """Parameters of ``func_name`` named in ``params`` (name or Var -> array) become constants."""

    def __init__(self, func_name: str, params: dict):
        self.func_name = func_name
        self.params = dict(params)

    def transform_module(self, mod: IRModule, ctx: Any) -> IRModule:
        if self.func_name in mod:
            f = mod[self.func_name]
            if isinstance(f, rx.Function):
                mod[self.func_name] = bind_params(f, self.params)
        return mod


# --------------------------------------------------------------------------- FoldConstant


def _static_tensor(sinfo: Any) -> bool:
    return isinstance(sinfo, TensorStructInfo) and isinstance(sinfo.shape, rx.ShapeExpr) \
        and all(isinstance(d, IntImm) for d in sinfo.shape.values) and str(sinfo.dtype) != "void"


def _try_fold(call: rx.Call, mod: IRModule | None) -> Any:
    """The constant a call of a Relax operator on constants evaluates to, else None."""
    from ...ir.expr import Op

    if not isinstance(call.op, Op) or call.op.name in _IMPURE_OPS or not call.op.name.startswith("relax."):
        return None
    if call.op.name in ("relax.call_tir", "relax.call_dps_packed", "relax.call_pure_packed"):
        return None
    if not call.args or not all(isinstance(a, rx.Constant) for a in call.args):
        return None
    if not _static_tensor(call.struct_info):
        return None
    evaluate = get_global_func("runtime.reference_relax.eval_expr")  # (the reference executor's)
    try:
        value = np.asarray(evaluate(call, mod))
    except Exception:  # noqa: BLE001  (an op the reference executor cannot run stays)
        return None
    shape = tuple(int(d.value) for d in call.struct_info.shape.values)
    if value.shape != shape:
        return None
    # (not np.ascontiguousarray: it makes a 0-d array 1-d)
    return make_constant(np.array(value, dtype=str(call.struct_info.dtype), order="C"))


def _fold_call_tir(call: rx.Call, mod: IRModule | None, built: dict) -> Any:
    """The constant (or tuple of constants) ``R.call_tir(f, (constants...))`` makes: ``f`` built
    for the host and run, as TVM's FoldConstant does (weights bound with BindParams are then
    transformed at compile time); None when an argument is not a constant or a size is not, or
    when ``f`` cannot be built or run here (scheduled for a GPU, a dtype numpy lacks): the call
    stays. ``built`` keeps each kernel's build (or None for one that failed) by name."""
    from ...ir.function import PrimFunc

    gv, args = call.args[0], call.args[1]
    if len(call.args) > 2 or mod is None or not isinstance(gv, GlobalVar) or gv.name_hint not in mod:
        return None
    func = mod[gv.name_hint]
    outs = call.sinfo_args[0].fields if len(call.sinfo_args) == 1 and \
        isinstance(call.sinfo_args[0], TupleStructInfo) else call.sinfo_args
    if not (isinstance(func, PrimFunc) and isinstance(args, rx.Tuple) and outs
            and all(isinstance(a, rx.Constant) for a in args.fields) and all(map(_static_tensor, outs))
            and len(func.params) == len(args.fields) + len(outs)
            and all(p in func.buffer_map for p in func.params)):
        return None
    from ..build import build  # (the driver, for the host: a kernel run once here)

    if gv.name_hint not in built:
        try:
            built[gv.name_hint] = build(IRModule({gv.name_hint: func}), "llvm")[gv.name_hint]
        except Exception:  # noqa: BLE001  (what the host's build does not take stays a call)
            built[gv.name_hint] = None
    kernel = built[gv.name_hint]
    if kernel is None:
        return None
    try:
        results = [np.empty(tuple(int(d.value) for d in s.shape.values), dtype=str(s.dtype)) for s in outs]
        kernel(*[np.require(a.data, requirements=("C", "W")) for a in args.fields], *results)
    except Exception:  # noqa: BLE001  (a dtype numpy lacks, a kernel refusing its arguments)
        return None
    consts = [make_constant(r) for r in results]
    return consts[0] if len(call.sinfo_args) == 1 and not isinstance(call.sinfo_args[0], TupleStructInfo) \
        else rx.Tuple(tuple(consts))


def fold_constant(func: rx.Function, mod: IRModule | None = None) -> rx.Function:
    consts: dict = {}  # var -> the Constant it is bound to
    built: dict = {}  # kernel name -> its host build (_fold_call_tir)

    def fold_seq(seq: rx.SeqExpr) -> rx.SeqExpr:
        blocks = []
        for blk in seq.blocks:
            dataflow = isinstance(blk, rx.DataflowBlock)
            new = []
            for b in blk.bindings:
                value = b.value
                if isinstance(value, rx.If):
                    value = value.with_changes(cond=_substitute(value.cond, consts),
                                               true_branch=fold_expr(value.true_branch),
                                               false_branch=fold_expr(value.false_branch))
                elif isinstance(value, rx.SeqExpr):
                    value = fold_seq(value)
                elif not isinstance(value, rx.Function):
                    value = _substitute(value, consts)
                if isinstance(value, rx.Call):
                    is_call_tir = getattr(value.op, "name", None) == "relax.call_tir"
                    folded = _fold_call_tir(value, mod, built) if is_call_tir else \
                        _try_fold(value, mod) if dataflow else None
                    if folded is not None:
                        value = folded
                if isinstance(b, rx.VarBinding) and isinstance(value, rx.Constant):
                    consts[b.var] = value
                new.append(b if value is b.value else b.with_changes(value=value))
            blocks.append(type(blk)(tuple(new), span=blk.span))
        return seq.with_changes(blocks=tuple(blocks), body=_substitute(seq.body, consts))

    def fold_expr(e: Any) -> Any:
        return fold_seq(e) if isinstance(e, rx.SeqExpr) else _substitute(e, consts)

    new = func.with_changes(body=fold_seq(func.body))
    return remove_unused_bindings(new, mod)  # TVM's FoldConstant ends with RemoveAllUnused


@module_pass(opt_level=0, name="FoldConstant")
class FoldConstant:
    """Calls of Relax operators on constants inside dataflow blocks are evaluated (with the
    reference executor's numpy kernels) and replaced by constants, and so are ``R.call_tir``s of
    constants anywhere (the kernel built for the host and run); variables bound to constants
    are replaced by them and the bindings left unused removed, as TVM does."""

    def transform_module(self, mod: IRModule, ctx: Any) -> IRModule:
        for gv, f in _relax_funcs(mod):
            mod[gv] = fold_constant(f, mod)
        return mod


for _p in (ToNonDataflow, ConvertToDataflow, DeadCodeElimination, CanonicalizeBindings,
           FoldConstant):
    register_pass(factory=_p)

__all__ = ["BindParams", "CanonicalizeBindings", "ConvertToDataflow", "DeadCodeElimination",
           "FoldConstant", "ToNonDataflow"]
