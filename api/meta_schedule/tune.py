"""``tvms.meta_schedule.tune``: tune a list of tasks together (re-exports only)."""
from ..lowering.tune.progress import Progress, write_curve
from ..lowering.tune.tune import TuneConfig, tune_tasks

__all__ = ["Progress", "TuneConfig", "tune_tasks", "write_curve"]
