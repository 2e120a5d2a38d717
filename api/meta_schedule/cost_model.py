"""``tvms.meta_schedule.cost_model`` (TVM's ``ms.cost_model``)."""
from ..lowering.tune.cost_model import CostModel, RandomModel  # noqa: F401
from ..lowering.tune.xgb_model import XGBModel  # noqa: F401

PyCostModel = CostModel  # (TVM's base for Python subclasses: here every base is one)
create = CostModel.create
