"""Buffers: a typed, shaped view of memory that TensorIR loads from and stores to."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .dtype import DataType, handle, int32
from .expr import IntImm, PointerType, PrimExpr, Range, Var
from .node import Node, binds, hint

if TYPE_CHECKING:
    from .tile_layout import ComposeLayout, TileLayout

DEFAULT_ALIGN = 64  # bytes; TVM's kAllocAlignment


@dataclass(frozen=True, slots=True, eq=False)
class Buffer(Node):
    """``T.Buffer((128, 128), "float32")``. Buffers have identity, like variables.

    ``data`` is the handle variable pointing at the memory; its PointerType carries the
    storage scope (``"global"``, ``"shared"``, ``"local"``, ...).
    """

    data: Var = binds()
    dtype: DataType = DataType("float32")
    shape: tuple = ()
    strides: tuple = ()
    elem_offset: PrimExpr | None = None
    name: str = hint(default="buffer")
    data_alignment: int = DEFAULT_ALIGN
    offset_factor: int = 1  # (TVM's default; decl_buffer reads 0, "not given", as 1)
    buffer_type: str = "default"  # or "auto_broadcast"
    axis_separators: tuple = ()
    # TVM 0.27's mutable scalar: a one-element buffer with TVM's default tile layout, which
    # ``x: T.int32 = v`` and a plain allocation in a PrimFunc without blocks make; printed as the
    # bare name (``x = x + 1``). Other buffers have no layout. A hint: the classic dialect has no
    # spelling for it, and the values are those of any one-element buffer.
    scalar: bool = hint(default=False)
    # TVM 0.27's ``layout=None``: a buffer of a (non-s_tir) PrimFunc declared without TVM's default
    # tile layout. Its elements sit row-major all the same, so it only travels to the printed text.
    no_layout: bool = hint(default=False)
    # TVM 0.27's tile layout (ir/tile_layout.py), None for the default one (row-major, which TVM
    # prints not). It is part of the buffer's meaning: lowering refuses the ones it cannot honour.
    layout: TileLayout | ComposeLayout | None = None
    # TVM 0.27's ``allocated_addr=``: where a pooled scope (tensor memory, a Trainium SBUF) put
    # the buffer, one address per level of the pool.
    allocated_addr: tuple = ()

    @property
    def one_element(self) -> bool:
        """One element in a plain layout: what TVM 0.27 writes as a scalar once it is laid out.
        TVM compares the layout with the default one of an int32 extent, so an int64 one is not."""
        return (len(self.shape) == 1 and isinstance(self.shape[0], IntImm) and self.shape[0].value == 1
                and self.shape[0].dtype == int32 and not self.no_layout and self.layout is None
                and not self.strides and self.data_alignment == DEFAULT_ALIGN and self.offset_factor == 1)

    @property
    def is_scalar(self) -> bool:
        """Printed as a scalar: TVM's ``BufferVar::IsScalar`` (one element, default layout; a
        declared one, ``T.decl_scalar``, may sit at an offset)."""
        return self.scalar and self.one_element

    @property
    def index_dtype(self) -> DataType:
        """TVM's default index type of the buffer: its first dimension's, int64 for a 0-d one.
        ``elem_offset=None`` stands for a zero of this type."""
        return _index_dtype(self.shape)

    @property
    def offset(self) -> PrimExpr:
        """The element offset as a value (``A.elem_offset`` in a script)."""
        return IntImm(self.index_dtype, 0) if self.elem_offset is None else self.elem_offset

    @property
    def array_shape(self) -> tuple:
        """The shape of the array that holds the buffer: a buffer of L-lane vectors
        (``float32x2``) has one more, last dimension of L, as TVM's ``.numpy()`` shows it (scalable
        vectors have no fixed L: no array holds them)."""
        dtype = self.dtype
        return (*self.shape, IntImm(self.index_dtype, dtype.lanes)) if dtype.lanes > 1 and not dtype.scalable \
            else self.shape

    @property
    def scope(self) -> str:
        ann = self.data.type_annotation
        return ann.storage_scope if isinstance(ann, PointerType) else "global"

    @property
    def uses_strides(self) -> bool:
        """Whether the buffer's elements lie by its strides: given, one per dimension. Strides of
        another count (TVM's tests print ``T.alloc_buffer((8, 8), strides=(1,))``) are dropped
        as TVM's CompactBufferAllocation drops them: such a buffer is row-major."""
        return bool(self.strides) and len(self.strides) == len(self.shape)

    def __repr__(self) -> str:
        return f"Buffer({self.name!r}, {self.shape}, {self.dtype})"

    def __getitem__(self, indices):  # A[i, j] from Python builds a load
        from .expr import BufferLoad, const

        if not isinstance(indices, tuple):
            indices = (indices,)
        return BufferLoad(self, tuple(const(i) for i in indices))


def _index_dtype(shape: tuple) -> DataType:
    return shape[0].dtype if shape else DataType("int64")


def decl_buffer(shape, dtype="float32", name="buffer", *, data: Var | None = None, scope="global",
                strides=(), elem_offset=None, data_alignment=DEFAULT_ALIGN, offset_factor=0,
                buffer_type="default", axis_separators=(), no_layout=False, layout=None, allocated_addr=(),
                span=None) -> Buffer:
    """Make a Buffer, creating its data pointer when none is given. An offset of zero in the
    buffer's index type is the default, None. ``offset_factor=0`` means none was given, which
    TVM stores as 1 (unlike TVM's decl_buffer, this one makes no offset variable for a factor:
    passes copy buffers through it, and the parser makes that variable). A tile ``layout`` equal
    to the default one of the shape is the default, None."""
    from .expr import const
    from .tile_layout import is_default  # (it compares structurally, which imports this module)

    dt = DataType(dtype)
    shape = tuple(const(s, "int32") if isinstance(s, int) else s for s in shape)
    if data is None:
        data = Var(name, handle, PointerType(dt, scope))
    if isinstance(elem_offset, IntImm) and elem_offset.value == 0 and elem_offset.dtype == _index_dtype(shape):
        elem_offset = None  # (the default; TVM prints a zero of another dtype)
    return Buffer(data, dt, shape, tuple(strides), elem_offset, name, data_alignment, offset_factor or 1,
                  buffer_type, tuple(axis_separators), no_layout=no_layout,
                  layout=None if layout is not None and is_default(layout, shape) else layout,
                  allocated_addr=tuple(allocated_addr), span=span)


def element_bytes(dtype: DataType) -> int:
    """The bytes of one element, its lanes together (a type under a byte takes one, as in TVM)."""
    return (dtype.bits * dtype.lanes + 7) // 8


def constant_size(buffer: Buffer) -> int | None:
    """How many elements a buffer of constant shape has (None where its shape is symbolic)."""
    count = 1
    for extent in buffer.shape:
        if not isinstance(extent, IntImm):
            return None
        count *= extent.value
    return count


def pointer_data(arg):
    """The data Var a pointer argument (``tvm_access_ptr``'s, ``cp_async``'s) names: a Buffer
    stands for its data, as TVM 0.27 prints it (``T.tvm_access_ptr(t, A, ...)``)."""
    return arg.data if isinstance(arg, Buffer) else arg


@dataclass(frozen=True, slots=True, eq=False)
class BufferRegion(Node):
    """``A[vi, 0:16]``: a buffer and one Range per dimension."""

    buffer: Buffer
    region: tuple

    @staticmethod
    def full(buffer: Buffer) -> "BufferRegion":
        return BufferRegion(buffer, tuple(Range(IntImm(s.dtype, 0), s) for s in buffer.shape))


@dataclass(frozen=True, slots=True, eq=False)
class MatchBufferRegion(Node):
    """``Asub = T.match_buffer(A[vi * 16:vi * 16 + 16], (16,))`` inside a block."""

    buffer: Buffer = binds()
    source: BufferRegion = field()
