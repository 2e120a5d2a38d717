"""Relax quantize / dequantize, registered when ``relax_ops`` imports this module.

``quantize(x, scale, zero_point)`` is ``clip(round(x / scale) + zero_point)`` in the quantized
type; ``dequantize`` is ``(x - zero_point) * scale``. Scale and zero point are scalars, tensors
of ones, or vectors along ``axis``."""
from __future__ import annotations

from .dtype import DataType
from .relax_infer import describe, fmt_dim, int_of, normalize_axis, prove_equal, tensor_arg
from .relax_op import ATTR_DTYPE, ATTR_INT, Attr, CallInfo, register
from .struct_info import VOID, StructInfo, TensorStructInfo

_ZERO_POINT_TYPES = ("int8", "uint8", "int16", "uint16", "int32", "uint32", "float16")
_FLOAT8 = ("float8_e4m3fn", "e4m3_float8", "float8_e5m2", "e5m2_float8")


def _check_qparams(info: CallInfo, data: TensorStructInfo, quantized_in: bool) -> TensorStructInfo:
    """The shared checks of quantize (``quantized_in`` False) and dequantize; the result."""
    scale, zero = tensor_arg(info, 1), tensor_arg(info, 2)
    out = info.attrs["out_dtype"]
    if VOID in (data.dtype, scale.dtype, zero.dtype):
        return TensorStructInfo(data.shape, VOID, data.ndim, data.vdevice)
    inputs = ("int8", "uint8", "int16", "uint16", "int32", "float16", "float32") + _FLOAT8 \
        if quantized_in else ("float16", "float32")
    if str(data.dtype) not in inputs:
        raise info.fail(f"the input dtype must be one of {', '.join(inputs)}, got {data.dtype}")
    if str(scale.dtype) not in ("float16", "float32"):
        raise info.fail(f"the scale must be float16 or float32, got {scale.dtype}")
    if str(zero.dtype) not in _ZERO_POINT_TYPES:
        raise info.fail(f"the zero point must be one of {', '.join(_ZERO_POINT_TYPES)}, got {zero.dtype}")
    if data.ndim != 0:
        axis = normalize_axis(info, info.attrs["axis"], data.ndim) if data.ndim > 0 else -1
        for name, p in (("scale", scale), ("zero point", zero)):
            if _singleton(p):
                continue
            if p.dims is None or data.dims is None:  # (TVM fails there too)
                raise info.fail(f"the {name} {describe(p)} is checked against dimension {axis} of "
                                f"the input, which needs both shapes known; got {describe(data)}")
            if not prove_equal(p.dims[0], data.dims[axis]):
                raise info.fail(f"the {name} has {fmt_dim(p.dims[0])} values for dimension {axis} "
                                f"of size {fmt_dim(data.dims[axis])}")
    elif not (_singleton(scale) and _singleton(zero)):
        raise info.fail(f"a scalar input needs a scalar scale and zero point, got {describe(scale)} "
                        f"and {describe(zero)}")
    return TensorStructInfo(data.shape, out, data.ndim, data.vdevice)


def _singleton(p: TensorStructInfo) -> bool:
    """A scalar, or a tensor whose dimensions are all 1."""
    return p.ndim == 0 or (p.dims is not None and len(p.dims) > 0 and all(int_of(d) == 1 for d in p.dims))


def _infer_quantize(info: CallInfo) -> StructInfo:
    out = str(info.attrs["out_dtype"])
    if out not in ("int8", "uint8", "int16", "uint16") + _FLOAT8:
        raise info.fail(f"cannot quantize to {out}")
    return _check_qparams(info, tensor_arg(info, 0), quantized_in=False)


def _infer_dequantize(info: CallInfo) -> StructInfo:
    out = str(info.attrs["out_dtype"])
    if out not in ("float16", "float32"):
        raise info.fail(f"cannot dequantize to {out}")
    return _check_qparams(info, tensor_arg(info, 0), quantized_in=True)


# (TVM prints out_dtype before axis, and takes axis first when given by position)
for _name, _infer, _out in (("quantize", _infer_quantize, "int8"), ("dequantize", _infer_dequantize, "float32")):
    register(_name, ("data", "scale", "zero_point"), _infer,
             (Attr("out_dtype", DataType(_out), ATTR_DTYPE), Attr("axis", -1, ATTR_INT)),
             positional=("axis", "out_dtype"))
