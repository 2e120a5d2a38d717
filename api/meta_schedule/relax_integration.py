"""``tvms.meta_schedule.relax_integration``: tune a Relax program's PrimFuncs (re-exports only)."""
from ..lowering.tune.relax_integration import ExtractedTask, compile_relax, extract_tasks, tune_relax

__all__ = ["ExtractedTask", "compile_relax", "extract_tasks", "tune_relax"]
