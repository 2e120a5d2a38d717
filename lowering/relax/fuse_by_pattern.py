"""FuseOpsByPattern: group the bindings a pattern matches into composite functions, as TVM's
``relax.transform.FuseOpsByPattern`` does (the text it prints is TVM 0.27's, byte for byte).

::

    patterns = [("cpu_blas.matmul_bias", pattern, annotations, check)]  # or FusionPattern(...)
    mod = FuseOpsByPattern(patterns, annotate_codegen=True)(mod)

Patterns are applied one after the other, the first of the list first (the list is in order of
priority); each one runs over every dataflow block of every Relax function. A match is rooted at
a binding's call; the calls its call sub-patterns matched (followed through the variables of the
block) join the group, the rest (what wildcards matched) become the group's inputs. A match is
rejected when one of its calls already belongs to a group, or when the pattern's ``check``
says no. Each group becomes a private function ``fused_<op>_<op>...`` with attributes
``{"Composite": <pattern name>, "Primitive": True}``; equal groups share one function. With
``annotate_codegen`` it is wrapped instead in a public function ``fused_..._<backend>`` with
``{"Codegen": <backend>}`` whose body calls the composite function (``RunCodegen`` then hands
those to the backend).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterator

from ...ir import relax as rx
from ...ir.errors import TVMSError
from ...ir.expr import Op
from ...ir.expr import Var as TirVar
from ...ir.function import PrimFunc
from ...ir.module import GlobalVar, IRModule
from ...ir.struct_info import ShapeStructInfo, TensorStructInfo, call_result
from ...ir.structural import structural_equal
from ...ir.visitor import collect, walk
from ...ir.name_supply import NameSupply
from ..pass_registry import register_pass
from ..transform import module_pass
from .dpl import CallPattern, DFPattern, TupleGetItemPattern
from .passes import _substitute, tvm_print_order

# Functions made by a fusion pass; fusing inside them again would nest composites.
_FUSED_ATTRS = ("Composite", "Codegen", "Primitive")


@dataclass(frozen=True)
class PatternCheckContext:
    """What a pattern's ``check`` sees of a match (TVM's ``PatternCheckContext``).

    ``matched_expr``: the root call; ``annotated_expr``: annotation name -> the expression its
    sub-pattern matched; ``matched_bindings``: variable -> value of the bindings to be fused;
    ``var_usages``: variable -> the variables whose bindings use it (whole function);
    ``value_to_bound_var``: value -> the variable it is bound to (bindings up to the root)."""

    matched_expr: Any
    annotated_expr: dict
    matched_bindings: dict
    var_usages: dict
    value_to_bound_var: dict


@dataclass(frozen=True)
class FusionPattern:
    """A named pattern for FuseOpsByPattern: ``name`` is ``"<backend>.<what>"``;
    ``annotation_patterns`` names sub-patterns for ``check``; ``check(context) -> bool``
    accepts or rejects a match; ``attrs_getter(annotated_expr) -> dict`` adds attributes to the
    composite function."""

    name: str
    pattern: DFPattern
    annotation_patterns: dict | None = None
    check: Callable[[PatternCheckContext], bool] | None = None
    attrs_getter: Callable[[dict], dict] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise TVMSError(f"FusionPattern: the name must be a non-empty string, "
                            f"got {self.name!r}")
        if not isinstance(self.pattern, DFPattern):
            raise TVMSError(f"FusionPattern {self.name!r}: expected a DFPattern, "
                            f"got {type(self.pattern).__name__}")
        object.__setattr__(self, "annotation_patterns", dict(self.annotation_patterns or {}))

    @property
    def backend(self) -> str:
        """The name of the backend: what comes before the first dot."""
        return self.name.split(".", 1)[0]


def as_fusion_pattern(item: Any) -> FusionPattern:
    """A FusionPattern, or a tuple ``(name, pattern[, annotations[, check]])`` made into one."""
    if isinstance(item, FusionPattern):
        return item
    if isinstance(item, tuple) and 2 <= len(item) <= 5:
        return FusionPattern(*item)
    raise TVMSError(f"a fusion pattern is a FusionPattern or a tuple (name, pattern[, annotations"
                    f"[, check]]), got {type(item).__name__}")


@module_pass(opt_level=0, name="FuseOpsByPattern")
class FuseOpsByPattern:
    """``relax.transform.FuseOpsByPattern(patterns, bind_constants, annotate_codegen)``.

    ``bind_constants``: constants stay inside the fused function (else they become parameters
    ``param_0``, ... and are passed by the caller). ``entry_functions``: the names of the
    functions to fuse in (default: every Relax function that is not itself a fused one)."""

    def __init__(self, patterns: list, bind_constants: bool = True, annotate_codegen: bool = False,
                 entry_functions: list | None = None):
        self.patterns = [as_fusion_pattern(p) for p in (patterns or [])]
        self.bind_constants = bind_constants
        self.annotate_codegen = annotate_codegen
        self.entry_functions = None if entry_functions is None \
            else [str(f) for f in entry_functions]

    def transform_module(self, mod: IRModule, ctx: Any = None) -> IRModule:
        if not self.patterns:
            return mod
        for pattern in self.patterns:
            fuser = _PatternFuser(mod, pattern, self.bind_constants, self.annotate_codegen)
            for gv, func in mod.functions_items():
                if self._applies(gv, func):
                    new = fuser.fuse_function(func)
                    if new is not func:
                        mod[gv] = new
        return tvm_print_order(mod)

    def _applies(self, gv: GlobalVar, func: Any) -> bool:
        if not isinstance(func, rx.Function) or any(k in func.attrs for k in _FUSED_ATTRS):
            return False
        return self.entry_functions is None or gv.name_hint in self.entry_functions


# --------------------------------------------------------------------------- one pattern


@dataclass
class _Group:
    members: set  # the variables whose bindings the group fuses
    annotated: dict  # annotation name -> the expression it matched (for attrs_getter)


class _PatternFuser:
    """Applies one pattern to the functions of a module, adding the fused functions to it.
    Fresh caller variables (``lv``, ``lv1``, ...) are named across the whole module pass."""

    def __init__(self, mod: IRModule, pattern: FusionPattern, bind_constants: bool,
                 annotate_codegen: bool):
        self.mod = mod
        self.pattern = pattern
        self.bind_constants = bind_constants
        self.annotate_codegen = annotate_codegen
        self.names = NameSupply()

    def fuse_function(self, func: rx.Function) -> rx.Function:
        body = func.body
        if not isinstance(body, rx.SeqExpr):
            return func
        usages = _var_usages(func)
        remap: dict = {}
        blocks = []
        for block in body.blocks:
            if isinstance(block, rx.DataflowBlock):
                block = _substitute(block, remap) if remap else block
                block = self.fuse_block(block, usages, remap)
            elif remap:
                block = _substitute(block, remap)
            blocks.append(block)
        if all(a is b for a, b in zip(blocks, body.blocks)):
            return func
        result = _substitute(body.body, remap) if remap else body.body
        return func.with_changes(body=body.with_changes(blocks=tuple(blocks), body=result))

    # -- grouping
    def find_groups(self, block: rx.DataflowBlock, usages: dict) -> list[_Group]:
        bindings = [b for b in block.bindings if isinstance(b, rx.VarBinding)]
        var2val = {b.var: b.value for b in bindings}
        bound_var = {b.value: b.var for b in bindings}  # values are nodes: keyed by identity
        position = {b.var: k for k, b in enumerate(bindings)}
        group_of: dict = {}
        groups: list[_Group] = []
        for i, b in enumerate(bindings):
            if not isinstance(b.value, rx.Call) or b.var in group_of:
                continue
            matches = self.pattern.pattern.extract_matched_expr(b.value, var2val)
            if matches is None:
                continue
            members = {b.var}
            for sub, expr in matches.items():
                if isinstance(sub, (CallPattern, TupleGetItemPattern)) and expr is not b.value \
                        and expr in bound_var:
                    members.add(bound_var[expr])
            if any(v in group_of for v in members):
                continue  # part of it is already fused by an earlier match of this pattern
            if _cyclic(members, bindings[min(position[v] for v in members):i + 1]):
                continue  # TVM stops with "cyclic dependency"; the match is left unfused here
            annotated = {name: matches[p] for name, p in self.pattern.annotation_patterns.items()
                         if p in matches}
            if self.pattern.check is not None:
                context = PatternCheckContext(b.value, annotated, {v: var2val[v] for v in members},
                                              usages, {x.value: x.var for x in bindings[:i + 1]})
                if not self.pattern.check(context):
                    continue
            group = _Group(members, annotated)
            groups.append(group)
            for v in members:
                group_of[v] = group
        return groups

    def fuse_block(self, block: rx.DataflowBlock, usages: dict, remap: dict) -> rx.DataflowBlock:
        groups = self.find_groups(block, usages)
        if not groups:
            return block
        group_of = {v: g for g in groups for v in g.members}
        # one item per binding outside the groups and per group (at its first binding)
        items: list = []
        seen: set = set()
        for b in block.bindings:
            g = group_of.get(b.var)
            if g is None:
                items.append([b])
            elif id(g) not in seen:
                seen.add(id(g))
                items.append([x for x in block.bindings if x.var in g.members])
        new_bindings = []
        for item in _dependency_order(items):
            group = group_of.get(item[0].var)
            if group is None:
                new_bindings.append(item[0])
            else:
                new_bindings += self.fuse_group(item, group, usages, remap)
        return rx.DataflowBlock(tuple(_substitute(b, remap) for b in new_bindings), span=block.span)

    # -- one group
    def fuse_group(self, bindings: list, group: _Group, usages: dict, remap: dict) -> list:
        members = {b.var for b in bindings}
        inputs = _group_inputs(bindings, members, self.bind_constants)
        root = bindings[-1].var  # the match's root comes after what it matched
        outputs = [b.var for b in bindings
                   if b.var is root or _leaves_group(b.var, members, usages)]
        name = "fused_" + "_".join(b.value.op.name.replace(".", "_") for b in bindings
                                   if isinstance(b.value, rx.Call) and isinstance(b.value.op, Op))
        sizes = _sizes_to_pass(bindings, inputs)
        gv = self.add_function(name, lambda fname: self.make_function(
            fname, bindings, inputs, outputs, group.annotated, sizes))
        func = self.mod[gv]
        args = tuple(inputs) + ((rx.ShapeExpr(sizes),) if sizes else ())
        call = rx.Call(gv, args, struct_info=call_result(
            func.struct_info, tuple(a.struct_info for a in args)))
        if len(outputs) == 1:
            var = self.caller_var(outputs[0], call.struct_info)
            remap[outputs[0]] = var
            return [rx.VarBinding(call, var)]
        tuple_var = rx.DataflowVar(self.names.fresh("lv"), call.struct_info)
        out = [rx.VarBinding(call, tuple_var)]
        for i, o in enumerate(outputs):
            item = rx.TupleGetItem(tuple_var, i)
            var = self.caller_var(o, item.struct_info)
            remap[o] = var
            out.append(rx.VarBinding(item, var))
        return out

    def caller_var(self, old: rx.Var, sinfo: Any) -> rx.Var:
        """A fresh variable for a group's result: ``gv``, ``gv1``, ... when it is visible after
        the block, else ``lv``, ``lv1``, ... (numbered across the pattern's pass over the
        module, as TVM names them)."""
        if not isinstance(old, rx.DataflowVar):
            return rx.Var(self.names.fresh("gv"), sinfo)
        return rx.DataflowVar(self.names.fresh("lv"), sinfo)

    def make_function(self, name: str, bindings: list, inputs: list, outputs: list,
                      annotated: dict, sizes: tuple) -> rx.Function:
        constants = [a for a in inputs if isinstance(a, rx.Constant)]
        params = [rx.Var(f"param_{constants.index(a)}", a.struct_info)
                  if isinstance(a, rx.Constant) else rx.Var(a.name, a.struct_info) for a in inputs]
        mapping = dict(zip(inputs, params))
        if sizes:  # symbolic sizes no tensor parameter defines come as a shape, as in TVM
            params.append(rx.Var("tir_vars", ShapeStructInfo(sizes)))
        out_names = NameSupply()
        for b in bindings:
            v = b.var
            mapping[v] = rx.Var(out_names.fresh("gv"), v.struct_info) if v in outputs \
                else rx.DataflowVar(v.name, v.struct_info)
        new = tuple(rx.VarBinding(_substitute(b.value, mapping), mapping[b.var]) for b in bindings)
        result = mapping[outputs[0]] if len(outputs) == 1 else \
            rx.Tuple(tuple(mapping[o] for o in outputs))
        attrs: dict = {"Composite": self.pattern.name}
        if self.pattern.attrs_getter is not None:
            attrs.update(self.pattern.attrs_getter(dict(annotated)))
        if not self.annotate_codegen:  # the wrapper is what the backend sees as primitive
            attrs["Primitive"] = True
        composite = rx.Function(tuple(params), rx.SeqExpr((rx.DataflowBlock(new),), result),
                                attrs=attrs)
        if not self.annotate_codegen:
            return composite
        return _codegen_wrapper(name, composite, self.pattern.backend)

    def add_function(self, name: str, make: Callable[[str], rx.Function]) -> GlobalVar:
        """Add the function ``make(name)`` under ``name``, ``name1``, ... (before the backend's
        suffix, as TVM numbers them); an equal function already in the module is used instead."""
        suffix = "_" + self.pattern.backend if self.annotate_codegen else ""
        candidate, k = name + suffix, 0
        while candidate in self.mod:
            func = make(candidate)
            if structural_equal(self.mod[candidate], func, map_free_vars=True):
                return self.mod.get_global_var(candidate)
            k += 1
            candidate = f"{name}{k}{suffix}"
        gv = GlobalVar(candidate)
        self.mod[gv] = make(candidate)
        return gv


def _codegen_wrapper(name: str, composite: rx.Function, backend: str) -> rx.Function:
    """``name``: a public function for the backend whose body calls the composite function,
    bound locally as ``local_func``, as TVM prints it."""
    params = tuple(rx.Var(p.name, p.struct_info) for p in composite.params)
    local = rx.Var("local_func", composite.struct_info)
    call = rx.Call(local, params, struct_info=composite.ret_struct_info)
    output = rx.Var("output", call.struct_info)
    block = rx.BindingBlock((rx.VarBinding(composite, local), rx.VarBinding(call, output)))
    return rx.Function(params, rx.SeqExpr((block,), output),
                       attrs={"Codegen": backend, "global_symbol": name})


# --------------------------------------------------------------------------- helpers


def _operands(expr: Any) -> Iterator[Any]:
    """The variables and constants ``expr`` reads, left to right."""
    if isinstance(expr, (rx.Var, rx.Constant)):
        yield expr
    elif isinstance(expr, rx.Call):
        if isinstance(expr.op, rx.Var):
            yield expr.op
        for a in expr.args:
            yield from _operands(a)
    elif isinstance(expr, rx.Tuple):
        for f in expr.fields:
            yield from _operands(f)
    elif isinstance(expr, rx.TupleGetItem):
        yield from _operands(expr.tuple_value)


def _group_inputs(bindings: list, members: set, bind_constants: bool) -> list:
    """What the group reads from outside, in order of first use: variables, and constants
    unless they stay bound inside."""
    inputs: list = []
    for b in bindings:
        for x in _operands(b.value):
            if x in members or x in inputs:
                continue
            if isinstance(x, rx.Constant) and bind_constants:
                continue
            inputs.append(x)
    return inputs


def _sizes_to_pass(bindings: list, inputs: list) -> tuple:
    """The symbolic sizes the group uses that no input defines by a plain dimension (an input
    of shape ``((n + 1) // 2, 1)`` does not define ``n``), in order of first use."""
    defined = set()
    for a in inputs:
        sinfo = a.struct_info
        dims = sinfo.dims if isinstance(sinfo, TensorStructInfo) else \
            sinfo.values if isinstance(sinfo, ShapeStructInfo) else None
        defined.update(d for d in dims or () if isinstance(d, TirVar))
    used: dict = {}
    for node in [a.struct_info for a in inputs] + [b for b in bindings]:
        for v in collect(node, TirVar):
            used.setdefault(v, None)
    return tuple(v for v in used if v not in defined)


def _var_usages(func: rx.Function) -> dict:
    """variable -> the variables whose bindings use it."""
    usages: dict = {}
    for b in walk(func):
        if isinstance(b, (rx.VarBinding, rx.MatchCast)):
            for n in walk(b.value):
                if isinstance(n, rx.Var):
                    usages.setdefault(n, []).append(b.var)
    return usages


def _leaves_group(var: rx.Var, members: set, usages: dict) -> bool:
    """Whether the value of ``var`` is needed outside the group: a variable visible after the
    block, or one that a binding outside the group uses."""
    if not isinstance(var, rx.DataflowVar):
        return True
    return any(user not in members for user in usages.get(var, ()))


def _cyclic(members: set, bindings: list) -> bool:
    """Whether a binding outside the group both depends on the group and feeds it (the group
    could then not be one call). ``bindings``: those from the group's first to its root."""
    tainted = set(members)  # the members and what depends on them
    for b in bindings:
        used = {n for n in walk(b.value) if isinstance(n, rx.Var)}
        if b.var in members:
            if any(v in tainted and v not in members for v in used):
                return True
        elif used & tainted:
            tainted.add(b.var)
    return False


def _dependency_order(items: list) -> list:
    """The items (lists of bindings) in their order, each moved after the items that define
    what it uses (a group sits at its first binding, so an input bound between its bindings
    comes first)."""
    defined_by = {b.var: k for k, item in enumerate(items) for b in item}
    done: set = set()
    order: list = []

    def visit(k: int, active: set) -> None:
        if k in done or k in active:
            return
        active.add(k)
        for b in items[k]:
            for n in walk(b.value):
                dep = defined_by.get(n) if isinstance(n, rx.Var) else None
                if dep is not None and dep != k:
                    visit(dep, active)
        done.add(k)
        order.append(items[k])

    for k in range(len(items)):
        visit(k, set())
    return order


def _fuse_with_registered_patterns() -> Any:
    """``tvms opt -p FuseOpsByPattern``: every pattern of the backend registry, by priority
    (``import tvms`` registers the cpu_blas backend's)."""
    from .backend import registered_patterns

    return FuseOpsByPattern(registered_patterns())


register_pass("FuseOpsByPattern", _fuse_with_registered_patterns)

__all__ = ["FuseOpsByPattern", "FusionPattern", "PatternCheckContext", "as_fusion_pattern"]
