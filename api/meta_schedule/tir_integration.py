"""``tvms.meta_schedule.tir_integration``: tune and compile TensorIR (re-exports only)."""
from ..lowering.tune.tune import compile_tir, tune_tir

__all__ = ["compile_tir", "tune_tir"]
