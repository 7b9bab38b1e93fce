"""Which instance of a pool gets a request: the values of ``disaggregation.router``.

Each policy picks one of a pool's instance ids given their loads (requests
queued, running or on their way to it). Both engines (the engine core's pools,
:mod:`vidur_specdec.engine.core.pools`, and the Vidur-backed reference,
:mod:`vidur_specdec.engine.reference.disagg`) route with these.
"""

from __future__ import annotations

from typing import Dict, List

import numpy as np

from vidur_specdec.config.registry import registrar

#: ``disaggregation.router`` -> picks one of ``ids`` given their loads (requests queued, running or arriving)
ROUTERS: Dict[str, type] = {}


register_router = registrar(ROUTERS)  # a value of disaggregation.router


@register_router("round_robin")
class RoundRobin:
    """Each pool's instances in turn (vLLM's disaggregated proxy examples cycle through their instances)."""

    def __init__(self) -> None:
        self._next: Dict[str, int] = {}

    def pick(self, pool: str, ids: List[int], loads: List[int]) -> int:
        i = self._next.get(pool, 0)
        self._next[pool] = i + 1
        return ids[i % len(ids)]


@register_router("least_loaded")
class LeastLoaded:
    """The instance with the fewest requests queued, running or on their way; ties to the lowest id."""

    def pick(self, pool: str, ids: List[int], loads: List[int]) -> int:
        return ids[int(np.argmin(loads))]
