"""XGBModel: TVM's learned cost model, gradient-boosted trees over per-store features.

Trained online: every measured batch adds (feature matrix, cost) pairs, grouped by workload; the
label of a candidate is its workload's best cost over its own (1 for the fastest, near 0 for a
failed one). A candidate's score is the sum of the tree ensemble over its rows (TVM's "pack-sum"),
fitted with squared error weighted by the label, so the fast candidates count most.

The trees come from ``xgboost`` when it is installed (``pip install tvms[xgboost]``: the
``xgboost-cpu`` wheel, which brings scipy along), else from a small histogram-based Newton
booster in numpy that fits the same objective. Both save to one ``.npz`` file with the training
data; a model saved by either loads in the other (it is retrained from the data).
"""
from __future__ import annotations

import io
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from ...ir.errors import TVMSError
from ...ir.files import write_file
from ...ir.structural import structural_hash
from .cost_model import CostModel
from .database import FAILED_RUN_SECS
from .feature_extractor import FeatureExtractor


class XGBConfig(NamedTuple):
    """TVM's XGBoost parameters. ``nthread`` None is one thread here (TVM: the physical cores):
    training shares the machine with the builders and runners, and two OpenMP threads on a
    loaded 2-core machine trained 5x slower than one."""

    max_depth: int = 10
    gamma: float = 0.001
    min_child_weight: float = 0
    eta: float = 0.2
    seed: int = 43
    nthread: int | None = None
    tree_method: str = "auto"

    def to_dict(self) -> dict:
        return self._asdict()


@dataclass
class FeatureGroup:
    """The measured candidates of one workload: their feature matrices and costs."""

    group_hash: str
    features: list = field(default_factory=list)
    costs: np.ndarray = field(default_factory=lambda: np.zeros(0))

    @property
    def min_cost(self) -> float:
        return float(np.min(self.costs))

    def append(self, features: list, costs: np.ndarray) -> None:
        self.features.extend(features)
        self.costs = np.append(self.costs, costs)


# ---------------------------------------------------------------------------- the pack-sum objective
def pack(xs: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """All rows of the candidates' matrices, and for each row the index of its candidate."""
    ids = np.repeat(np.arange(len(xs)), [len(x) for x in xs])
    return np.concatenate(xs, axis=0).astype("float32"), ids


def candidate_scores(row_preds: np.ndarray, ids: np.ndarray, n: int) -> np.ndarray:
    return np.bincount(ids, weights=row_preds, minlength=n)


def gradients(row_preds: np.ndarray, ids: np.ndarray, ys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Gradient and hessian, per row, of sum_c y_c * (score_c - y_c)^2 / 2 (TVM's objective)."""
    y = ys[ids]
    error = candidate_scores(row_preds, ids, len(ys))[ids] - y
    return error * y, y.astype("float64")


def p_rmse(row_preds: np.ndarray, ids: np.ndarray, ys: np.ndarray) -> float:
    return float(np.sqrt(np.mean((candidate_scores(row_preds, ids, len(ys)) - ys) ** 2)))


# ---------------------------------------------------------------------------- boosters
class NumpyBooster:
    """Newton boosting of regression trees on histograms of the features (as xgboost's "hist"
    method), in numpy: each tree fits the objective's gradient and hessian; a split maximizes
    G_L^2/(H_L+1) + G_R^2/(H_R+1) - G^2/(H+1), by more than ``gamma``."""

    def __init__(self, config: XGBConfig, n_bins: int = 32, max_depth: int = 6) -> None:
        self.eta, self.gamma = config.eta, config.gamma
        self.min_child_weight = config.min_child_weight
        self.max_depth = min(config.max_depth, max_depth)  # deeper trees overfit the few samples a tuning run has
        self.n_bins = n_bins
        self.trees: list[tuple] = []  # (feature, threshold, left, right, value) arrays; feature -1: a leaf

    def fit(self, rows: np.ndarray, ids: np.ndarray, ys: np.ndarray, max_rounds: int = 300,
            early_stopping_rounds: int = 50) -> None:
        edges = [np.unique(np.quantile(col, np.linspace(0, 1, self.n_bins))) for col in rows.T]
        binned = np.stack([np.searchsorted(e, col) for e, col in zip(edges, rows.T)], axis=1)
        preds = np.zeros(len(rows))
        best, best_round, trees = np.inf, 0, []
        for round_ in range(max_rounds):
            g, h = gradients(preds, ids, ys)
            tree = self._grow(binned, edges, g, h)
            preds += self._predict_tree(tree, rows)
            trees.append(tree)
            score = p_rmse(preds, ids, ys)
            if score < best - 1e-12:
                best, best_round = score, round_
            elif round_ - best_round >= early_stopping_rounds:
                break
        self.trees = trees[:best_round + 1]

    def _grow(self, binned: np.ndarray, edges: list, g: np.ndarray, h: np.ndarray) -> tuple:
        feature, threshold, left, right, value = [], [], [], [], []
        n_features = binned.shape[1]
        offsets = np.arange(n_features) * self.n_bins

        def node(idx: np.ndarray, depth: int) -> int:
            k = len(feature)
            G, H = g[idx].sum(), h[idx].sum()
            feature.append(-1), threshold.append(0.0), left.append(-1), right.append(-1)
            value.append(-self.eta * G / (H + 1.0))
            if depth == self.max_depth or len(idx) < 2:
                return k
            flat = (binned[idx] + offsets).ravel()
            size = n_features * self.n_bins
            hist = [np.bincount(flat, weights=np.repeat(w, n_features), minlength=size).reshape(n_features, -1)
                    for w in (g[idx], h[idx], np.ones(len(idx)))]
            GL, HL, NL = (np.cumsum(x, axis=1) for x in hist)
            GR, HR, NR = G - GL, H - HL, len(idx) - NL
            with np.errstate(divide="ignore", invalid="ignore"):
                gain = GL ** 2 / (HL + 1.0) + GR ** 2 / (HR + 1.0) - G ** 2 / (H + 1.0)
            gain[(NL < 1) | (NR < 1) | (HL < self.min_child_weight) | (HR < self.min_child_weight)] = -np.inf
            f, b = np.unravel_index(np.argmax(gain), gain.shape)
            if not gain[f, b] > self.gamma:
                return k
            goes_left = binned[idx, f] <= b
            feature[k], threshold[k] = int(f), float(edges[f][min(b, len(edges[f]) - 1)])
            left[k] = node(idx[goes_left], depth + 1)
            right[k] = node(idx[~goes_left], depth + 1)
            return k

        node(np.arange(len(binned)), 0)
        return tuple(np.asarray(a) for a in (feature, threshold, left, right, value))

    @staticmethod
    def _predict_tree(tree: tuple, rows: np.ndarray) -> np.ndarray:
        feature, threshold, left, right, value = tree
        at = np.zeros(len(rows), dtype=int)
        while True:
            f = feature[at]
            inner = f >= 0
            if not inner.any():
                return value[at]
            go_left = rows[np.arange(len(rows)), np.where(inner, f, 0)] <= threshold[at]
            at = np.where(inner, np.where(go_left, left[at], right[at]), at)

    def predict(self, rows: np.ndarray) -> np.ndarray:
        return sum((self._predict_tree(t, rows) for t in self.trees), np.zeros(len(rows)))

    def state(self) -> dict:
        sizes = [len(t[0]) for t in self.trees]
        return {"numpy_tree_sizes": np.asarray(sizes, dtype="int64"),
                **{f"numpy_{name}": np.concatenate([t[i] for t in self.trees]) if self.trees else np.zeros(0)
                   for i, name in enumerate(("feature", "threshold", "left", "right", "value"))}}

    def restore(self, state: Any) -> None:
        cuts = np.cumsum(state["numpy_tree_sizes"])[:-1]
        parts = [np.split(state[f"numpy_{name}"], cuts) for name in ("feature", "threshold", "left", "right", "value")]
        self.trees = [tuple(p[i] for p in parts) for i in range(len(state["numpy_tree_sizes"]))]


class XGBoostBooster:
    """The same objective with ``xgboost`` (a custom objective over the packed rows)."""

    def __init__(self, config: XGBConfig) -> None:
        import xgboost  # noqa: F401  (fails here, before any training, when it is missing)

        self.config = config
        self.booster = None

    def fit(self, rows: np.ndarray, ids: np.ndarray, ys: np.ndarray, max_rounds: int = 10000,
            early_stopping_rounds: int = 50) -> None:
        import xgboost as xgb

        train = xgb.DMatrix(rows, label=ys[ids], nthread=1)
        params = {k: v for k, v in self.config.to_dict().items() if v is not None}
        params.setdefault("nthread", 1)
        params.update(base_score=0.0, disable_default_eval_metric=1, verbosity=0)
        self.booster = xgb.train(
            params, train, num_boost_round=max_rounds, obj=lambda preds, _: gradients(preds, ids, ys),
            evals=[(train, "tr")], custom_metric=lambda preds, _: ("p-rmse", p_rmse(preds, ids, ys)),
            early_stopping_rounds=early_stopping_rounds, verbose_eval=False)

    def predict(self, rows: np.ndarray) -> np.ndarray:
        import xgboost as xgb

        return self.booster.predict(xgb.DMatrix(rows, nthread=1), iteration_range=(0, self.booster.best_iteration + 1))

    def state(self) -> dict:
        return {"xgboost_model": np.frombuffer(bytes(self.booster.save_raw("json")), dtype="uint8")}

    def restore(self, state: Any) -> None:
        import xgboost as xgb

        self.booster = xgb.Booster(model_file=bytearray(state["xgboost_model"].tobytes()))


def xgboost_available() -> bool:
    try:
        import xgboost  # noqa: F401
    except ImportError:
        return False
    return True


# ---------------------------------------------------------------------------- the model
class XGBModel(CostModel):
    """``XGBModel(extractor="per-store-feature", config=XGBConfig(), num_warmup_samples=100,
    early_stopping_rounds=50, verbose_eval=25, average_peak_n=32, adaptive_training=True,
    num_tuning_cores=None, tree_method=None, backend="auto")`` as TVM's; ``backend`` is
    ``"xgboost"``, ``"numpy"`` or ``"auto"`` (xgboost when installed)."""

    def __init__(self, *, extractor: Any = "per-store-feature", config: XGBConfig = XGBConfig(),
                 num_warmup_samples: int = 100, early_stopping_rounds: int = 50, verbose_eval: int = 25,
                 average_peak_n: int = 32, adaptive_training: bool = True, num_tuning_cores: int | None = None,
                 tree_method: str | None = None, backend: str = "auto") -> None:
        self.extractor = extractor if isinstance(extractor, FeatureExtractor) else FeatureExtractor.create(extractor)
        if config.nthread is None and num_tuning_cores is not None:
            config = config._replace(nthread=num_tuning_cores)
        if tree_method is not None:
            config = config._replace(tree_method=tree_method)
        self.config = config
        if backend not in ("auto", "xgboost", "numpy"):
            raise TVMSError(f"XGBModel: backend is 'auto', 'xgboost' or 'numpy', got {backend!r}")
        if backend == "xgboost" and not xgboost_available():
            raise TVMSError("XGBModel(backend='xgboost') needs xgboost: pip install tvms[xgboost]")
        self.backend = "xgboost" if backend == "auto" and xgboost_available() else \
            "numpy" if backend == "auto" else backend
        self.num_warmup_samples = num_warmup_samples
        self.early_stopping_rounds = early_stopping_rounds
        self.verbose_eval = verbose_eval
        self.average_peak_n = average_peak_n
        self.adaptive_training = adaptive_training
        self.data: dict[str, FeatureGroup] = {}
        self.data_size = 0
        self.last_train_size = 0
        self.booster: Any = None
        self._rng = np.random.default_rng(config.seed)

    def _new_booster(self) -> Any:
        return XGBoostBooster(self.config) if self.backend == "xgboost" else NumpyBooster(self.config)

    # ------------------------------------------------------------ the CostModel interface
    def update(self, context: Any, candidates: list, results: list) -> None:
        """Add the measured candidates to the data and retrain (with adaptive training only once
        the data grew by a fifth since the last training)."""
        if len(candidates) != len(results):
            raise TVMSError(f"XGBModel.update: {len(candidates)} candidates but {len(results)} results")
        if not candidates:
            return
        features = self.extractor.extract_from(context, candidates)
        costs = np.array([float(np.median(r.run_secs)) if r.run_secs else FAILED_RUN_SECS for r in results])
        kept = [i for i, f in enumerate(features) if len(f)]
        if not kept:
            return
        key = str(structural_hash(context.mod))
        group = self.data.setdefault(key, FeatureGroup(key))
        group.append([np.asarray(features[i], dtype="float32") for i in kept], costs[kept])
        self.data_size += len(kept)
        if self.adaptive_training and self.data_size - self.last_train_size < self.last_train_size / 5:
            return
        self.train()

    def train(self) -> None:
        """Fit the trees to every measurement so far."""
        self.last_train_size = self.data_size
        xs = [x for g in self.data.values() for x in g.features]
        ys = np.concatenate([g.min_cost / g.costs for g in self.data.values()])
        rows, ids = pack(xs)
        self.booster = self._new_booster()
        self.booster.fit(rows, ids, ys, early_stopping_rounds=self.early_stopping_rounds)

    def predict(self, context: Any, candidates: list) -> np.ndarray:
        """Predicted normalized throughput (higher is better); random before ``num_warmup_samples``
        measurements, as TVM's."""
        if self.booster is None or self.data_size < self.num_warmup_samples:
            return self._rng.uniform(0, 1, size=len(candidates))
        return self.predict_features(self.extractor.extract_from(context, candidates))

    def predict_features(self, xs: list[np.ndarray]) -> np.ndarray:
        scores = np.zeros(len(xs))
        present = [i for i, x in enumerate(xs) if len(x)]
        if present:
            rows, ids = pack([xs[i] for i in present])
            scores[present] = candidate_scores(self.booster.predict(rows), ids, len(present))
        return scores

    # ------------------------------------------------------------ saving
    def save(self, path: str) -> None:
        """The data and the trained trees in one ``.npz`` file (written as ``path``)."""
        groups = list(self.data.values())
        features = [x for g in groups for x in g.features]
        state = {
            "backend": np.array(self.backend if self.booster is not None else ""),
            "group_hashes": np.array([g.group_hash for g in groups]),
            "group_sizes": np.array([len(g.features) for g in groups], dtype="int64"),
            "costs": np.concatenate([g.costs for g in groups]) if groups else np.zeros(0),
            "row_counts": np.array([len(x) for x in features], dtype="int64"),
            "rows": np.concatenate(features) if features else np.zeros((0, 0), "float32"),
            "last_train_size": np.array(self.last_train_size),
            **(self.booster.state() if self.booster is not None else {}),
        }
        buffer = io.BytesIO()
        np.savez(buffer, **state)
        write_file(path, buffer.getvalue())  # atomic: an interrupted save leaves the old file

    def load(self, path: str) -> None:
        """Read what ``save`` wrote; trees saved by the other backend are retrained here."""
        try:
            with np.load(path, allow_pickle=False) as state:
                state = dict(state)
            missing = {"group_hashes", "group_sizes", "costs", "row_counts", "rows"} - set(state)
            if missing:
                raise ValueError(f"it lacks {', '.join(sorted(missing))}")
        except (OSError, ValueError, TypeError, AttributeError) as e:  # (a .npy loads as an array)
            raise TVMSError(f"XGBModel.load: {path} is not a saved XGBModel ({e})") from None
        matrices = np.split(state["rows"], np.cumsum(state["row_counts"])[:-1]) if len(state["row_counts"]) else []
        costs = np.split(state["costs"], np.cumsum(state["group_sizes"])[:-1])
        self.data, start = {}, 0
        for key, size, group_costs in zip(state["group_hashes"], state["group_sizes"], costs):
            self.data[str(key)] = FeatureGroup(str(key), list(matrices[start:start + size]), group_costs)
            start += size
        self.data_size = int(sum(state["group_sizes"]))
        self.last_train_size = int(state["last_train_size"])
        saved_by = str(state["backend"])
        self.booster = None
        if saved_by == self.backend:
            self.booster = self._new_booster()
            self.booster.restore(state)
        elif saved_by and self.data:
            self.train()
