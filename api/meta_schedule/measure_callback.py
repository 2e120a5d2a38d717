"""``tvms.meta_schedule.measure_callback`` (TVM's ``ms.measure_callback``)."""
from ..lowering.tune.measure_callback import (AddToDatabase, MeasureCallback, RemoveBuildArtifact,  # noqa: F401
                                               UpdateCostModel)

PyMeasureCallback = MeasureCallback  # (TVM's base for Python subclasses: here every base is one)
