"""CUDA tensor maps (TMA descriptors) on the host: ``runtime.cuTensorMapEncodeTiled``.

A TMA kernel's host function makes a slot for each map and has it encoded before the launch:

    A_map: T.let[T.TensorMap()] = T.tvm_stack_alloca("tensormap", 1)
    T.call_packed("runtime.cuTensorMapEncodeTiled", A_map, "float16", 2, A.data,
                  64, 16,        # globalDim, innermost first (rank values)
                  128,           # globalStrides in bytes of the outer dimensions (rank - 1)
                  64, 16,        # boxDim: the tile one copy moves (rank)
                  1, 1,          # elementStrides (rank)
                  0, 0, 0, 0)    # interleave, swizzle, L2 promotion, out-of-bounds fill[, data type]

``tiled_encoding(dtype, rank, address, args)`` checks the arguments as TVM 0.27's runtime checks
them before it calls the driver (the same rules, in the same order, with its messages) and returns
a ``TiledEncoding``: a pure function, tested without a GPU. The slot is the launcher's
(``launcher.tensor_map()``): the driver's encodes a real ``CUtensorMap`` with
``cuTensorMapEncodeTiled`` (``DeviceTensorMap``), which the launch passes by value; the reference
launcher's keeps the encoding and the array it views (``ReferenceTensorMap``), which the reference
executor's ``cp.async.bulk.tensor`` reads and writes.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from tvms.ir.dtype import DataType
from tvms.ir.errors import TVMSError
from tvms.ir.registry import register_func

NAME = "runtime.cuTensorMapEncodeTiled"
MAX_RANK = 5

# CUtensorMapDataType of each dtype (TVM's mapping: int8 and the fp8 formats travel as bytes)
UINT8, UINT16, UINT32, INT32, UINT64, INT64, FLOAT16, FLOAT32, FLOAT64, BFLOAT16 = range(10)
FLOAT32_FTZ, TFLOAT32, TFLOAT32_FTZ, U4_ALIGN8, U4_ALIGN16, U6_ALIGN16 = range(10, 16)
_DATA_TYPES = {"int8": UINT8, "int32": INT32, "int64": INT64, "uint8": UINT8, "uint16": UINT16,
               "uint32": UINT32, "uint64": UINT64, "float16": FLOAT16, "float32": FLOAT32, "float64": FLOAT64,
               "bfloat16": BFLOAT16, "float8_e4m3fn": UINT8, "float8_e5m2": UINT8, "float4_e2m1fn": U4_ALIGN16}
FLOATING = (FLOAT16, FLOAT32, FLOAT64, BFLOAT16, FLOAT32_FTZ, TFLOAT32, TFLOAT32_FTZ)
_PACKED_ALIGN16 = (U4_ALIGN16, U6_ALIGN16)
PACKED = (U4_ALIGN8, *_PACKED_ALIGN16)  # (4- and 6-bit values packed 16 to a chunk)

INTERLEAVE_NONE, INTERLEAVE_16B, INTERLEAVE_32B = range(3)
SWIZZLE_NONE, SWIZZLE_32B, SWIZZLE_64B, SWIZZLE_128B = range(4)
SWIZZLE_128B_ATOMS = (4, 5, 6)  # (128B with 32-byte atoms, the same flipped by 8 bytes, 64-byte atoms)
SWIZZLE_BYTES = {SWIZZLE_NONE: 0, SWIZZLE_32B: 32, SWIZZLE_64B: 64, SWIZZLE_128B: 128}
L2_PROMOTIONS = range(4)  # (none, 64, 128, 256 bytes)
OOB_FILL_NONE, OOB_FILL_NAN = 0, 1  # (NaN, with FMAs of it counting as zero)


@dataclass(frozen=True)
class TiledEncoding:
    """The fields of a tiled tensor map, innermost dimension first (as the driver takes them)."""

    dtype: str
    data_type: int  # the CUtensorMapDataType
    dims: tuple  # globalDim
    strides: tuple  # globalStrides in bytes, of dimensions 1.. (dimension 0 is contiguous)
    box: tuple  # boxDim
    element_strides: tuple
    interleave: int
    swizzle: int
    l2_promotion: int
    oob_fill: int

    @property
    def rank(self) -> int:
        return len(self.dims)

    @property
    def element_bytes(self) -> int:
        return _element_bytes(self.dtype)

    @property
    def box_bytes(self) -> int:
        """The bytes one copy of a whole box moves (what ``complete_tx`` counts)."""
        return int(np.prod(self.box)) * self.element_bytes


def _element_bytes(dtype: str) -> int:
    return (DataType(dtype).bits + 7) // 8


def _check(ok: bool, message: str) -> None:
    if not ok:
        raise TVMSError(f"{NAME}: {message}")


def _int(value: Any, what: str) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TVMSError(f"{NAME}: {what} must be an integer, got {value!r}")
    return int(value)


def tiled_encoding(dtype: Any, rank: Any, address: int, args: tuple | list) -> TiledEncoding:
    """The encoding ``args`` (globalDim, globalStrides, boxDim, elementStrides, interleave,
    swizzle, L2 promotion, out-of-bounds fill[, forced data type]) describe for a ``dtype``
    tensor of ``rank`` dimensions at ``address``, checked as TVM's runtime checks them."""
    rank = _int(rank, "tensorRank")
    _check(rank > 0, "tensorRank must be non-zero")
    _check(rank <= MAX_RANK, "cuTensorMapEncodeTiled only supports up to 5D tensors")
    count = 4 * rank + 3  # (and the map, the dtype, the rank and the address before them)
    _check(len(args) in (count, count + 1),
           f"cuTensorMapEncodeTiled expects {count + 4} (or +1 force_cu_dtype) arguments: tensor_map, "
           f"tensor_dtype, tensor_rank, tensor_ptr, global_shape({rank}), global_strides({rank - 1}), "
           f"shared_shape({rank}), shared_strides({rank}), interleaved_kind, swizzle_kind, "
           f"l2_promotion_kind, oob_fill_kind[, force_cu_dtype]; got {len(args) + 4}")
    values = [_int(v, f"argument {k + 4}") for k, v in enumerate(args)]
    dims, values = values[:rank], values[rank:]
    strides, values = values[:rank - 1], values[rank - 1:]
    box, values = values[:rank], values[rank:]
    element_strides, values = values[:rank], values[rank:]
    interleave, swizzle, l2_promotion, oob_fill = values[:4]
    forced = values[4] if len(values) > 4 else -1
    for i, d in enumerate(dims):
        _check(d > 0, f"globalDim[{i}] must be non-zero")
        _check(d <= 1 << 32, f"globalDim[{i}] must be less than or equal to 2^32")
    for i, s in enumerate(strides):
        _check(s >= 0, f"globalStrides[{i}] must be non-negative")
        _check(s % 16 == 0, "global strides must be multiple of 16")
        _check(s < 1 << 40, f"globalStrides[{i}] must be less than 2^40")
    for i, b in enumerate(box):
        _check(b > 0, f"boxDim[{i}] must be non-zero")
        _check(b <= 256, f"boxDim[{i}] must be less than or equal to 256")
    for i, e in enumerate(element_strides):
        _check(e > 0, f"elementStrides[{i}] must be non-zero")
        _check(e <= 8, f"elementStrides[{i}] must be less than or equal to 8")
    _check(forced >= -1, "force_cu_dtype must be -1 (derive from tensor_dtype) or a supported "
                         "CUtensorMapDataType value")
    dtype = str(dtype)
    try:
        lanes = DataType(dtype).lanes
    except TVMSError:
        lanes = None
    _check(lanes is not None, f"unknown tensor_dtype {dtype!r}")
    _check(lanes == 1, f"Expect tensor_dtype to have lanes=1, but get {dtype}")
    _check(dtype in _DATA_TYPES, f"Unsupported data type {dtype} (a tensor map holds "
                                 f"{', '.join(_DATA_TYPES)})")
    data_type = _DATA_TYPES[dtype]
    if forced >= 0:
        _check(forced == TFLOAT32, "force_cu_dtype only supports CU_TENSOR_MAP_DATA_TYPE_TFLOAT32 (11)")
        _check(dtype == "float32", "CU_TENSOR_MAP_DATA_TYPE_TFLOAT32 requires a scalar float32 tensor_dtype")
        data_type = forced
    _check(interleave in (INTERLEAVE_NONE, INTERLEAVE_16B, INTERLEAVE_32B),
           f"Unsupported interleave enum value: {interleave}")
    _check(swizzle in SWIZZLE_BYTES or swizzle in SWIZZLE_128B_ATOMS, f"Unsupported swizzle enum value: {swizzle}")
    _check(l2_promotion in L2_PROMOTIONS, f"Unsupported l2Promotion enum value: {l2_promotion}")
    _check(oob_fill in (OOB_FILL_NONE, OOB_FILL_NAN), f"Unsupported oobFill enum value: {oob_fill}")
    packed_align16 = data_type in _PACKED_ALIGN16
    packed = data_type in PACKED
    element_bytes = _element_bytes(dtype)
    _check(address % 16 == 0, f"globalAddress must be 16-byte aligned (it is {address:#x})")
    if interleave != INTERLEAVE_NONE:
        _check(rank >= 3, "tensorRank must be greater than or equal to 3 when interleave is not NONE")
    if interleave == INTERLEAVE_32B:
        _check(swizzle == SWIZZLE_32B, "CU_TENSOR_MAP_INTERLEAVE_32B requires CU_TENSOR_MAP_SWIZZLE_32B")
    _check(element_strides[0] == 1, "elementStrides[0] must be one because tiled TMA does not support an "
                                    "innermost element stride")
    if interleave == INTERLEAVE_32B or packed_align16:
        _check(address % 32 == 0, "globalAddress must be 32-byte aligned")
        for i, s in enumerate(strides):
            _check(s % 32 == 0, f"globalStrides[{i}] must be a multiple of 32")
    if packed_align16:
        _check(dims[0] % 128 == 0, "globalDim[0] must be a multiple of 128 for packed 16U4/16U6 align16 formats")
        _check(box[0] == 128, "boxDim[0] must be 128 for packed 16U4/16U6 align16 formats")
    if data_type == U4_ALIGN16:
        _check(swizzle in (SWIZZLE_NONE, SWIZZLE_128B, SWIZZLE_128B_ATOMS[0]),
               "CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN16B supports only NONE, 128B, or 128B_ATOM_32B swizzle")
    if interleave == INTERLEAVE_NONE and not packed:
        _check(box[0] * element_bytes % 16 == 0,
               "boxDim[0] * elementSizeInBytes(tensorDataType) must be a multiple of 16 bytes")
    if oob_fill == OOB_FILL_NAN:
        _check(data_type in FLOATING, "CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA requires a "
                                       "floating-point tensorDataType")
        _check(not packed, "CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA is not supported for packed "
                           "tensorDataType")
    if interleave == INTERLEAVE_NONE and not packed and swizzle != SWIZZLE_NONE:
        limit = SWIZZLE_BYTES.get(swizzle, 128)
        name = {32: "32B", 64: "64B"}.get(limit, "128B")
        _check(box[0] * element_bytes <= limit, f"CU_TENSOR_MAP_SWIZZLE_{name} implies the bounding box inner "
                                                f"dimension will be <= {limit}.")
    return TiledEncoding(dtype, data_type, tuple(dims), tuple(strides), tuple(box), tuple(element_strides),
                         interleave, swizzle, l2_promotion, oob_fill)


def address_of(pointer: Any) -> int:
    """The address a host function's pointer value holds: a device pointer (an int) or, on the
    reference launcher, the host array's first byte."""
    if isinstance(pointer, np.ndarray):
        return int(pointer.__array_interface__["data"][0])
    return _int(pointer, "tensor_ptr")


class ReferenceTensorMap:
    """A slot of the reference launcher: once encoded, the encoding and the flat host array it
    views (the reference executor copies boxes out of it and into it)."""

    def __init__(self) -> None:
        self.encoding: TiledEncoding | None = None
        self.array: np.ndarray | None = None

    def encode(self, encoding: TiledEncoding, pointer: Any) -> None:
        if not isinstance(pointer, np.ndarray):
            raise TVMSError(f"{NAME}: the reference launcher encodes a map of a host array, "
                            f"not {type(pointer).__name__}")
        self.encoding, self.array = encoding, pointer

    def __repr__(self) -> str:
        return f"ReferenceTensorMap({self.encoding})"


class DeviceTensorMap:
    """A slot of the driver launcher: the 128-byte ``CUtensorMap`` the driver encodes, passed to
    the kernel by value (``words``: its 16 64-bit words)."""

    def __init__(self) -> None:
        self.encoding: TiledEncoding | None = None
        self.words: tuple | None = None

    def encode(self, encoding: TiledEncoding, pointer: Any) -> None:
        from . import cuda_driver  # (cuda-python only when a GPU runs it)

        driver = cuda_driver.driver()
        # (cuda-python takes the sizes as its cuuint64_t / cuuint32_t objects, not as ints)
        sizes64, sizes32 = driver.cuuint64_t, driver.cuuint32_t
        try:
            descriptor = cuda_driver.call(
                "cuTensorMapEncodeTiled", driver.CUtensorMapDataType(encoding.data_type), encoding.rank,
                address_of(pointer), [sizes64(d) for d in encoding.dims], [sizes64(s) for s in encoding.strides],
                [sizes32(b) for b in encoding.box], [sizes32(e) for e in encoding.element_strides],
                driver.CUtensorMapInterleave(encoding.interleave),
                driver.CUtensorMapSwizzle(encoding.swizzle), driver.CUtensorMapL2promotion(encoding.l2_promotion),
                driver.CUtensorMapFloatOOBfill(encoding.oob_fill))
        except TVMSError as err:
            raise TVMSError(f"{NAME}: the driver refused the tensor map {encoding}: {err}") from None
        except (TypeError, ValueError) as err:  # (a cuda-python whose binding takes other argument types)
            raise TVMSError(f"{NAME}: cuda-python's cuTensorMapEncodeTiled does not take the arguments tvms "
                            f"passes ({err})") from None
        self.encoding, self.words = encoding, tuple(int(w) for w in descriptor.opaque)

    def __repr__(self) -> str:
        return f"DeviceTensorMap({self.encoding})"


def check_slot(kind: Any, count: Any) -> None:
    """``T.tvm_stack_alloca(kind, count)`` as a host function makes it: one slot for one CUDA
    tensor map (the map is one value; a slot of several maps is not addressable as a map)."""
    if kind != "tensormap" or count != 1:
        raise TVMSError(f"a tensor-map slot is T.tvm_stack_alloca(\"tensormap\", 1) (one CUDA tensor map), "
                        f"not T.tvm_stack_alloca({kind!r}, {count})")


def encode_tiled(*args: Any) -> None:
    """``runtime.cuTensorMapEncodeTiled(tensor_map, dtype, rank, pointer, ...)``: checks the arguments
    and encodes the slot ``tensor_map`` (one a launcher's ``tensor_map()`` made) for the tensor at
    ``pointer``."""
    _check(len(args) >= 4, f"cuTensorMapEncodeTiled expects at least 4 arguments (tensor_map, tensor_dtype, "
                           f"tensor_rank, tensor_ptr, ...), got {len(args)}")
    tensor_map, dtype, rank, pointer, *args = args
    if not hasattr(tensor_map, "encode"):
        raise TVMSError(f"{NAME}: the first argument must be a tensor-map slot "
                        f"(T.tvm_stack_alloca(\"tensormap\", 1)), not {type(tensor_map).__name__}")
    tensor_map.encode(tiled_encoding(dtype, rank, address_of(pointer), args), pointer)


register_func(NAME, encode_tiled, override=True)

__all__ = ["DeviceTensorMap", "ReferenceTensorMap", "TiledEncoding", "address_of", "check_slot", "encode_tiled",
           "tiled_encoding"]
