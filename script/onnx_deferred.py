"""ONNX nodes converted when their inputs arrive: a node whose shape or axis is decided by a value
known only at run time (ReduceSum's ``axes`` as a graph input, Resize's ``scales``, TopK's ``k``)
cannot become a Relax operator at import time. The importer emits instead

::

    y = R.call_pure_packed("tvms.onnx.specialized_node",
                           R.str('opset 18: y = ReduceSum <keepdims: int = 0> (x, axes)'), x, axes,
                           sinfo_args=(R.Tensor(dtype="float32", ndim=1),))

(the node as ONNX's text syntax, its present inputs, and its outputs' dtypes and ranks from ONNX's
type inference), and the runtime (``api/onnx_node.py``) converts the node with the values
that arrived bound as constants, compiles it and caches the result, as a JIT guards on them.
This file holds the import-time half: the node's text, the call, and the one-node conversion
both halves use. The node is data: only tvms's converters read it.
"""
from __future__ import annotations

import base64
from typing import Any

import numpy as np

from ..ir import relax as rx
from ..ir.errors import TVMSError
from ..ir.expr import IntImm
from ..ir.relax_op import make_call
from ..ir.struct_info import TensorStructInfo, TupleStructInfo
from .onnx_ops_random import RANDOM_OPS

SPECIALIZED_NODE = "tvms.onnx.specialized_node"
_BASE64 = "base64 "  # (a node ONNX's text syntax does not carry exactly, e.g. a float attribute)


def node_spec(node: Any, opset: int) -> str:
    """The text naming ``node`` and the opset it is converted as (``parse_spec`` reads it back):
    ONNX's text syntax where it gives back the same node, the node's bytes in base64 otherwise."""
    from onnx import parser, printer

    text = printer.to_text(node).strip()
    try:
        same = _same_node(parser.parse_node(text), node)
    except Exception:  # (onnx's parser refusing what its printer wrote)
        same = False
    if not same:
        text = _BASE64 + base64.b64encode(node.SerializeToString()).decode()
    return f"opset {opset}: {text}"


def _same_node(a: Any, b: Any) -> bool:
    from onnx.helper import get_attribute_value
    from onnx.numpy_helper import to_array

    def attrs(node):
        out = {}
        for attr in node.attribute:
            value = get_attribute_value(attr)
            out[attr.name] = to_array(value).tolist() if hasattr(value, "dims") else value
        return out

    return (a.op_type, list(a.input), list(a.output), a.domain or "") == \
        (b.op_type, list(b.input), list(b.output), b.domain or "") and attrs(a) == attrs(b)


def parse_spec(spec: str) -> tuple[Any, int]:
    """The (NodeProto, opset) of a ``node_spec`` text; a TVMSError for any other text."""
    from onnx import NodeProto, parser

    head, sep, text = spec.partition(": ")
    try:
        if not (sep and head.startswith("opset ")):
            raise ValueError("no 'opset N: ' prefix")
        opset = int(head[len("opset "):])
        if text.startswith(_BASE64):
            node = NodeProto()
            node.ParseFromString(base64.b64decode(text[len(_BASE64):], validate=True))
        else:
            node = parser.parse_node(text)
    except Exception as err:
        raise TVMSError(f"{SPECIALIZED_NODE}: {spec[:80]!r} is not an ONNX node as the importer "
                        f"writes it ({type(err).__name__}: {err})") from None
    return node, opset


# ---------------------------------------------------------------------------- import time
def deferred_call(node: Any, opset: int, inputs: list) -> tuple[rx.Call, list] | None:
    """The call that converts ``node`` at run time, its result typed by ONNX's inference from
    the inputs' struct info (dtype, and rank where known), and per output the dimensions that
    inference gives (ints where static, None where not; None for an unknown rank); None when
    inference cannot type every output."""
    types = _output_types(node, opset, inputs)
    if types is None:
        return None
    sinfos = [TensorStructInfo(dims, dtype) if dims is not None and None not in dims
              else TensorStructInfo(dtype=dtype, ndim=-1 if dims is None else len(dims)) for dtype, dims in types]
    sinfo = sinfos[0] if len(sinfos) == 1 else TupleStructInfo(tuple(sinfos))
    args = [rx.ExternFunc(SPECIALIZED_NODE), rx.StringImm(node_spec(node, opset))]
    kind = "call_packed" if node.op_type in RANDOM_OPS else "call_pure_packed"  # (a draw is impure)
    call = make_call(kind, args + [x for x in inputs if x is not None], {}, (sinfo,))
    return call, [dims for _, dims in types]


def _output_types(node: Any, opset: int, inputs: list) -> list | None:
    from onnx import defs, helper, shape_inference

    types = {}
    for name, x in zip(node.input, inputs):
        if x is None:
            continue
        sinfo = x.struct_info
        if not isinstance(sinfo, TensorStructInfo) or sinfo.dtype.is_void:
            return None
        shape = None
        if sinfo.dims is not None:
            shape = [d.value if isinstance(d, IntImm) else str(d) for d in sinfo.dims]
        elif sinfo.ndim >= 0:
            shape = [None] * sinfo.ndim
        types[name] = helper.make_tensor_type_proto(helper.np_dtype_to_tensor_dtype(np.dtype(str(sinfo.dtype))),
                                                    shape)
    try:
        schema = defs.get_schema(node.op_type, opset, node.domain)
        inferred = shape_inference.infer_node_outputs(schema, node, types,
                                                      opset_imports=[helper.make_opsetid("", opset)])
    except Exception:  # (no schema, or inference refusing the node)
        return None
    types = []
    for name in node.output:
        kind = inferred.get(name)
        if kind is None or not kind.HasField("tensor_type") or not kind.tensor_type.elem_type:
            return None
        tensor = kind.tensor_type
        dtype = str(helper.tensor_dtype_to_np_dtype(tensor.elem_type))
        dims = [d.dim_value if d.HasField("dim_value") else None for d in tensor.shape.dim] \
            if tensor.HasField("shape") else None
        types.append((dtype, dims))
    return types
