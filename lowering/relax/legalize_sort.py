"""LegalizeOps of unique and nonzero, as TVM 0.27's (their FCallPacked): an R.call_pure_packed of
the runtime functions ``relax.run.unique`` / ``relax.run.nonzero``, whose results' sizes depend
on the data (runtime/numpy_ops_sort.py provides them). TVM legalizes sort, argsort and topk to
nothing (its backend dispatches them), and median through a packed argsort: they stay, and the VM
runs their numpy references."""
from __future__ import annotations

from .legalize import CALL_PACKED

CALL_PACKED.update({
    "relax.unique": ("relax.run.unique", True),
    "relax.nonzero": ("relax.run.nonzero", True),
})
