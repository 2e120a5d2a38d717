"""``relax.transform.LiftTransformParams``: what a function computes from its weights alone moves
to a function run once.

A Relax function with the ``num_input`` attribute takes its first ``num_input`` parameters at
every call (the inputs) and the rest once (the weights). Bindings inside dataflow blocks that
depend on weights only (transposes, casts, packing) are lifted into ``<func>_transform_params``,
which takes the weights as one tuple (``model_params``) and returns a tuple of what the function
still needs: the weights it reads itself, then the lifted values, in their original order. The
function then takes those in place of the weights. As TVM 0.27 does it:

    main(x, w1, w2)  ->  main_transform_params((w1, w2)) -> (w2, w1_t);  main(x, w2, w1_t)

``shared_transform=True`` (or a list of function names) makes one ``transform_params`` holding
the lifting common to all those functions (their weights must match one for one), and each
function takes its outputs. ``R.builtin.stop_lift_params(x)`` keeps what uses it at run time.
With the pass context option ``relax.lift_transform_params.consume_params``, the transform
releases each weight from its input tuple once read (``vm.builtin.tuple_reset_item``).

A function that already has a transform (a second lifting) gets the two composed.
"""
from __future__ import annotations

from typing import Any

from ...ir import relax as rx
from ...ir.analysis import written_params
from ...ir.errors import TVMSError
from ...ir.expr import Op, Var as TirVar
from ...ir.function import PrimFunc
from ...ir.module import GlobalVar, IRModule
from ...ir.name_supply import NameSupply
from ...ir.node import FrozenDict
from ...ir.op import get_op
from ...ir.relax import merge_blocks
from ...ir.relax_vars import bound_vars, free_vars
from ...ir.struct_info import (FuncStructInfo, PrimStructInfo, ShapeStructInfo, TensorStructInfo,
                               TupleStructInfo, definable_sizes, erase_undefined)
from ...ir.structural import structural_equal
from ...ir.visitor import Mutator, collect
from ..pass_registry import register_pass
from ..transform import module_pass
from .passes import _is_pure, _substitute, canonicalize_bindings, remove_unused_bindings, tvm_print_order

CONSUME_PARAMS = "relax.lift_transform_params.consume_params"
_STOP = "relax.builtin.stop_lift_params"


# --------------------------------------------------------------------------- symbolic sizes


def _unique(items: list) -> list:
    seen: set = set()
    return [x for x in items if not (id(x) in seen or seen.add(id(x)))]


def _sizes_in(node: Any) -> list:
    """Every TensorIR variable in ``node`` (struct info or expression), in order."""
    return _unique(collect(node, TirVar))


# --------------------------------------------------------------------------- the plan


class _Plan:
    """Which bindings of one function are lifted (TVM's LocalCollectInfo): ``lifted`` can be
    computed before the call, ``from_weights`` depends on a weight, ``needed`` is used at run
    time (relax and TensorIR variables, by identity)."""

    def __init__(self, func: rx.Function, mod: IRModule, shared: "_SharedPlan | None" = None) -> None:
        self.func, self.mod = func, mod
        self.shared = shared
        self.num_input = _num_input(func)
        # a value computed once must not be written at each call (R.call_tir_inplace into it):
        # such values stay in the function, and so does what depends on them, until none is left
        self.kept: set = set()
        while True:
            self._collect()
            written = _written_in_place(func, {b.var for b in self.lifted}, mod) - self.kept
            if not written:
                break
            self.kept |= written

    def _collect(self) -> None:
        self.lifted: list = []
        self.from_weights: set = set()
        self.needed: set = set()
        self.liftable: set = set()
        for p in self.func.params[self.num_input:]:
            self.liftable.add(p)
            self.from_weights.add(p)
            self.liftable.update(definable_sizes(p.struct_info))
        for blk in self.func.body.blocks:
            for b in blk.bindings:
                self._visit(b, isinstance(blk, rx.DataflowBlock))
        self.needed.update(free_vars(self.func.body.body))
        # (TVM 0.27: a scalar weight is its size variable, needed wherever the size is)
        self.needed.update(w for w in self.weights if (size := _size_of_scalar(w)) is not None and size in self.needed)

    def _visit(self, binding: Any, in_dataflow: bool) -> None:
        value = binding.value
        if binding.var not in self.kept and _can_lift(binding, in_dataflow, self.liftable, self.mod) and \
                (self.shared is None or binding.var in self.shared.remap):
            self.lifted.append(binding)
            self.liftable.add(binding.var)
            if any(v in self.from_weights for v in free_vars(value)):
                self.from_weights.add(binding.var)
        else:
            self.needed.add(binding.var)
            self.needed.update(free_vars(value))
            self.needed.update(_sizes_in(value))

    @property
    def inputs(self) -> list:
        return list(self.func.params[:self.num_input])

    @property
    def weights(self) -> list:
        return list(self.func.params[self.num_input:])

    def outputs(self) -> list:
        return _outputs(self.weights, self.lifted, self.from_weights, self.needed)

    def propagated_sizes(self) -> list:
        """Sizes the weights define that the function needs and cannot take from its inputs or
        from the transformed weights: they travel as one shape parameter."""
        known = {id(v) for v in definable_sizes([p.struct_info for p in self.inputs])}
        known |= {id(v) for v in definable_sizes([v.struct_info for v in self.outputs()])}
        return [v for v in definable_sizes([p.struct_info for p in self.func.params])
                if v in self.needed and id(v) not in known]


def _can_lift(binding: Any, in_dataflow: bool, liftable: set, mod: IRModule) -> bool:
    value = binding.value
    if not in_dataflow or isinstance(value, rx.ExternFunc):
        return False
    if not _is_pure(value, mod):  # (a kernel called directly writes its output argument)
        return False
    if isinstance(value, rx.Call) and isinstance(value.op, Op) and value.op.name == _STOP:
        return False
    if any(v not in liftable for v in free_vars(value)):
        return False
    return all(v in liftable for v in _sizes_in(binding.var.struct_info))


def _outputs(weights: list, lifted: list, from_weights: set, needed: set) -> list:
    """The transform's results: the weights used at run time, then the lifted values used at run
    time that depend on a weight (values made from nothing are cheaper to remake)."""
    return [w for w in weights if w in needed] + \
        [b.var for b in lifted if b.var in from_weights and b.var in needed]


class _SharedPlan:
    """One transform for several functions (TVM's GlobalCollectInfo): their weights correspond
    one for one (those of the first function stand for all), and a binding is lifted when every
    function computes it (the same value of corresponding variables)."""

    def __init__(self, funcs: list, mod: IRModule) -> None:
        if not funcs:
            raise TVMSError("LiftTransformParams: shared_transform found no function with num_input")
        self.weights = list(funcs[0].params[_num_input(funcs[0]):])
        self.remap: dict = {}  # a variable of any function -> the one standing for it
        for f in funcs:
            weights = f.params[_num_input(f):]
            if len(weights) != len(self.weights):
                raise TVMSError(f"LiftTransformParams: the number of parameters should be the same for "
                                f"all target functions ({len(self.weights)} weights, then {len(weights)})")
            for k, (mine, first) in enumerate(zip(weights, self.weights)):
                self._correspond(mine, first, k)
        seen = dict(self.remap)  # (every binding's stand-in, shared or not)
        liftable = set(p for f in funcs for p in f.params[_num_input(f):])
        groups: list = []  # [value with stand-ins, [bindings computing it]]
        for f in funcs:
            for blk in f.body.blocks:
                for b in blk.bindings:
                    if isinstance(b, rx.MatchCast):
                        raise TVMSError("LiftTransformParams: R.match_cast is not supported with shared_transform")
                    if not _can_lift(b, isinstance(blk, rx.DataflowBlock), liftable, mod):
                        continue
                    liftable.add(b.var)
                    value = _substitute(b.value, seen)
                    group = next((g for g in groups if structural_equal(g[0], value)), None)
                    if group is None:
                        groups.append(group := [value, []])
                    group[1].append(b)
                    seen[b.var] = group[1][0].var
        self.lifted = []
        for _, bindings in groups:
            if len(bindings) == len(funcs):  # (one per function, or repeats: TVM counts bindings)
                self.lifted.append(bindings[0])
                self.remap.update((b.var, bindings[0].var) for b in bindings)
        self.from_weights: set = set()
        self.needed: set = set()
        self.plans = {}
        for f in funcs:
            plan = self.plans[f] = _Plan(f, mod, self)
            self.from_weights.update(self.remap.get(v, v) for v in plan.from_weights)
            self.needed.update(self.remap.get(v, v) for v in plan.needed)

    def _correspond(self, mine: rx.Var, first: rx.Var, k: int) -> None:
        if not structural_equal(mine.struct_info, first.struct_info, map_free_vars=True):
            raise TVMSError(f"LiftTransformParams: the type of the parameters should be the same for all "
                            f"target functions (weight {k}, {mine.name}, differs from the first function's)")
        self.remap[mine] = first
        self.remap.update(zip(definable_sizes(mine.struct_info), definable_sizes(first.struct_info)))

    def outputs(self) -> list:
        return _outputs(self.weights, self.lifted, self.from_weights, self.needed)

    def propagated_sizes(self) -> list:
        known = {id(v) for v in definable_sizes([v.struct_info for v in self.outputs()])}
        return [v for v in definable_sizes([p.struct_info for p in self.weights])
                if v in self.needed and id(v) not in known]

    def transform_function(self) -> rx.Function:
        return _transform_function(self.weights, self.lifted, self.propagated_sizes(), self.outputs())

    def runtime_function(self, func: rx.Function) -> rx.Function:
        """``func`` taking the shared transform's outputs (its own variables where it has them)."""
        plan = self.plans[func]
        local = {self.remap[v]: v for v in [*plan.propagated_sizes(), *plan.outputs()] if v in self.remap}
        return _runtime_function(plan, [local.get(v, v) for v in self.propagated_sizes()],
                                 [local.get(v, v) for v in self.outputs()])


def _num_input(func: rx.Function) -> int:
    return int(func.attrs.get("num_input", len(func.params)))


# --------------------------------------------------------------------------- making the functions


def _transform_function(weights: list, bindings: list, sizes: list, outputs: list) -> rx.Function:
    """``transform_params``: the lifted bindings, returning ``(sizes?, *outputs)``, with the
    weights bundled into ``model_params``."""
    out_bindings, fields = [], []
    if sizes:
        fields.append(rx.ShapeExpr(tuple(sizes)))
    for var in outputs:
        out = rx.Var(var.name + "_output", var.struct_info)
        out_bindings.append(rx.VarBinding(var, out))
        fields.append(out)
    result = rx.Tuple(tuple(fields))
    if fields:  # (TVM returns an empty tuple as it is)
        result, value = rx.Var("output_tuple", result.struct_info), result
        out_bindings.append(rx.VarBinding(value, result))
    body = rx.SeqExpr((rx.DataflowBlock(tuple(bindings)), rx.DataflowBlock(tuple(out_bindings))), result)
    func = rx.Function(tuple(weights), body, result.struct_info, attrs=FrozenDict({"num_input": 0}))
    func = bundle_model_params(copy_with_new_vars(func))
    return remove_unused_bindings(canonicalize_bindings(func))


def _runtime_function(plan: _Plan, sizes: list, outputs: list) -> rx.Function:
    """The function itself, taking its inputs, the propagated sizes and the transform's outputs;
    the lifted bindings that depend on weights are gone."""
    params = plan.inputs
    if sizes:
        params.append(rx.Var("vars_from_compile_time_params", ShapeStructInfo(tuple(sizes))))
    takes = []
    for var in outputs:
        param = rx.Var(var.name, var.struct_info)
        takes.append(rx.VarBinding(param, var))
        params.append(param)
    gone = {b.var for b in plan.lifted if b.var in plan.from_weights}
    body = _without(plan.func.body, gone)
    blocks = [rx.DataflowBlock(tuple(takes)), *body.blocks]
    if not isinstance(body.body, _LEAVES):  # (TVM's normalizer binds the result when it flattens)
        result = rx.Var("gv", body.body.struct_info)
        blocks.append(rx.BindingBlock((rx.VarBinding(body.body, result),)))
        body = body.with_changes(body=result)
    body = body.with_changes(blocks=tuple(merge_blocks(blocks)))
    func = plan.func
    func = rx.Function(tuple(params), body, func.ret_struct_info, func.is_pure, func.attrs,
                       span=func.span, source_dialect=func.source_dialect)
    return canonicalize_bindings(copy_with_new_vars(func))


_LEAVES = (rx.Var, rx.Constant, rx.ShapeExpr, rx.PrimValue, rx.StringImm, rx.DataTypeImm, rx.ExternFunc)


def _without(node: Any, gone: set) -> Any:
    """``node`` without the bindings of ``gone`` and with ``stop_lift_params(x)`` read as ``x``."""

    class _Drop(Mutator):
        def visit_BindingBlock(self, blk: Any) -> Any:
            kept = tuple(self.visit(b) for b in blk.bindings if b.var not in gone)
            return type(blk)(kept, span=blk.span)

        def visit_Call(self, call: rx.Call) -> Any:
            if isinstance(call.op, Op) and call.op.name == _STOP:
                return self.visit(call.args[0])
            return self.generic_visit(call)

    return _Drop().visit(node)


def copy_with_new_vars(func: rx.Function) -> rx.Function:
    """``func`` with a fresh variable for each one it binds (TVM's ``CopyWithNewVars``), so that
    functions made of another's bindings share no variable with it."""
    fresh = {v: type(v)(v.name, v.struct_info, span=v.span) for v in bound_vars(func)}
    return _substitute(func, fresh)


def bundle_model_params(func: rx.Function, name: str = "model_params") -> rx.Function:
    """The weights of ``func`` (parameters after ``num_input``) taken as one tuple ``name``; each
    use of a weight reads its field into a variable of the weight's name just before it, as
    TVM's ``BundleModelParams`` does (its builder makes the names unique: ``w``, ``w1``, ...).

    A scalar weight that is a size variable (TVM 0.27's ``n: T.int64``) is read once, at the top
    of the function, where reading it defines the size again (``n: T.int64 = model_params[0]``);
    the tuple does not know the sizes such weights define (unless the inputs do), so a weight
    shaped by one is read back with a match_cast to its shape."""
    num_input = _num_input(func)
    weights = func.params[num_input:]
    signature = {id(v) for v in definable_sizes([p.struct_info for p in func.params[:num_input]])}
    scalar_sizes = [w for w in weights if _size_of_scalar(w) is not None]
    defined = {id(v) for v in collect([w.struct_info for w in weights] + [func.ret_struct_info], TirVar)}
    defined -= {id(_size_of_scalar(w)) for w in scalar_sizes} - signature
    fields = tuple(erase_undefined(w.struct_info, defined) for w in weights)
    bundle = rx.Var(name, TupleStructInfo(fields))
    index = {w: i for i, w in enumerate(weights)}
    names = NameSupply()
    prologue, scalar_reads = [], {}
    for w in scalar_sizes:
        read = rx.Var(names.fresh(w.name), w.struct_info)
        field = rx.TupleGetItem(bundle, index[w], fields[index[w]])
        cast = not structural_equal(fields[index[w]], w.struct_info)
        prologue.append(rx.MatchCast(field, w.struct_info, read) if cast else rx.VarBinding(field, read))
        scalar_reads[w] = read

    class _Reads(Mutator):
        def __init__(self) -> None:
            self.emitted: list = []
            self.dataflow = False
            self.prologue = prologue  # (taken by the function's body, the first sequence visited)

        def visit_Var(self, var: rx.Var) -> Any:
            i = index.get(var)
            if i is None:
                return var
            if var in scalar_reads:
                return scalar_reads[var]
            read = (rx.DataflowVar if self.dataflow else rx.Var)(names.fresh(var.name), var.struct_info)
            field = rx.TupleGetItem(bundle, i, fields[i])
            cast = not structural_equal(fields[i], var.struct_info)
            self.emitted.append(rx.MatchCast(field, var.struct_info, read) if cast else rx.VarBinding(field, read))
            return read

        def visit_Function(self, f: rx.Function) -> Any:
            return f  # (a nested function does not see the weights as its own)

        def visit_SeqExpr(self, seq: rx.SeqExpr) -> Any:
            first, self.prologue = self.prologue, []  # (the scalar weights, read before anything)
            blocks = [rx.BindingBlock(tuple(first))] if first else []
            for blk in seq.blocks:
                self.dataflow = isinstance(blk, rx.DataflowBlock)
                out = []
                for b in blk.bindings:
                    new = self.visit(b)
                    out += self.emitted
                    self.emitted = []
                    out.append(new)
                blocks.append(type(blk)(tuple(out), span=blk.span))
            self.dataflow = False
            body = self.visit(seq.body)
            if self.emitted:
                blocks.append(rx.BindingBlock(tuple(self.emitted)))
                self.emitted = []
            return seq.with_changes(blocks=tuple(blocks), body=body)

    params = (*func.params[:num_input], bundle)
    ret = erase_undefined(func.ret_struct_info, defined)
    body = _Reads().visit(func.body)
    body = body.with_changes(blocks=tuple(merge_blocks(list(body.blocks))))
    return func.with_changes(params=params, body=body, ret_struct_info=ret, struct_info=FuncStructInfo(
        tuple(p.struct_info for p in params), ret, func.is_pure))


def _size_of_scalar(param: rx.Var) -> Any:
    """The size variable a scalar parameter is (TVM 0.27: ``n: T.int64``), or None."""
    sinfo = param.struct_info
    return sinfo.value if isinstance(sinfo, PrimStructInfo) and isinstance(sinfo.value, TirVar) else None


def consume_bundled_params(func: rx.Function) -> rx.Function:
    """Each weight released from the input tuple once it has been read (TVM's
    ``ConsumeBundledParams``): the transform then holds one copy of the weights at a time."""
    bundle = func.params[-1]
    first: dict = {}
    blocks = []
    for blk in func.body.blocks:
        out = []
        for b in blk.bindings:
            value = b.value
            if isinstance(value, rx.TupleGetItem) and value.tuple_value is bundle:
                if value.index in first:
                    out.append(b.with_changes(value=first[value.index]))
                    continue
                first[value.index] = b.var
                out.append(b)
                reset = rx.Call(get_op("relax.call_pure_packed"),
                                (rx.ExternFunc("vm.builtin.tuple_reset_item"), bundle,
                                 rx.PrimValue(value.index)),
                                sinfo_args=(TupleStructInfo(()),), struct_info=TupleStructInfo(()))
                out.append(rx.VarBinding(reset, rx.DataflowVar("_", TupleStructInfo(()))))
                continue
            out.append(b)
        blocks.append(type(blk)(tuple(out), span=blk.span))
    return func.with_changes(body=func.body.with_changes(blocks=tuple(blocks)))


def compose_functions(first: rx.Function, second: rx.Function) -> rx.Function:
    """``second(first(params))`` as one function: the transform of a function lifted twice."""
    param = first.params[0]
    blocks, mid = list(first.body.blocks), first.body.body
    # (the sizes of second's input are those of first's output)
    sizes = dict(zip(definable_sizes(second.params[0].struct_info), definable_sizes(first.ret_struct_info)))
    fresh = copy_with_new_vars(_substitute(second, sizes) if sizes else second)
    blocks.append(rx.BindingBlock((rx.VarBinding(mid, fresh.params[0]),)))
    blocks += fresh.body.blocks
    body = rx.SeqExpr(tuple(merge_blocks(blocks)), fresh.body.body)
    out = rx.Function((param,), body, _substitute(second.ret_struct_info, sizes), first.is_pure and second.is_pure,
                      second.attrs, span=second.span, source_dialect=second.source_dialect)
    return remove_unused_bindings(canonicalize_bindings(out))


# --------------------------------------------------------------------------- the pass


def _targets(mod: IRModule, shared: Any) -> list:
    """The functions to lift, by name: those named in ``shared`` (a list), else every Relax
    function with ``num_input`` that is not itself a transform."""
    if isinstance(shared, (list, tuple)) and shared:
        found = []
        for name in shared:
            name = str(name)
            if name not in mod:
                raise TVMSError(f"LiftTransformParams: the module has no function {name!r} "
                                f"(shared_transform names the functions to lift)")
            func = mod[name]
            if not isinstance(func, rx.Function) or "num_input" not in func.attrs:
                raise TVMSError(f"LiftTransformParams: {name} must be a Relax function with the "
                                f"num_input attribute to share a transform")
            found.append((mod.get_global_var(name), func))
        return found
    return sorted(((gv, f) for gv, f in mod.functions_items() if isinstance(f, rx.Function)
                   and "num_input" in f.attrs and not gv.name_hint.endswith("transform_params")),
                  key=lambda item: item[0].name_hint)


@module_pass(opt_level=1, name="LiftTransformParams")
class LiftTransformParams:
    """Lifts what functions with ``num_input`` compute from their weights alone into
    ``<func>_transform_params`` (``shared_transform=False``) or one shared ``transform_params``
    (True, or the list of functions to share it)."""

    def __init__(self, shared_transform: Any = False) -> None:
        if not isinstance(shared_transform, (bool, list, tuple)):
            raise TVMSError("LiftTransformParams: shared_transform is a bool or a list of function names")
        self.shared_transform = shared_transform

    def transform_module(self, mod: IRModule, ctx: Any) -> IRModule:
        targets = _targets(mod, self.shared_transform)
        shared = bool(self.shared_transform) or isinstance(self.shared_transform, (list, tuple))
        transforms: dict = {}
        if shared:
            plan = _SharedPlan([f for _, f in targets], mod)
            for gv, func in targets:
                mod[gv] = plan.runtime_function(func)
            transforms["transform_params"] = plan.transform_function()
        else:
            for gv, func in targets:
                plan = _Plan(func, mod)
                sizes, outputs = plan.propagated_sizes(), plan.outputs()
                mod[gv] = _runtime_function(plan, sizes, outputs)
                transforms[gv.name_hint + "_transform_params"] = \
                    _transform_function(plan.weights, plan.lifted, sizes, outputs)
        for name, transform in transforms.items():
            if name in mod:
                transform = compose_functions(mod[name], transform)
                del mod[mod.get_global_var(name)]
            mod[name] = transform
        consume = bool(ctx.config.get(CONSUME_PARAMS, False))
        for gv, func in list(mod.functions_items()):
            if isinstance(func, rx.Function) and gv.name_hint.endswith("transform_params"):
                func = func.with_attr("global_symbol", gv.name_hint)
                mod[gv] = consume_bundled_params(func) if consume else func
        return tvm_print_order(mod)


register_pass(factory=LiftTransformParams)


# operators whose result is (or may be) the memory of an argument
_ALIASING = ("relax.reshape", "relax.memory.view", "relax.call_tir_inplace", "relax.call_inplace_packed", _STOP)


def writes_weights(func: rx.Function, mod: IRModule) -> bool:
    """Whether ``func`` writes in place into one of its weights (the parameters after
    ``num_input``) or a value aliasing one: ``R.call_tir_inplace`` or ``R.call_inplace_packed``
    naming it, or a kernel storing into the input it is passed as."""
    aliases = set(func.params[_num_input(func):])
    for binding in collect(func.body, (rx.VarBinding, rx.MatchCast)):
        value = binding.value
        if not any(v in aliases for v in free_vars(value)):
            continue
        if isinstance(value, rx.Call) and isinstance(value.op, Op) and value.op.name.startswith("relax.call_"):
            if any(a in aliases for a in _written_args(value, mod)):
                return True
        if isinstance(value, (rx.Var, rx.Tuple, rx.TupleGetItem)) or \
                (isinstance(value, rx.Call) and isinstance(value.op, Op) and value.op.name in _ALIASING):
            aliases.add(binding.var)
    return False


def _written_in_place(func: rx.Function, lifted: set, mod: IRModule) -> set:
    """The variables of ``lifted`` whose memory a binding not lifted writes in place (through
    aliases: ``y = v``, a reshape, the result of an in-place call that wrote ``v``)."""
    sources: dict = {}  # a variable -> those whose memory it may be
    written: list = []
    for binding in collect(func.body, (rx.VarBinding, rx.MatchCast)):
        value = binding.value
        is_op = isinstance(value, rx.Call) and isinstance(value.op, Op)
        if is_op and value.op.name in ("relax.call_tir_inplace", "relax.call_inplace_packed"):
            sources[binding.var] = _written_args(value, mod)
        elif isinstance(value, (rx.Var, rx.Tuple, rx.TupleGetItem)) or (is_op and value.op.name in _ALIASING):
            sources[binding.var] = free_vars(value)
        if is_op and value.op.name.startswith("relax.call_") and binding.var not in lifted:
            written += _written_args(value, mod)
    reached: set = set()
    while written:
        v = written.pop()
        if isinstance(v, rx.Var) and v not in reached:
            reached.add(v)
            written += sources.get(v, [])
    return reached & lifted


def _written_args(call: rx.Call, mod: IRModule) -> list:
    """The arguments a ``R.call_*`` writes into (outputs it allocates aside)."""
    name = call.op.name
    if name == "relax.call_inplace_packed":
        return [call.args[1 + k] for k in call.attrs["inplace_indices"] if 0 <= k < len(call.args) - 1]
    if name not in ("relax.call_tir", "relax.call_tir_inplace") or len(call.args) < 2:
        return []
    inputs = call.args[1].fields if isinstance(call.args[1], rx.Tuple) else (call.args[1],)
    written = []
    if name == "relax.call_tir_inplace":
        written += [inputs[k] for k in call.attrs["inplace_indices"] if 0 <= k < len(inputs)]
    callee = call.args[0]
    if isinstance(callee, GlobalVar) and callee.name_hint in mod and isinstance(mod[callee.name_hint], PrimFunc):
        written += [inputs[k] for k in written_params(mod[callee.name_hint]) if k < len(inputs)]
    return written


def lift_weights(mod: IRModule) -> tuple:
    """``tvms.compile``'s step: ``(module, lifted)``. Each function ``f`` with ``num_input``
    whose weights are transformed (a transpose, a cast, after SplitLayoutRewritePreproc the
    Matmul rule's packing) gains ``f_transform_params`` and ``f_lifted`` (``f`` as
    LiftTransformParams leaves it: taking the transformed weights); ``f`` itself stays as it was,
    so its signature and an exported library keep working. ``lifted`` maps ``f`` to
    ``(f_lifted, f_transform_params, num_input, number of weights)``, for the VM to call
    ``f_lifted`` with weights transformed once per parameter set (``runtime/param_cache.py``).
    A module with a transform already (lifted by its author, who calls it) stays as it is; so does
    a function that writes a weight in place (``writes_weights``), and the names the module has
    are not reused (``f_lifted_1`` when it has an ``f_lifted``)."""
    from .split_layout_rewrite_preproc import split_layout_rewrite_preproc

    targets = _targets(mod, False)
    if not targets or any(gv.name_hint.endswith("transform_params") for gv, _ in mod.functions_items()):
        return mod, {}
    # a function writing into a weight in place changes it at every call: nothing computed from
    # it may be run once (and the lifted call would write into a private copy)
    targets = [(gv, f) for gv, f in targets if not writes_weights(f, mod)]
    if not targets:
        return mod, {}
    split = split_layout_rewrite_preproc(mod.copy(), strict=False)  # (what cannot be split stays whole)
    plans = {gv.name_hint: _Plan(split[gv.name_hint], split) for gv, _ in targets}
    if not any(b.var in p.from_weights for p in plans.values() for b in p.lifted):
        return mod, {}
    after = LiftTransformParams()(split)
    out = split.copy()
    lifted = {}
    names = NameSupply("_")  # (a function the module has already is not replaced)
    for gv in split.get_global_vars():
        names.reserve(gv.name_hint)
    for name, plan in plans.items():
        runtime, transform = names.fresh(name + "_lifted"), name + "_transform_params"
        func = after[name]
        out[runtime] = func.with_attr("global_symbol", runtime) if "global_symbol" in func.attrs else func
        out[transform] = after[transform]
        lifted[name] = (runtime, transform, plan.num_input, len(plan.weights))
    return tvm_print_order(out), lifted


__all__ = ["LiftTransformParams", "bundle_model_params", "copy_with_new_vars", "definable_sizes", "lift_weights",
           "writes_weights"]
