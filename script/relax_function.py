"""Building a Relax function's body: bindings, dataflow blocks, ``if``, nested functions and
``return``, with the well-formedness checks that need positions (undefined or escaping
variables, struct-info mismatches)."""
from __future__ import annotations

from typing import Any

from ..ir import relax as rx
from ..ir.dtype import DataType, float_literal_refusal
from ..ir.errors import ScriptError, Span, TVMSError
from ..ir.expr import Op, Var as TirVar, const
from ..ir.module import GlobalVar
from ..ir.node import EMPTY, FrozenDict
from ..ir.struct_info import (VOID, FuncStructInfo, ObjectStructInfo, PrimStructInfo,
                              StructInfo, TensorStructInfo, TupleStructInfo)
from ..ir.struct_info import definable_sizes, join_struct_info, own_sizes
from ..ir.structural import structural_equal
from ..ir.visitor import collect
from . import syntax as S
from .comments import carry
from .diagnostics import span_of
from .syntax import dotted
from .relax_parser import ModuleRef, RBuiltin, RelaxBuilder
from .tensorir.attrs import freeze_value, norm_attrs as _norm_attrs
from .tensorir.evaluator import NewVar
from .tensorir.evaluator import FunctionFrame
from .tensorir.functions import _names_in  # (the names a piece of syntax reads)


class RelaxFunctionBuilder(RelaxBuilder):
    def function(self, fdef: S.FunctionDef, decorator_kwargs: dict, nested: bool = False) -> rx.Function:
        if self.func is None:
            self.func = FunctionFrame()  # holds this function's variables for module TypeVars
        saved_slots, self.slots = getattr(self, "slots", None), {}
        self.scopes.append({})
        saved_sizes, self.size_scope = self.size_scope, len(self.scopes) - 1  # (a nested function's own)
        saved_size_names, self.size_names = getattr(self, "size_names", set()), _names_used_as_sizes(fdef.body)
        params = []
        saved_declared, self.sizes_declared_in_expressions = self.sizes_declared_in_expressions, []
        for p in fdef.params:
            if p.annotation is None:
                raise self.error(p, f"parameter {p.name!r} needs struct info, such as R.Tensor((4,), \"float32\")")
            sinfo = self.as_struct_info(self.ev(p.annotation), p.annotation)
            var = self.param_var(p.name, sinfo, self.span(p))
            params.append(var)
            self.define(p.name, var)
        sizes = {v.name for v in collect([p.struct_info for p in params], TirVar)} - \
            {v.name for v in own_sizes(params)}  # (a parameter that is its size variable)
        for p in fdef.params:  # (TVM: "Variable m already defined in current scope")
            if p.name in sizes:
                raise self.error(p, f"{p.name!r} is defined twice: as a parameter and as a symbolic size "
                                 f"of the signature")
        ret_sinfo = None
        if fdef.returns is not None:
            ret_sinfo = self.as_struct_info(self.ev(fdef.returns), fdef.returns)
        self.refuse_undefined_sizes(params)  # (of the parameters' annotations and the return's)
        self.sizes_declared_in_expressions = saved_declared
        self.attrs: dict = {}
        blocks, body = self.function_body(fdef, ret_sinfo)
        self.scopes.pop()
        self.slots, self.size_scope, self.size_names = saved_slots, saved_sizes, saved_size_names
        # (an annotation that contradicts the body is kept, as TVM keeps it: tvms.compile refuses it)
        body_sinfo = getattr(body, "struct_info", ObjectStructInfo())
        seq = rx.SeqExpr(tuple(blocks), body, body_sinfo, span=self.span(fdef.body[-1]))  # `return`
        attrs = dict(self.attrs)
        if not decorator_kwargs.get("private", False) and not nested and "global_symbol" not in attrs:
            attrs["global_symbol"] = fdef.name
        pure = bool(decorator_kwargs.get("pure", True))
        # without "-> ...", Function derives the return struct info from the body as TVM does
        return rx.Function(tuple(params), seq, ret_sinfo, pure, FrozenDict(attrs), span=self.span(fdef),
                           source_dialect=self.dialect.name)

    def refuse_undefined_sizes(self, params: list) -> None:
        """A size that a quoted expression of the signature names (``"n + 1"``) must be defined by
        a parameter, where it stands alone (TVM: "name 'n' is not defined")."""
        defined = {id(v) for v in definable_sizes([p.struct_info for p in params])}
        for var, syn, text, offset in self.sizes_declared_in_expressions:
            if id(var) not in defined:
                at = span_of(self.source, syn)
                # (the name inside the quoted text, when the annotation holds it on its first line)
                start = -1 if at is None else self.source.line_text(at.line).find(text, at.col - 1)
                if start >= 0:
                    col = start + 1 + offset
                    at = Span(at.source, at.line, col, at.line, col + len(var.name))
                raise ScriptError(f"name {var.name!r} is not defined: no parameter defines the size "
                                  f"(it stands alone in none of their shapes)", at)

    def signature(self, fdef: S.FunctionDef, decorator_kwargs: dict) -> FuncStructInfo:
        """The struct info of a module function from its annotations alone, so that calls to it
        (``cls.f(x)``) get their type before its body is read."""
        saved, saved_sizes = self.func, self.size_scope
        if self.func is None:
            self.func = FunctionFrame()
        self.scopes.append({})
        self.size_scope = len(self.scopes) - 1
        try:
            params = []
            for p in fdef.params:
                if p.annotation is not None:
                    var = self.param_var(p.name, self.as_struct_info(self.ev(p.annotation), p.annotation))
                    params.append(var.struct_info)
                    self.define(p.name, var)  # a later annotation may use it
            params = tuple(params)
            ret = self.as_struct_info(self.ev(fdef.returns), fdef.returns) if fdef.returns else ObjectStructInfo()
        finally:
            self.scopes.pop()
            self.func, self.size_scope = saved, saved_sizes  # (a nested signature is read in its parent)
        return FuncStructInfo(params, ret, bool(decorator_kwargs.get("pure", True)))

    def function_body(self, fdef: S.FunctionDef, declared: Any = None) -> tuple[list, Any]:
        """The binding blocks and the value returned; bare numbers returned take the types of the
        return annotation ``declared`` (``-> T.int32: return 3``), as a binding's take its."""
        stmts = fdef.body
        for i, stmt in enumerate(stmts[:-1]):
            if isinstance(stmt, S.Return):
                raise self.error(stmts[i + 1], "statements after 'return' are never run")
        last = stmts[-1]
        if not isinstance(last, S.Return):
            raise self.error(fdef, f"function {fdef.name!r} must end with a return statement")
        blocks, current = self.binding_blocks(stmts[:-1], fdef)
        if last.value is None:
            body = rx.Tuple((), TupleStructInfo(()))
        else:
            value = self.ev(last.value)
            if declared is not None and _holds_numbers(value):
                value = _typed_numbers(value, declared, None)
            body = self.to_relax(value, last.value)
        body = self.bind_operand(body, current)  # a call returned is bound first, as in TVM
        if current:
            blocks.append(rx.BindingBlock(tuple(current)))
        self.check_defined(body, last)
        return blocks, body

    def binding_blocks(self, stmts: list, owner: Any = None) -> tuple[list, list]:
        """The binding blocks of ``stmts`` (a ``with R.dataflow()`` makes one of its own), and
        the bindings of the last block, still open. ``owner``: the function they open."""
        blocks: list = []
        current: list = []
        for i, stmt in enumerate(stmts):
            if isinstance(stmt, S.With) and _is_dataflow(stmt):
                if current:
                    blocks.append(rx.BindingBlock(tuple(current)))
                    current = []
                blocks.append(self.dataflow(stmt))
                continue
            opening = owner is not None and not blocks and not current
            self.statement_or_carry(stmt, current, owner if opening else
                                    stmts[i + 1] if i + 1 < len(stmts) else None, opening)
        return blocks, current

    def statement_or_carry(self, stmt: Any, out: list, heir: Any, inside: bool = False) -> None:
        """A statement; one that binds nothing (``R.func_attr``) leaves its comments to ``heir``:
        the next statement, or the function it opens (``inside``)."""
        count = len(out)
        self.statement(stmt, out)
        if len(out) == count:
            carry(self.source, stmt, heir, "inside" if inside else "before")

    def check_defined(self, expr: Any, syn: Any) -> None:
        if isinstance(expr, rx.DataflowVar):
            raise self.error(syn, f"{expr.name!r} is a dataflow variable: it is only visible inside its "
                             f"dataflow block; list it in R.output(...) to use it after the block")

    # ---------------------------------------------------------------- statements
    def statement(self, stmt: Any, out: list) -> None:
        if isinstance(stmt, S.ExprStmt) and isinstance(stmt.value, S.Call):
            func = self.ev(stmt.value.func)
            if isinstance(func, RBuiltin) and func.path == "func_attr":
                args = [self.ev(a) for a in stmt.value.args]
                if len(args) != 1 or not isinstance(args[0], dict):
                    raise self.error(stmt, "R.func_attr takes one dict")
                self.attrs.update(_norm_attrs(args[0], self.dialect))
                return
            if isinstance(func, RBuiltin) and func.path == "output":
                raise self.error(stmt, "R.output(...) is only allowed at the end of a dataflow block")
            value = self.ev(stmt.value)
            if isinstance(value, rx.RelaxExpr):  # a call for its effect: bound to an unused name
                value = self.normalize(value, out)
                self.take_slot()
                # (inside a dataflow block a dataflow variable, as a builder's emit makes it)
                var = (rx.DataflowVar if self.in_dataflow else rx.Var)("_", value.struct_info)
                out.append(rx.VarBinding(value, var, span=self.span(stmt)))
                return
            raise self.error(stmt, "an expression statement has no effect here")
        if isinstance(stmt, S.Assign):
            return self.assign(stmt, stmt.targets, stmt.value, None, out)
        if isinstance(stmt, S.AnnAssign):
            return self.assign(stmt, [stmt.target], stmt.value, stmt.annotation, out)
        if isinstance(stmt, S.If):
            return self.if_binding(stmt, out)
        if isinstance(stmt, S.FunctionDef):
            var = None
            if stmt.name in _names_in(stmt.body):  # it calls itself: its name is bound first, by
                var = self.new_var(stmt.name, self.signature(stmt, _decorator_kwargs(self, stmt)), stmt)
            func = RelaxFunctionBuilder.nested_function(self, stmt)  # (its signature), as in TVM
            var = var or self.new_var(stmt.name, func.struct_info, stmt)  # (in a dataflow block, a DataflowVar)
            out.append(rx.VarBinding(func, var, span=self.span(stmt)))
            return
        if isinstance(stmt, (S.Pass, S.Import)):
            return
        raise self.error(stmt, f"this statement ({type(stmt).__name__}) is not allowed in a Relax function")

    def nested_function(self, fdef: S.FunctionDef) -> rx.Function:
        kwargs = _decorator_kwargs(self, fdef)
        # (the function's own dataflow blocks must not end the one it is bound in)
        saved = self.attrs, self.in_dataflow, self.outputs
        self.in_dataflow, self.outputs = False, None
        try:
            return self.function(fdef, kwargs, nested=True)
        finally:
            self.attrs, self.in_dataflow, self.outputs = saved

    def assign(self, stmt: Any, targets: list, value_syn: Any, annotation: Any, out: list) -> None:
        if len(targets) != 1 or not isinstance(targets[0], S.Name):
            raise self.error(stmt, "a binding assigns one name")
        name = targets[0].id
        if isinstance(value_syn, S.Call) and dotted(value_syn.func) in ("TypeVar", "typing.TypeVar"):
            if annotation is not None or len(value_syn.args) != 1 or value_syn.kwargs \
                    or not isinstance(value_syn.args[0], S.Constant) or value_syn.args[0].value != name:
                raise self.error(stmt, f"write a type variable as {name} = TypeVar(\"{name}\")")
            self.typevar_names = self.typevar_names | {name}  # (TVM 0.27: a nested function's size)
            return
        if isinstance(value_syn, S.Name) and value_syn.id in ("Module", getattr(self, "class_name", "Module")) \
                and annotation is None:
            self.define(name, ModuleRef(self.module_names))  # cls = Module
            return
        if isinstance(value_syn, S.Call):
            func = self.ev(value_syn.func)
            if isinstance(func, RBuiltin) and func.path == "match_cast":
                return self.match_cast(stmt, name, value_syn, annotation, out)
        value = self.ev(value_syn)
        declared = None  # (the annotation's struct info, read once where it is needed)
        if annotation is not None and _holds_numbers(value):
            declared = self.as_struct_info(self.ev(annotation), annotation)
            value = _typed_numbers(value, declared, lambda message: self.error(value_syn, message))
        if isinstance(value, NewVar):  # n = T.int64(): a symbolic size (the classic dialect)
            existing = self.lookup_local(name)
            if not isinstance(existing, TirVar):
                self.define(name, TirVar(name, value.dtype))
            return
        value = self.normalize(self.to_relax(value, value_syn), out)
        sinfo = value.struct_info if hasattr(value, "struct_info") else ObjectStructInfo()
        if annotation is not None:
            if declared is None:
                declared = self.as_struct_info(self.ev(annotation), annotation)
            self.check_compatible(declared, sinfo, annotation, name)
            if self.reads_a_size(name, declared, sinfo):
                sinfo = PrimStructInfo(declared.dtype, TirVar(name, declared.dtype))
                var = self.new_var(name, sinfo, targets[0])
                out.append(rx.MatchCast(value, sinfo, var, span=self.span(stmt)))
                return
            sinfo = declared
        var = self.new_var(name, sinfo, targets[0])
        out.append(rx.VarBinding(value, var, span=self.span(stmt)))

    def reads_a_size(self, name: str, declared: StructInfo, inferred: StructInfo) -> bool:
        """In TVM 0.27 a scalar int64 variable is a size variable too, as a parameter is
        (``param_var``): one bound to a scalar of unknown value (``n: T.int64 = params[0]``, as
        LiftTransformParams writes a scalar weight) and used as a size in the function
        (``R.Tensor((n,))``) defines the size ``n``: it is a match_cast to a scalar of value
        ``n``. Used otherwise, it is a plain binding, as TVM's parser makes it."""
        return (self.dialect.name != "classic" and name in self.size_names
                and isinstance(declared, PrimStructInfo) and declared.value is None
                and declared.dtype == DataType("int64") and isinstance(inferred, PrimStructInfo)
                and inferred.value is None)

    # ---------------------------------------------------------------- normal form
    def take_slot(self) -> str:
        """The name TVM's builder gives the next binding: each binding of a function, named by
        the script or not, takes the next of ``gv``, ``gv1``, ... (``lv``, ``lv1``, ... inside a
        dataflow block), so generated names come out as TVM's."""
        prefix = "lv" if self.in_dataflow else "gv"
        k = self.slots.get(prefix, 0)
        self.slots[prefix] = k + 1
        return prefix if k == 0 else f"{prefix}{k}"

    def normalize(self, value: Any, out: list) -> Any:
        """``value`` in TVM's normal form: its operands that are neither leaves nor tuples
        (nested calls, items of a called function's result) are bound first, innermost first."""
        if isinstance(value, rx.Call):
            args = tuple(self.bind_operand(a, out) for a in value.args)
            if any(a is not b for a, b in zip(args, value.args)):
                value = value.with_changes(args=args)
        elif isinstance(value, rx.Tuple):
            fields = tuple(self.bind_operand(f, out) for f in value.fields)
            if any(a is not b for a, b in zip(fields, value.fields)):
                value = value.with_changes(fields=fields)
        elif isinstance(value, rx.TupleGetItem):
            tup = self.bind_operand(value.tuple_value, out)
            if tup is not value.tuple_value:
                value = value.with_changes(tuple_value=tup)
        return value

    def bind_operand(self, value: Any, out: list) -> Any:
        """An operand in normal form: a leaf or a tuple stays; anything else is bound to a
        fresh variable, which replaces it."""
        if isinstance(value, _LEAVES):
            return value
        value = self.normalize(value, out)
        if isinstance(value, rx.Tuple):
            return value
        name = self.take_slot()
        var = (rx.DataflowVar if self.in_dataflow else rx.Var)(name, value.struct_info)
        out.append(rx.VarBinding(value, var))
        return var

    def new_var(self, name: str, sinfo: StructInfo, syn: Any) -> rx.Var:
        self.take_slot()
        cls = rx.DataflowVar if self.in_dataflow and name not in (self.outputs or ()) else rx.Var
        var = cls(name, sinfo, span=self.span(syn))
        self.define(name, var)
        return var

    def check_compatible(self, declared: StructInfo, inferred: StructInfo, syn: Any, name: str) -> None:
        """An annotation may be more precise than what is inferred, never in conflict with it."""
        if isinstance(declared, TupleStructInfo) and isinstance(inferred, TupleStructInfo):
            if len(declared.fields) != len(inferred.fields):
                raise self.error(syn, f"{name!r} is annotated a tuple of {len(declared.fields)} fields but its "
                                      f"value has {len(inferred.fields)}")
            for field_declared, field_inferred in zip(declared.fields, inferred.fields):
                self.check_compatible(field_declared, field_inferred, syn, name)
            return
        kinds = {type(declared), type(inferred)}
        if kinds == {PrimStructInfo, TensorStructInfo}:
            what = {PrimStructInfo: "a scalar", TensorStructInfo: "a tensor"}
            raise self.error(syn, f"{name!r} is annotated {what[type(declared)]} but its value is "
                                  f"{what[type(inferred)]}")
        if isinstance(declared, PrimStructInfo) and isinstance(inferred, PrimStructInfo) \
                and VOID not in (declared.dtype, inferred.dtype) and declared.dtype != inferred.dtype:
            raise self.error(syn, f"{name!r} is annotated {declared.dtype} but its value is {inferred.dtype}")
        if isinstance(declared, TensorStructInfo) and isinstance(inferred, TensorStructInfo):
            if declared.dtype != VOID and inferred.dtype != VOID and declared.dtype != inferred.dtype:
                raise self.error(syn, f"{name!r} is annotated {declared.dtype} but its value is {inferred.dtype}")
            a, b = declared.dims, inferred.dims
            if a is not None and b is not None:
                if len(a) != len(b):
                    raise self.error(syn, f"{name!r} is annotated with {len(a)} dimensions but its value "
                                     f"has {len(b)}")
                for x, y in zip(a, b):
                    if _static(x) is not None and _static(y) is not None and _static(x) != _static(y):
                        raise self.error(syn, f"{name!r} is annotated with a dimension {_static(x)} where "
                                         f"its value has {_static(y)}")

    def match_cast(self, stmt: Any, name: str, call: S.Call, annotation: Any, out: list) -> None:
        if len(call.args) != 2:
            raise self.error(call, "R.match_cast takes a value and struct info")
        # (TVM keeps a call as the value it matches: R.match_cast(R.nonzero(c), ...); its operands normalized)
        value = self.normalize(self.to_relax(self.ev(call.args[0]), call.args[0]), out)
        sinfo = self.as_struct_info(self.ev(call.args[1]), call.args[1])
        if annotation is not None:
            declared = self.as_struct_info(self.ev(annotation), annotation)
            if not structural_equal(declared, sinfo, map_free_vars=True):
                raise self.error(annotation, "the annotation of a match_cast must equal its struct info")
        inferred = value.struct_info
        if type(inferred) is not type(sinfo) and not isinstance(inferred, ObjectStructInfo):
            raise self.error(call, f"R.match_cast: a value of {_kind(inferred)} cannot match {_kind(sinfo)}")
        if isinstance(inferred, TensorStructInfo) and isinstance(sinfo, TensorStructInfo):
            if inferred.ndim >= 0 and sinfo.ndim >= 0 and inferred.ndim != sinfo.ndim:
                raise self.error(call, f"R.match_cast: a {inferred.ndim}-d tensor cannot match "
                                 f"{sinfo.ndim} dimensions")
            if inferred.dtype != VOID and sinfo.dtype != VOID and inferred.dtype != sinfo.dtype:
                raise self.error(call, f"R.match_cast: a {inferred.dtype} tensor cannot match {sinfo.dtype}")
        var = self.new_var(name, sinfo, stmt)
        out.append(rx.MatchCast(value, sinfo, var, span=self.span(stmt)))

    def if_binding(self, stmt: S.If, out: list) -> None:
        cond = self.bind_operand(self.to_relax(self.ev(stmt.test), stmt.test), out)
        then_seq, then_name = self.branch(stmt.body, stmt, "then")
        else_seq, else_name = self.branch(stmt.orelse, stmt, "else")
        if then_name != else_name:
            raise self.error(stmt, f"both branches of an if must end by assigning the same name "
                             f"('{then_name}' and '{else_name}')")
        sinfo = join_struct_info(then_seq.struct_info, else_seq.struct_info)
        expr = rx.If(cond, then_seq, else_seq, sinfo, span=self.span(stmt))
        var = self.new_var(then_name, sinfo, stmt)
        out.append(rx.VarBinding(expr, var, span=self.span(stmt)))

    def branch(self, stmts: list, where: Any, which: str) -> tuple[rx.SeqExpr, str]:
        """One branch of an if. As in TVM, a value computed by the branch's last assignment
        (``z = R.add(b, x)``) is bound to ``z_then`` (``z_else``), which the branch returns."""
        if not stmts:
            raise self.error(where, "an if in a Relax function needs both branches")
        self.scopes.append({})
        try:
            blocks, bindings = self.binding_blocks(stmts[:-1])
            last = stmts[-1]
            if not isinstance(last, (S.Assign, S.AnnAssign)):
                raise self.error(last, "a branch ends by assigning the value of the if")
            target = last.targets[0] if isinstance(last, S.Assign) else last.target
            value = self.ev(last.value)
            declared = self.as_struct_info(self.ev(last.annotation), last.annotation) \
                if isinstance(last, S.AnnAssign) else None
            if declared is not None and _holds_numbers(value):
                value = _typed_numbers(value, declared, lambda message: self.error(last.value, message))
            value = self.normalize(self.to_relax(value, last.value), bindings)
            if declared is not None:
                self.check_compatible(declared, value.struct_info, last.annotation, target.id)
            span = self.span(last)  # the comments of the last line: its binding's, or the branch's
            self.take_slot()  # (TVM's builder numbers the branch's value, bound or not)
            if not isinstance(value, (*_LEAVES, rx.Tuple)):  # (a tuple of leaves stays, as in TVM)
                span = None
                var = rx.Var(f"{target.id}_{which}", value.struct_info, span=self.span(last))
                bindings.append(rx.VarBinding(value, var, span=self.span(last)))
                value = var
            if _is_void(value.struct_info) and not _is_void_tuple(value):
                value = rx.Tuple((), TupleStructInfo(()))  # (TVM's normalizer: nothing is R.tuple())
            if bindings:
                blocks.append(rx.BindingBlock(tuple(bindings)))
            self.check_defined(value, last.value)
            return rx.SeqExpr(tuple(blocks), value, value.struct_info, span=span), target.id
        finally:
            self.scopes.pop()

    def dataflow(self, stmt: S.With) -> rx.DataflowBlock:
        body = stmt.body
        last = body[-1] if body else None
        if not (isinstance(last, S.ExprStmt) and isinstance(last.value, S.Call)
                and dotted(last.value.func) == "R.output"):
            raise self.error(stmt, "a dataflow block ends with R.output(...) naming the variables it exports")
        outputs = []
        for a in last.value.args:
            if not isinstance(a, S.Name):
                raise self.error(a, "R.output(...) takes variable names")
            outputs.append(a.id)
        self.outputs, self.in_dataflow = set(outputs), True
        bindings: list = []
        # the comments of R.output(...) go below the last binding, the line before it
        carry(self.source, last, body[-2] if len(body) > 1 else stmt, "below" if len(body) > 1 else "before")
        try:
            for i, s in enumerate(body[:-1]):
                if isinstance(s, S.If):
                    raise self.error(s, "an if is not allowed inside a dataflow block")
                self.statement_or_carry(s, bindings, body[i + 1] if i + 2 < len(body) else None)
        finally:
            self.in_dataflow, self.outputs = False, None
        for a in last.value.args:
            self.lookup(a.id, a)  # an output must be defined in the block
        # this block's dataflow variables stay inside it (a function defined in an outer block
        # leaves that block's own visible)
        own = {id(b.var) for b in bindings if isinstance(b.var, rx.DataflowVar)}
        for scope in self.scopes[1:]:
            for key, value in list(scope.items()):
                if isinstance(value, rx.DataflowVar) and id(value) in own:
                    scope[key] = _Escaped(value)
        return rx.DataflowBlock(tuple(bindings), span=self.span(stmt))

    def lookup(self, name: str, syn: Any) -> Any:
        value = RelaxBuilder.lookup(self, name, syn)
        if isinstance(value, _Escaped):
            raise self.error(syn, f"{name!r} is a dataflow variable: it is only visible inside its "
                             f"dataflow block; list it in R.output(...) to use it after the block")
        if type(value) is rx.Var and _is_void(value.struct_info):
            # TVM's normalizer writes a use of a variable holding nothing as R.tuple()
            return rx.Tuple((), TupleStructInfo(()), span=self.span(syn))
        return value


def _is_void(sinfo: Any) -> bool:
    return isinstance(sinfo, TupleStructInfo) and not sinfo.fields


def _is_void_tuple(value: Any) -> bool:
    return isinstance(value, rx.Tuple) and not value.fields


class _Escaped:
    """A dataflow variable after its block ended: using it is an error."""

    def __init__(self, var: rx.DataflowVar):
        self.var = var


# What TVM's normal form leaves in place as an operand.
_LEAVES = (rx.Var, rx.Constant, rx.ShapeExpr, rx.PrimValue, rx.StringImm, rx.DataTypeImm,
           rx.ExternFunc, GlobalVar, Op)


def _decorator_kwargs(b: RelaxFunctionBuilder, fdef: S.FunctionDef) -> dict:
    """The keywords of a nested function's ``@R.function(pure=False)``."""
    kwargs: dict = {}
    for dec in fdef.decorators:
        if dotted(dec if not isinstance(dec, S.Call) else dec.func) not in ("R.function", "relax.function"):
            raise b.error(dec, "a nested function needs @R.function")
        if isinstance(dec, S.Call):
            kwargs.update((k, b.ev(v)) for k, v in dec.kwargs)
    return kwargs


def _holds_numbers(value: Any) -> bool:
    """A bare number, or a tuple holding one (``3, 4``, ``x, 5``)."""
    if isinstance(value, tuple):
        return any(_holds_numbers(v) for v in value)
    return type(value) in (int, float)


def _typed_numbers(value: Any, declared: Any, refuse: Any) -> Any:
    """Bare numbers under a scalar's annotation are of the annotation's type, as TVM 0.27 writes an
    integer scalar of any type (``k: T.int32 = 3``, ``g: R.Tuple(T.int32, T.int64) = 3, 4``); an
    integer out of the type's range is refused (``refuse(message)`` makes the error), as TVM
    refuses it. (A float type takes an integer too, where TVM asks for ``3.0``.) Without ``refuse``
    (a ``return``, whose numbers TVM leaves int64 or float64 whatever the annotation), a number
    out of the type's range stays as TVM reads it."""
    if isinstance(value, tuple):
        if isinstance(declared, TupleStructInfo) and len(declared.fields) == len(value):
            return tuple(_typed_numbers(v, d, refuse) for v, d in zip(value, declared.fields))
        return value
    if type(value) not in (int, float) or not isinstance(declared, PrimStructInfo) or declared.dtype == VOID \
            or declared.dtype.lanes != 1:
        return value
    dtype = declared.dtype
    if dtype.is_float:
        refusal = float_literal_refusal(dtype, value)
        if refusal and refuse is None:
            return value
        if refusal:
            raise refuse(refusal)
        return const(float(value), dtype)
    if type(value) is int and dtype.is_integer and not dtype.is_bool:
        if not dtype.holds_int(value):
            if refuse is None:
                return value
            raise refuse(f"{value} is out of the range of {dtype}")
        return const(value, dtype)
    return value


_SIZE_CALLS = {"Tensor", "Shape", "Prim", "shape", "prim_value"}  # (R.<name>(...): what reads sizes)


def _names_used_as_sizes(stmts: list) -> set[str]:
    """The names a function body's syntax reads as sizes: in annotations, in the struct info,
    shapes and scalars it writes (``R.Tensor((n,))``, ``R.shape([n])``) and in arithmetic
    (``n + 1``: TensorIR's, as TVM 0.27 writes a scalar's value; Relax's is ``R.add``)."""
    found: set[str] = set()
    stack: list = list(stmts)
    while stack:
        node = stack.pop()
        if isinstance(node, (list, tuple)):
            stack.extend(node)
        elif isinstance(node, S.Syn):
            path = dotted(node.func) if isinstance(node, S.Call) else None
            if isinstance(node, (S.BinOp, S.UnaryOp, S.Compare, S.BoolOp, S.NotOp)) or path is not None \
                    and path.split(".")[0] in ("R", "relax") and path.split(".")[-1] in _SIZE_CALLS:
                found.update(_names_in(node))
                continue
            annotation = getattr(node, "annotation", None) if isinstance(node, (S.AnnAssign, S.Param)) \
                else node.returns if isinstance(node, S.FunctionDef) else None
            found.update(_names_in(annotation) if annotation is not None else ())
            stack.extend(getattr(node, name) for name in type(node).__slots__)
    return found


def _is_dataflow(stmt: S.With) -> bool:
    return isinstance(stmt.item, S.Call) and dotted(stmt.item.func) == "R.dataflow"


def _static(e: Any) -> int | None:
    from ..ir.expr import IntImm

    return e.value if isinstance(e, IntImm) else None


def _kind(s: StructInfo) -> str:
    return type(s).__name__.replace("StructInfo", "").lower() or "object"


__all__ = ["RelaxFunctionBuilder", "DataType", "TVMSError", "EMPTY", "freeze_value"]
