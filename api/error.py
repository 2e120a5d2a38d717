"""``tvms.error``: the error classes, under TVM's names (``tvm.error``).

Every error tvms raises on purpose is a ``TVMError`` (tvms's ``TVMSError``); TVMScript errors are
``DiagnosticError``s (``ScriptError``: file:line:col, the line and a caret).
"""
from .ir.errors import ScriptError, TVMSError

TVMError = TVMSError
DiagnosticError = ScriptError


class InternalError(TVMSError):
    """A broken invariant inside tvms (a bug to report), not a problem with the input."""


class OpError(TVMSError):
    """An operator used wrongly."""


class OpNotImplemented(OpError, NotImplementedError):
    """An operator (or one of its forms) tvms does not implement."""


__all__ = ["DiagnosticError", "InternalError", "OpError", "OpNotImplemented", "TVMError"]
