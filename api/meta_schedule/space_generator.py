"""``tvms.meta_schedule.space_generator`` (TVM's ``ms.space_generator``)."""
from ..lowering.tune.space_generator import (ScheduleFn, SpaceGenerator, SpaceGeneratorUnion,  # noqa: F401
                                              register_defaults)

PySpaceGenerator = SpaceGenerator  # (TVM's base for Python subclasses: here every base is one)
create = SpaceGenerator.create
