"""``FuseTIR``: each fused Relax function (``{"Primitive": True}``, made by FuseOps) becomes one
PrimFunc of the same name, and its calls become ``R.call_tir`` of it, as TVM does.

The PrimFunc runs the bodies of the PrimFuncs the function calls one after the other, in one
root block: the function's tensor parameters become buffer parameters named after them, the
results of inner calls become ``T.alloc_buffer``s named ``<output buffer>_intermediate``, and the
function's results become the output parameters. Shape (``tir_vars: R.Shape([n])``) and scalar
parameters become scalar parameters ``n: T.int64`` in their place, passed inside the call's tuple
(``R.call_tir(cls.fused, (x, n), ...)``). Symbolic sizes of the inner PrimFuncs are matched to
the fused function's through buffer shapes and scalar arguments. Before it, bindings are
canonicalized (as TVM's ExpandTupleArguments ends with); after it, DeadCodeElimination drops
the PrimFuncs and functions nothing calls any more.
"""
from __future__ import annotations

from typing import Any

from ...ir import relax as rx
from ...ir.buffer import Buffer, decl_buffer
from ...ir.dtype import handle
from ...ir.errors import TVMSError
from ...ir.expr import Op, Var as TirVar, const
from ...ir.function import PrimFunc
from ...ir.module import GlobalVar, IRModule
from ...ir.node import FrozenDict, Node
from ...ir.relax_op import make_call
from ...ir.stmt import Block, BlockRealize, seq
from ...ir.struct_info import (PrimStructInfo, ShapeStructInfo, TensorStructInfo,
                               TupleStructInfo)
from ...ir.visitor import Mutator
from ..pass_registry import register_pass
from ..transform import module_pass
from .expr_functor import PyExprMutator
from .call_tir_rewrite import flat_tensors as _flat_tensors
from .passes import canonicalize_bindings, DeadCodeElimination, tvm_print_order


class _Renew(Mutator):
    """A copy with fresh variables and buffers in place of every one (TVM's RenewDefs), so that
    a PrimFunc inlined twice gives two independent bodies."""

    def __init__(self) -> None:
        self.memo: dict = {}

    def visit(self, node: Node) -> Any:
        done = self.memo.get(id(node))
        if done is None:
            if isinstance(node, TirVar):
                done = type(node)(node.name, node.dtype, node.type_annotation, span=node.span)
            else:
                done = super().visit(node)
            self.memo[id(node)] = done
        return done


class _Substitute(Mutator):
    """Buffers and symbolic sizes replaced (by identity), once per node."""

    def __init__(self, buffers: dict, sizes: dict):
        self.buffers, self.sizes, self.memo = buffers, sizes, {}

    def visit(self, node: Node) -> Any:
        done = self.memo.get(id(node))
        if done is None:
            if isinstance(node, Buffer) and id(node) in self.buffers:
                done = self.buffers[id(node)]
            elif isinstance(node, TirVar) and id(node) in self.sizes:
                done = self.sizes[id(node)]
            else:
                done = super().visit(node)
            self.memo[id(node)] = done
        return done

    def visit_Block(self, block: Block) -> Block:
        # two regions of one buffer (``a * a`` once a and its copy became one buffer) merge
        # into the first, as TVM's substitution does
        block = self.generic_visit(block)
        reads, writes = _first_per_buffer(block.reads), _first_per_buffer(block.writes)
        if len(reads) == len(block.reads) and len(writes) == len(block.writes):
            return block
        return block.with_changes(reads=reads, writes=writes)


def _first_per_buffer(regions: tuple) -> tuple:
    seen: set = set()
    kept = []
    for r in regions:
        if id(r.buffer) not in seen:
            seen.add(id(r.buffer))
            kept.append(r)
    return tuple(kept)


def _unique_block_names(body: Any) -> Any:
    """Blocks renamed so that no two share a name: a name taken gets the next free number
    (``T_add`` -> ``T_add1``; ``compute2`` -> ``compute3``), as TVM's deduplicator does."""
    taken: set = set()

    class _Rename(Mutator):
        def visit_Block(self, block: Block) -> Block:
            block = self.generic_visit(block)
            name = _fresh_block_name(block.name_hint, taken)
            taken.add(name)
            return block if name == block.name_hint else block.with_changes(name_hint=name)

    return _Rename().visit(body)


def _fresh_block_name(name: str, taken: set) -> str:
    if name not in taken:
        return name
    base = name.rstrip("0123456789")
    counter = int(name[len(base):]) + 1 if len(base) < len(name) else 1
    while f"{base}{counter}" in taken:
        counter += 1
    return f"{base}{counter}"


class _FusedPrimFunc:
    """Builds the PrimFunc of one primitive Relax function."""

    def __init__(self, mod: IRModule, func: rx.Function):
        self.mod = mod
        self.buffers_of: dict = {}  # id(relax expr or var) -> list of Buffers it stands for
        self.params: list = []
        self.buffer_map: dict = {}
        self.allocs: list = []
        self.bodies: list = []
        self.buffer_subst: dict = {}  # id(inner buffer) -> fused buffer
        self.size_subst: dict = {}  # id(inner symbolic size) -> fused PrimExpr
        self.scalars: dict = {}  # id(relax scalar parameter) -> its TensorIR variable
        # the renewed callees, kept alive while their ids key buffer_subst and size_subst: a
        # parameter its body never reads would otherwise be freed and its id given to a new node
        self.inlined: list = []
        self.inplace: list = []  # per output: the parameter (index) it is written into, or None
        self.func = func

    def build(self) -> PrimFunc:
        func = self.func
        for p in func.params:
            self.add_param(p)
        for b in (b for block in func.body.blocks for b in block.bindings):
            if not isinstance(b, rx.VarBinding):
                raise TVMSError("FuseTIR: R.match_cast is not supported in primitive functions")
            self.buffers_of[id(b.var)] = self.visit(b.value)
        outputs = self.visit(func.body.body)
        param_buffers = {id(b) for b in self.buffer_map.values()}
        # (an output that is a parameter's buffer, written in place, is no output parameter: the
        # fused call becomes R.call_tir_inplace naming that parameter, as in TVM)
        param_of = {id(b): k for k, p in enumerate(func.params) for b in self.buffers_of.get(id(p), [])}
        self.inplace = [param_of.get(id(b)) for b in outputs]
        out_ids = set()
        for i, buf in enumerate(b for b in outputs if id(b) not in param_buffers):
            p = TirVar(f"p_output{i}", handle)
            self.params.append(p)
            self.buffer_map[p] = buf
            out_ids.add(id(buf))
        subst = _Substitute(self.buffer_subst, self.size_subst)
        allocs = tuple(subst.visit(b) for b in self.allocs if id(b) not in out_ids)
        body = subst.visit(_unique_block_names(seq(self.bodies)))
        root = Block((), allocs, (), (), (), "root", None, body)
        return PrimFunc(tuple(self.params), FrozenDict(self.buffer_map),
                        BlockRealize((), const(True), root), None,
                        FrozenDict({"tir.noalias": True}), True)

    def add_param(self, p: rx.Var) -> None:
        sinfo = p.struct_info
        if isinstance(sinfo, TensorStructInfo):
            if sinfo.dims is None or sinfo.dtype.is_void:
                raise TVMSError(f"FuseTIR: parameter {p.name!r} needs a known shape and dtype")
            buf = decl_buffer(sinfo.dims, sinfo.dtype, p.name)
            var = TirVar("p_" + p.name, handle)
            self.params.append(var)
            self.buffer_map[var] = buf
            self.buffers_of[id(p)] = [buf]
        elif isinstance(sinfo, ShapeStructInfo) and sinfo.values is not None:
            for v in sinfo.values:
                if not isinstance(v, TirVar):
                    raise TVMSError("FuseTIR: shape parameters must list symbolic variables")
                self.params.append(v)
            self.buffers_of[id(p)] = []
        elif isinstance(sinfo, PrimStructInfo):
            # a scalar parameter is a scalar parameter of the PrimFunc (its value's variable)
            var = sinfo.value if isinstance(sinfo.value, TirVar) else TirVar(p.name, sinfo.dtype)
            self.params.append(var)
            self.scalars[id(p)] = var
            self.buffers_of[id(p)] = []
        else:
            raise TVMSError(f"FuseTIR: parameter {p.name!r} of type {type(sinfo).__name__} is not "
                            f"supported (tensors, scalars and shapes are)")

    def visit(self, e: Any) -> list:
        if isinstance(e, rx.Var):
            return self.buffers_of[id(e)]
        if isinstance(e, rx.Tuple):
            return [b for f in e.fields for b in self.visit(f)]
        if isinstance(e, rx.TupleGetItem):
            whole = self.visit(e.tuple_value)
            fields = e.tuple_value.struct_info.fields
            start = sum(_tensor_count(f) for f in fields[:e.index])
            return whole[start:start + _tensor_count(fields[e.index])]
        if isinstance(e, rx.Call) and isinstance(e.op, Op) and e.op.name in ("relax.call_tir",
                                                                             "relax.call_tir_inplace"):
            return self.inline_call(e)
        what = e.op.name if isinstance(e, rx.Call) and isinstance(e.op, Op) else type(e).__name__
        raise TVMSError(f"FuseTIR: only R.call_tir and R.call_tir_inplace are supported in primitive "
                        f"functions, got {what}")

    def inline_call(self, call: rx.Call) -> list:
        callee = self.mod[call.args[0]]
        if not isinstance(callee, PrimFunc):
            raise TVMSError(f"FuseTIR: {call.args[0].name_hint!r} is not a PrimFunc")
        callee = _Renew().visit(callee)
        self.inlined.append(callee)
        root = callee.body.block if isinstance(callee.body, BlockRealize) else None
        if root is None or callee.body.iter_values:
            raise TVMSError(f"FuseTIR: only schedulable PrimFuncs (a root block) can be fused, "
                            f"not {call.args[0].name_hint!r}")
        self.allocs.extend(root.alloc_buffers)
        self.bodies.append(root.body)
        params = [callee.buffer_map.get(p, p) for p in callee.params]
        index = 0
        arguments = []  # the fused buffers of each argument
        for a in call.args[1].fields:  # inputs: the callee's buffers stand for the arguments'
            scalar = self.scalar_value(a)
            if scalar is not None:  # a size argument (``n``) of a scalar parameter
                self.match_scalar(params[index], scalar)
                arguments.append([])
                index += 1
                continue
            arguments.append(self.visit(a))
            for target in arguments[-1]:
                inner = params[index]
                if not isinstance(inner, Buffer):
                    raise TVMSError(f"FuseTIR: {call.args[0].name_hint!r} takes a scalar where "
                                    f"a tensor is passed")
                self.match_shape(inner.shape, target.shape)
                self.buffer_subst[id(inner)] = target
                index += 1
        out_sinfos = _flat_tensors(call.sinfo_args)
        # R.call_tir_inplace: an output with an index is the argument there, written in place
        inplace = call.attrs["inplace_indices"] if call.op.name == "relax.call_tir_inplace" else ()
        outputs = []
        for k, sinfo in enumerate(out_sinfos):
            if k < len(inplace) and int(inplace[k]) != -1:
                outputs.append(self.written_in_place(arguments[int(inplace[k])], call))
                continue
            inner = params[index]
            index += 1
            buf = decl_buffer(sinfo.dims, inner.dtype, self.intermediate_name(inner.name),
                              scope=inner.scope)
            self.allocs.append(buf)
            self.match_shape(inner.shape, buf.shape)
            self.buffer_subst[id(inner)] = buf
            outputs.append(buf)
        # the older form: sizes after the outputs, passed as ``tir_vars=R.shape([n])``
        for size in (call.args[2].values if len(call.args) > 2 else ()):
            self.match_scalar(params[index], size)
            index += 1
        return outputs

    def written_in_place(self, argument: list, call: rx.Call) -> Buffer:
        """The buffer an in-place output is: its argument's (a parameter's makes the fused call
        an in-place one, see ``build``)."""
        if len(argument) != 1:
            raise TVMSError(f"FuseTIR: {call.args[0].name_hint!r} writes in place an argument that is "
                            f"not one tensor")
        return argument[0]

    def scalar_value(self, e: Any) -> Any:
        """The PrimExpr that ``e`` passes to a scalar parameter, or None for a tensor."""
        if isinstance(e, rx.PrimValue):
            return e.value
        if isinstance(e, rx.Var) and id(e) in self.scalars:
            return self.scalars[id(e)]
        return None

    def match_scalar(self, inner: Any, value: Any) -> None:
        if not isinstance(inner, TirVar) or inner.dtype == handle:
            raise TVMSError(f"FuseTIR: a scalar argument is passed where {inner.name!r} expects "
                            f"a tensor")
        if id(inner) not in self.size_subst:
            self.size_subst[id(inner)] = value

    def intermediate_name(self, base: str) -> str:
        # cumulative on purpose, as TVM 0.27 names them: the third T_add is T_add_intermediate_1_2
        # (fixtures/fusion/conv_adds.FuseTIR.tvms)
        names = {b.name for b in self.allocs}
        name, i = base + "_intermediate", 0
        while name in names:
            i += 1
            name = f"{name}_{i}"
        return name

    def match_shape(self, inner: tuple, outer: tuple) -> None:
        for a, b in zip(inner, outer):
            if isinstance(a, TirVar) and id(a) not in self.size_subst:
                self.size_subst[id(a)] = b


def _tensor_count(sinfo: Any) -> int:
    return len(_flat_tensors((sinfo,)))


class _CallRewriter(PyExprMutator):
    """Calls of the fused Relax functions become ``R.call_tir`` of their PrimFuncs."""

    def __init__(self, mod: IRModule, replaced: dict):
        super().__init__(mod)
        self.replaced = replaced  # name -> (GlobalVar of the PrimFunc, the parameter each output is or None)

    def visit_call_(self, call: rx.Call) -> Node:
        call = super().visit_call_(call)
        if not isinstance(call.op, GlobalVar) or call.op.name_hint not in self.replaced:
            return call
        call = self.builder_.normalize(call)
        # tensors as they are, each size of a shape and each scalar as a PrimValue, in the order
        # of the parameters (TVM 0.27's form: ``R.call_tir(cls.f, (x, n), ...)``)
        args: list = []
        at: list = []  # where each argument of the fused function's call is in ``args``
        for a in call.args:
            at.append(len(args))
            sinfo = a.struct_info
            if isinstance(sinfo, ShapeStructInfo):
                args.extend(rx.PrimValue(v) for v in sinfo.values)
            elif isinstance(sinfo, PrimStructInfo) and sinfo.value is not None:
                # (a scalar variable is passed as it is, as TVM passes it)
                args.append(a if isinstance(a, (rx.PrimValue, rx.Var)) else rx.PrimValue(sinfo.value))
            elif isinstance(sinfo, TupleStructInfo):
                raise TVMSError("FuseTIR: tuple arguments of fused functions are not supported")
            else:
                args.append(a)
        outs = tuple(_flat_tensors(call.struct_info))
        prim, inplace = self.replaced[call.op.name_hint]
        if any(k is not None for k in inplace):
            indices = tuple(-1 if k is None else at[k] for k in inplace)
            return make_call("call_tir_inplace", [prim, rx.Tuple(tuple(args))], {"inplace_indices": indices}, outs)
        return make_call("call_tir", [prim, rx.Tuple(tuple(args))], {}, outs)


def fuse_tir(mod: IRModule) -> IRModule:
    primitive = [(gv, f) for gv, f in mod.functions_items()
                 if isinstance(f, rx.Function) and f.attrs.get("Primitive")]
    if not primitive:
        return mod
    replaced: dict = {}
    fused: list = []
    for gv, f in primitive:
        builder = _FusedPrimFunc(mod, f)
        fused.append((gv, builder.build(), builder.inplace))
    for gv, prim, inplace in fused:
        del mod[gv]
        new_gv = GlobalVar(gv.name_hint)
        mod[new_gv] = prim
        replaced[gv.name_hint] = (new_gv, inplace)
    rewriter = _CallRewriter(mod, replaced)
    for gv, f in mod.functions_items():
        if isinstance(f, rx.Function):
            new = rewriter.visit_expr(f)
            if new is not f:
                mod[gv] = new
    return mod


@module_pass(opt_level=0, name="FuseTIR")
class FuseTIR:
    """Fused Relax functions become single PrimFuncs (see the module docstring)."""

    def transform_module(self, mod: IRModule, ctx: Any) -> IRModule:
        for gv, f in mod.functions_items():
            if isinstance(f, rx.Function):
                mod[gv] = canonicalize_bindings(f)
        mod = fuse_tir(mod)
        # DeadCodeElimination's work, as part of this pass (no instrument sees it run apart)
        return tvm_print_order(DeadCodeElimination().pass_func(mod, ctx))


register_pass(factory=FuseTIR)

__all__ = ["FuseTIR", "fuse_tir"]
