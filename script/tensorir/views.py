"""Views of a buffer's memory (TVM 0.27): ``B.view(4, 8)`` / ``B.view(4, 8, layout=...)``,
``B.view("float32")`` (the same bytes as another type), ``B.local(...)`` (what one thread holds
of a buffer laid out across threads) and ``B.permute(1, 0)``: each a ``DeclBuffer`` over the
viewed buffer's data. Printing writes a declared buffer as the view TVM's printer recognizes in
it, where it does (``view_or_decl``)."""
from __future__ import annotations

from dataclasses import replace
from typing import Any

from ...ir import arith
from ...ir.buffer import Buffer
from ...ir.dtype import DataType
from ...ir.errors import TVMSError
from ...ir.expr import IntImm, Mul, PointerType, PrimExpr, Sub, Var
from ...ir.stmt import DeclBuffer
from ...ir.structural import structural_equal
from ...ir.tile_layout import (TileLayout, layout_of, on_threads, permutation, permute, same_placement, storage,
                               storage_size, storage_span)
from .. import syntax as S
from .evaluator import BufferMethod
from .layouts import layout_text
from .rules import TakesRest
from .text import quote


class ViewParsing:
    """Reading views (mixed into the TIRBuilder)."""

    def buffer_view(self, target: Any, method: BufferMethod, call: S.Call, rest: list) -> Any:
        name = self.target_name(target)
        args = [self.ev(a) for a in call.args]
        kwargs = {k: self.ev(v) for k, v in call.kwargs}
        base = method.buffer
        if len(args) == 1 and isinstance(args[0], str) and not kwargs:  # ``B.view("float32")``
            buf = self.retyped_view(name, base, self.dtype_of(args[0], call), call)
            return TakesRest(DeclBuffer(buf, self.rest_body(rest, {name: buf}), base,
                                        span=self.assigned_span(call, target)))
        shape = tuple(args) if args and not isinstance(args[0], (tuple, list)) else (args[0] if args else ())
        # (without layout=, or with layout=None as in TVM, a view places the elements as the buffer
        # it views does: it keeps that buffer's layout, as TVM keeps it, which TVM's printer compares)
        if kwargs.get("layout") is None:
            s_tir = self.func is not None and self.func.s_tir  # (whose buffers have no layout)
            kwargs["layout"] = None if base.no_layout else base.layout or ("default" if s_tir else layout_of(base))
        return self.derived_buffer(target, base, shape, kwargs, call, rest)

    def derived_buffer(self, target: Any, base: Buffer, shape: tuple, kwargs: dict, call: S.Call,
                       rest: list) -> TakesRest:
        """A view of ``base``'s memory: its strides, offset and alignment, another shape."""
        memory = {"data": base.data, "strides": base.strides, "elem_offset": base.offset,
                  "align": base.data_alignment, "offset_factor": base.offset_factor}
        if base.scope == "tmem" and base.allocated_addr:
            # (tensor memory is reached by its column address, not a pointer: as TVM does, the
            # view is a buffer of its own at the same address)
            memory = {"scope": "tmem", "align": base.data_alignment, "allocated_addr": base.allocated_addr[0]}
        name = self.target_name(target)
        buf = self.buffer_decl(name, [shape], {"dtype": kwargs.pop("dtype", str(base.dtype)),
                                               **memory, **kwargs}, call)
        return TakesRest(DeclBuffer(buf, self.rest_body(rest, {name: buf}), base,
                                    span=self.assigned_span(call, target)))

    def buffer_local(self, target: Any, method: BufferMethod, call: S.Call, rest: list) -> Any:
        """``B.local(*shape, layout=...)``: what one thread holds of ``B``'s storage, as a buffer of
        its own (by default the whole reach of its storage, row-major; with a layout, as many
        elements as the storage holds). A shape with a layout needs nothing of ``B``'s layout."""
        base = method.buffer
        args = [self.ev(a) for a in call.args]
        kwargs = {k: self.ev(v) for k, v in call.kwargs}
        layout = kwargs.pop("layout", None)
        if kwargs:
            raise self.error(call, f"{base.name}.local(...) takes a shape and layout=, not {next(iter(kwargs))}=")
        if args and layout is not None:
            return self.derived_buffer(target, base, tuple(args), {"layout": layout}, call, rest)
        if base.no_layout:
            raise self.error(call, f"{base.name}.local(...) reads what one thread holds from {base.name}'s layout, "
                                   f"and {base.name} has layout=None: give a shape and layout=")
        parent = layout_of(base)  # (the default layout of a buffer that has none of its own too)
        if not isinstance(parent, TileLayout):
            raise self.error(call, f"{base.name}.local(...): tvms reads what one thread holds of a "
                                   f"T.TileLayout, and {base.name} has a T.ComposeLayout")
        held = storage(parent)
        extent = storage_span(held) if layout is None else storage_size(held)
        shape = tuple(args) if args else (extent,)
        if layout is None and args and not _holds(shape, extent):
            raise self.error(call, f"{base.name}.local{tuple(args)}: the shape must cover the {extent} "
                                   f"element(s) one thread holds")
        return self.derived_buffer(target, base, shape, {"layout": layout or "default"}, call, rest)

    def buffer_permute(self, target: Any, method: BufferMethod, call: S.Call, rest: list) -> Any:
        """``B.permute(1, 0)``: ``B``'s memory with its dimensions reordered (TVM 0.27), the
        layout's pieces with them."""
        base = method.buffer
        dims = [self.ev(a) for a in call.args]
        dims = [d.value if isinstance(d, IntImm) else d for d in dims]
        if (call.kwargs or not all(isinstance(d, int) and not isinstance(d, bool) for d in dims)
                or sorted(dims) != list(range(len(base.shape)))):
            raise self.error(call, f"{base.name}.permute(...) takes an order of its {len(base.shape)} "
                                   f"dimension{'s' if len(base.shape) != 1 else ''}, such as "
                                   f"{base.name}.permute({', '.join(map(str, reversed(range(len(base.shape)))))})")
        if base.no_layout:
            raise self.error(call, f"{base.name}.permute(...) reorders {base.name}'s layout, and {base.name} "
                                   f"has layout=None")
        try:
            layout = permute(layout_of(base), base.shape, tuple(dims))
        except TVMSError as e:
            raise self.error(call, f"{base.name}.permute(...): {e}") from None
        return self.derived_buffer(target, base, tuple(base.shape[d] for d in dims), {"layout": layout}, call, rest)

    def retyped_view(self, name: str, base: Buffer, dtype: DataType, call: S.Call) -> Buffer:
        """``base.view(dtype)``: the same bytes as elements of another type (the last dimension
        and the offset scaled by the ratio of the sizes, as TVM's ``Buffer.view`` does)."""
        if base.layout is not None:
            raise self.error(call, f"{base.name}.view({str(dtype)!r}): tvms retypes no buffer with a tile layout")
        bits, base_bits = dtype.bits * dtype.lanes, base.dtype.bits * base.dtype.lanes
        big, small = max(bits, base_bits), min(bits, base_bits)
        last = base.shape[-1] if base.shape else None
        offset = base.offset
        if (big % small or not isinstance(last, IntImm) or not isinstance(offset, IntImm)
                or (bits > base_bits and (last.value % (big // small) or offset.value % (big // small)))):
            raise self.error(call, f"{base.name}.view({str(dtype)!r}): the last dimension and offset of a "
                             f"{base.dtype} buffer must be constants that {dtype} elements cover exactly")
        scale = (lambda n: n // (big // small)) if bits > base_bits else (lambda n: n * (big // small))
        # (the view carries no pooled buffer's address, as in TVM; but tensor memory is reached by
        # its column address, not a pointer: there the view is a buffer of its own at that address)
        tmem = base.scope == "tmem" and bool(base.allocated_addr)
        data = Var(name, base.data.dtype, PointerType(dtype, "tmem")) if tmem else base.data
        return replace(base, data=data, dtype=dtype, name=name,
                       shape=(*base.shape[:-1], IntImm(last.dtype, scale(last.value))),
                       elem_offset=None if base.elem_offset is None else IntImm(offset.dtype, scale(offset.value)),
                       scalar=False, allocated_addr=base.allocated_addr if tmem else ())


class ViewPrinting:
    """Printing a declared buffer as a view (mixed into the TIRPrinter)."""

    def view_or_decl(self, b: Buffer, data_of: Buffer | None) -> str:
        if self.d.name != "classic" and b.is_scalar:
            offset = self.expr(b.elem_offset) if b.elem_offset is not None else "0"  # (TVM writes it always)
            return (f"{self.tir('decl_scalar')}({self.tir(str(b.dtype))}, data={self.var(b.data)}, "
                    f"elem_offset={offset}, scope={quote(b.scope)})")
        # the buffer the source named as the data's, while it is in scope; else the innermost
        named = data_of is not None and data_of.data is b.data and self.namer.get(data_of) is not None
        owner = data_of if named else self.data_owner(b.data, exclude=b)
        if owner is None or self.namer.get(b.data) is not None:
            return self.buffer_decl(b, "decl_buffer", [])
        if owner.allocated_addr and owner.scope != "tmem":
            # (a view does not carry a pooled buffer's address: TVM declares a buffer over its data)
            return self.buffer_decl(b, "decl_buffer", [], data=self.data_of(owner))
        if self.d.name != "classic" and _localizes(owner, b):
            return self.local_view(owner, b)
        dims = _permutes(owner, b) if self.d.name != "classic" else None
        if dims is not None:
            return f"{self.namer.get(owner)}.permute({', '.join(map(str, dims))})"
        # (view's layout=None keeps the viewed buffer's layout: a buffer without one over the
        # memory of a buffer with one is no view, and TVM declares it)
        if self.d.name != "classic" and _reshapes(owner, b) and (owner.no_layout or not b.no_layout):
            # (a layout= placing the elements as the viewed buffer does is what view gives anyway)
            if b.no_layout or owner.no_layout:
                same = b.no_layout == owner.no_layout
            else:  # (both row-major by default: a reshape of contiguous memory places as it was)
                same = b.layout is None and owner.layout is None or same_placement(layout_of(b), layout_of(owner))
            layout = [] if same else [f"layout={layout_text(self, layout_of(b))}"]
            return f"{self.namer.get(owner)}.view({', '.join([*(self.expr(x) for x in b.shape), *layout])})"
        if self.d.name != "classic" and _retypes(owner, b):
            return f"{self.namer.get(owner)}.view({quote(str(b.dtype))})"
        return self.buffer_decl(b, "decl_buffer", [], data=self.data_of(owner))

    def local_view(self, parent: Buffer, b: Buffer) -> str:
        """``parent.local(...)``: the shape where it is not the one ``local`` gives, the layout
        where it is not the default one (or the shape would not cover the storage's reach)."""
        held = storage(parent.layout)
        span, size = storage_span(held), storage_size(held)
        explicit = b.layout is not None or not _holds(b.shape, span)
        implicit = size if explicit else span
        args = [] if len(b.shape) == 1 and _holds(b.shape, implicit) else [self.expr(x) for x in b.shape]
        if explicit:
            args.append(f"layout={layout_text(self, layout_of(b))}")
        return f"{self.namer.get(parent)}.local({', '.join(args)})"


def _holds(shape: tuple, count: int | PrimExpr) -> bool:
    """Whether a shape has ``count`` elements (an expression: provably, for every value)."""
    total = arith.to_expr(1)
    for extent in shape:
        if isinstance(extent, bool) or not isinstance(extent, (int, PrimExpr)):
            return False
        total = arith.binary(Mul, total, extent)
    difference = arith.simplify(arith.binary(Sub, total, count))
    return isinstance(difference, IntImm) and difference.value == 0


def _localizes(parent: Buffer, b: Buffer) -> bool:
    """Whether ``b`` is ``parent.local(...)``, as TVM prints it: a view of the memory of a buffer
    laid out across threads, laid out on memory alone."""
    return (isinstance(parent.layout, TileLayout) and on_threads(parent.layout) and not b.no_layout
            and not on_threads(layout_of(b)) and parent.dtype == b.dtype and parent.scope == b.scope
            and len(parent.strides) == len(b.strides) == 0 and structural_equal(parent.offset, b.offset)
            and parent.data_alignment == b.data_alignment and parent.offset_factor == b.offset_factor
            and b.buffer_type == "default" and not b.axis_separators)


def _same(xs: tuple, ys: tuple) -> bool:
    return len(xs) == len(ys) and all(structural_equal(x, y) for x, y in zip(xs, ys))


def _same_storage(parent: Buffer, b: Buffer) -> bool:
    """Whether ``b`` reaches ``parent``'s elements as ``parent`` does (dtype, offset, strides,
    scope, alignment and offset factor equal): a view of it, whatever its shape."""
    return (parent.dtype == b.dtype and _same(parent.strides, b.strides)
            and structural_equal(parent.offset, b.offset) and parent.scope == b.scope
            and parent.data_alignment == b.data_alignment and parent.offset_factor == b.offset_factor
            and b.buffer_type == "default" and not b.axis_separators)


def _reshapes(parent: Buffer, b: Buffer) -> bool:
    """Whether ``b`` is ``parent.view(*shape)``, as TVM prints it: another shape over the same
    elements."""
    return _same_storage(parent, b) and not _same(parent.shape, b.shape)


def _permutes(parent: Buffer, b: Buffer) -> tuple | None:
    """The dimensions of ``b`` as ``parent.permute(*dims)``, where TVM prints it so."""
    if parent.no_layout or b.no_layout or not _same_storage(parent, b):
        return None
    return permutation(layout_of(parent), parent.shape, layout_of(b), b.shape)


def _retypes(parent: Buffer, b: Buffer) -> bool:
    """Whether ``b`` is ``parent.view(dtype)``, as TVM prints it: the same bytes as elements of
    another type (the last dimension scaled by the ratio of the sizes, the rest equal)."""
    if parent.dtype == b.dtype or len(parent.shape) != len(b.shape) or not b.shape:
        return False
    bits, parent_bits = b.dtype.bits * b.dtype.lanes, parent.dtype.bits * parent.dtype.lanes
    last, parent_last = b.shape[-1], parent.shape[-1]
    if not (isinstance(last, IntImm) and isinstance(parent_last, IntImm)):
        return False
    scaled = (last.value * (bits // parent_bits) == parent_last.value if bits > parent_bits
              else last.value == parent_last.value * (parent_bits // bits))
    return (scaled and all(structural_equal(x, y) for x, y in zip(parent.shape[:-1], b.shape[:-1]))
            and _offset_retyped(parent, b, parent_bits, bits) and len(parent.strides) == len(b.strides)
            and all(structural_equal(x, y) for x, y in zip(parent.strides, b.strides))
            and parent.scope == b.scope and parent.data_alignment == b.data_alignment
            and parent.offset_factor == b.offset_factor and b.buffer_type == "default" and not b.axis_separators)


def _offset_retyped(parent: Buffer, b: Buffer, parent_bits: int, bits: int) -> bool:
    """Whether ``b``'s offset is ``parent``'s counted in elements of ``bits`` bits, as the parser
    of ``.view(dtype)`` scales it (``retyped_view``)."""
    if parent.elem_offset is None or b.elem_offset is None:
        return parent.elem_offset is b.elem_offset
    return (isinstance(parent.elem_offset, IntImm) and isinstance(b.elem_offset, IntImm)
            and parent.elem_offset.dtype == b.elem_offset.dtype
            and b.elem_offset.value * bits == parent.elem_offset.value * parent_bits)
