"""``tvms.meta_schedule.builder`` (TVM's ``ms.builder``)."""
from ..lowering.tune.builder import Builder, LocalBuilder, default_build, default_export  # noqa: F401
from ..lowering.tune.measure import BuilderInput, BuilderResult  # noqa: F401

PyBuilder = Builder  # (TVM's base for Python subclasses: here every base is one)
create = Builder.create
