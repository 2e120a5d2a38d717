"""``tvms.meta_schedule.mutator``: changes to the sampling decisions of a trace (TVM's names)."""
from ..lowering.tune.mutate_compute_location import MutateComputeLocation  # noqa: F401
from ..lowering.tune.mutate_parallel import MutateParallel  # noqa: F401
from ..lowering.tune.mutate_thread_binding import MutateThreadBinding  # noqa: F401
from ..lowering.tune.mutate_tile_size import MutateTileSize  # noqa: F401
from ..lowering.tune.mutate_unroll import MutateUnroll  # noqa: F401
from ..lowering.tune.mutator import Mutator, PyMutator  # noqa: F401

create = Mutator.create
