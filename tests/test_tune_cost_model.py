"""Per-store features of lowered TensorIR, and the XGBoost-style cost model learning from them: a
model trained on measurements of part of a matmul space ranks the rest far better than chance,
with the numpy booster and (when installed) with xgboost; it saves and loads."""
from __future__ import annotations

import math

import numpy as np
import pytest
from tune_search_space import design_space, matmul_relu

import tvms
from tvms.ir.errors import TVMSError
from tvms.lowering.tune.feature_extractor import FeatureExtractor, RandomFeatureExtractor
from tvms.lowering.tune.measure import MeasureCandidate, RunnerResult
from tvms.lowering.tune.per_store_feature import PerStoreFeature
from tvms.lowering.tune.tune_context import TuneContext
from tvms.lowering.tune.xgb_model import XGBModel, xgboost_available

TRANSPOSE_SCALE = '''
# from tvm.script import tir as T
@T.prim_func
def main(A: T.Buffer((64, 64), "float32"), B: T.Buffer((64, 64), "float32")):
    for i in T.parallel(64):
        for j in T.vectorized(64):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = A[vj, vi] * T.float32(2)
'''


def slog(x: float) -> float:
    return math.copysign(math.log2(abs(x) + 1), x)


def test_per_store_features_of_a_transposing_loop_nest() -> None:
    extractor = PerStoreFeature()
    rows = extractor.features_of(tvms.script.from_source(TRANSPOSE_SCALE))
    assert rows.shape == (1, 164)
    f = dict(zip(extractor.feature_names, rows[0].tolist()))
    expected = {
        "float_mul": slog(4096), "float_add_sub": 0, "int_mul": slog(4096),  # (A's index j * 64 + i)
        "parallel.num": 1, "parallel.prod": slog(64), "parallel.len": slog(64), "parallel.pos_outer_spatial": 1,
        "vectorize.prod": slog(64), "vectorize.pos_inner_spatial": 1, "unroll.pos_none": 1,
        "buffer0.write": 1, "buffer0.stride": slog(1), "buffer0.bytes": slog(4096 * 4),
        "buffer0.unique_bytes": slog(4096 * 4), "buffer0.lines": slog(4096 / 16), "buffer0.no_reuse": 1,
        "buffer1.read": 1, "buffer1.stride": slog(64), "buffer1.lines": slog(4096),  # a line per element
        "buffer2.bytes": 0, "outer_prod": slog(4096), "num_loops": slog(2), "alloc_size": 0,
    }
    assert {k: f[k] for k in expected} == pytest.approx(expected, abs=1e-5)
    assert f["arith_intensity_curve9"] == pytest.approx(slog(4096 / (2 * 4096 * 4)), abs=1e-5)


def test_feature_extractors_by_name_and_the_random_one() -> None:
    assert isinstance(FeatureExtractor.create("per-store-feature"), PerStoreFeature)
    with pytest.raises(TVMSError, match="unknown feature extractor"):
        FeatureExtractor.create("per-block")
    shapes = [x.shape for x in RandomFeatureExtractor(feature_size=7, max_block_num=3).extract_from(None, [0] * 20)]
    assert {s[1] for s in shapes} == {7} and {s[0] for s in shapes} <= {1, 2, 3} and len(set(shapes)) > 1


@pytest.fixture(scope="module")
def measured() -> tuple:
    """Candidates of the matmul space and a synthetic measurement of each: seconds that grow with
    the cache lines their stores touch (a known function of the features)."""
    extractor = PerStoreFeature()
    lines = [extractor.feature_names.index(f"buffer{b}.lines") for b in range(5)]
    candidates = [MeasureCandidate(design_space(seed, place_scaling=False), []) for seed in range(48)]
    features = extractor.extract_from(None, candidates)
    secs = np.array([sum((2.0 ** f[:, c] - 1).sum() for c in lines) * 1e-9 for f in features])
    return candidates, features, secs


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    ra, rb = (np.argsort(np.argsort(x)) for x in (a, b))
    return float(np.corrcoef(ra, rb)[0, 1])


@pytest.mark.parametrize("backend", ["numpy", pytest.param("xgboost", marks=pytest.mark.skipif(
    not xgboost_available(), reason="xgboost is an extra (pip install tvms[xgboost])"))])
def test_the_learned_model_ranks_held_out_candidates(measured: tuple, backend: str) -> None:
    candidates, features, secs = measured
    ctx = TuneContext(matmul_relu(), "llvm", rand_state=0)
    model = XGBModel(backend=backend, num_warmup_samples=10)
    model.update(ctx, candidates[:32], [RunnerResult([s]) for s in secs[:32]])
    predicted = model.predict(ctx, candidates[32:])
    throughput = 1 / secs[32:]
    assert spearman(predicted, throughput) > 0.5  # chance is 0
    pairs = [(i, j) for i in range(16) for j in range(i + 1, 16) if throughput[i] != throughput[j]]
    agree = np.mean([(predicted[i] - predicted[j]) * (throughput[i] - throughput[j]) > 0 for i, j in pairs])
    assert agree > 0.7  # pairwise accuracy; chance is 0.5


def test_model_predicts_randomly_before_warmup_and_saves_and_loads(measured: tuple, tmp_path) -> None:
    candidates, features, secs = measured
    ctx = TuneContext(matmul_relu(), "llvm", rand_state=0)
    model = XGBModel(backend="numpy", num_warmup_samples=20, early_stopping_rounds=10)
    model.update(ctx, candidates[:12], [RunnerResult([s]) for s in secs[:12]])
    first = model.predict(ctx, candidates[40:])
    assert model.data_size == 12 and len(first) == 8 and ((0 <= first) & (first < 1)).all()
    failed = [RunnerResult(None, "build error")] * 4  # failures are data too: the slowest of all
    model.update(ctx, candidates[12:16], failed)
    model.update(ctx, candidates[16:24], [RunnerResult([s]) for s in secs[16:24]])
    scores = model.predict(ctx, candidates[40:])
    path = str(tmp_path / "model.npz")
    model.save(path)
    loaded = XGBModel(backend="numpy", num_warmup_samples=20, early_stopping_rounds=10)
    loaded.load(path)
    assert loaded.data_size == 24 and np.array_equal(loaded.predict(ctx, candidates[40:]), scores)
    with pytest.raises(TVMSError, match="not a saved XGBModel"):
        loaded.load(str(tmp_path / "nothing.npz"))
    np.savez(tmp_path / "other.npz", a=np.zeros(2))  # an .npz of something else, and an .npy
    np.save(tmp_path / "array.npy", np.zeros(2))
    for other in ("other.npz", "array.npy"):
        with pytest.raises(TVMSError, match="not a saved XGBModel"):
            loaded.load(str(tmp_path / other))
