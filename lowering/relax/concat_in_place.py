"""``ConcatInPlace``: the kernels whose results a concatenation joins write them straight into
their slice of its result, so that the concatenation copies nothing (tvms' own pass; TVM has none).

After fusion a fire module of SqueezeNet (an Inception block alike) is

    a = R.call_tir(f, (x, w1, b1), out_sinfo=R.Tensor((1, 64, 55, 55)))
    b = R.call_tir(g, (x, w3, b3), out_sinfo=R.Tensor((1, 64, 55, 55)))
    c = R.call_tir(concatenate, (a, b), out_sinfo=R.Tensor((1, 128, 55, 55)))

and the copy of ``concatenate`` costs as much as a quarter of the convolutions. Here it becomes

    a = R.call_tir(f_in_concatenate, (x, w1, b1), out_sinfo=R.Tensor((1, 128, 55, 55)))
    b = R.call_tir_inplace(g_in_concatenate, (x, w3, b3, a), inplace_indices=[3], out_sinfo=...)
    c = b

where ``f_in_concatenate`` is ``f`` with its result buffer widened to the concatenation's shape
and each access of it moved along the axis by the part's offset (``g``'s by 64): each kernel
writes its slice and leaves the others as they are. A part is written in place when it is the
result of a ``call_tir`` in the same block, used by the concatenation only, whose kernel never
reads its result buffer (its last block stores it: a convolution's bias and relu epilogue, which
the default schedules compute in registers whatever the store's index; a convolution that
accumulates into its result is left as it is) and whose result buffer has a constant shape.
Other parts (parameters, constants, other concatenations, ...) are copied into their slice by a
kernel of their own, at the concatenation's place (a concatenation none of whose parts is
written in place stays as it is: its kernel is that copy). A concatenation is recognised as the kernel
LegalizeOps makes for ``R.concat`` of its arguments (structurally equal), so any axis works.
"""
from __future__ import annotations

import dataclasses
from typing import Any

from ...ir import relax as rx
from ...ir.buffer import Buffer, BufferRegion
from ...ir.dtype import DataType
from ...ir.errors import TVMSError
from ...ir.expr import BufferLoad, IntImm, Range
from ...ir.function import PrimFunc
from ...ir.module import GlobalVar, IRModule
from ...ir.name_supply import NameSupply
from ...ir.node import FrozenDict
from ...ir.relax_op import make_call
from ...ir.stmt import BufferStore
from ...ir.struct_info import TensorStructInfo
from ...ir.structural import structural_equal
from ...ir.visitor import Mutator, collect
from .. import te
from ..pass_registry import register_pass
from ..transform import module_pass
from .passes import _reachable, _relax_funcs, tvm_print_order


@module_pass(opt_level=0, name="ConcatInPlace")
class ConcatInPlace:
    """Writes the parts of each concatenation into its result in place (module docstring)."""

    def transform_module(self, mod: IRModule, ctx: Any) -> IRModule:
        return concat_in_place(mod)


def concat_in_place(mod: IRModule) -> IRModule:
    """The pass on ``mod`` (a new module; ``mod`` itself when no concatenation is rewritten)."""
    rewriter = _Rewriter(mod.copy())
    changed = False
    for gv, func in _relax_funcs(mod):
        new = rewriter.function(func)
        if new is not func:
            rewriter.mod[gv] = new
            changed = True
    if not changed:
        return mod
    out = rewriter.mod  # (less the kernels no longer called: the concatenations, the parts' first forms)
    keep = _reachable(out, [gv.name_hint for gv, f in out.functions_items() if not getattr(f, "is_private", True)])
    for gv in [gv for gv in out.get_global_vars() if gv.name_hint not in keep]:
        del out[gv]
    return tvm_print_order(out)


def concat_axis(func: PrimFunc, parts: list, out: Any) -> int | None:
    """The axis along which ``func`` concatenates tensors of the struct infos ``parts`` into one
    of ``out``: when it is the kernel LegalizeOps makes for ``R.concat`` of them (attributes
    aside); else None."""
    from .legalize import LegalizeOps

    dims, total = [_static_dims(p) for p in parts], _static_dims(out)
    if len(parts) < 2 or None in dims or total is None or any(len(d) != len(total) for d in dims):
        return None
    axes = [ax for ax in range(len(total)) if total[ax] != dims[0][ax]]
    if len(axes) != 1 or any(d[ax] != total[ax] for d in dims for ax in range(len(total)) if ax != axes[0]):
        return None
    params = tuple(rx.Var(f"x{i}", p) for i, p in enumerate(parts))
    try:
        concat = make_call("concat", [rx.Tuple(params)], {"axis": axes[0]})
        made = LegalizeOps()(IRModule({"main": rx.Function(params, concat)}))
    except TVMSError:  # (parts R.concat does not take: dtypes that differ)
        return None
    kernel = next((made[k] for k in made if isinstance(made[k], PrimFunc)), None)
    return axes[0] if kernel is not None and structural_equal(_bare(kernel), _bare(func)) else None


def into_slice(func: PrimFunc, shape: tuple, axis: int, offset: int) -> PrimFunc:
    """``func`` with its last parameter's buffer (its result) widened to ``shape`` and every
    access of it moved by ``offset`` along ``axis``."""
    old = func.buffer_map[func.params[-1]]
    new = dataclasses.replace(old, shape=tuple(IntImm(d.dtype, s) for d, s in zip(old.shape, shape)))
    return _Shift(old, new, axis, offset).visit(func)


class _Shift(Mutator):
    def __init__(self, old: Buffer, new: Buffer, axis: int, offset: int) -> None:
        self.old, self.new, self.axis, self.offset = old, new, axis, offset

    def visit_Buffer(self, node: Buffer) -> Buffer:
        return self.new if node is self.old else node

    def _moved(self, index: Any) -> Any:
        return index + IntImm(index.dtype, self.offset) if self.offset else index

    def _shifted(self, node: Any, field: str, move: Any) -> Any:
        was = node.buffer is self.old
        node = self.generic_visit(node)
        if not was:
            return node
        items = list(getattr(node, field))
        items[self.axis] = move(items[self.axis])
        return dataclasses.replace(node, **{field: tuple(items)})

    def visit_BufferStore(self, node: BufferStore) -> BufferStore:
        return self._shifted(node, "indices", self._moved)

    def visit_BufferLoad(self, node: BufferLoad) -> BufferLoad:
        return self._shifted(node, "indices", self._moved)

    def visit_BufferRegion(self, node: BufferRegion) -> BufferRegion:
        return self._shifted(node, "region", lambda r: Range(self._moved(r.min), r.extent))


def _bare(func: PrimFunc) -> PrimFunc:
    return func.with_changes(attrs=FrozenDict({}))


def _static_dims(sinfo: Any) -> tuple | None:
    if not isinstance(sinfo, TensorStructInfo) or sinfo.dims is None:
        return None
    dims = tuple(d.value if isinstance(d, IntImm) else None for d in sinfo.dims)
    return None if None in dims else dims


def _writes_only_result(func: PrimFunc, inputs: int) -> bool:
    """Whether ``func`` takes ``inputs`` tensors and its result last, of a constant shape,
    stores its result buffer and never reads it (so no reduction accumulates into it)."""
    if len(func.params) != inputs + 1 or func.params[-1] not in func.buffer_map:
        return False
    out = func.buffer_map[func.params[-1]]
    if out.strides or out.elem_offset is not None:  # (widened, a laid-out buffer would move)
        return False
    if not all(isinstance(d, IntImm) for d in out.shape):  # (widening drops what a size defines)
        return False
    return not any(load.buffer is out for load in collect(func.body, BufferLoad))


class _Rewriter:
    def __init__(self, mod: IRModule) -> None:
        self.mod = mod
        self.names = NameSupply("_")
        for gv in mod.get_global_vars():
            self.names.reserve(gv.name_hint)
        self.kernels: dict = {}  # (what it writes, the concatenation, offset) -> GlobalVar
        self.axes: dict = {}  # concatenation kernel's name -> its axis (or None)

    def function(self, func: rx.Function) -> rx.Function:
        if not isinstance(func.body, rx.SeqExpr):
            return func
        uses: dict = {}
        for v in collect(func.body, rx.Var):  # (each bound variable once at its binding)
            uses[v] = uses.get(v, 0) + 1
        blocks = tuple(self.block(blk, uses) for blk in func.body.blocks)
        if all(a is b for a, b in zip(blocks, func.body.blocks)):
            return func
        return func.with_changes(body=func.body.with_changes(blocks=blocks))

    def block(self, blk: Any, uses: dict) -> Any:
        bindings = list(blk.bindings)
        bound_at = {b.var: i for i, b in enumerate(bindings)}
        replaced: dict = {}  # binding index -> its new bindings
        for i, b in enumerate(bindings):
            parts = self._concat_parts(b)
            if parts is None:
                continue
            axis, out = parts
            offsets, at = [], 0
            for part in b.value.args[1].fields:
                offsets.append(at)
                at += _static_dims(part.struct_info)[axis]
            producers = [(bound_at[p], p, off) for p, off in zip(b.value.args[1].fields, offsets)
                         if self._producer(p, bound_at, i, uses, bindings, replaced)]
            if not producers:
                continue
            chain, dataflow = None, isinstance(blk, rx.DataflowBlock)
            for j, var, off in sorted(producers, key=lambda t: t[0]):
                call = bindings[j].value
                kernel = self._kernel(call.args[0], b.value.args[0].name_hint, out, axis, off)
                chain, binding = self._write(kernel, list(call.args[1].fields), chain, out, var, dataflow)
                replaced[j] = [binding]
            tail = []
            written = {id(var) for _, var, _ in producers}
            for part, off in zip(b.value.args[1].fields, offsets):
                if id(part) not in written:  # (a part not made here: copied into its slice)
                    kernel = self._copy_kernel(part.struct_info, b.value.args[0].name_hint, out, axis, off)
                    chain, binding = self._write(kernel, [part], chain, out, b.var, dataflow)
                    tail.append(binding)
            replaced[i] = tail + [rx.VarBinding(chain, b.var)]
        if not replaced:
            return blk
        return type(blk)(tuple(n for k, b in enumerate(bindings) for n in replaced.get(k, [b])), span=blk.span)

    def _concat_parts(self, b: Any) -> tuple | None:
        """(axis, result's struct info) of a binding that concatenates variables and constants;
        else None."""
        call = b.value
        if not (isinstance(b, rx.VarBinding) and _call_tir(call) and _static_dims(call.sinfo_args[0]) is not None
                and all(isinstance(p, (rx.Var, rx.Constant)) for p in call.args[1].fields)):
            return None
        name = call.args[0].name_hint
        if name not in self.axes:
            func = self.mod[name]
            parts = [p.struct_info for p in call.args[1].fields]
            self.axes[name] = concat_axis(func, parts, call.sinfo_args[0]) if isinstance(func, PrimFunc) else None
        return None if self.axes[name] is None else (self.axes[name], call.sinfo_args[0])

    def _producer(self, var: Any, bound_at: dict, before: int, uses: dict, bindings: list, replaced: dict) -> bool:
        """Whether ``var`` is a kernel's result, bound before the concatenation, that only the
        concatenation uses, and the kernel can write it into a slice (not a concatenation
        rewritten already: its result is copied)."""
        j = bound_at.get(var) if isinstance(var, rx.Var) else None
        if j is None or j >= before or j in replaced or uses.get(var, 0) != 2:  # (its binding and the concatenation)
            return False
        call = bindings[j].value
        if not _call_tir(call):
            return False
        func = self.mod[call.args[0].name_hint]
        return isinstance(func, PrimFunc) and _writes_only_result(func, len(call.args[1].fields)) \
            and _static_dims(call.sinfo_args[0]) is not None

    def _kernel(self, callee: GlobalVar, concat: str, out: Any, axis: int, offset: int) -> GlobalVar:
        key = (callee.name_hint, concat, offset)
        if key not in self.kernels:
            func = into_slice(self.mod[callee.name_hint], _static_dims(out), axis, offset)
            self.kernels[key] = self._add(f"{callee.name_hint}_in_{concat}", func)
        return self.kernels[key]

    def _copy_kernel(self, part: Any, concat: str, out: Any, axis: int, offset: int) -> GlobalVar:
        key = (("copy", _static_dims(part), str(part.dtype)), concat, offset)
        if key not in self.kernels:
            x = te.placeholder([IntImm(DataType("int64"), d) for d in _static_dims(part)], str(part.dtype), "x")
            copy = te.compute(x.shape, lambda *i: x[i], "T_copy")
            func = te.create_prim_func([x, copy], index_dtype_override="int64")
            func = func.with_changes(attrs=FrozenDict({"tir.noalias": True}))  # (private, as legalized kernels)
            self.kernels[key] = self._add(f"copy_in_{concat}", into_slice(func, _static_dims(out), axis, offset))
        return self.kernels[key]

    def _add(self, name: str, func: PrimFunc) -> GlobalVar:
        gv = GlobalVar(self.names.fresh(name))
        if "global_symbol" in func.attrs:  # (a public callee's copy is public under its own name)
            func = func.with_attr("global_symbol", gv.name_hint)
        self.mod[gv] = func
        return gv

    @staticmethod
    def _write(kernel: GlobalVar, args: list, chain: Any, out: Any, var: rx.Var, dataflow: bool) -> tuple:
        """(the variable, its binding) of ``kernel`` on ``args`` writing its slice: into a new
        tensor of the concatenation's shape (``chain`` None), else into ``chain`` in place."""
        if chain is None:
            call = make_call("call_tir", [kernel, rx.Tuple(tuple(args))], {}, (out,))
        else:
            call = make_call("call_tir_inplace", [kernel, rx.Tuple(tuple(args) + (chain,))],
                             {"inplace_indices": (len(args),)}, (out,))
        new = (rx.DataflowVar if dataflow else rx.Var)(var.name + "_", out)
        return new, rx.VarBinding(call, new)


def _call_tir(value: Any) -> bool:
    """Whether ``value`` is ``R.call_tir`` of a kernel (a GlobalVar) on a tuple, with one result."""
    return (isinstance(value, rx.Call) and getattr(value.op, "name", None) == "relax.call_tir"
            and len(value.args) == 2 and isinstance(value.args[0], GlobalVar)
            and isinstance(value.args[1], rx.Tuple) and len(value.sinfo_args) == 1)


register_pass(factory=ConcatInPlace)

__all__ = ["ConcatInPlace", "concat_axis", "concat_in_place", "into_slice"]
