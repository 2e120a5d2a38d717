"""Fit the polynomial coefficients of ``lowering/codegen/llvm_vector_math.py`` and print them.

Each polynomial P approximates what is left of a function once its exact leading terms are taken
out (``e^r = 1 + r + r^2 P(r)``, ...). The fit is Lawson's algorithm: weighted least squares on
Chebyshev nodes of the range, the weights multiplied by each node's error at every round, which
tends to the minimax (equal-ripple) fit; the error minimized is relative to the whole function's
value. Coefficients are printed rounded to float32, as the module holds them::

    python3 tools/fit_vector_math.py
"""
from __future__ import annotations

import math

import numpy as np

NODES, ROUNDS = 6000, 80


def fit(rest, whole, basis, lo: float, hi: float, degree: int) -> tuple[list, float]:
    """Coefficients c_0..c_degree with ``sum(c_k basis(x, k)) ~ rest(x)`` on [lo, hi], and the
    largest error relative to ``whole(x)``."""
    x = (lo + hi) / 2 + (hi - lo) / 2 * np.cos(np.pi * (np.arange(NODES) + 0.5) / NODES)
    a = np.stack([basis(x, k) for k in range(degree + 1)], 1)
    y, scale = rest(x), np.abs(whole(x))
    weights = np.full(NODES, 1.0 / NODES)
    for _ in range(ROUNDS):
        w = np.sqrt(weights) / scale
        c, *_ = np.linalg.lstsq(a * w[:, None], y * w, rcond=None)
        err = np.abs(a @ c - y) / scale
        weights = weights * err / np.sum(weights * err)
    return [float(np.float32(v)) for v in c], float(err.max())


def main() -> None:
    erf, erfc = np.vectorize(math.erf), np.vectorize(math.erfc)
    half_ln2 = math.log(2) / 2
    fits = {
        # e^r = 1 + r + r^2 P(r), |r| <= ln2 / 2
        "_EXP_P": fit(lambda r: np.expm1(r) - r, np.exp, lambda r, k: r ** (k + 2),
                      -half_ln2, half_ln2, 4),
        # log1p(f) = f - f^2 / 2 + f^3 P(f), 1 + f in [sqrt(1/2), sqrt(2))
        "_LOG_P": fit(lambda f: np.log1p(f) - f + f * f / 2, np.log1p, lambda f, k: f ** (k + 3),
                      math.sqrt(0.5) - 1, math.sqrt(2) - 1, 7),
        # tanh(x) = x + x^3 P(x^2), 0 < x < 0.625
        "_TANH_P": fit(lambda x: np.tanh(x) - x, np.tanh, lambda x, k: x ** (2 * k + 3), 1e-4, 0.625, 5),
        # erf(x) = x + x P(x^2), 0 < x < 1
        "_ERF_P": fit(lambda x: erf(x) - x, erf, lambda x, k: x ** (2 * k + 1), 1e-4, 1.0, 6),
        # erfc(a) = e^{-a^2} Q(t), t = 1 / (1 + 2a), 1 <= a <= 4 (the error printed is relative to
        # erfc(a) e^{a^2}, Q's target; erf = 1 - erfc makes it smaller in erf, erfc(1) being 0.16)
        "_ERFC_Q": fit(lambda a: erfc(a) * np.exp(a * a), lambda a: erfc(a) * np.exp(a * a),
                       lambda a, k: (1 / (1 + 2 * a)) ** k, 1.0, 4.0, 7),
    }
    for name, (coefficients, err) in fits.items():
        print(f"{name} = {tuple(coefficients)}  # relative error {err:.2g}")


if __name__ == "__main__":
    main()
