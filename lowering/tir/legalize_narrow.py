"""LegalizeNarrowFloat: bfloat16 and float8/6/4 arithmetic computed in float32 (the rewrite is
``tvms.ir.narrow_float``, which the reference executor runs too)."""
from __future__ import annotations

from ...ir.narrow_float import legalize_narrow
from .tir_pass import define_tir_pass

LegalizeNarrowFloat = define_tir_pass("LegalizeNarrowFloat", legalize_narrow)

__all__ = ["LegalizeNarrowFloat", "legalize_narrow"]
