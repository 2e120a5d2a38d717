"""DisallowDynamicLoop: reject a schedule with a loop whose extent is not a constant."""
from __future__ import annotations

from typing import Any

from ...ir.expr import IntImm
from ...ir.function import PrimFunc
from ...ir.stmt import For
from ...ir.analysis import collect_statements
from .postproc import Postproc


class DisallowDynamicLoop(Postproc):
    def apply(self, sch: Any) -> bool:
        mod = sch.mod
        return all(isinstance(loop.extent, IntImm)
                   for name in mod if isinstance(mod[name], PrimFunc)
                   for loop in collect_statements(mod[name].body, For))
