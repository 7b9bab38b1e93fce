"""One data-parallel group as one Vidur replica: per-rank schedulers, a router, one synchronised step.

vLLM 0.33.0 with ``--data-parallel-size D --enable-expert-parallel`` on an MoE
model runs D engine cores (``DPEngineCoreProc``, ``vllm/v1/engine/core.py``), each
with its own scheduler and KV cache (attention and KV per rank), and the MoE layers
expert-parallel over all D x TP GPUs. The ranks step together: a rank with no work
while another has some runs a dummy batch (``execute_dummy_batch``, one token) so the
MoE all-to-all has all its peers, and the ranks agree each step whether any has work
left (``_has_global_unfinished_reqs``). The front end routes each request to the rank
of least load (``DPLBAsyncMPClient.get_core_engine_for_request``,
``vllm/v1/engine/core_client.py``): score ``waiting + running``, plus
``6 x waiting x max(0, kv_usage - 0.5)``, the scan starting one rank later each
request so ties rotate (:mod:`vidur_specdec.engine.dp_router`, the engine core's router too).

Here one Vidur replica is one such group. :class:`DPGroupReplicaScheduler` holds D
:class:`~vidur_specdec.engine.reference.scheduler.SpecSarathiReplicaScheduler` ranks (each its
own queue, ``num_blocks`` KV blocks, ``max_num_seqs`` and token budget), routes
arrivals as above, and on each schedule asks every rank for its batch; the group's
step is one Vidur :class:`~vidur.entities.Batch` of all ranks' requests whose
:class:`~vidur_specdec.engine.reference.step_plan.StepPlan` holds the ranks' plans (``dp_parts``;
None for a rank that runs the dummy batch), priced by
:class:`~vidur_specdec.engine.dp_predictor.DPExecutionTimePredictor`; the group keeps
the ranks' own batches by the group batch's id until it ends, to hand each back to its
rank. No step runs when no rank has a batch (vLLM: all engines idle).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional

from vidur.entities import Batch
from vidur.scheduler.replica_scheduler.base_replica_scheduler import BaseReplicaScheduler
from vidur.scheduler.replica_scheduler.replica_scheduler_registry import ReplicaSchedulerRegistry

from vidur_specdec.engine import dp_router
from vidur_specdec.engine.reference.scheduler import SpecDecSchedulerType, SpecSarathiReplicaScheduler, SpecSarathiSchedulerConfig
from vidur_specdec.engine.reference.step_plan import attach, merge_ranks, plan_of

DP_GROUP = SpecDecSchedulerType.SPEC_SARATHI + 1  # registry key (>= 100: never collides with Vidur's)


@dataclass
class DPGroupSchedulerConfig(SpecSarathiSchedulerConfig):
    """The per-rank speculative Sarathi settings plus the ranks of the group (``data_parallel_size``)."""

    data_parallel_size: int = 1

    @staticmethod
    def get_type():
        return DP_GROUP


class DPGroupReplicaScheduler(BaseReplicaScheduler):
    """D speculative Sarathi ranks behind vLLM's least-loaded router; one step for all of them.

    ``rank_class``: each rank's scheduler (a prefill or decode pool's instance scheduler in a disaggregated run,
    :mod:`vidur_specdec.engine.reference.disagg`)."""

    rank_class = SpecSarathiReplicaScheduler

    def __init__(self, replica_config, replica_scheduler_config, cache_config, request_generator_config,
                 replica, num_stages, execution_time_predictor) -> None:
        super().__init__(replica_config, replica_scheduler_config, cache_config, request_generator_config,
                         replica, num_stages, execution_time_predictor)
        self.ranks: List[SpecSarathiReplicaScheduler] = [
            self.rank_class(replica_config, replica_scheduler_config, cache_config, request_generator_config,
                            replica, num_stages, execution_time_predictor)
            for _ in range(int(replica_scheduler_config.data_parallel_size))]
        self._router = dp_router.LeastLoadedScan(len(self.ranks))
        self.rank_of = {}  # request id -> its rank
        self._parts: Dict[int, List[Optional[Batch]]] = {}  # group batch id -> the ranks' batches (None: idle)

    # ------------------------------------------------------------------ the router
    def _score(self, rank: SpecSarathiReplicaScheduler, more_waiting: int = 0) -> float:
        waiting = len(rank._request_queue) + more_waiting
        running = len(rank._allocation_map)
        usage = rank._num_allocated_blocks / rank._cache_config.num_blocks
        return dp_router.score(waiting, running, usage)

    def pick(self, more_waiting=None) -> int:
        """The rank the router sends the next request to (its index); ``more_waiting``: per rank, requests on
        their way to it that its queue does not hold yet (a decode pool's requests waiting for KV room)."""
        return self._router.pick(lambda i: self._score(self.ranks[i], more_waiting[i] if more_waiting else 0))

    def add_request(self, request) -> None:
        best = self.pick()
        self.rank_of[request.id] = best
        self.ranks[best].add_request(request)

    # ------------------------------------------------------------------ Vidur's view of the group
    @property
    def num_pending_requests(self) -> int:
        return sum(r.num_pending_requests for r in self.ranks)

    def get_pending_requests(self):
        return [q for r in self.ranks for q in r.get_pending_requests()]

    @property
    def num_allocated_blocks(self) -> int:
        return sum(r.num_allocated_blocks for r in self.ranks)

    @property
    def memory_usage_percent(self) -> float:
        return sum(r.memory_usage_percent for r in self.ranks) / len(self.ranks)

    def is_empty(self) -> bool:
        return all(r.num_pending_requests == 0 and not r._allocation_map for r in self.ranks) and all(
            s.is_empty() for s in self._replica_stage_schedulers.values())

    # ------------------------------------------------------------------ one synchronised step
    def _get_next_batch(self, time: float) -> Optional[Batch]:
        parts: List[Optional[Batch]] = [r._get_next_batch(time) for r in self.ranks]
        if all(p is None for p in parts):
            return None
        reqs, q, kv = [], [], []
        for rank, part in zip(self.ranks, parts):
            if part is None:
                continue
            rank._num_running_batches += 1  # the rank's own on_batch_end decrements it
            reqs += part.requests
            q += part.num_q_tokens
            kv += part.num_kv_tokens
        batch = Batch(self._replica_id, reqs, q, kv)
        attach(batch, merge_ranks([plan_of(p) if p is not None else None for p in parts]))
        self._parts[batch.id] = parts
        return batch

    def on_batch_end(self, batch) -> None:
        super().on_batch_end(batch)
        for rank, part in zip(self.ranks, self._parts.pop(batch.id)):
            if part is not None:
                rank.on_batch_end(part)


ReplicaSchedulerRegistry.register(DP_GROUP, DPGroupReplicaScheduler)
