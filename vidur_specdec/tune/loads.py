"""What each load of a tune runs, and whether a run was overloaded (docs/tune.md, "Loads").

Requests per closed-loop point follow the measured dataset this project reads:
22, 88, 128, 220, 440 and 880 prompts at concurrency 1, 8, 32, 64, 128 and 256,
and four per request in flight at any other concurrency (at least 22), unless
``workload.requests_per_concurrency`` says otherwise (then that many per request
in flight, at least 1). Open-loop (qps) points keep ``workload.num_requests``.
The first ``workload.warmup_requests`` arrivals are left out of the metrics and
run on top of the counted ones. A closed-loop point without a warm-up given
(``--warmup-requests``, ``workload.warmup_requests``) leaves out its start
burst: the first C requests at concurrency C, which ``vllm bench serve
--max-concurrency C`` sends at once, so their TTFT carries the queue behind
each other's prefills and would otherwise decide TTFT p99 (:func:`warmup`;
``--warmup-requests 0`` keeps them).

A run is **overloaded** when requests queue without bound: the queue wait
(arrival to first scheduled step) of the last third of the measured requests,
by arrival, is more than :data:`GROWTH_FACTOR` times that of the first third and
above :data:`GROWTH_FLOOR_S`, or the median queue wait exceeds
:data:`WAIT_BOUND_S`, or its median TTFT is more than :data:`TTFT_GROWTH_FACTOR`
times the TTFT reference: the median TTFT without speculation at the lightest
load every k runs at (the lowest load of the tune's grid). Waits alone miss a
run whose requests are admitted at once but whose prefills are starved by the
token budget (decode and verify tokens fill ``max_num_batched_tokens``); its
TTFT grows instead. The factor follows the single-server queue, where the time
in system is the service time / (1 - utilization) (M/M/1; L. Kleinrock,
*Queueing Systems*, vol. 1, 1975): 10 times the unloaded TTFT means the
prefill path is over 90 % busy, past the knee where more load only queues.
Crossovers and the best k use only loads whose runs are not overloaded.

The search stays inside the config's valid ranges: qps up to ``workload.qps``'s
upper bound, concurrency up to :data:`CONCURRENCY_BOUND_FACTOR` times
``scheduler.max_num_seqs`` (times ``parallel.data_parallel_size``: the limit is per
rank; beyond it requests only queue).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Dict, Optional
from vidur_specdec.config import WorkloadConfig

DATASET_REQUESTS = {1: 22, 8: 88, 32: 128, 64: 220, 128: 440, 256: 880}
PER_REQUEST_IN_FLIGHT = 4
MIN_REQUESTS = 22
GROWTH_FACTOR = 2.0
GROWTH_FLOOR_S = 0.5
WAIT_BOUND_S = 2.0
TTFT_GROWTH_FACTOR = 10.0
CONCURRENCY_BOUND_FACTOR = 2


def requests_for_concurrency(c: int, per: Optional[float]) -> int:
    """Counted requests of a closed-loop point at concurrency ``c``."""
    if per is not None:
        return max(1, int(math.ceil(per * c)))
    return DATASET_REQUESTS.get(int(c), max(MIN_REQUESTS, PER_REQUEST_IN_FLIGHT * int(c)))


def load_bounds(base, axis) -> Dict[str, float]:
    """``{"lo", "hi"}``: the loads the search may try."""
    meta = {f.name: f.metadata for f in dataclasses.fields(WorkloadConfig)}
    if axis.name == "concurrency":
        if base.disaggregation.enabled:  # every decode instance's batch (lazy: tune.pools reads the topology)
            from vidur_specdec.tune.pools import max_batch

            seqs = max_batch(base) * base.disaggregation.decode_instances
            return {"lo": 1.0, "hi": float(CONCURRENCY_BOUND_FACTOR * seqs)}
        # max_num_seqs is per data-parallel rank (vLLM's per-rank scheduler): a group holds dp times it
        return {"lo": 1.0, "hi": float(CONCURRENCY_BOUND_FACTOR * base.scheduler.max_num_seqs
                                       * base.parallel.data_parallel_size)}
    return {"lo": float(meta["qps"]["lo"]), "hi": float(meta["qps"]["hi"])}


def warmup(base, axis, load: float, burst: bool) -> int:
    """Requests left out of a point's metrics: the config's warm-up, else (``burst``, the closed-loop axis) the
    start burst, C requests at concurrency C."""
    w = base.workload
    if burst and axis.name == "concurrency" and w.warmup_requests == 0:
        return int(load)
    return w.warmup_requests


def workload_overrides(base, axis, load: float, burst: bool = False) -> Dict:
    """The load's own overrides: the axis key, plus the request count and warm-up on the closed-loop axis."""
    ov = dict(axis.overrides(load))
    w = base.workload
    if axis.name == "concurrency":
        warm = warmup(base, axis, load, burst)
        ov["workload.num_requests"] = requests_for_concurrency(int(load), w.requests_per_concurrency) + warm
        if warm != w.warmup_requests:
            ov["workload.warmup_requests"] = warm
    return ov


def overloaded(req, warmup: int) -> bool:
    """The overload rule above, on a run's requests table."""
    r = req.sort_values(["arrived_at_s", "request_id"]).iloc[warmup:]
    wait = (r["scheduled_at_s"] - r["arrived_at_s"]).to_numpy(float)
    n = len(wait)
    if n == 0:
        return False
    if float(sorted(wait)[n // 2]) > WAIT_BOUND_S:
        return True
    if n < 6:
        return False
    third = n // 3
    first, last = float(wait[:third].mean()), float(wait[-third:].mean())
    return last > GROWTH_FLOOR_S and last > GROWTH_FACTOR * first


def point_overloaded(metrics, ttft_reference_ms: Optional[float]) -> bool:
    """A point's overload flag: the queue rule (recorded by the run) or TTFT p50 past the growth bound."""
    if metrics is None:
        return False
    if metrics.get("overloaded"):
        return True
    t = metrics.get("ttft_ms_p50")
    return bool(ttft_reference_ms and t is not None and t > TTFT_GROWTH_FACTOR * ttft_reference_ms)


def overload_reason(metrics, ttft_reference_ms: Optional[float]) -> str:
    """Why a point is overloaded: ``queue``, ``ttft`` or empty."""
    if metrics is None:
        return ""
    if metrics.get("overloaded"):
        return "queue"
    return "ttft" if point_overloaded(metrics, ttft_reference_ms) else ""
