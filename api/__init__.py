"""tvms: a TVMScript toolchain. ``import tvms as tvm`` reads like Apache TVM's Python API."""
from . import ir, script  # noqa: F401  (script registers the printer)
from . import relax  # noqa: E402
from .ir import IRModule, ScriptError, TVMSError

__all__ = ["IRModule", "ScriptError", "TVMSError", "ir", "relax", "script"]
__version__ = "0.1.0"
