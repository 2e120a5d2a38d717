"""``tvms.meta_schedule.runner`` (TVM's ``ms.runner``)."""
from ..lowering.tune.measure import EvaluatorConfig, RunnerInput, RunnerResult  # noqa: F401
from ..lowering.tune.runner import LocalRunner, LocalRunnerFuture, Runner, RunnerFuture  # noqa: F401

PyRunner = Runner  # (TVM's bases for Python subclasses: here every base is one)
PyRunnerFuture = RunnerFuture
create = Runner.create
