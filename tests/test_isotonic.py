"""The operator model's isotonic fit without scikit-learn: bit for bit what scikit-learn's IsotonicRegression
predicts, on random data with ties, zeros and negative zeros, and on every linear op of a built profile."""

import numpy as np
import pytest
from sklearn.isotonic import IsotonicRegression

from vidur_specdec.architectures.models import get_model
from vidur_specdec.costs import isotonic
from vidur_specdec.costs.ops import LINEAR_OPS
from vidur_specdec.costs.profiles import build_profile


def _sklearn(x, y):
    return IsotonicRegression().fit(x, y).predict(x)


@pytest.mark.parametrize("seed", [0, 1])
def test_random_series_match_scikit_learn_bit_for_bit(seed):
    rng = np.random.default_rng(seed)
    for t in range(3000):
        n = int(rng.integers(1, 60))
        kind = t % 5
        if kind == 0:
            y = rng.normal(size=n)
        elif kind == 1:  # ties and (negative) zeros
            y = np.round(rng.normal(size=n), 1)
        elif kind == 2:
            y = np.cumsum(rng.normal(0.1, 1, size=n)) * rng.uniform(0.001, 10)
        elif kind == 3:
            y = rng.choice([0.1, 0.2, 0.3, 0.7], size=n) * rng.uniform(0.01, 3)
        else:  # a noisy rising profile column
            y = np.round(np.sort(rng.uniform(0, 1, size=n)) + rng.normal(0, 0.05, size=n), 6)
        x = np.cumsum(rng.integers(1, 40, size=n)).astype(float)
        assert isotonic.fit_predict(x, y).tobytes() == _sklearn(x, y).tobytes(), (t, y.tolist())


def test_a_built_profiles_linear_ops_match_scikit_learn():
    mlp, _ = build_profile(get_model("meta-llama/Llama-2-7b-hf"), "a100", 1)
    for op in LINEAR_OPS:
        g = mlp.groupby("num_tokens")[f"time_stats.{op}.median"].median().sort_index()
        x, y = g.index.to_numpy(float), g.to_numpy(float)
        y = y * (1 + 0.01 * np.sin(np.arange(len(y))))  # measured-like noise, so pools form
        assert isotonic.fit_predict(x, y).tobytes() == _sklearn(x, y).tobytes(), op


def test_x_must_rise_strictly():
    with pytest.raises(ValueError, match="strictly increasing"):
        isotonic.fit_predict(np.array([1.0, 1.0]), np.array([2.0, 1.0]))
