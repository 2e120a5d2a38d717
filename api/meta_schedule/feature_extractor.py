"""``tvms.meta_schedule.feature_extractor``: candidates as feature matrices (TVM's names)."""
from ..lowering.tune.feature_extractor import FeatureExtractor, PyFeatureExtractor, RandomFeatureExtractor  # noqa: F401
from ..lowering.tune.per_store_feature import PerStoreFeature  # noqa: F401
