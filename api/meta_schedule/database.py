"""``tvms.meta_schedule.database`` (TVM's ``ms.database``)."""
from ..lowering.tune.database import Database, MemoryDatabase, TuningRecord, Workload  # noqa: F401
from ..lowering.tune.json_database import JSONDatabase, create  # noqa: F401

PyDatabase = Database  # (TVM's base for Python subclasses: here every base is one)
