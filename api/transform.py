"""tvms.transform (also ``tvms.ir.transform``): the pass infrastructure, shaped like
``tvm.transform`` (re-exports only; the logic is in ``tvms.lowering.transform``).

::

    @tvms.transform.module_pass(opt_level=0, name="ReluToGelu")
    class ReluToGelu:
        def transform_module(self, mod, ctx):
            ...

    with tvms.transform.PassContext(opt_level=3):
        mod = tvms.transform.Sequential([ReluToGelu()])(mod)
"""
from .lowering.instrument import (PassInstrument, PassTimingInstrument, PrintAfterAll, PrintBeforeAll,
                                   VerifyEachInstrument)
from .lowering.pass_registry import get_pass, list_passes, load_passes, register_pass
from .lowering.transform import (FunctionPass, ModulePass, Pass, PassContext, PassError, PassInfo,
                                  Sequential, function_pass, module_pass, prim_func_pass)

__all__ = ["FunctionPass", "ModulePass", "Pass", "PassContext", "PassError", "PassInfo",
           "PassInstrument", "PassTimingInstrument", "PrintAfterAll", "PrintBeforeAll", "Sequential",
           "VerifyEachInstrument", "function_pass", "get_pass", "list_passes", "load_passes",
           "module_pass", "prim_func_pass", "register_pass"]
