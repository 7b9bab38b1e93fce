"""vLLM's least-loaded router in front of a data-parallel group's ranks: the one both engines' groups call
(the engine core's :mod:`vidur_specdec.engine.core.group`, the reference's
:mod:`vidur_specdec.engine.reference.dp_group`).

vLLM 0.33.0 ``vllm/v1/engine/core_client.py`` (``DPLBAsyncMPClient.get_core_engine_for_request``): each
rank's score is its waiting plus running requests, plus ``waiting × 6 × max(0, KV cache usage − 0.5)``;
the scan starts at ``eng_start_index``, which moves on by one rank per request, and the first lowest
score wins.
"""

from __future__ import annotations

from typing import Callable

WAITING_KV_PENALTY = 6.0  # vLLM 0.33.0 core_client.py: score += waiting * 6.0 * max(0, kv_cache_usage - 0.5)


def score(waiting: int, running: int, usage: float) -> float:
    """A rank's load: requests waiting and running (counts), ``usage`` the share of its KV blocks held."""
    return waiting + running + (waiting * WAITING_KV_PENALTY * max(0.0, usage - 0.5) if waiting else 0.0)


class LeastLoadedScan:
    """The scan over ``n`` ranks, from vLLM's ``eng_start_index``."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.start = 0  # vLLM's eng_start_index: the rank the next scan starts from

    def pick(self, score_of: Callable[[int], float]) -> int:
        """The rank (its index) with the lowest ``score_of(rank)``, the first in scan order on a tie."""
        n = self.n
        best, best_score = self.start, None
        for i in range(n):
            idx = (self.start + i) % n
            s = score_of(idx)
            if best_score is None or s < best_score:
                best, best_score = idx, s
        self.start = (self.start + 1) % n
        return best
