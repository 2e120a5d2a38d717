"""Python visitors and mutators over Relax, as TVM's ``relax.expr_functor``.

::

    @mutator
    class ReluRewriter(PyExprMutator):
        def visit_call_(self, call):
            if call.op.name == "relax.nn.relu":
                return relax.op.nn.gelu(call.args[0])
            return super().visit_call_(call)

    rewriter = ReluRewriter(mod)
    for gv, func in mod.functions_items():
        if isinstance(func, relax.Function):
            rewriter.builder_.update_func(gv, rewriter.visit_expr(func))
    new_mod = rewriter.builder_.get()

``visit_expr`` dispatches on the node's class to a ``visit_<kind>_`` hook (``visit_call_``,
``visit_var_``, ``visit_function_``, ...); bindings go through ``visit_binding`` (then
``visit_var_binding_`` / ``visit_match_cast_``), blocks through ``visit_binding_block`` and
variables they define through ``visit_var_def``. Override a hook and call ``super()`` to go on
into the children.

The mutator keeps A-normal form as TVM's does: each binding's new value is normalized by
``builder_`` (nested calls are bound to fresh variables in the current block, struct info is
filled in); a variable whose value's struct info changed is replaced by a new variable of the
same name, and later uses follow it (``var_remap_``). Nothing that did not change is rebuilt.
"""
from __future__ import annotations

from typing import Any

from ...ir import relax as rx
from ...ir.errors import TVMSError
from ...ir.expr import Op
from ...ir.module import GlobalVar, IRModule
from ...ir.node import Node
from ...ir.struct_info import ObjectStructInfo
from ...ir.structural import structural_equal
from ...ir.relax import merge_blocks
from ...script.block_builder import BlockBuilder

# node class -> hook name; subclasses come before their bases (DataflowVar before Var)
_EXPR_HOOKS: list[tuple[type, str]] = [
    (rx.Constant, "visit_constant_"),
    (rx.Tuple, "visit_tuple_"),
    (rx.DataflowVar, "visit_dataflow_var_"),
    (rx.Var, "visit_var_"),
    (rx.ShapeExpr, "visit_shape_expr_"),
    (rx.ExternFunc, "visit_extern_func_"),
    (GlobalVar, "visit_global_var_"),
    (rx.Function, "visit_function_"),
    (rx.Call, "visit_call_"),
    (rx.SeqExpr, "visit_seq_expr_"),
    (rx.If, "visit_if_"),
    (Op, "visit_op_"),
    (rx.TupleGetItem, "visit_tuple_getitem_"),
    (rx.PrimValue, "visit_prim_value_"),
    (rx.StringImm, "visit_string_imm_"),
    (rx.DataTypeImm, "visit_data_type_imm_"),
]
_HOOK_OF: dict[type, str] = {}


def _hook(node: Any) -> str:
    cls = type(node)
    name = _HOOK_OF.get(cls)
    if name is None:
        for klass, hook in _EXPR_HOOKS:
            if isinstance(node, klass):
                name = _HOOK_OF[cls] = hook
                break
        else:
            raise TVMSError(f"visit_expr: not a Relax expression: {type(node).__name__}")
    return name


class MutatorBuilder(BlockBuilder):
    """The ``builder_`` of a mutator: a BlockBuilder over the module being rewritten, which can
    also open a bare binding block (outside ``with bb.function``) to normalize into."""

    def in_block(self) -> bool:
        return bool(self._frames)


# --------------------------------------------------------------------------- visitor


def _dispatch_binding(functor: Any, binding: Node) -> None:
    """Send a binding to the visitor's or mutator's hook for its kind."""
    if isinstance(binding, rx.MatchCast):
        functor.visit_match_cast_(binding)
    elif isinstance(binding, rx.VarBinding):
        functor.visit_var_binding_(binding)
    else:
        raise TVMSError(f"visit_binding: not a binding: {type(binding).__name__}")


class PyExprVisitor:
    """Walks a Relax expression; every hook returns None. Override hooks, call ``super()``."""

    def visit_expr(self, expr: Node) -> None:
        getattr(self, _hook(expr))(expr)

    # -- bindings and blocks
    def visit_binding(self, binding: Node) -> None:
        _dispatch_binding(self, binding)

    def visit_var_binding_(self, binding: rx.VarBinding) -> None:
        self.visit_expr(binding.value)
        self.visit_var_def(binding.var)

    def visit_match_cast_(self, binding: rx.MatchCast) -> None:
        self.visit_expr(binding.value)
        self.visit_var_def(binding.var)

    def visit_binding_block(self, block: rx.BindingBlock) -> None:
        if isinstance(block, rx.DataflowBlock):
            self.visit_dataflow_block_(block)
        else:
            self.visit_binding_block_(block)

    def visit_binding_block_(self, block: rx.BindingBlock) -> None:
        for b in block.bindings:
            self.visit_binding(b)

    def visit_dataflow_block_(self, block: rx.DataflowBlock) -> None:
        for b in block.bindings:
            self.visit_binding(b)

    def visit_var_def(self, var: rx.Var) -> None:
        if isinstance(var, rx.DataflowVar):
            self.visit_dataflow_var_def_(var)
        else:
            self.visit_var_def_(var)

    def visit_var_def_(self, var: rx.Var) -> None:
        pass

    def visit_dataflow_var_def_(self, var: rx.DataflowVar) -> None:
        pass

    # -- expressions
    def visit_function_(self, func: rx.Function) -> None:
        for p in func.params:
            self.visit_var_def(p)
        self.visit_expr(func.body)

    def visit_seq_expr_(self, seq: rx.SeqExpr) -> None:
        for block in seq.blocks:
            self.visit_binding_block(block)
        self.visit_expr(seq.body)

    def visit_call_(self, call: rx.Call) -> None:
        self.visit_expr(call.op)
        for a in call.args:
            self.visit_expr(a)

    def visit_tuple_(self, tup: rx.Tuple) -> None:
        for f in tup.fields:
            self.visit_expr(f)

    def visit_tuple_getitem_(self, item: rx.TupleGetItem) -> None:
        self.visit_expr(item.tuple_value)

    def visit_if_(self, node: rx.If) -> None:
        self.visit_expr(node.cond)
        self.visit_expr(node.true_branch)
        self.visit_expr(node.false_branch)

    def _leaf(self, node: Node) -> None:
        pass

    visit_constant_ = visit_var_ = visit_dataflow_var_ = visit_shape_expr_ = _leaf
    visit_extern_func_ = visit_global_var_ = visit_op_ = visit_prim_value_ = _leaf
    visit_string_imm_ = visit_data_type_imm_ = _leaf


# --------------------------------------------------------------------------- mutator


class PyExprMutator:
    """Rewrites a Relax expression bottom-up; each hook returns the new expression (the very
    same object when nothing changed). ``builder_`` is a BlockBuilder over ``mod``: collect the
    rewritten functions with ``builder_.update_func`` and take the module with ``builder_.get()``."""

    def __init__(self, mod: IRModule | None = None):
        self.builder_ = MutatorBuilder(mod)
        self.var_remap_: dict[int, rx.Var] = {}  # id(old variable) -> its replacement

    def visit_expr(self, expr: Node) -> Node:
        return getattr(self, _hook(expr))(expr)

    def visit_expr_post_order(self, expr: Node) -> Node:
        """``expr`` with its children visited (the default hook's work), then normalized."""
        return self.builder_.normalize(getattr(PyExprMutator, _hook(expr))(self, expr))

    def lookup_binding(self, var: rx.Var) -> Any:
        return self.builder_.lookup_binding(var)

    def set_var_remap(self, old: rx.Var, new: rx.Var) -> None:
        self.var_remap_[id(old)] = new

    def get_var_remap(self, var: rx.Var) -> rx.Var:
        return self.var_remap_.get(id(var), var)

    # -- bindings and blocks: they emit into builder_'s current block
    def visit_binding(self, binding: Node) -> None:
        _dispatch_binding(self, binding)

    def visit_var_binding_(self, binding: rx.VarBinding) -> None:
        value = self.builder_.normalize(self.visit_expr(binding.value))
        var = self.visit_var_def(binding.var)
        if value is binding.value and var is binding.var:
            self.builder_.emit_normalized(binding)
            return
        sinfo = getattr(value, "struct_info", None)
        if sinfo is not None and type(sinfo) is not ObjectStructInfo \
                and not structural_equal(var.struct_info, sinfo):
            new_var = type(var)(var.name, sinfo, span=var.span)
            self.set_var_remap(binding.var, new_var)
            var = new_var
        self.builder_.emit_normalized(rx.VarBinding(value, var, span=binding.span))

    def visit_match_cast_(self, binding: rx.MatchCast) -> None:
        value = self.builder_.normalize(self.visit_expr(binding.value))
        var = self.visit_var_def(binding.var)
        if value is binding.value and var is binding.var:
            self.builder_.emit_normalized(binding)
        else:
            self.builder_.emit_normalized(rx.MatchCast(value, binding.struct_info, var,
                                                       span=binding.span))

    def visit_binding_block(self, block: rx.BindingBlock) -> rx.BindingBlock:
        if isinstance(block, rx.DataflowBlock):
            return self.visit_dataflow_block_(block)
        return self.visit_binding_block_(block)

    def visit_binding_block_(self, block: rx.BindingBlock) -> rx.BindingBlock:
        return self._rebuild_block(block, False)

    def visit_dataflow_block_(self, block: rx.DataflowBlock) -> rx.BindingBlock:
        return self._rebuild_block(block, True)

    def _rebuild_block(self, block: rx.BindingBlock, dataflow: bool) -> rx.BindingBlock:
        self.builder_.begin_block(dataflow)
        try:
            for b in block.bindings:
                self.visit_binding(b)
        finally:
            new = self.builder_.end_block()
        if len(new.bindings) == len(block.bindings) and all(
                a is b for a, b in zip(new.bindings, block.bindings)):
            return block
        return type(block)(new.bindings, span=block.span)

    def visit_var_def(self, var: rx.Var) -> rx.Var:
        if isinstance(var, rx.DataflowVar):
            return self.visit_dataflow_var_def_(var)
        return self.visit_var_def_(var)

    def visit_var_def_(self, var: rx.Var) -> rx.Var:
        return var

    def visit_dataflow_var_def_(self, var: rx.DataflowVar) -> rx.Var:
        return var

    def visit_with_new_scope(self, expr: Node) -> Node:
        """A function body or a branch: a SeqExpr whose bindings stay inside it."""
        if isinstance(expr, rx.SeqExpr):
            return self.visit_expr(expr)
        self.builder_.begin_block(False)
        try:
            body = self.builder_.normalize(self.visit_expr(expr))
        finally:
            prologue = self.builder_.end_block()
        if not prologue.bindings:
            return body
        return rx.SeqExpr((prologue,), body, getattr(body, "struct_info", ObjectStructInfo()))

    # -- expressions
    def visit_function_(self, func: rx.Function) -> Node:
        params = tuple(self.visit_var_def(p) for p in func.params)
        body = self.visit_with_new_scope(func.body)
        if body is func.body and all(a is b for a, b in zip(params, func.params)):
            return func
        return rx.Function(params, body, func.ret_struct_info, func.is_pure, func.attrs, span=func.span,
                           source_dialect=func.source_dialect)

    def visit_seq_expr_(self, seq: rx.SeqExpr) -> Node:
        blocks = [self.visit_binding_block(b) for b in seq.blocks]
        self.builder_.begin_block(False)
        try:
            body = self.builder_.normalize(self.visit_expr(seq.body))
        finally:
            prologue = self.builder_.end_block()
        if prologue.bindings:
            blocks.append(prologue)
        blocks = merge_blocks(blocks)
        if body is seq.body and len(blocks) == len(seq.blocks) \
                and all(a is b for a, b in zip(blocks, seq.blocks)):
            return seq
        return rx.SeqExpr(tuple(blocks), body, getattr(body, "struct_info", ObjectStructInfo()),
                          span=seq.span)

    def visit_call_(self, call: rx.Call) -> Node:
        op = self.visit_expr(call.op)
        args = tuple(self.visit_expr(a) for a in call.args)
        if op is call.op and all(a is b for a, b in zip(args, call.args)):
            return call
        # struct info is left for the builder to infer from the new arguments
        return rx.Call(op, args, call.attrs, call.sinfo_args, span=call.span)

    def visit_tuple_(self, tup: rx.Tuple) -> Node:
        fields = tuple(self.visit_expr(f) for f in tup.fields)
        if all(a is b for a, b in zip(fields, tup.fields)):
            return tup
        return rx.Tuple(fields, span=tup.span)

    def visit_tuple_getitem_(self, item: rx.TupleGetItem) -> Node:
        value = self.visit_expr(item.tuple_value)
        if value is item.tuple_value:
            return item
        return rx.TupleGetItem(value, item.index, span=item.span)

    def visit_if_(self, node: rx.If) -> Node:
        cond = self.visit_expr(node.cond)
        then = self.visit_with_new_scope(node.true_branch)
        other = self.visit_with_new_scope(node.false_branch)
        if cond is node.cond and then is node.true_branch and other is node.false_branch:
            return node
        return rx.If(cond, then, other, span=node.span)

    def visit_var_(self, var: rx.Var) -> Node:
        return self.var_remap_.get(id(var), var)

    visit_dataflow_var_ = visit_var_

    def _leaf(self, node: Node) -> Node:
        return node

    visit_constant_ = visit_shape_expr_ = visit_extern_func_ = visit_global_var_ = _leaf
    visit_op_ = visit_prim_value_ = visit_string_imm_ = visit_data_type_imm_ = _leaf


def mutate_relax_functions(mutator: PyExprMutator, mod: IRModule) -> IRModule:
    """``mod`` with each of its Relax functions (composites aside) rewritten by ``mutator``
    (made over ``mod``)."""
    for gv, func in mod.functions_items():
        if isinstance(func, rx.Function) and "Composite" not in func.attrs:
            new = mutator.visit_expr(func)
            if new is not func:
                mutator.builder_.update_func(gv, new)
    return mutator.builder_.get()


def visitor(cls: type) -> type:
    """TVM's ``@relax.expr_functor.visitor``: checks that the class is a PyExprVisitor."""
    if not (isinstance(cls, type) and issubclass(cls, PyExprVisitor)):
        raise TVMSError(f"@visitor: {getattr(cls, '__name__', cls)!r} must subclass PyExprVisitor")
    return cls


def mutator(cls: type) -> type:
    """TVM's ``@relax.expr_functor.mutator``: checks that the class is a PyExprMutator."""
    if not (isinstance(cls, type) and issubclass(cls, PyExprMutator)):
        raise TVMSError(f"@mutator: {getattr(cls, '__name__', cls)!r} must subclass PyExprMutator")
    return cls


__all__ = ["MutatorBuilder", "PyExprMutator", "PyExprVisitor", "mutate_relax_functions", "mutator", "visitor"]
