"""The tags that set the run's seeded random streams apart: one table, so no two streams share a tag.

Every stream is ``numpy.random.default_rng([seed, TAG, ...])`` with the run's
``seed`` (and, for per-request streams, the request's workload index after the
tag), so adding a stream never shifts the draws of another.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

WORKLOAD_STREAM = 1  # arrivals and token lengths (engine.workload; validate.workload's gamma arrivals)
ACCEPTANCE_STREAM = 2  # per request: one uniform per decode step (speculation.acceptance)
ACCEPTANCE_SPREAD_STREAM = 3  # per request: its own acceptance rate around the mean (acceptance_spread)
PROPOSAL_STREAM = 4  # per request: the per-step match draws of ngram / suffix (speculation.proposals)
PROPOSAL_SPREAD_STREAM = 5  # per request: its own proposal rate around the mean (proposal_spread)
PROMPT_IDS_STREAM = 2  # validation prompts' token ids (validate.workload): its own command, apart from a run's


def beta_around(mean: float, spread: Optional[float], seed: int, tag: int, index: int) -> Optional[float]:
    """Request ``index``'s own rate ~ Beta(mean·c, (1 − mean)·c), c = mean(1 − mean)/spread² − 1
    (so E = mean, sd = spread), from stream ``[seed, tag, index]``; None without spread or at mean 0 or 1."""
    if not spread or mean is None or mean in (0.0, 1.0):
        return None
    c = mean * (1 - mean) / (spread * spread) - 1.0
    rng = np.random.default_rng([int(seed), tag, int(index)])
    return float(rng.beta(mean * c, (1 - mean) * c))
