"""tvms.relax.vm: the Relax VM under the name older TVM tutorials use (``relax.vm.build``)."""
from __future__ import annotations

from ..runtime.vm import Executable, VirtualMachine
from ..lowering.build import relax_build as build

__all__ = ["Executable", "VirtualMachine", "build"]
