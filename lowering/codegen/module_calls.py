"""Calls of another function of the module (``Module.f(...)`` in TVMScript: a Call whose op is a
GlobalVar), which tvms's code generators do not compile: each compiles one PrimFunc on its own."""
from __future__ import annotations

from ...ir import expr as E
from ...ir.errors import TVMSError


def refuse_module_call(call: E.Call, target_name: str) -> None:
    """Raise a TVMSError naming the callee if ``call`` calls a function of the module."""
    if not isinstance(call.op, E.Op):
        callee = getattr(call.op, "name_hint", call.op)
        raise TVMSError(f"the {target_name} target compiles each PrimFunc on its own and cannot call "
                        f"the module's function {callee!r}")
