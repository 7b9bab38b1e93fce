"""Acceptance models: how many of a request's guesses the target keeps.

Acceptance is an *input* to the simulator, never predicted. Every model is
reduced to one probability mass function over the number of accepted guesses
``0..k`` at full ``k`` (verification stops at the first rejected guess). A step
that proposes only ``g < k`` guesses (near a request's end, or shortened by the
token budget) keeps ``min(A, g)`` with ``A`` drawn from that pmf: the first ``g``
positions of a draft are accepted exactly as they would be in a full draft.

Draws come from one seeded stream per request (keyed by the run seed, a tag
that sets them apart from the workload's stream, and the request's index), one uniform per decode step, so a request's
acceptance sequence does not depend on what else shares its batches.
"""

from __future__ import annotations

from bisect import bisect_right
from typing import Optional, Sequence

import numpy as np


def pmf_from_rates(rates: Sequence[float]) -> np.ndarray:
    """P(accepted = j), j = 0..k, from conditional per-position rates alpha_1..alpha_k.

    alpha_j is P(guess j accepted | guesses 1..j-1 accepted).
    """
    k = len(rates)
    pmf = np.zeros(k + 1)
    survive = 1.0
    for j, a in enumerate(rates):
        pmf[j] = survive * (1.0 - a)
        survive *= a
    pmf[k] = survive
    return pmf


def expected_tokens_per_step(alpha: float, k: int) -> float:
    """Mean tokens advanced by a full-k verify step under i.i.d. alpha: (1-alpha^(k+1))/(1-alpha)."""
    if alpha >= 1.0:
        return float(k + 1)
    return (1.0 - alpha ** (k + 1)) / (1.0 - alpha)


ACCEPTANCE_STREAM = 2  # seed-sequence tag of the acceptance streams (the workload's is 1)


class AcceptanceModel:
    """A pmf over accepted guesses 0..k plus per-request seeded draws."""

    def __init__(self, pmf: Sequence[float], seed: int) -> None:
        pmf = np.asarray(pmf, dtype=float)
        if pmf.ndim != 1 or len(pmf) < 1 or (pmf < 0).any() or abs(pmf.sum() - 1.0) > 1e-6:
            raise ValueError(f"acceptance pmf must be non-negative and sum to 1, got {pmf.tolist()}")
        self.k = len(pmf) - 1
        self.pmf = pmf / pmf.sum()
        self._cdf = np.cumsum(self.pmf)
        self._cdf[-1] = 1.0
        self._cdf_list = self._cdf.tolist()
        self._seed = int(seed)

    @classmethod
    def from_config(cls, spec, seed: int) -> "AcceptanceModel":
        """Build from a :class:`~vidur_specdec.config.SpeculativeConfig` (its most specific input)."""
        k = spec.num_speculative_tokens
        used = spec.acceptance_input()
        if used == "acceptance_histogram":
            pmf = spec.acceptance_histogram
        elif used == "acceptance_per_position":
            pmf = pmf_from_rates(spec.acceptance_per_position)
        else:
            pmf = pmf_from_rates([spec.acceptance_rate] * k)
        return cls(pmf, seed)

    @property
    def mean_accepted(self) -> float:
        """Expected accepted guesses in a full-k step."""
        return float(np.dot(np.arange(self.k + 1), self.pmf))

    def stream(self, request_index: int, max_draws: int) -> np.ndarray:
        """The request's uniforms, one per decode step (``max_draws`` bounds its steps)."""
        rng = np.random.default_rng([self._seed, ACCEPTANCE_STREAM, int(request_index)])
        return rng.random(max(1, int(max_draws)))

    def accepted(self, uniform: float, guesses: int) -> int:
        """Accepted guesses for one draw when ``guesses`` (<= k) were proposed."""
        return min(bisect_right(self._cdf_list, uniform), guesses, self.k)


def build(spec, seed: int) -> Optional[AcceptanceModel]:
    """The acceptance model for a run, or None when speculation is off."""
    return AcceptanceModel.from_config(spec, seed) if spec.enabled else None
