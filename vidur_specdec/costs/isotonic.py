"""Least-squares monotone (isotonic) fit of a profile's per-size times, without scikit-learn.

:func:`fit_predict` returns, value for value and bit for bit, what
``sklearn.isotonic.IsotonicRegression().fit(x, y).predict(x)`` returns for unit weights and strictly
increasing ``x`` (scikit-learn 1.9, which solves by ``scipy.optimize.isotonic_regression``, SciPy 1.17): the
pool-adjacent-violators algorithm in the order SciPy's ``_pava/pava_pybind.cpp`` pools blocks (Busing 2022,
"Monotone Regression: A Simple and Fast O(n) PAVA Implementation", J. Stat. Softw. 102(1), Algorithm 1, with
SciPy's ``>=`` merges), then scikit-learn's prediction: interpolation between the fit's points less those
inside a flat run, and its first value passed through a sum from zero as its de-duplication does. The
operator model fits every linear op of every profile it reads this way; importing scikit-learn for it cost
about 2.5 s of every cold start. ``tests/test_isotonic.py`` holds the two to each other.
"""

from __future__ import annotations

from typing import List, Sequence

import numpy as np


def pava(y: Sequence[float]) -> List[float]:
    """The nondecreasing sequence nearest ``y`` in least squares (unit weights), pooled as SciPy pools."""
    x = [float(v) for v in y]
    n = len(x)
    if n < 2:
        return x
    w = [1.0] * n
    r = [0] * (n + 1)  # r[b] .. r[b + 1] - 1: the elements of block b
    r[1] = 1
    b = 0
    xb_prev, wb_prev = x[0], w[0]
    i = 1
    while i < n:
        b += 1
        xb, wb = x[i], w[i]
        if xb_prev >= xb:  # a down violation: pool with the previous block
            b -= 1
            sb = wb_prev * xb_prev + wb * xb
            wb += wb_prev
            xb = sb / wb
            while i < n - 1 and xb >= x[i + 1]:  # then the up violations that follow
                i += 1
                sb += w[i] * x[i]
                wb += w[i]
                xb = sb / wb
            while b > 0 and x[b - 1] >= xb:  # then the down violations it made
                b -= 1
                sb += w[b] * x[b]
                wb += w[b]
                xb = sb / wb
        x[b] = xb_prev = xb
        w[b] = wb_prev = wb
        r[b + 1] = i + 1
        i += 1
    f = n - 1
    for k in range(b, -1, -1):  # every element takes its block's value
        xk = x[k]
        for j in range(f, r[k] - 1, -1):
            x[j] = xk
        f = r[k] - 1
    return x


def fit_predict(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The isotonic fit of ``y`` at ``x`` (strictly increasing), as scikit-learn predicts it at ``x``."""
    x = np.asarray(x, dtype=float)
    if x.ndim != 1 or len(x) != len(y) or len(x) == 0 or (len(x) > 1 and not (np.diff(x) > 0).all()):
        raise ValueError("isotonic fit: x must be a non-empty, strictly increasing 1-D array as long as y")
    ys = [float(v) for v in y]
    ys[0] = 0.0 + ys[0]  # scikit-learn's de-duplication sums the first value onto 0.0 (-0.0 becomes 0.0)
    fit = np.array(pava(ys))
    if len(fit) == 1:
        return fit
    keep = np.ones(len(fit), dtype=bool)  # scikit-learn's thresholds: a flat run keeps its two ends
    keep[1:-1] = np.logical_or(np.not_equal(fit[1:-1], fit[:-2]), np.not_equal(fit[1:-1], fit[2:]))
    return np.interp(x, x[keep], fit[keep])
