"""``tvms.meta_schedule``: auto-tuning, in the shape of TVM's ``tvm.s_tir.meta_schedule``.

A thin face: each submodule re-exports one part of ``tvms.lowering.tune``.
"""
from ..lowering.tune.database import Database, MemoryDatabase, TuningRecord, Workload  # noqa: F401
from ..lowering.tune.measure import (BuilderInput, BuilderResult, EvaluatorConfig, MeasureCandidate,  # noqa: F401
                                      RunnerInput, RunnerResult, TensorInfo)
from ..lowering.tune.tune_context import TuneContext  # noqa: F401
from .feature_extractor import FeatureExtractor  # noqa: F401
from .mutator import Mutator  # noqa: F401
