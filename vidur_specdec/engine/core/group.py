"""A data-parallel group in the engine core: D ranks behind vLLM's least-loaded router, one step for all.

vLLM 0.33.0 with ``--data-parallel-size D --enable-expert-parallel`` on an MoE model
runs D engine cores, each with its own scheduler and KV cache, stepping together (a
rank with no work runs a one-token dummy batch so the MoE all-to-all has all its
peers); the front end routes each request to the rank of least load
(``DPLBAsyncMPClient.get_core_engine_for_request``, ``vllm/v1/engine/core_client.py``):
score ``waiting + running``, plus ``6 x waiting x max(0, kv_usage - 0.5)``, the scan
starting one rank later each request so ties rotate (:mod:`vidur_specdec.engine.dp_router`, which the
reference calls too). (The reference:
:mod:`vidur_specdec.engine.reference.dp_group`.)

:class:`DataParallelGroup` holds D :class:`~vidur_specdec.engine.core.sarathi.SarathiRank`
ranks; its step is every rank's step side by side, planned as
:func:`~vidur_specdec.pricing.plan.merge_ranks` of the ranks' plans (None for a rank
on the dummy batch) and priced as one by the step pricer. No step runs when no rank
has work (vLLM: all engines idle).
"""

from __future__ import annotations

from typing import List, Optional

from vidur_specdec.engine import dp_router
from vidur_specdec.engine.core.request import advance_step
from vidur_specdec.engine.core.sarathi import SarathiRank, Step
from vidur_specdec.pricing.plan import merge_ranks



class DataParallelGroup:
    """D speculative Sarathi ranks behind vLLM's least-loaded router; one step for all of them."""

    def __init__(self, ranks: List[SarathiRank]) -> None:
        self.ranks = ranks
        self._router = dp_router.LeastLoadedScan(len(self.ranks))

    # ------------------------------------------------------------------ the router
    @staticmethod
    def _score(rank: SarathiRank, more_waiting: int = 0) -> float:
        waiting = len(rank.queue) + more_waiting
        running = len(rank.alloc)
        usage = rank.allocated / rank.num_blocks
        return dp_router.score(waiting, running, usage)

    def pick(self, more_waiting=None) -> int:
        """The rank the router sends the next request to (its index); ``more_waiting``: per rank, requests on
        their way to it that its queue does not hold yet (a decode pool's requests waiting for KV room)."""
        return self._router.pick(lambda i: self._score(self.ranks[i], more_waiting[i] if more_waiting else 0))

    def add(self, request) -> None:
        self.ranks[self.pick()].add(request)

    @property
    def num_pending(self) -> int:
        return sum(len(r.queue) for r in self.ranks)

    def is_empty(self) -> bool:
        return all(r.is_empty() for r in self.ranks)

    # ------------------------------------------------------------------ one synchronised step
    def next_step(self) -> Optional[Step]:
        parts = [r.next_step() for r in self.ranks]
        if all(p is None for p in parts):
            return None
        reqs = []
        for part in parts:
            if part is not None:
                reqs += part.requests
        return Step(reqs, merge_ranks([p.plan if p is not None else None for p in parts]), parts=parts)

    def end_step(self, step: Step, time: float) -> list:
        none_done = not advance_step(step.requests, step.plan, time)  # then every rank's requests run on
        for rank, part in zip(self.ranks, step.parts):
            if part is not None:
                rank.release(part, () if none_done else None)
        return step.requests
