"""Cost models: predicted merit of candidates before they are measured (TVM's ``CostModel``).

``predict`` scores candidates, higher is better (TVM predicts normalized throughput);
``update`` trains on measured ones; ``save``/``load`` keep a model between runs.
"""
from __future__ import annotations

import json
import random
from typing import Any

import numpy as np

from ...ir.errors import TVMSError
from ...ir.files import write_file


class CostModel:
    def load(self, path: str) -> None:
        raise NotImplementedError

    def save(self, path: str) -> None:
        raise NotImplementedError

    def update(self, context: Any, candidates: list, results: list) -> None:
        raise NotImplementedError

    def predict(self, context: Any, candidates: list) -> np.ndarray:
        raise NotImplementedError

    @staticmethod
    def create(kind: Any = "xgb", *args: Any, **kwargs: Any) -> "CostModel":
        """A cost model from ``tune_tir``'s ``cost_model=``: an instance, ``"random"``, ``"xgb"``."""
        if isinstance(kind, CostModel):
            return kind
        if kind == "random":
            return RandomModel(*args, **kwargs)
        if kind == "xgb":
            from .xgb_model import XGBModel

            return XGBModel(*args, **kwargs)
        raise TVMSError(f"unknown cost model {kind!r} (random, xgb)")


class RandomModel(CostModel):
    """``RandomModel(seed=None, path=None, max_range=100)``: uniform random scores in
    ``[0, max_range)``, a baseline that learns nothing. ``save``/``load`` keep its generator's
    state, so a reloaded model continues the same sequence."""

    def __init__(self, *, seed: int | None = None, path: str | None = None, max_range: int = 100) -> None:
        self.rng = random.Random(seed)
        self.max_range = max_range
        if path is not None:
            self.load(path)

    def load(self, path: str) -> None:
        try:
            with open(path) as f:
                version, internal, gauss = json.load(f)
            self.rng.setstate((version, tuple(internal), gauss))
        except (OSError, TypeError, ValueError) as err:
            raise TVMSError(f"RandomModel.load: cannot read the model state in {path}: {err}") from None

    def save(self, path: str) -> None:
        version, internal, gauss = self.rng.getstate()
        write_file(path, json.dumps([version, list(internal), gauss]).encode())  # atomic

    def update(self, context: Any, candidates: list, results: list) -> None:
        """Nothing to learn."""

    def predict(self, context: Any, candidates: list) -> np.ndarray:
        return np.array([self.rng.uniform(0, self.max_range) for _ in candidates], dtype=np.float64)
