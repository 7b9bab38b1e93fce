"""Tables and summary figures of a disaggregated run: TTFT parts per request, figures per pool.

``requests.csv`` gains, per request: ``prefill_replica``; the TTFT parts
``ttft_queue_ms`` (arrival to its first prefill step), ``ttft_prefill_ms``
(first prefill step to prefill done), ``ttft_kv_transfer_ms`` (prefill done to
KV loaded on the decode instance: ``kv_wait_ms`` waiting for KV room there plus
``kv_transfer_ms`` moving it) and ``ttft_first_decode_ms`` (KV loaded to first
token), which add up to ``ttft_ms``; and ``kv_transfer_bytes``. ``summary.json``
gains their percentiles (``ttft_parts_ms``), the link, and per pool its shape,
utilisation (busy instance-time over instance-time of the run) and steps (a pool
of data-parallel groups: its all-to-all and rank-wait shares too).
"""

from __future__ import annotations

from typing import Dict, Sequence

import pandas as pd

from vidur_specdec.engine.metrics import _pct, data_parallel_summary

PART_COLUMNS = ["prefill_replica", "ttft_queue_ms", "ttft_prefill_ms", "ttft_kv_transfer_ms",
                "ttft_first_decode_ms", "kv_wait_ms", "kv_transfer_ms", "kv_transfer_bytes"]
PARTS = ("queue", "prefill", "kv_transfer", "first_decode")


def request_parts(requests: Sequence) -> pd.DataFrame:
    """One row per request (workload order) of :data:`PART_COLUMNS`; times in ms."""
    rows = []
    for r in requests:
        sh = r.shadow
        rows.append((
            r.prefill_replica,
            (sh.scheduled_at - r.arrived_at) * 1e3,
            (sh.prefill_completed_at - sh.scheduled_at) * 1e3,
            (r.kv_loaded_at - r.handoff_at) * 1e3,
            (r.prefill_completed_at - r.kv_loaded_at) * 1e3,
            (r.kv_start_at - r.handoff_at) * 1e3,
            r.kv_transfer_ms,
            r.kv_transfer_bytes,
        ))
    return pd.DataFrame(rows, columns=PART_COLUMNS)


def pool_figures(top, req: pd.DataFrame, steps: pd.DataFrame) -> Dict:
    """Summary entries of a disaggregated run (merged over the decode pool's own summary)."""
    warm = top.cfg.workload.warmup_requests
    measured = req.sort_values(["arrived_at_s", "request_id"]).iloc[warm:] if warm else req
    span = float(req["completed_at_s"].max() - req["arrived_at_s"].min())
    pools = {}
    for pool in top.pools:
        d = pool.describe()
        mine = steps[steps["pool"] == pool.role]
        busy_s = float(mine["duration_ms"].sum()) * 1e-3
        d["num_steps"] = int(len(mine))
        d["utilization"] = busy_s / (pool.instances * span) if span > 0 else float("nan")
        d["mean_step_ms"] = float(mine["duration_ms"].mean()) if len(mine) else float("nan")
        if pool.deployment.dp > 1:  # a pool of data-parallel groups: its all-to-all and rank-wait shares
            d.update(data_parallel_summary(mine, pool.deployment.dp, pool.deployment.redundant_experts))
        pools[pool.role] = d
    link = top.link
    dz = top.cfg.disaggregation
    return {
        "ttft_parts_ms": {part: _pct(measured[f"ttft_{part}_ms"]) for part in PARTS},
        "kv_transfer_ms": _pct(measured["kv_transfer_ms"]),
        "kv_wait_ms": _pct(measured["kv_wait_ms"]),
        "kv_transfer_bytes_mean": float(measured["kv_transfer_bytes"].mean()),
        "kv_link": {"name": link.name, "bandwidth_bytes_s_per_gpu": link.bandwidth, "latency_ms": link.latency_ms,
                    "draft_kv": dz.draft_kv, "draft_kv_transferred": link.draft_transferred},
        "router": dz.router,
        "pools": pools,
        "num_replicas": sum(p.instances for p in top.pools),
        "num_gpus": sum(p.gpus for p in top.pools),
        "global_scheduler": "disaggregated:" + dz.router,
        "plan_digest": top.digest,
    }
