"""tvms: a TVMScript toolchain. ``import tvms as tvm`` reads like Apache TVM's Python API.

``import tvms`` loads the IR layer and the pass infrastructure only; every other name here
(``tvms.relax``, ``tvms.script``, ``tvms.build``, ``tvms.cpu``, ...) imports its part on first use,
so that a program pays for the parts it uses (the parser, the schedules, LLVM, CUDA). What those
parts register by name (the printer, global functions, passes) is loaded by the first lookup that
misses (``ir.registry.load_layers``).
"""
import functools as _functools
import importlib as _importlib
import importlib.abc as _abc
import importlib.util as _util
import sys as _sys

from . import ir
from . import instrument, transform  # (light: TVM also spells them tvm.ir.transform/instrument)
from .ir.lazy import lazy_names as _lazy_names
from .ir import IRModule, ScriptError, TVMSError
from .ir.registry import add_layer_loader as _add_layer_loader

# what ``import tvms`` imported before it was lazy: a lookup by name that misses imports these, in
# this order, until it finds the name (the runtime's and the printer's names are the usual ones)
_LAYERS = ("runtime", "script", "error", "relax", "te", "tir", "nd", "lowering.build", "target", "dlight")
__getattr__, __dir__, _ = _lazy_names(__name__, globals(), {
    **{layer: (f".{layer}", None) for layer in _LAYERS if "." not in layer},
    "TVMError": (".error", "TVMError"), "cpu": (".runtime", "cpu"), "cuda": (".runtime", "cuda"),
    "device": (".runtime", "device"), "get_global_func": (".runtime", "get_global_func"),
    "register_func": (".runtime", "register_func"), "build": (".lowering.build", "build"),
    "compile": (".lowering.build", "compile"), "tirx": (".tir", None)})


class _TirxAlias(_abc.MetaPathFinder, _abc.Loader):
    """``import tvms.tirx``: TVM 0.27's name of ``tvms.tir``, the same module object."""

    def find_spec(self, fullname, path=None, target=None):
        return _util.spec_from_loader(fullname, self) if fullname == f"{__name__}.tirx" else None

    def create_module(self, spec):
        return _importlib.import_module(f"{__name__}.tir")

    def exec_module(self, module) -> None:
        pass


for _layer in _LAYERS:
    _add_layer_loader(_functools.partial(_importlib.import_module, f"{__name__}.{_layer}"))
# (the run-time conversion of ONNX nodes, tvms.onnx.specialized_node, registers when looked up)
_add_layer_loader(_functools.partial(_importlib.import_module, f"{__name__}.onnx_node"))
_sys.meta_path.append(_TirxAlias())
# TVM spells the pass infrastructure both ``tvm.transform`` and ``tvm.ir.transform``. The ir/
# layer must not import the lowering layer, so the face attaches the same module objects to
# ``tvms.ir`` here (as attributes, and in sys.modules so ``import tvms.ir.transform`` works).
for _name, _module in (("transform", transform), ("instrument", instrument)):
    setattr(ir, _name, _module)
    _sys.modules[f"{ir.__name__}.{_name}"] = _module
del _layer, _name, _module

__all__ = ["IRModule", "ScriptError", "TVMError", "TVMSError", "error", "tirx", "cpu", "cuda", "device", "get_global_func", "instrument",
           "ir", "nd", "register_func", "relax", "runtime", "script", "transform"]
__version__ = "0.1.0"
