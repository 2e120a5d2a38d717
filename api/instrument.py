"""tvms.instrument (also ``tvms.ir.instrument``): pass instruments, shaped like
``tvm.instrument`` (re-exports only; the logic is in ``tvms.lowering.instrument``)."""
from .lowering.instrument import (PassInstrument, PassTimingInstrument, PrintAfterAll, PrintBeforeAll,
                                   VerifyEachInstrument, pass_instrument)

__all__ = ["PassInstrument", "PassTimingInstrument", "PrintAfterAll", "PrintBeforeAll",
           "VerifyEachInstrument", "pass_instrument"]
