"""``tvms.meta_schedule.search_strategy`` (TVM's ``ms.search_strategy``)."""
from ..lowering.tune.evolutionary_search import EvolutionarySearch  # noqa: F401
from ..lowering.tune.measure import MeasureCandidate  # noqa: F401
from ..lowering.tune.search_strategy import ReplayFunc, ReplayTrace, SearchStrategy  # noqa: F401

PySearchStrategy = SearchStrategy  # (TVM's base for Python subclasses: here every base is one)
create = SearchStrategy.create
