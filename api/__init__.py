"""tvms: a TVMScript toolchain. ``import tvms as tvm`` reads like Apache TVM's Python API."""
import sys as _sys

from . import ir, script  # noqa: F401  (script registers the printer)
from . import instrument, transform  # noqa: E402
from . import error, relax, te, tir  # noqa: E402,F401
from .ir import IRModule, ScriptError, TVMSError
from .error import TVMError  # noqa: E402
from . import nd, runtime  # noqa: E402,F401
from .runtime import cpu, cuda, device, get_global_func, register_func  # noqa: E402
from .lowering.build import build  # noqa: E402
from . import target  # noqa: E402,F401
from . import dlight  # noqa: E402,F401
from .lowering.build import compile  # noqa: E402,A004

# TVM spells the pass infrastructure both ``tvm.transform`` and ``tvm.ir.transform``. The ir/
# layer must not import the lowering layer, so the face attaches the same module objects to
# ``tvms.ir`` here (as attributes, and in sys.modules so ``import tvms.ir.transform`` works).
for _name, _module in (("transform", transform), ("instrument", instrument)):
    setattr(ir, _name, _module)
    _sys.modules[f"{ir.__name__}.{_name}"] = _module
del _name, _module
tirx = _sys.modules[f"{__name__}.tirx"] = tir  # TVM 0.27 calls the TensorIR namespace tirx

__all__ = ["IRModule", "ScriptError", "TVMError", "TVMSError", "error", "tirx", "cpu", "cuda", "device", "get_global_func", "instrument",
           "ir", "nd", "register_func", "relax", "runtime", "script", "transform"]
__version__ = "0.1.0"
