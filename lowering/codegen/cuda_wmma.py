"""Tensor cores through CUDA's WMMA API: the ``nvcuda::wmma::fragment`` arrays of the
``wmma.matrix_a``/``wmma.matrix_b``/``wmma.accumulator`` scopes (their tile from the
``fragment_shape`` and ``fragment_layout`` attributes around the allocation) and the calls of
``T.tvm_fill_fragment``, ``T.tvm_load_matrix_sync``, ``T.tvm_store_matrix_sync`` and
``T.tvm_mma_sync``, as TVM 0.27's CUDA code generator writes them.
"""
from __future__ import annotations

from typing import Any

from ...ir.errors import TVMSError

WMMA_CALLS = ("tvm_fill_fragment", "tvm_load_matrix_sync", "tvm_store_matrix_sync", "tvm_mma_sync",
              "tvm_bmma_sync")


class TensorCoreFragments:
    """The tensor-core side of ``CudaSource`` (``fragments`` is set per function)."""

    def fragment_info(self, node: Any) -> dict:
        """The fragment_shape / fragment_layout given to an array (by its data variable, or by
        its name: in TVM's printed text the attribute names a buffer declared just before)."""
        data = getattr(node, "data", node)
        info = self.fragments.get(data)
        if info is None:
            name = getattr(node, "name", None) or getattr(data, "name", "")
            info = self.fragments.setdefault(name, {})
            self.fragments[data] = info
        return info

    def fragment_tile(self, buf: Any, scope: str) -> tuple[int, int]:
        shape = self.fragment_info(buf).get("fragment_shape")
        if shape is None:
            raise TVMSError(f"the {scope} array {buf.name!r} has no fragment_shape attribute")
        m, n, k = (int(x) for x in shape.split(", "))
        return {"wmma.matrix_a": (m, k), "wmma.matrix_b": (k, n), "wmma.accumulator": (m, n)}[scope]

    def fragment_type(self, buf: Any, scope: str) -> str:
        if scope not in ("wmma.matrix_a", "wmma.matrix_b", "wmma.accumulator"):
            raise TVMSError(f"unknown tensor-core scope {scope!r} of {buf.name!r}")
        operand = scope != "wmma.accumulator"
        allowed = ("float16", "bfloat16", "int8", "uint8") if operand else ("float16", "float32", "int32")
        if buf.dtype.name not in allowed:
            raise TVMSError(f"a {scope} fragment holds {', '.join(allowed)}, not {buf.dtype} ({buf.name!r})")
        info = self.fragment_info(buf)
        self.fragment_tile(buf, scope)  # (checks the shape is given)
        self.tags.add("mma")
        kind = f"nvcuda::wmma::{scope[len('wmma.'):]}, {info['fragment_shape']}, {self.c_type(buf.dtype)}"
        if operand:
            layout = info.get("fragment_layout")
            if not layout:
                raise TVMSError(f"the {scope} array {buf.name!r} has no fragment_layout attribute")
            kind += f", nvcuda::wmma::{layout}"
        return f"nvcuda::wmma::fragment<{kind}>"

    def wmma(self, short: str, args: tuple) -> str:
        """The WMMA call of tvm_fill_fragment, tvm_load/store_matrix_sync, tvm_(b)mma_sync."""
        self.tags.add("mma")
        x = [self.expr(a) for a in args]
        if short == "tvm_fill_fragment":
            return f"nvcuda::wmma::fill_fragment({x[0]}[{x[4]}], {x[5]})"
        if short == "tvm_load_matrix_sync":
            return f"nvcuda::wmma::load_matrix_sync({x[0]}[{x[4]}], {x[5]}, {x[6]})"
        if short == "tvm_store_matrix_sync":
            return (f"nvcuda::wmma::store_matrix_sync({x[5]}, {x[0]}[{x[4]}], {x[6]}, "
                    f"nvcuda::wmma::mem_{args[7].value})")
        operands = ", ".join(f"{x[2 * i]}[{x[2 * i + 1]}]" for i in range(4))
        return f"nvcuda::wmma::{short[len('tvm_'):]}({operands})"
