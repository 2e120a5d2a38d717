"""Feature extractors: a candidate's schedule as a matrix of numbers a cost model learns from
(TVM's ``FeatureExtractor``). Each candidate gives one ``(rows, columns)`` array: a row per store
statement for ``PerStoreFeature``, random rows for ``RandomFeatureExtractor``."""
from __future__ import annotations

import random
from typing import Any

import numpy as np

from ...ir.errors import TVMSError


class FeatureExtractor:
    """``extract_from(context, candidates) -> list[np.ndarray]``; subclasses override it."""

    def extract_from(self, context: Any, candidates: list) -> list[np.ndarray]:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"

    @staticmethod
    def create(kind: str, *args: Any, **kwargs: Any) -> "FeatureExtractor":
        """``"per-store-feature"`` or ``"random"``, as TVM names them."""
        from .per_store_feature import PerStoreFeature

        kinds = {"per-store-feature": PerStoreFeature, "random": RandomFeatureExtractor}
        if kind not in kinds:
            raise TVMSError(f"unknown feature extractor {kind!r}; known: {', '.join(kinds)}")
        return kinds[kind](*args, **kwargs)


PyFeatureExtractor = FeatureExtractor  # TVM's name for an extractor written in Python


class RandomFeatureExtractor(FeatureExtractor):
    """``RandomFeatureExtractor(feature_size=30, max_block_num=5, seed=0)``: for each candidate,
    between 1 and ``max_block_num`` rows of uniform random numbers (a stand-in for tests)."""

    def __init__(self, *, feature_size: int = 30, max_block_num: int = 5, seed: int = 0) -> None:
        if max_block_num < 1 or feature_size < 1:
            raise TVMSError("RandomFeatureExtractor: feature_size and max_block_num are at least 1")
        self.feature_size = feature_size
        self.max_block_num = max_block_num
        self.random_state = random.Random(seed)

    def extract_from(self, context: Any, candidates: list) -> list[np.ndarray]:
        rng = np.random.default_rng(self.random_state.randrange(1 << 31))
        return [rng.random((int(rng.integers(1, self.max_block_num + 1)), self.feature_size)).astype("float32")
                for _ in candidates]
