"""Run a prepared deployment on the engine core and build its tables.

:func:`run_core` takes what :func:`vidur_specdec.engine.simulation.prepare` built
(one pool of replicas, or a topology of prefill and decode pools), builds the
core's replicas over the workload's requests (:mod:`.sarathi`, :mod:`.group`,
:mod:`.pools`), runs the event loop (:mod:`.loop`) and returns the same
:class:`~vidur_specdec.engine.simulation.SimulationResult` the Vidur-backed
reference returns: ``requests.csv``, ``steps.csv`` and the summary, byte for
byte the same (``tests/test_engine_core.py``).
"""

from __future__ import annotations

from collections import deque

import pandas as pd

from vidur_specdec.config import ConfigError
from vidur_specdec.engine.core.group import DataParallelGroup
from vidur_specdec.engine.core.loop import GLOBAL_SCHEDULERS, Loop, Replica
from vidur_specdec.engine.core.pools import DecodeRank, PoolRouter, PrefillRank
from vidur_specdec.engine.core.request import CoreRequest
from vidur_specdec.engine.core.sarathi import SarathiRank
from vidur_specdec.engine.disagg_metrics import pool_figures, request_parts
from vidur_specdec.engine.metrics import StepRecorder, requests_frame
from vidur_specdec.engine.pipeline_metrics import PipelineStepRecorder


def _rank(p, cls=SarathiRank):
    """One scheduler of a prepared pool: its KV blocks, token budget, k and acceptance."""
    return cls(p.scheduler, int(p.memory.num_blocks), p.memory.block_size,
               p.cfg.scheduler.watermark_blocks_fraction, p.deployment.pp)


def _requests(specs, closed: bool) -> list:
    return [CoreRequest(i, i, 0.0 if closed else s.arrived_at_s, s.prompt_tokens, s.output_tokens)
            for i, s in enumerate(specs)]


def _start(loop: Loop, requests: list, concurrency) -> None:
    """Arrivals made at the start (open loop: every request at its time; closed loop: the first ``concurrency``
    at t = 0, each completion releasing the next, as ``vllm bench serve --max-concurrency`` does)."""
    if concurrency is None:
        first = requests
    else:
        first, rest = requests[:concurrency], deque(requests[concurrency:])

        def release(time: float) -> None:
            if rest:
                r = rest.popleft()
                r.arrived_at = time
                loop.push(time, _arrival, (loop, r))

        loop.on_complete = release
    for r in first:
        loop.push(r.arrived_at, _arrival, (loop, r))


def _arrival(time: float, payload) -> None:
    loop, r = payload
    loop.arrive(time, r)


def replica_of(requests) -> dict:
    """Request index -> the replica that ran its steps: the one whose scheduler held it last (a pools request's
    decode instance, which runs its steps after its prefill instance's)."""
    return {r.index: r.replica for r in requests}


def _concurrency(cfg):
    w = cfg.workload
    return w.concurrency if w.arrival == "closed" else None


def run_core(p, sim_mod):
    """Run a prepared run (or topology of pools) on the engine core; ``sim_mod`` is
    :mod:`vidur_specdec.engine.simulation` (its ``finish`` builds the summary)."""
    if hasattr(p, "pools"):
        return _run_pools(p, sim_mod)
    dep = p.deployment
    n = p.cfg.parallel.num_replicas
    replicas = []
    for rid in range(n):
        sched = DataParallelGroup([_rank(p) for _ in range(dep.dp)]) if dep.dp > 1 else _rank(p)
        replicas.append(Replica(rid, sched, p.pricer, dep.pp))
    # each request knows its replica (set by the global schedule), so the recorder need not track it
    recorder = (StepRecorder(track_replicas=False) if dep.pp == 1
                else PipelineStepRecorder(dep.pp, track_replicas=False))
    loop = Loop(replicas, GLOBAL_SCHEDULERS[p.cfg.parallel.global_scheduler](replicas), recorder)
    concurrency = _concurrency(p.cfg)
    requests = _requests(p.specs, concurrency is not None)
    _start(loop, requests, concurrency)
    loop.run()
    if not loop.finished(requests):
        unfinished = sum(not r.completed for r in requests)
        raise ConfigError(f"scheduler.num_blocks: {unfinished} requests could not be scheduled with "
                          f"{p.memory.num_blocks} KV blocks; give more blocks")
    return sim_mod.finish(p, requests_frame(requests, replica_of(requests)), recorder.steps_frame())


def _run_pools(top, sim_mod):
    """A disaggregated topology: the prefill pool's instances first, then the decode pool's, behind the router."""
    decode = top.pool("decode").prepared
    scheds, ids, replicas = {}, {}, []
    recompute = top.cfg.disaggregation.draft_kv == "recompute"
    for pool in top.pools:
        ids[pool.role] = []
        cls = DecodeRank if pool.role == "decode" else PrefillRank
        dp = pool.deployment.dp
        for _ in range(pool.instances):
            rid = len(replicas)
            ranks = [_rank(pool.prepared, cls) for _ in range(dp)]
            for rank in ranks:
                rank.recompute_draft = pool.role == "decode" and recompute
            scheds[rid] = DataParallelGroup(ranks) if dp > 1 else ranks[0]
            ids[pool.role].append(rid)
            replicas.append(Replica(rid, scheds[rid], pool.prepared.pricer, 1, pool.role))
    requests = _requests(top.specs, _concurrency(top.cfg) is not None)
    router = PoolRouter(scheds, ids, top.link, top.cfg.disaggregation.router, len(requests))
    recorder = StepRecorder(track_replicas=False)
    loop = Loop(replicas, router.assign, recorder)
    router.loop = loop
    _start(loop, requests, _concurrency(top.cfg))
    loop.run()
    if not loop.finished(requests):
        unfinished = sum(not r.completed for r in requests)
        raise ConfigError(f"scheduler.num_blocks: {unfinished} requests could not be scheduled with the "
                          "pools' KV blocks; give more blocks")
    req = pd.concat([requests_frame(requests, replica_of(requests)), request_parts(requests)], axis=1)
    steps = recorder.steps_frame()
    pool_of = {rid: role for role, rs in ids.items() for rid in rs}
    steps.insert(2, "pool", steps["replica"].map(pool_of))
    return sim_mod.finish(decode, req, steps, pool_figures(top, req, steps), cfg=top.cfg)
