"""``tvms.meta_schedule``: auto-tuning, in the shape of TVM's ``tvm.s_tir.meta_schedule``.

A thin face: each submodule re-exports one part of ``tvms.lowering.tune``.
"""
from ..lowering.tune.database import Database, MemoryDatabase, TuningRecord, Workload  # noqa: F401
from ..lowering.tune.measure import (BuilderInput, BuilderResult, EvaluatorConfig, MeasureCandidate,  # noqa: F401
                                      RunnerInput, RunnerResult, TensorInfo)
from ..lowering.tune.tune_context import TuneContext  # noqa: F401
from . import database  # noqa: F401
from .builder import Builder  # noqa: F401
from .cost_model import CostModel  # noqa: F401
from .measure_callback import MeasureCallback  # noqa: F401
from .runner import Runner  # noqa: F401
from .search_strategy import SearchStrategy  # noqa: F401
from .space_generator import SpaceGenerator  # noqa: F401
from . import postproc, schedule_rule  # noqa: F401,E402
from .postproc import Postproc  # noqa: F401,E402
from .schedule_rule import ScheduleRule  # noqa: F401,E402
from .feature_extractor import FeatureExtractor  # noqa: F401
from .mutator import Mutator  # noqa: F401
from . import relax_integration, task_scheduler, tir_integration  # noqa: F401,E402
from .relax_integration import ExtractedTask  # noqa: F401,E402
from .task_scheduler import TaskScheduler  # noqa: F401,E402
from .tir_integration import tune_tir  # noqa: F401,E402
from .tune import Progress, TuneConfig, tune_tasks  # noqa: F401,E402
