"""``tvms.meta_schedule.space_generator`` (TVM's ``ms.space_generator``)."""
from ..lowering.tune.space_generator import (ScheduleFn, SpaceGenerator, SpaceGeneratorUnion,  # noqa: F401
                                              register_defaults)
from ..lowering.tune.post_order_apply import PostOrderApply  # noqa: F401

PySpaceGenerator = SpaceGenerator  # (TVM's base for Python subclasses: here every base is one)
create = SpaceGenerator.create
