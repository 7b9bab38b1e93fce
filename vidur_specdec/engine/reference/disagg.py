"""Disaggregated prefill and decode inside Vidur's event loop.

The approach of Vidur's authors for prefill/decode splitting (microsoft/vidur
pull request 80, "splitwise"): a global scheduler that knows which replicas
prefill and which decode, and a request that leaves its prefill replica when
its prefill completes and reaches a decode replica after its KV has moved.
Here that is :class:`PoolRouter`, a Vidur global scheduler registered under its
own type, over the pools of a :class:`~vidur_specdec.engine.topology.Topology`
(each pool with its own predictor, scheduler and KV blocks), as vLLM's
disaggregated proxy runs it:

1. at arrival the router picks a prefill instance (``disaggregation.router``)
   and sends it the prompt with one output token (the proxy's ``max_tokens=1``);
2. when that prefill completes, its KV blocks stay held (the NIXL connector
   frees them only after the decode side has read them) and the router picks a
   decode instance, which reserves the prompt's KV blocks as soon as it has room
   (vLLM allocates a remote-prefill request's blocks before the async load and
   holds them through it; lookahead slots are deferred until the load is done,
   ``limit_lookahead_tokens`` in ``vllm/v1/core/sched/scheduler.py``);
3. the KV moves (:mod:`vidur_specdec.engine.kv_transfer`); then the prefill
   instance frees its blocks and the decode instance schedules the request
   with every prompt token but the last already computed: its first step
   computes that token and samples the first output token (vLLM: the decode
   side's ``num_computed_tokens = num_tokens - 1``), and it decodes from there;
4. with ``disaggregation.draft_kv: recompute`` the drafter's KV was not moved,
   so that first step also runs the drafter over the prompt (the step plan's
   ``draft_recompute``, priced by the step pricer), as vLLM's decode instance does when the
   draft KV groups are left out of the transfer (vLLM issue 54926).

An instance of a pool with ``data_parallel_size`` > 1 is a
:class:`~vidur_specdec.engine.reference.dp_group.DPGroupReplicaScheduler` of prefill or
decode ranks; its own router (vLLM's least-loaded one) picks the rank at arrival
and, on a decode instance, at hand-off, and the rank holds the request's KV.

TTFT splits into ``queue`` (arrival to first prefill step), ``prefill``,
``kv_transfer`` (prefill done to KV loaded: waiting for decode KV room plus
the transfer) and ``first_decode`` (KV loaded to first token). Times: ``*_s``
seconds, ``*_ms`` milliseconds.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from math import ceil
from typing import Any, Dict, List, Tuple

import pandas as pd
from vidur.config import BaseGlobalSchedulerConfig
from vidur.events.base_event import BaseEvent
from vidur.events.replica_schedule_event import ReplicaScheduleEvent
from vidur.scheduler.global_scheduler.base_global_scheduler import BaseGlobalScheduler
from vidur.scheduler.global_scheduler.global_scheduler_registry import GlobalSchedulerRegistry
from vidur.scheduler.replica_scheduler.base_replica_scheduler import BaseReplicaScheduler
from vidur.types import BaseIntEnum, EventType

from vidur_specdec.engine.pool_routing import ROUTERS
from vidur_specdec.engine.disagg_metrics import pool_figures, request_parts
from vidur_specdec.engine.metrics import requests_frame
from vidur_specdec.engine.reference.dp_group import DPGroupReplicaScheduler
from vidur_specdec.engine.reference.predictor import SpecDecExecutionTimePredictor
from vidur_specdec.engine.reference.request import SpecRequest
from vidur_specdec.engine.reference.scheduler import SpecSarathiReplicaScheduler

class PoolRouterType(BaseIntEnum):
    """Registry key of this project's global scheduler (values >= 100 never collide with Vidur's)."""

    POOL_ROUTER = 100


@dataclass
class PoolRouterConfig(BaseGlobalSchedulerConfig):
    """The topology and, per pool, Vidur's ``(ReplicaConfig, CacheConfig)`` for its instances."""

    topology: Any = None
    vidur_pools: Any = None  # [(replica_config, cache_config, predictor_config, scheduler_config), ...] in order

    @staticmethod
    def get_type():
        return PoolRouterType.POOL_ROUTER


# --------------------------------------------------------------------------- the instances of each pool


class PrefillInstanceScheduler(SpecSarathiReplicaScheduler):
    """A prefill instance (or one data-parallel rank of it): a request done with its prefill keeps its KV blocks
    until they have been read. ``unit``: its id among the router's schedulers."""

    router: "PoolRouter" = None
    unit: int = -1

    def on_batch_end(self, batch) -> None:
        BaseReplicaScheduler.on_batch_end(self, batch)
        done = []
        for request in batch.requests:
            if request.completed:
                done.append(request)  # blocks held: freed by the router once the KV has moved
            else:
                self._preempted_requests.append(request)
        for request in done:
            self.router.on_prefill_done(request, self.unit)


class DecodeInstanceScheduler(SpecSarathiReplicaScheduler):
    """A decode instance (or one data-parallel rank of it): requests arrive with their prompt's KV blocks already
    held. ``unit``: its id among the router's schedulers."""

    router: "PoolRouter" = None
    unit: int = -1
    recompute_draft: bool = False  # disaggregation.draft_kv: recompute (the drafter re-runs over a loaded prompt)

    def _draft_recompute(self, batch) -> tuple:
        """Tokens each loaded prompt's drafter pass covers in this step (its first on this instance), when the draft
        KV was not moved (``disaggregation.draft_kv: recompute``): the prompt but its last token."""
        if not self.recompute_draft:
            return ()
        return tuple(r.prompt_tokens - 1 for r in batch.requests
                     if getattr(r, "kv_loaded", False) and not r.is_prefill_complete and r.num_restarts == 0
                     and r.num_processed_tokens == r.prompt_tokens - 1 and r.prompt_tokens > 1)

    def _can_allocate_request(self, request) -> bool:
        if getattr(request, "kv_loaded", False) and request.num_restarts == 0 and request.id in self._allocation_map \
                and not request.is_prefill_complete and request.num_processed_tokens == request.prompt_tokens - 1:
            return True  # its loaded prompt's blocks are held; the last prompt token fits in them
        return super()._can_allocate_request(request)

    def on_batch_end(self, batch) -> None:
        super().on_batch_end(batch)
        self.router.admit(self.unit)


class PrefillGroupScheduler(DPGroupReplicaScheduler):
    """A prefill instance of data-parallel ranks: each rank a :class:`PrefillInstanceScheduler`."""

    rank_class = PrefillInstanceScheduler


class DecodeGroupScheduler(DPGroupReplicaScheduler):
    """A decode instance of data-parallel ranks: each rank a :class:`DecodeInstanceScheduler`."""

    rank_class = DecodeInstanceScheduler


class KVLoadedEvent(BaseEvent):
    """A request's KV has reached its decode instance (scheduled like a global schedule)."""

    def __init__(self, time: float, request) -> None:
        super().__init__(time, EventType.GLOBAL_SCHEDULE)
        self._request = request

    def handle_event(self, scheduler, metrics_store) -> List[BaseEvent]:
        return scheduler.on_kv_loaded(self._request, self.time)

    def to_dict(self) -> Dict:
        return {"time": self.time, "event_type": self.event_type, "request_id": self._request.id}


# --------------------------------------------------------------------------- the router


class PoolRouter(BaseGlobalScheduler):
    """Vidur global scheduler over a prefill and a decode pool joined by a KV link.

    Every rank (an instance's scheduler, or each data-parallel rank of a :class:`~vidur_specdec.engine.reference.dp_group.DPGroupReplicaScheduler`
    instance) is a *unit* (``_units``): the scheduler a request's KV blocks are held on; the proxy picks an
    instance by its units' loads, and a data-parallel instance's own router (vLLM's least-loaded one) the rank.
    """

    def __init__(self, config, replicas) -> None:
        self._config = config
        self._replicas = replicas
        self._num_replicas = len(replicas)
        self._request_queue = []
        rc: PoolRouterConfig = config.cluster_config.global_scheduler_config
        top = rc.topology
        self._link = top.link
        self._policy = ROUTERS[top.cfg.disaggregation.router]()
        ids = iter(sorted(replicas))
        self._replica_schedulers = {}
        self.ids: Dict[str, List[int]] = {}
        self._units: Dict[int, SpecSarathiReplicaScheduler] = {}
        self._unit_ids: Dict[int, List[int]] = {}
        for pool, (replica_config, cache_config, predictor_config, sched_config) in zip(top.pools, rc.vidur_pools):
            decode = pool.role == "decode"
            predictor = SpecDecExecutionTimePredictor(predictor_config=predictor_config, replica_config=replica_config,
                                                      cache_config=cache_config)
            dp = pool.deployment.dp
            scls = ((DecodeGroupScheduler if decode else PrefillGroupScheduler) if dp > 1
                    else DecodeInstanceScheduler if decode else PrefillInstanceScheduler)
            self.ids[pool.role] = []
            for _ in range(pool.instances):
                rid = next(ids)
                s = scls(replica_config=replica_config, replica_scheduler_config=sched_config,
                         cache_config=cache_config, request_generator_config=config.request_generator_config,
                         replica=replicas[rid], num_stages=1, execution_time_predictor=predictor)
                self._unit_ids[rid] = []
                for rank in getattr(s, "ranks", [s]):
                    rank.router = self
                    rank.recompute_draft = decode and top.cfg.disaggregation.draft_kv == "recompute"
                    rank.unit = len(self._units)
                    self._units[rank.unit] = rank
                    self._unit_ids[rid].append(rank.unit)
                self._replica_schedulers[rid] = s
                self.ids[pool.role].append(rid)
        self._waiting: Dict[int, deque] = {u: deque() for rid in self.ids["decode"] for u in self._unit_ids[rid]}
        self._sim = None

    def attach(self, sim) -> None:
        """The simulator whose event queue the router adds transfer completions to."""
        self._sim = sim

    def _pick(self, role: str, extra: Dict[int, int] = None) -> int:
        ids = self.ids[role]
        extra = extra or {}
        loads = []
        for rid in ids:
            loads.append(sum(self._units[u].num_pending_requests + len(self._units[u]._allocation_map)
                             + extra.get(u, 0) for u in self._unit_ids[rid]))
        return self._policy.pick(role, ids, loads)

    def schedule(self) -> List[Tuple[int, Any]]:
        """New arrivals, each as a one-output-token prefill request on a prefill instance."""
        self.sort_requests()
        out = []
        while self._request_queue:
            r = self._request_queue.pop(0)
            pid = self._pick("prefill")
            shadow = SpecRequest(r.arrived_at, r.prompt_tokens, 1, index=r.index)
            shadow.prefill_only = True  # a closed loop does not count its completion
            shadow.parent = r
            r.shadow, r.prefill_replica = shadow, pid
            out.append((pid, shadow))
        return out

    def on_prefill_done(self, shadow, unit: int) -> None:
        """A prefill finished on ``unit``: pick a decode instance (and its rank) and start the transfer when it has
        room."""
        r = shadow.parent
        r.prefill_unit = unit
        waiting = {u: len(q) for u, q in self._waiting.items()}
        did = self._pick("decode", waiting)
        units = self._unit_ids[did]
        group = self._replica_schedulers[did]
        du = units[group.pick([waiting[u] for u in units])] if len(units) > 1 else units[0]
        r.decode_replica, r.decode_unit = did, du
        r.handoff_at = self._sim._time
        self._waiting[du].append(r)
        self.admit(du)

    def admit(self, unit: int) -> None:
        """Reserve decode KV blocks on ``unit`` for its waiting requests in arrival order, starting their
        transfers."""
        s = self._units[unit]
        q = self._waiting[unit]
        now = self._sim._time
        cache = s._cache_config
        watermark = int(cache.watermark_blocks_fraction * cache.num_blocks)
        while q:
            r = q[0]
            need = ceil(r.prompt_tokens / cache.block_size)  # its prompt's KV blocks (and a hybrid model's state pages)
            if cache.num_blocks - s.num_allocated_blocks - need - s.state_blocks < watermark:
                break
            q.popleft()
            s.allocate(r.id, need)
            r.kv_start_at = now
            r.kv_transfer_ms = self._link.time_ms(r.prompt_tokens)
            r.kv_transfer_bytes = self._link.bytes(r.prompt_tokens)
            self._sim._add_event(KVLoadedEvent(now + r.kv_transfer_ms * 1e-3, r))

    def on_kv_loaded(self, r, time: float) -> List[BaseEvent]:
        """The KV has moved: free it on the prefill side, queue the request on its decode instance."""
        self._units[r.prefill_unit].free(r.shadow.id)
        r.kv_loaded_at = time
        r.kv_loaded = True
        r._num_processed_tokens = r._num_stage_processed_tokens = r.prompt_tokens - 1  # all but the last loaded
        self._units[r.decode_unit].add_request(r)  # on the rank chosen at hand-off
        return [ReplicaScheduleEvent(time, r.decode_replica), ReplicaScheduleEvent(time, r.prefill_replica)]


GlobalSchedulerRegistry.register(PoolRouterType.POOL_ROUTER, PoolRouter)


# --------------------------------------------------------------------------- running a topology


def run_topology(top, ref_mod, sim_mod):
    """Run a disaggregated topology's event loop and build its tables and summary.

    ``ref_mod`` is :mod:`vidur_specdec.engine.reference.run` (its Vidur configs and simulator, the colocated
    run's, reused per pool) and ``sim_mod`` :mod:`vidur_specdec.engine.simulation` (its ``finish``), handed in by
    the modules above this one.
    """
    decode = top.pool("decode").prepared
    ref_mod.reset_vidur_ids()
    per_pool = []
    for pool in top.pools:
        vc = ref_mod.vidur_config(pool.prepared, ref_mod.scheduler_config(pool.prepared, pool.deployment.dp),
                                  SpecRequest)
        per_pool.append((vc.cluster_config.replica_config, vc.cluster_config.cache_config,
                         vc.execution_time_predictor_config, vc.cluster_config.replica_scheduler_config))
    vc = ref_mod.vidur_config(decode, ref_mod.scheduler_config(decode), SpecRequest)
    vc.cluster_config.num_replicas = sum(p.instances for p in top.pools)
    vc.cluster_config.global_scheduler_config = PoolRouterConfig(topology=top, vidur_pools=per_pool)
    sim = ref_mod.SpecDecSimulator(vc)
    sim.scheduler.attach(sim)
    ref_mod.run_to_end(sim, lambda n: f"scheduler.num_blocks: {n} requests could not be scheduled with the "
                                      "pools' KV blocks; give more blocks")
    req = requests_frame(sim.requests, sim.recorder.replica_of)
    req = pd.concat([req, request_parts(sim.requests)], axis=1)
    steps = sim.recorder.steps_frame()
    pool_of = {int(getattr(rid, "id", rid)): role for role, ids in sim.scheduler.ids.items() for rid in ids}
    steps.insert(2, "pool", steps["replica"].map(pool_of))
    more = pool_figures(top, req, steps)
    return sim_mod.finish(decode, req, steps, more, cfg=top.cfg)
