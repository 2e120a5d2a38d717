"""``FuseOps``: TVM's operator fusion of Relax dataflow blocks by op pattern.

Three steps, as TVM does them:

1. a forward dataflow graph of the bindings (``_GraphBuilder``): one node per parameter, bound
   variable and constant argument; each ``R.call_tir`` node has the ``"op_pattern"`` of its
   PrimFunc (see ``AnnotateTIROpPattern``), anything else is opaque;
2. the graph is partitioned (``_Partitioner``): each node is fused into its immediate
   post-dominator when every path between them is of a fusable kind (three phases: anchors such
   as matmul first, then injective ops, then tuples), in union-find groups;
3. each group of more than one binding becomes a private Relax function
   ``fused_<callee names>`` with ``{"Primitive": True}``, and the block calls it instead
   (``_Fusor``).
"""
from __future__ import annotations

from typing import Any

from ...ir import relax as rx
from ...ir.expr import Op, Var as TirVar
from ...ir.module import GlobalVar, IRModule
from ...ir.node import Node
from ...ir.struct_info import ShapeStructInfo, TupleStructInfo, definable_sizes
from ...ir.visitor import collect, walk
from ..pass_registry import register_pass
from ..transform import module_pass
from .expr_functor import PyExprMutator
from .op_pattern import (BROADCAST, COMM_REDUCE_KIND, ELEMWISE, INJECTIVE, OPAQUE,
                         OUT_EWISE_FUSABLE, TUPLE)
from .passes import _substitute, tvm_print_order

MAX_FUSED_OPS = 256  # TVM's default for the "relax.FuseOps.max_depth" config
_CALL_TIR = ("relax.call_tir", "relax.call_tir_inplace")


# --------------------------------------------------------------------------- the graph


class _Node:
    __slots__ = ("ref", "index", "extern_ref", "pattern", "outputs")

    def __init__(self, ref: Any, index: int, pattern: int, extern_ref: bool):
        self.ref, self.index, self.pattern, self.extern_ref = ref, index, pattern, extern_ref
        self.outputs: list = []  # (node, edge pattern), in the order the edges were added


class _GraphBuilder:
    """The indexed forward graph of a module's Relax functions, nodes in post-DFS order."""

    def __init__(self, mod: IRModule):
        self.mod = mod
        self.nodes: dict[int, _Node] = {}  # id(relax object) -> node
        self.order: list[_Node] = []

    def add(self, ref: Any, pattern: int, extern_ref: bool = False) -> _Node:
        node = _Node(ref, len(self.order), pattern, extern_ref)
        self.nodes[id(ref)] = node
        self.order.append(node)
        return node

    def function(self, func: rx.Function) -> None:
        for p in func.params:
            self.add(p, OPAQUE, extern_ref=True)
        for block in func.body.blocks:
            for b in block.bindings:
                self.binding(b)

    def binding(self, b: Node) -> None:
        if isinstance(b, rx.MatchCast):
            self.add(b.var, OPAQUE)
            return
        value = b.value
        pattern, leaves = OPAQUE, ()
        if isinstance(value, rx.Call):
            leaves = value.args
            if isinstance(value.op, Op) and value.op.name in _CALL_TIR:
                pattern = int(self.mod[value.args[0]].attrs.get("op_pattern", OPAQUE))
                leaves = value.args[1].fields
        elif isinstance(value, rx.TupleGetItem):
            pattern, leaves = INJECTIVE, (value.tuple_value,)
        else:
            leaves = tuple(n for n in _post_order(value) if isinstance(n, (rx.Var, rx.Constant)))
        # the binding's node is numbered after the constants among its arguments (post-DFS)
        node = _Node(b.var, -1, pattern, not isinstance(b.var, rx.DataflowVar))
        self.nodes[id(b.var)] = node
        for a in leaves:
            self.leaf(a, node, pattern)
        node.index = len(self.order)
        self.order.append(node)

    def leaf(self, e: Any, node: _Node, pattern: int) -> None:
        if isinstance(e, rx.Tuple):
            for f in e.fields:
                self.leaf(f, node, pattern)
            return
        if not isinstance(e, (rx.ShapeExpr, rx.Var, rx.Constant, rx.PrimValue, rx.StringImm,
                              rx.DataTypeImm)):
            return  # GlobalVar, ExternFunc, Op
        src = self.nodes.get(id(e))
        if src is None:
            src = self.add(e, OPAQUE)
        src.outputs.append((node, pattern))


def _post_order(e: Any) -> list:
    """The Relax expressions under ``e`` (children before parents)."""
    return list(reversed([n for n in walk(e) if isinstance(n, rx.RelaxExpr)]))


def build_graph(mod: IRModule) -> _GraphBuilder:
    graph = _GraphBuilder(mod)
    for _, f in mod.functions_items():
        if isinstance(f, rx.Function) and not _is_primitive(f) and "Codegen" not in f.attrs:
            graph.function(f)
    return graph


def _is_primitive(f: rx.Function) -> bool:
    return bool(f.attrs.get("Primitive", False))


# --------------------------------------------------------------------------- post-dominators


class _DomNode:
    __slots__ = ("gnode", "parent", "depth", "pattern")

    def __init__(self, gnode: _Node, parent: "_DomNode | None", depth: int, pattern: int):
        self.gnode, self.parent, self.depth, self.pattern = gnode, parent, depth, pattern


def _post_dominators(order: list) -> list:
    """The immediate post-dominator of each node (by LCA over its outputs, the graph being a
    DAG), with the strongest pattern met on the way there."""
    tree: list = [None] * len(order)
    for index in range(len(order) - 1, -1, -1):
        g = order[index]
        if g.extern_ref or not g.outputs:
            tree[index] = _DomNode(g, None, 1, OPAQUE if g.extern_ref else ELEMWISE)
            continue
        pattern = ELEMWISE
        parent = None
        for i, (out, edge) in enumerate(g.outputs):
            node = tree[out.index]
            if i == 0:
                parent = node
            else:
                parent, pattern = _lca(parent, node, pattern)
            pattern = max(pattern, edge)
        tree[index] = _DomNode(g, parent, parent.depth + 1 if parent else 1, pattern)
    return tree


def _lca(a: Any, b: Any, pattern: int) -> tuple:
    while a is not b:
        if a is None or b is None:
            return None, pattern
        if a.depth < b.depth:
            pattern, b = max(pattern, b.pattern), b.parent
        elif b.depth < a.depth:
            pattern, a = max(pattern, a.pattern), a.parent
        else:
            pattern = max(pattern, a.pattern, b.pattern)
            a, b = a.parent, b.parent
    return a, pattern


# --------------------------------------------------------------------------- partitioning


class Group:
    """A union-find set of graph nodes that become one function."""

    __slots__ = ("parent", "pattern", "anchor", "num_nodes", "attrs")

    def __init__(self, pattern: int, anchor: Any):
        self.parent: Group | None = None
        self.pattern, self.anchor, self.num_nodes = pattern, anchor, 1
        self.attrs: dict = {}

    def root(self) -> "Group":
        r = self
        while r.parent is not None:
            r = r.parent
        p = self
        while p is not r:  # path compression
            p.parent, p = r, p.parent
        return r


def _combine(a: int, b: int) -> int:
    if a > BROADCAST and b > BROADCAST:
        raise ValueError("FuseOps: cannot merge two complex groups together")
    return max(a, b)


class _Partitioner:
    def __init__(self, order: list, opt_level: int, max_depth: int):
        self.order, self.opt_level, self.max_depth = order, opt_level, max_depth
        self.groups = [Group(n.pattern, n.ref if n.pattern == OUT_EWISE_FUSABLE else None)
                       for n in order]
        self.visited: set = set()

    def partition(self) -> list:
        if self.opt_level == 0:
            return self.groups
        tree = _post_dominators(self.order)
        for phase in range(3):
            self.run(tree, phase)
        return self.groups

    def check_path(self, src: _Node, sink: _Node, cond: Any) -> bool:
        """Every node on a path from ``src`` (excluded) to ``sink`` satisfies ``cond``."""
        self.visited = set()
        return all(self._check(out, sink, cond) for out, _ in src.outputs)

    def _check(self, src: _Node, sink: _Node, cond: Any) -> bool:
        if src.index in self.visited:
            return True
        self.visited.add(src.index)
        if not cond(self.groups[src.index].root().pattern, src is sink):
            return False
        if src is sink:
            return True
        return all(self._check(out, sink, cond) for out, _ in src.outputs)

    def merge(self, child: Group, parent: Group) -> None:
        child, parent = child.root(), parent.root()
        if child is parent:
            return
        parent.num_nodes += child.num_nodes
        child.parent = parent
        if child.anchor is not None:
            parent.anchor = child.anchor
            parent.pattern = _combine(child.pattern, parent.pattern)

    def commit(self, src: _Node, sink: _Node) -> None:
        target = self.groups[sink.index]
        self.visited = set()
        self._commit(src, sink, target)

    def _commit(self, src: _Node, sink: _Node, target: Group) -> None:
        if src is sink or src.index in self.visited:
            return
        self.visited.add(src.index)
        self.merge(self.groups[src.index], target)
        for out, _ in src.outputs:
            self._commit(out, sink, target)

    def count_with_child(self, child: _Node, dom_parent: _Node) -> int:
        self.visited = set()
        return self.groups[dom_parent.index].root().num_nodes + self._count(child, dom_parent)

    def _count(self, src: _Node, sink: _Node) -> int:
        if src is sink or src.index in self.visited:
            return 0
        self.visited.add(src.index)
        # TVM adds the node's own group size here, not its root's
        return self.groups[src.index].num_nodes + sum(self._count(o, sink) for o, _ in src.outputs)

    def run(self, tree: list, phase: int) -> None:
        for nid, gnode in enumerate(self.order):
            dom, group = tree[nid], self.groups[nid]
            if group.pattern == OPAQUE or dom.parent is None:
                continue
            sink = dom.parent.gnode
            if self.count_with_child(gnode, sink) > self.max_depth:
                continue
            parent_group = self.groups[sink.index]
            if phase == 2:
                # injective ops join a tuple that was already fused into injective consumers
                if group.pattern > INJECTIVE or parent_group.root().pattern == TUPLE:
                    continue
                if parent_group.pattern == TUPLE and parent_group.root().pattern <= INJECTIVE:
                    if self.check_path(gnode, sink, lambda k, s: k <= INJECTIVE):
                        self.commit(gnode, sink)
                continue
            if group.root() is parent_group.root() or parent_group.pattern == TUPLE:
                continue
            if group.pattern == OUT_EWISE_FUSABLE:
                if phase == 0 and dom.pattern == ELEMWISE \
                        and self.check_path(gnode, sink, lambda k, s: k <= BROADCAST):
                    self.commit(gnode, sink)
            elif group.pattern <= BROADCAST:
                if dom.pattern <= INJECTIVE or dom.pattern == COMM_REDUCE_KIND:
                    if self.check_path(gnode, sink, _into_anchor):
                        self.commit(gnode, sink)
            elif group.pattern in (INJECTIVE, TUPLE):
                if phase == 1 and self.check_path(gnode, sink, lambda k, s: k <= INJECTIVE):
                    self.commit(gnode, sink)


def _into_anchor(kind: int, is_sink: bool) -> bool:
    """Between an element-wise/broadcast op and its post-dominator: injective ops on the way,
    and the sink may already be fused into a reduction or an out-element-wise-fusable anchor."""
    if not is_sink:
        return kind <= INJECTIVE
    return kind <= BROADCAST or kind in (COMM_REDUCE_KIND, INJECTIVE, OUT_EWISE_FUSABLE)


# --------------------------------------------------------------------------- grouped functions


def _relax_vars(value: Any) -> list:
    return [n for n in _post_order(value) if isinstance(n, rx.Var)]


def _inlinable(e: Any) -> bool:
    """A constant shape or scalar: FuseOps copies it into the function instead of passing it."""
    if isinstance(e, rx.Tuple):
        return all(_inlinable(f) for f in e.fields)
    if isinstance(e, rx.PrimValue):
        return not collect(e.value, TirVar)
    if isinstance(e, rx.ShapeExpr):
        return not collect(e.values, TirVar)
    return False


class _FunctionCreator(PyExprMutator):
    """Collects one group's bindings, then builds its function: values used from outside become
    parameters (named after them), variables used outside become its outputs."""

    def __init__(self, outer_bindings: dict, attrs: dict):
        super().__init__()
        self.outer = outer_bindings
        self.attrs = attrs
        self.bindings: list = []
        self.params: list = []
        self.arguments: list = []
        self.name = "fused"
        self.function: rx.Function | None = None
        self.defined: set = set()
        self.outputs: list = []
        self.inlined: dict = {}
        self.n_const = 0
        # id(tuple argument) -> (the tuple, the field indices read): a tuple the group only
        # reads fields of is passed field by field
        self.partial: dict = {}

    def append_binding(self, b: Node) -> None:
        if isinstance(b, rx.VarBinding):
            value = b.value
            if isinstance(value, rx.Call):
                if isinstance(value.op, Op) and value.op.name in _CALL_TIR:
                    self.name += "_" + value.args[0].name_hint
                    for a in value.args[1].fields:
                        self.add_param(a)
                else:
                    if isinstance(value.op, Op):
                        self.name += "_" + value.op.name
                    elif isinstance(value.op, GlobalVar):
                        callee = value.op.name_hint  # fused_a_b called in a group: "_a_b"
                        self.name += "_" + callee.removeprefix("fused_")
                    for a in value.args:
                        for f in (a.fields if isinstance(a, rx.Tuple) else (a,)):
                            self.add_param(f)
                        self.partial.pop(id(a), None)  # the whole tuple is used
            elif isinstance(value, rx.TupleGetItem):
                self.add_param(value.tuple_value)
                if id(value.tuple_value) in self.partial:
                    self.partial[id(value.tuple_value)][1].append(value.index)
            self.defined.add(b.var)
            if not isinstance(b.var, rx.DataflowVar):
                self.append_output(b.var)
        self.bindings.append(b)

    def append_output(self, var: rx.Var) -> None:
        if not any(v is var for v in self.outputs):
            self.outputs.append(var)

    def add_param(self, e: Any) -> None:
        if any(a is e for a in self.arguments):
            return
        if isinstance(e, rx.PrimValue):
            # scalars (``n`` of a call_tir's size arguments) stay in the body, as TVM keeps them;
            # a symbolic size they use becomes part of the ``tir_vars`` parameter
            return
        is_var = isinstance(e, rx.Var)
        if is_var and e not in self.defined:
            bound, seen = e, set()
            while isinstance(bound, rx.Var) and bound in self.outer and id(bound) not in seen:
                seen.add(id(bound))
                bound = self.outer[bound]
            if bound is not e and _inlinable(bound):
                self.inlined[e] = bound
                return
        if is_var and e in self.defined:
            return
        if _inlinable(e):
            return
        name = e.name if is_var else f"param_{self.n_const}"
        if not is_var:
            self.n_const += 1
        self.arguments.append(e)
        self.params.append(rx.Var(name, e.struct_info))
        if isinstance(e.struct_info, TupleStructInfo):  # until a use needs more than fields
            self.partial[id(e)] = (e, [])

    def visit_expr(self, expr: Node) -> Node:
        for a, p in zip(self.arguments, self.params):
            if a is expr:
                return p
        if isinstance(expr, rx.Var) and expr in self.inlined:
            return self.inlined[expr]
        return super().visit_expr(expr)

    def split_partial_tuples(self) -> dict:
        """Each partially used tuple parameter becomes one parameter per field read (``t_1``),
        its argument ``t[1]``; returns id(tuple) -> {index: parameter}."""
        fields: dict = {}
        for tup, indices in self.partial.values():
            at = next(i for i, a in enumerate(self.arguments) if a is tup)
            name = self.params[at].name
            params = [rx.Var(f"{name}_{i}", tup.struct_info.fields[i]) for i in indices]
            self.arguments[at:at + 1] = [rx.TupleGetItem(tup, i) for i in indices]
            self.params[at:at + 1] = params
            fields[id(tup)] = dict(zip(indices, params))
        return fields

    def create(self) -> None:
        fields = self.split_partial_tuples()
        self.builder_.begin_block(True)
        results: list = [None] * len(self.outputs)
        for b in self.bindings:
            index = next((i for i, v in enumerate(self.outputs) if v is b.var), None)
            value = b.value
            if isinstance(value, rx.TupleGetItem) and id(value.tuple_value) in fields:
                param = fields[id(value.tuple_value)][value.index]
                self.set_var_remap(b.var, param)
                if index is not None:
                    results[index] = param
                continue
            if index is None:
                self.visit_binding(b)
                continue
            out = self.builder_.emit_output(self.visit_expr(b.value))
            self.set_var_remap(b.var, out)
            results[index] = out
        block = self.builder_.end_block()
        if not results:
            return  # nothing of the group is used: dead code, left to DeadCodeElimination
        body = results[0] if len(results) == 1 else rx.Tuple(tuple(results))
        attrs = dict(self.attrs)
        attrs["Primitive"] = True
        seq = rx.SeqExpr((rx.DataflowBlock(block.bindings),), body)
        func = rx.Function(tuple(self.params), seq, None, True, attrs)
        free = _free_sizes(func)
        if free:
            self.params.append(rx.Var("tir_vars", ShapeStructInfo(tuple(free))))
            self.arguments.append(rx.ShapeExpr(tuple(free)))
            func = rx.Function(tuple(self.params), seq, None, True, attrs)
        self.function = renew_sizes(func)


def _free_sizes(func: rx.Function) -> list:
    """Symbolic sizes the function uses but its parameters do not define, last first used first:
    TVM lists them from a hash set, which yields them in that order (``R.zeros(R.shape([m, n]))``
    gives ``tir_vars: R.Shape([n, m])``; with many sizes TVM's own order varies from run to run)."""
    defined = {id(v) for v in definable_sizes([p.struct_info for p in func.params])}
    free: list = []
    for v in [*collect(tuple(p.struct_info for p in func.params), TirVar),
              *collect(func.body, TirVar)]:
        if id(v) not in defined and not any(v is f for f in free):
            free.append(v)
    return free[::-1]


def renew_sizes(func: rx.Function) -> rx.Function:
    """``func`` with fresh symbolic-size variables in place of those its parameters define, so
    that no two functions share one (TVM's SymbolicVarRenewMutator)."""
    mapping: dict = {}
    for p in func.params:
        for v in collect(p.struct_info, TirVar):
            if v not in mapping:
                mapping[v] = type(v)(v.name, v.dtype, v.type_annotation)
    return _substitute(func, mapping) if mapping else func


class _Fusor(PyExprMutator):
    """Rewrites the dataflow blocks of the module's Relax functions by the partition."""

    def __init__(self, mod: IRModule, group_of: dict):
        super().__init__(mod)
        self.group_of = group_of  # id(relax object) -> Group
        self.outer: dict = {}
        self.deps: dict = {}

    def transform(self, mod: IRModule) -> IRModule:
        for gv, f in mod.functions_items():
            if isinstance(f, rx.Function) and not _is_primitive(f) and "Codegen" not in f.attrs:
                self.outer = {b.var: b.value for b in walk(f) if isinstance(b, rx.VarBinding)}
                self.builder_.update_func(gv, self.visit_expr(f))
        return self.builder_.get()

    def group(self, var: Any) -> Group:
        return self.group_of[id(var)].root()

    def visit_dataflow_block_(self, block: rx.DataflowBlock) -> rx.BindingBlock:
        creators: dict = {}  # id(group) -> creator
        for b in block.bindings:
            g = self.group(b.var)
            if g.num_nodes == 1 and not g.attrs:
                continue
            if id(g) not in creators:
                creators[id(g)] = _FunctionCreator(self.outer, g.attrs)
            creators[id(g)].append_binding(b)
        self.collect_boundary(block.bindings, creators)
        for creator in creators.values():
            creator.create()

        self.builder_.begin_block(True)
        for b in self.topo_sort(block.bindings):
            g = self.group(b.var)
            if g.num_nodes == 1 and not g.attrs:
                self.visit_binding(b)
                continue
            creator = creators[id(g)]
            if creator.function is None or creator.bindings[-1] is not b:
                continue
            gv = self.builder_.add_func(creator.function, creator.name)
            call = rx.Call(gv, tuple(self.visit_expr(a) for a in creator.arguments))
            outs = creator.outputs
            single = len(outs) == 1
            if single and not isinstance(outs[0], rx.DataflowVar):
                new = self.builder_.emit_output(call)
            else:
                new = self.builder_.emit(call)
            if single:
                self.set_var_remap(outs[0], new)
                continue
            for i, out in enumerate(outs):
                item = rx.TupleGetItem(new, i)
                emit = self.builder_.emit if isinstance(out, rx.DataflowVar) \
                    else self.builder_.emit_output
                self.set_var_remap(out, emit(item))
        new_block = self.builder_.end_block()
        return rx.DataflowBlock(new_block.bindings, span=block.span)

    def collect_boundary(self, bindings: tuple, creators: dict) -> None:
        for b in bindings:
            cur = self.group(b.var)
            for used in _relax_vars(b.value):
                if id(used) not in self.group_of:
                    continue
                producer = self.group(used)
                if producer is cur:
                    continue
                if any(d is cur for d in self.deps.get(id(producer), [])):
                    raise ValueError(f"FuseOps: a cyclic dependency between the groups of "
                                     f"{b.var.name!r} and {used.name!r}")
                self.deps.setdefault(id(cur), []).append(producer)
                if id(producer) in creators:
                    creators[id(producer)].append_output(used)

    def topo_sort(self, bindings: tuple) -> list:
        """The bindings ordered so that each group comes after the groups it uses, otherwise in
        their original order."""
        per_group: dict = {}
        order: list = []
        for b in bindings:
            g = self.group(b.var)
            order.append(g)
            per_group.setdefault(id(g), []).append(b)
        visited: set = set()
        result: list = []

        def visit(g: Group) -> None:
            if id(g) in visited:
                return
            visited.add(id(g))
            for dep in self.deps.get(id(g), []):
                visit(dep)
            result.extend(per_group.get(id(g), []))

        for g in order:
            visit(g)
        return result


def fuse_ops(mod: IRModule, opt_level: int, max_depth: int = MAX_FUSED_OPS) -> IRModule:
    graph = build_graph(mod)
    groups = _Partitioner(graph.order, opt_level, max_depth).partition()
    group_of = {id(n.ref): groups[n.index].root() for n in graph.order}
    return tvm_print_order(_Fusor(mod, group_of).transform(mod))


@module_pass(opt_level=0, name="FuseOps")
class FuseOps:
    """Groups the bindings of dataflow blocks into fused private functions by op pattern;
    ``fuse_opt_level`` -1 takes the PassContext's opt_level (0 fuses nothing)."""

    def __init__(self, fuse_opt_level: int = -1):
        self.fuse_opt_level = fuse_opt_level

    def transform_module(self, mod: IRModule, ctx: Any) -> IRModule:
        level = ctx.opt_level if self.fuse_opt_level == -1 else self.fuse_opt_level
        depth = int(ctx.config.get("relax.FuseOps.max_depth", MAX_FUSED_OPS))
        return fuse_ops(mod, level, depth)


register_pass(factory=FuseOps)

__all__ = ["FuseOps", "Group", "build_graph", "fuse_ops", "renew_sizes"]
