"""BlockBuilder: building Relax functions from Python, as TVM's ``relax.BlockBuilder`` does.

::

    bb = BlockBuilder()
    with bb.function("main", [x, w]):
        with bb.dataflow():
            lv = bb.emit(relax.op.matmul(x, relax.op.permute_dims(w)))   # permute_dims -> lv, matmul -> lv1
            gv = bb.emit_output(relax.op.nn.relu(lv))
        bb.emit_func_output(gv)
    mod = bb.get()

The builder keeps Relax in A-normal form the way TVM's normalizer does: a nested call in an
argument is bound to a fresh variable first (``lv``, ``lv1``, ... inside a dataflow block, ``gv``,
``gv1``, ... outside), struct info is filled in, adjacent blocks of the same kind are merged, and
a function's return struct info forgets symbolic sizes its parameters do not define. Names come
from one name supply per builder (shared by variables and functions), with TVM's rules: the first
``x`` is ``x``, then ``x1``, ``x2``; dots become underscores.

``emit_te`` / ``call_te`` (tensor expressions) come with the TE layer and are not here yet.
"""
from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from ..ir import relax as rx
from ..ir.name_supply import NameSupply
from ..ir import relax_op
from ..ir.dtype import DataType
from ..ir.errors import TVMSError
from ..ir.expr import Op
from ..ir.module import GlobalVar, IRModule
from ..ir.node import FrozenDict
from ..ir.relax import make_constant, merge_blocks
from ..ir.struct_info import (FuncStructInfo, ObjectStructInfo, StructInfo,
                              TupleStructInfo, call_result, join_struct_info)
from ..ir.structural import structural_equal, structural_hash
from ..ir.visitor import Mutator
from .dialect import canonical_attr_key
from .tensorir.attrs import freeze_value


class _Frame:
    """A binding block being built."""

    __slots__ = ("bindings", "is_dataflow", "memo")

    def __init__(self, is_dataflow: bool):
        self.bindings: list = []
        self.is_dataflow = is_dataflow
        self.memo: dict[int, tuple[Any, rx.Var]] = {}  # id(argument) -> (argument, its variable)

    def block(self) -> rx.BindingBlock:
        cls = rx.DataflowBlock if self.is_dataflow else rx.BindingBlock
        return cls(tuple(self.bindings))


class FunctionScope:
    """``with bb.function(...)``: one Relax function under construction."""

    def __init__(self, builder: "BlockBuilder", name: str, params: list | None, attrs: dict, pure: bool):
        self._bb, self.name, self.params, self.attrs, self.pure = builder, name, params, attrs, pure
        self.blocks: list = []
        self.output_emitted = False
        self.depth = 0  # the builder's open blocks before the function began

    def __enter__(self) -> "FunctionScope":
        self._bb._enter_function(self)
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self._bb._exit_function(self, exc_type is None)


class DataflowScope:
    """``with bb.dataflow()``: a dataflow block inside the current function."""

    def __init__(self, builder: "BlockBuilder"):
        self._bb = builder

    def __enter__(self) -> "DataflowScope":
        bb = self._bb
        func = bb._current_function("dataflow")
        if bb._frame().is_dataflow:
            raise TVMSError("BlockBuilder.dataflow(): dataflow blocks do not nest")
        bb._close_block(func)
        bb._frames.append(_Frame(True))
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        bb = self._bb
        if exc_type is not None or not bb._funcs:
            return
        bb._close_block(bb._funcs[-1])
        bb._frames.append(_Frame(False))


class BlockBuilder:
    """Builds Relax functions into an IRModule (see the module docstring)."""

    _stack: ClassVar[list["BlockBuilder"]] = []

    def __init__(self, mod: IRModule | None = None):
        self._mod = mod.copy() if mod is not None else IRModule()
        self._names = NameSupply()
        self._funcs: list[FunctionScope] = []
        self._frames: list[_Frame] = []
        self._dedup: dict[int, list[GlobalVar]] = {}

    @staticmethod
    def current() -> "BlockBuilder | None":
        """The builder whose ``function`` scope is innermost (the nn frontend emits through it)."""
        return BlockBuilder._stack[-1] if BlockBuilder._stack else None

    # ---------------------------------------------------------------- scopes
    def function(self, name: str, params: Any = None, attrs: dict | None = None, pure: bool = True,
                 private: bool = False) -> FunctionScope:
        """A function scope. ``params`` may be left for ``emit_func_output(..., params=...)``.
        A function that is not private gets the ``global_symbol`` attribute (its name)."""
        if isinstance(params, rx.Var):
            params = [params]
        if params is not None:
            params = list(params)
            for p in params:
                if not isinstance(p, rx.Var):
                    raise TVMSError(f"BlockBuilder.function: parameters must be relax.Var, got "
                                    f"{type(p).__name__}")
        attrs = {canonical_attr_key(k): freeze_value(v) for k, v in (attrs or {}).items()}
        if not private:
            attrs["global_symbol"] = name
        return FunctionScope(self, name, params, attrs, pure)

    def dataflow(self) -> DataflowScope:
        return DataflowScope(self)

    def _enter_function(self, func: FunctionScope) -> None:
        func.depth = len(self._frames)
        BlockBuilder._stack.append(self)
        self._funcs.append(func)
        self._frames.append(_Frame(False))

    def _exit_function(self, func: FunctionScope, ok: bool) -> None:
        if self._funcs and self._funcs[-1] is func:
            self._funcs.pop()
        if BlockBuilder._stack and BlockBuilder._stack[-1] is self:
            BlockBuilder._stack.pop()
        del self._frames[func.depth:]  # after an error, too
        if not func.output_emitted:
            if ok:
                raise TVMSError(f"function {func.name!r}: emit_func_output must be called before "
                                f"its `with bb.function(...)` scope ends")

    def _current_function(self, what: str) -> FunctionScope:
        if not self._funcs:
            raise TVMSError(f"BlockBuilder.{what}() is only allowed inside `with bb.function(...)`")
        return self._funcs[-1]

    def begin_block(self, is_dataflow: bool) -> None:
        """Open a bare binding block (a dataflow block when ``is_dataflow``) to emit into,
        outside ``with bb.function``: what a mutator normalizes into."""
        self._frames.append(_Frame(is_dataflow))

    def end_block(self) -> rx.BindingBlock:
        """Close the block ``begin_block`` opened and return it."""
        return self._frames.pop().block()

    def _frame(self) -> _Frame:
        if not self._frames:
            raise TVMSError("the BlockBuilder has no open block: use `with bb.function(...)`")
        return self._frames[-1]

    def _close_block(self, func: FunctionScope) -> None:
        frame = self._frames.pop()
        if frame.bindings:
            func.blocks.append(frame.block())

    def current_block_is_dataflow(self) -> bool:
        return self._frame().is_dataflow

    def function_depth(self) -> int:
        """How many ``with bb.function(...)`` scopes are open (1: emitting into a top-level
        function, more: into a function built inside another one)."""
        return len(self._funcs)

    # ---------------------------------------------------------------- emitting
    def emit(self, expr: Any, name_hint: str = "") -> rx.Var:
        """Bind ``expr`` (normalized) to a fresh variable: a DataflowVar inside a dataflow block."""
        frame = self._frame()
        value = self.normalize(_py_tuple(expr))
        return self._bind(value, frame.is_dataflow, name_hint)

    def emit_output(self, output: Any, name_hint: str = "") -> rx.Var:
        """Bind the output of a dataflow block to a variable that is visible after the block."""
        if not self._frame().is_dataflow:
            raise TVMSError("BlockBuilder.emit_output is only allowed inside a dataflow block")
        value = self.normalize(_py_tuple(output))
        return self._bind(value, False, name_hint)

    def match_cast(self, value: Any, struct_info: StructInfo, name_hint: str = "") -> rx.Var:
        """``var = R.match_cast(value, struct_info)``; symbolic sizes met there become defined."""
        frame = self._frame()
        value = self.normalize(_py_tuple(value))
        name = self._names.fresh(name_hint or ("lv" if frame.is_dataflow else "gv"))
        var = (rx.DataflowVar if frame.is_dataflow else rx.Var)(name, struct_info)
        frame.bindings.append(rx.MatchCast(value, struct_info, var))
        return var

    def emit_normalized(self, binding: Any) -> None:
        """Append a binding that is already normalized, as it is."""
        self._frame().bindings.append(binding)

    def emit_func_output(self, output: Any, params: Any = None) -> GlobalVar:
        """End the function: ``output`` is its result (normalized into the last block); adds the
        function to the module and returns its GlobalVar."""
        func = self._current_function("emit_func_output")
        if func.output_emitted:
            raise TVMSError("emit_func_output must be called exactly once in a function")
        if self._frame().is_dataflow:
            raise TVMSError("emit_func_output must be called after the dataflow block ends")
        if func.params is not None and params is not None:
            raise TVMSError("the function's parameters were already given to bb.function(...)")
        if params is not None:
            func.params = [params] if isinstance(params, rx.Var) else list(params)
        if func.params is None:
            raise TVMSError("a Relax function needs parameters: give them to bb.function or "
                            "emit_func_output")
        if _dataflow_vars(output):
            raise TVMSError(f"the output of {func.name!r} uses the dataflow variable "
                            f"{_dataflow_vars(output)[0].name!r}, which is not visible after its "
                            f"block: bind it with bb.emit_output(...) inside the block")
        func.output_emitted = True
        self._close_block(func)
        seq = self._normalize_seq(rx.SeqExpr(tuple(func.blocks), _py_tuple(output)))
        # the return struct info is the body's, less the sizes the parameters do not define
        function = rx.Function(tuple(func.params), seq, None, func.pure, FrozenDict(func.attrs))
        return self.add_func(function, func.name)

    def _bind(self, value: Any, dataflow: bool, name_hint: str) -> rx.Var:
        name = self._names.fresh(name_hint or ("lv" if dataflow else "gv"))
        var = (rx.DataflowVar if dataflow else rx.Var)(name, _sinfo(value))
        self._frame().bindings.append(rx.VarBinding(value, var))
        return var

    def lookup_binding(self, var: rx.Var) -> Any:
        """The value bound to ``var`` in the function being built, or None."""
        blocks = [f.bindings for f in self._frames] + [b.bindings for fn in self._funcs for b in fn.blocks]
        for bindings in blocks:
            for b in bindings:
                if b.var is var:
                    return b.value
        return None

    def get_unique_name(self, name_prefix: str) -> str:
        return self._names.fresh(name_prefix)

    # ---------------------------------------------------------------- the module
    def add_func(self, func: Any, func_name: str) -> GlobalVar:
        """Add a function (Relax or TensorIR) under a fresh name and return its GlobalVar; a
        function structurally equal to one already in the module is not added twice."""
        key = structural_hash(func)
        for gv in self._dedup.get(key, []):
            if gv in self._mod and structural_equal(self._mod[gv], func):
                return gv
        name = self._names.fresh(func_name)
        while name in self._mod:
            name = self._names.fresh(func_name)
        gv = GlobalVar(name)
        self._mod[gv] = func
        self._dedup.setdefault(key, []).append(gv)
        return gv

    def update_func(self, gv: GlobalVar, func: Any) -> None:
        """Replace the function ``gv`` refers to (it keeps its place in the module)."""
        if gv not in self._mod:
            raise TVMSError(f"the module has no function {gv.name_hint!r} to update")
        self._mod[gv] = func
        self._dedup.setdefault(structural_hash(func), []).append(gv)

    def get(self) -> IRModule:
        """The module built so far (a copy: building on does not change it)."""
        return self._mod.copy()

    def finalize(self) -> IRModule:
        """The module, with every public function named by its ``global_symbol`` (TVM's
        NormalizeGlobalVar); private functions give way when a public one needs the name."""
        items = self._mod.functions_items()
        wanted = {gv.name_hint: str(f.attrs["global_symbol"]) for gv, f in items
                  if "global_symbol" in getattr(f, "attrs", {})}
        if all(gv.name_hint == wanted.get(gv.name_hint, gv.name_hint) for gv, _ in items):
            return self.get()
        taken = set(wanted.values())
        rename: dict[int, GlobalVar] = {}
        for gv, _ in items:
            new = wanted.get(gv.name_hint)
            if new is None and gv.name_hint in taken:
                new = self._names.fresh(gv.name_hint)
                while new in taken or new in self._mod:
                    new = self._names.fresh(gv.name_hint)
            if new is not None and new != gv.name_hint:
                rename[id(gv)] = GlobalVar(new)
            taken.add(new or gv.name_hint)
        mutator = _RenameGlobals(rename)
        mod = self._mod.empty_copy()
        for gv, f in items:
            mod[rename.get(id(gv), gv)] = mutator.visit(f)
        return mod

    # ---------------------------------------------------------------- normalization
    def normalize(self, expr: Any) -> Any:
        """``expr`` in normal form: nested non-leaf arguments bound to variables in the current
        block, struct info filled in. Returns the very same object when it is already normal."""
        e = _py_tuple(expr)
        if isinstance(e, rx.Call):
            return self._normalize_call(e)
        if isinstance(e, rx.Tuple):
            fields = tuple(self._normalize_arg(f) for f in e.fields)
            if all(a is b for a, b in zip(fields, e.fields)) and _known(e.struct_info):
                return e
            return rx.Tuple(fields, TupleStructInfo(tuple(_sinfo(f) for f in fields)), span=e.span)
        if isinstance(e, rx.TupleGetItem):
            value = self._normalize_arg(e.tuple_value)
            if value is e.tuple_value and _known(e.struct_info):
                return e
            sinfo = _sinfo(value)
            if not isinstance(sinfo, TupleStructInfo) or not 0 <= e.index < len(sinfo.fields):
                raise TVMSError(f"index {e.index} of a value that is not a tuple of that many fields")
            return rx.TupleGetItem(value, e.index, sinfo.fields[e.index], span=e.span)
        if isinstance(e, rx.If):
            return self._normalize_if(e)
        if isinstance(e, rx.SeqExpr):
            return self._normalize_seq(e)
        if isinstance(e, rx.Function):
            return self._normalize_function(e)
        if isinstance(e, (rx.RelaxExpr, GlobalVar, Op)):
            return e
        raise TVMSError(f"expected a Relax expression, got {type(e).__name__}")

    def _normalize_arg(self, expr: Any) -> Any:
        """An argument: anything but a leaf (variable, constant, ...) or a tuple is bound to a
        fresh variable in the current block; the same argument object is bound once."""
        frames = self._frames
        if frames and id(expr) in frames[-1].memo:
            return frames[-1].memo[id(expr)][1]
        post = self.normalize(_py_tuple(expr))
        if _is_leaf_or_tuple(expr):
            return post
        if not frames:
            raise TVMSError("cannot normalize a nested expression outside a block: use "
                            "`with bb.function(...)`")
        var = self._bind(post, frames[-1].is_dataflow, "")
        frames[-1].memo[id(expr)] = (expr, var)
        return var

    def _normalize_call(self, call: rx.Call) -> rx.Call:
        op = call.op if isinstance(call.op, (Op, GlobalVar, rx.Var, rx.ExternFunc)) \
            else self._normalize_arg(call.op)
        args = tuple(self._normalize_arg(a) for a in call.args)
        if op is call.op and all(a is b for a, b in zip(args, call.args)) and _known(call.struct_info):
            return call
        if isinstance(op, Op):
            new = relax_op.make_call(relax_op.spec_of(op), args, dict(call.attrs), call.sinfo_args,
                                     span=call.span)
            return new
        return rx.Call(op, args, call.attrs, call.sinfo_args, self._callee_ret(op, call), span=call.span)

    def _callee_ret(self, op: Any, call: rx.Call) -> StructInfo:
        if _known(call.struct_info):
            return call.struct_info
        if call.sinfo_args:
            return call.sinfo_args[0] if len(call.sinfo_args) == 1 else TupleStructInfo(call.sinfo_args)
        sinfo = getattr(op, "struct_info", None)
        if isinstance(op, GlobalVar) and op in self._mod:
            sinfo = getattr(self._mod[op], "struct_info", None)
        if not isinstance(sinfo, FuncStructInfo):
            return ObjectStructInfo()
        return call_result(sinfo, tuple(getattr(a, "struct_info", ObjectStructInfo()) for a in call.args))

    def _normalize_if(self, e: rx.If) -> rx.If:
        cond = self._normalize_arg(e.cond)
        then = self._normalize_scope(e.true_branch)
        other = self._normalize_scope(e.false_branch)
        if cond is e.cond and then is e.true_branch and other is e.false_branch and _known(e.struct_info):
            return e
        return rx.If(cond, then, other, join_struct_info(_sinfo(then), _sinfo(other)), span=e.span)

    def _normalize_scope(self, expr: Any) -> Any:
        """A branch or a function body: normalized in blocks of its own, as a SeqExpr."""
        if isinstance(expr, rx.SeqExpr):
            return self._normalize_seq(expr)
        seq = self._normalize_seq(rx.SeqExpr((), expr))
        return seq

    def _normalize_seq(self, seq: rx.SeqExpr) -> rx.SeqExpr:
        blocks = [self._normalize_block(b) for b in seq.blocks]
        self._frames.append(_Frame(False))
        try:
            body = self._normalize_arg(seq.body)
        finally:
            prologue = self._frames.pop()
        if prologue.bindings:
            blocks.append(prologue.block())
        blocks = merge_blocks(blocks)
        if body is seq.body and len(blocks) == len(seq.blocks) \
                and all(a is b for a, b in zip(blocks, seq.blocks)) and _known(seq.struct_info):
            return seq
        return rx.SeqExpr(tuple(blocks), body, _sinfo(body), span=seq.span)

    def _normalize_block(self, block: rx.BindingBlock) -> rx.BindingBlock:
        frame = _Frame(isinstance(block, rx.DataflowBlock))
        self._frames.append(frame)
        try:
            for b in block.bindings:
                value = self.normalize(b.value)
                if value is b.value:
                    frame.bindings.append(b)
                elif isinstance(b, rx.MatchCast):
                    frame.bindings.append(rx.MatchCast(value, b.struct_info, b.var, span=b.span))
                else:
                    frame.bindings.append(rx.VarBinding(value, b.var, span=b.span))
        finally:
            self._frames.pop()
        if len(frame.bindings) == len(block.bindings) and all(
                a is b for a, b in zip(frame.bindings, block.bindings)):
            return block
        return type(block)(tuple(frame.bindings), span=block.span)

    def _normalize_function(self, f: rx.Function) -> rx.Function:
        body = self._normalize_scope(f.body)
        if body is f.body:
            return f
        return rx.Function(f.params, body, f.ret_struct_info, f.is_pure, f.attrs, span=f.span,
                           source_dialect=f.source_dialect)


class _RenameGlobals(Mutator):
    def __init__(self, rename: dict[int, GlobalVar]):
        self.rename = rename

    def visit_GlobalVar(self, gv: GlobalVar) -> GlobalVar:
        return self.rename.get(id(gv), gv)


def const(value: Any, dtype: "str | DataType | None" = None) -> rx.Constant:
    """A Relax constant: ``relax.const(1.0, "float32")``, ``relax.const(np.ones((2, 2)))``.
    Without a dtype, int64 data becomes int32 and float64 data float32, as in TVM."""
    data = np.asarray(value, dtype=str(dtype) if dtype else None)
    if not dtype:
        narrow = {np.dtype("int64"): np.int32, np.dtype("float64"): np.float32}
        data = data.astype(narrow.get(data.dtype, data.dtype))
    return make_constant(data)


# -------------------------------------------------------------------- helpers
def _py_tuple(expr: Any) -> Any:
    """Python tuples and lists of Relax values become relax.Tuple, as in TVM's builder."""
    if isinstance(expr, (list, tuple)):
        return rx.Tuple(tuple(_py_tuple(e) for e in expr))
    return expr


def _dataflow_vars(e: Any) -> list:
    if isinstance(e, rx.DataflowVar):
        return [e]
    if isinstance(e, (list, tuple)):
        return [v for x in e for v in _dataflow_vars(x)]
    if isinstance(e, rx.Tuple):
        return _dataflow_vars(e.fields)
    if isinstance(e, rx.Call):
        return _dataflow_vars(e.args)
    return []


def _is_leaf_or_tuple(e: Any) -> bool:
    return isinstance(e, (rx.Var, rx.Constant, rx.ShapeExpr, rx.PrimValue, rx.StringImm,
                          rx.DataTypeImm, rx.ExternFunc, rx.Tuple, GlobalVar, Op))


def _sinfo(e: Any) -> StructInfo:
    return getattr(e, "struct_info", None) or ObjectStructInfo()


def _known(sinfo: Any) -> bool:
    return sinfo is not None and type(sinfo) is not ObjectStructInfo


__all__ = ["BlockBuilder", "FunctionScope", "DataflowScope", "NameSupply", "const"]
