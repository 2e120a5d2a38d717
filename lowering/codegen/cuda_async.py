"""Asynchronous copies (``cp.async``, sm_80 and later) as TVM 0.27's CUDA code generator writes them:
each copy and group operation is a call of a ``__forceinline__`` helper wrapping the PTX in inline
asm, and the helpers are defined after the preamble, in the reverse order of their first use.

* ``T.s_tir.cp_async_raw(dtype, dst, dst_offset, src, src_offset, bytes[, predicate])``
  (InjectPTXAsyncCopy) calls ``ptx_cp_async_legacy[_pred]_{ca|cg}_{bytes}_{dst}_{src}``: offsets
  in elements of ``dtype`` (the destination's: the call's dtype) and of the source pointer's type
  (the helper's last two numbers, in bytes), ``cg`` (L2 only) for 16 bytes, else ``ca``; the
  predicated form stores zeros where the predicate is false;
* ``T.attr(0, "async_commit_queue_scope", 0)`` is its body, then ``cp.async.commit_group``;
* ``T.attr(0, "async_wait_queue_scope", 0)`` around ``async_wait_inflight_count`` ``n``: first
  ``cp.async.wait_group n`` (at most ``n`` groups still in flight), then the body;
* the same group operations written in TVM 0.27's PTX dialect, and ``cp.async.bulk.commit_group``,
  as the same helpers.
"""
from __future__ import annotations

from typing import Any

from ...ir import expr as E
from ...ir.arith import Analyzer
from ...ir.buffer import element_bytes, pointer_data
from ...ir.errors import TVMSError
from ...ir.op import PTX_CP

CP_ASYNC = "tir.s_tir.cp_async_raw"
GROUP_OPS = {"commit": PTX_CP["async", "commit_group", ""], "wait": PTX_CP["async", "wait_group", ""],
             "bulk_commit": "tirx.ptx.cp_async_bulk_commit_group"}  # (the last: TVM's table, ir/ptx_table.json)
_ZERO_FILL = {4: "st.shared.u32 [%0], {%4}", 8: "st.shared.v2.u32 [%0], {%4, %4}",
              16: "st.shared.v4.u32 [%0], {%4, %4, %4, %4}"}


def _group_helper(name: str, ptx: str, clobber: str) -> str:
    return (f"__forceinline__ __device__ void {name}() {{\n"
            f'  asm volatile("{ptx};" :  : {clobber});\n'
            "}\n")


class AsyncCopies:
    """The cp.async side of ``CudaSource`` (``helpers``: name -> definition, in first-use order)."""

    def async_helper(self, name: str, definition: str) -> str:
        self.helpers.setdefault(name, definition)
        return name

    def commit_group(self, bulk: bool = False) -> str:
        """The call of ``cp.async[.bulk].commit_group``'s helper."""
        kind = "async_bulk" if bulk else "async"
        name = f"tvm_builtin_ptx_cp_{kind}_commit_group_{kind}_commit_group"
        ptx = f"cp.{kind.replace('_', '.')}.commit_group"
        return self.async_helper(name, _group_helper(name, ptx, "")) + "()"

    def wait_group(self, count: Any) -> str:
        """The call of ``cp.async.wait_group count``'s helper."""
        # (an unrolled epilogue's ``2 - 0``, a one-iteration pipeline's ``if_then_else(0 < 1 & 0 < 1,
        # 1, 0)``: TVM's StmtSimplify folds them)
        count = Analyzer().simplify(count)
        if not isinstance(count, E.IntImm):
            raise TVMSError(f"cp.async.wait_group needs a constant number of groups in flight, not {count}")
        name = f"tvm_builtin_ptx_cp_async_wait_group_async_wait_group_{count.value}"
        ptx = f"cp.async.wait_group {count.value}"
        return self.async_helper(name, _group_helper(name, ptx, ' : "memory"')) + "()"

    def group_call(self, call: E.Call) -> str | None:
        """A cp.async group operation written in the T.ptx dialect (``T.ptx.cp("async",
        "commit_group", "")``, ``T.ptx.cp(n, "async", "wait_group", "")``, the bulk commit), rendered
        as TVM renders it; None for any other call."""
        name = call.op.name if isinstance(call.op, E.Op) else ""
        if name == GROUP_OPS["commit"]:
            return self.commit_group()
        if name == GROUP_OPS["bulk_commit"]:
            return self.commit_group(bulk=True)
        if name == GROUP_OPS["wait"]:
            return self.wait_group(call.args[0])
        return None

    def cp_async(self, call: E.Call) -> str:
        if len(call.args) not in (5, 6):
            raise TVMSError(f"T.s_tir.cp_async_raw takes 5 or 6 arguments, not {len(call.args)}")
        dst, dst_off, src, src_off, size = call.args[:5]
        if not isinstance(size, E.IntImm) or size.value not in _ZERO_FILL:
            raise TVMSError(f"cp.async copies a constant 4, 8 or 16 bytes, not {size.script()}")
        size = size.value
        src_type = self.handle_type.get(pointer_data(src), call.dtype)
        widths = f"{size}_{element_bytes(call.dtype)}_{element_bytes(src_type)}"
        cache = "cg" if size == 16 else "ca"
        predicated = len(call.args) == 6
        name = f"ptx_cp_async_legacy_{'pred_' if predicated else ''}{cache}_{widths}"
        self.async_helper(name, self._cp_async_helper(name, cache, size, call.dtype, src_type, predicated))
        args = [self.expr(a) for a in (dst, dst_off, src, src_off) + tuple(call.args[5:])]
        return f"{name}({', '.join(args)})"

    @staticmethod
    def _cp_async_helper(name: str, cache: str, size: int, dst_type: Any, src_type: Any, predicated: bool) -> str:
        def scaled(what: str, dtype: Any) -> str:
            width = element_bytes(dtype)
            return f"  uint8_t* {what}_p = (uint8_t*){what} + {what}_off{f' * {width}' if width != 1 else ''};\n"

        params = "void* dst, int dst_off, void* src, int src_off" + (", int predicate" if predicated else "")
        text = (f"\n__forceinline__ __device__ void {name}({params}) {{\n" + scaled("dst", dst_type)
                + scaled("src", src_type) + "  unsigned int dst_addr = __cvta_generic_to_shared(dst_p);\n")
        copy = f"cp.async.{cache}.shared.global [%0], [%1], %2;"
        if predicated:
            text += ("  __asm__ __volatile__(\n"
                     '    "{\\n"\n'
                     '    " .reg .pred p;\\n"\n'
                     '    " setp.eq.u32 p, %3, 1;\\n"\n'
                     f'    " @p {copy}\\n"\n'
                     f'    " @!p {_ZERO_FILL[size]};\\n"\n'
                     '    "}\\n"\n'
                     f'    :: "r"(dst_addr), "l"(src_p), "n"({size}), "r"(predicate), "r"(0)\n'
                     "  );\n")
        else:
            text += (f'  asm volatile("{copy}"\n'
                     f'    :: "r"(dst_addr), "l"(src_p), "n"({size}));\n')
        return text + "}\n"

    def async_helpers(self) -> str:
        return "".join(reversed(self.helpers.values()))
