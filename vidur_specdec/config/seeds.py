"""The tags that set the run's seeded random streams apart: one table, so no two streams share a tag.

Every stream is ``numpy.random.default_rng([seed, TAG, ...])`` with the run's
``seed`` (and, for per-request streams, the request's workload index after the
tag), so adding a stream never shifts the draws of another.
"""

from __future__ import annotations

from typing import List, Optional

import numpy as np

from vidur_specdec.config.memo import BoundedMemo

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


STREAM_MEMO_LIMIT = 200_000  # streams kept before the memo is cleared (a sweep's or tune's points share them)
_STREAMS = BoundedMemo(STREAM_MEMO_LIMIT)  # (seed, tag, index) -> the longest stream drawn so far


def uniform_stream(seed: int, tag: int, index: int, n: int) -> List[float]:
    """The first ``max(1, n)`` uniforms of stream ``[seed, tag, index]`` (NumPy's default generator), as Python
    floats. Kept per process: the points of a sweep, ``tune`` or ``plan`` draw the same requests' streams, and a
    generator costs tens of µs to seed; a stream's first n draws are the same whatever n it was drawn with."""
    n = max(1, int(n))
    key = (int(seed), int(tag), int(index))
    got = _STREAMS.get(key)
    if got is None or len(got) < n:
        got = _STREAMS.put(key, np.random.default_rng(list(key)).random(n).tolist())
    return got if len(got) == n else got[:n]
