"""One sweep row, run in a worker: the simulation and the numbers recorded for it."""

from __future__ import annotations

import math
import time
from typing import Dict, Mapping, Optional, Sequence

from vidur_specdec.config import unused
from vidur_specdec.engine.resolve import from_dict
from vidur_specdec.sweep.digest import code_digest, profile_digests

# Measured per row (floats, ms / tokens per s / tokens), in this order.
METRIC_COLUMNS = [
    "tpot_ms_p50", "tpot_ms_p90", "tpot_ms_p99",
    "ttft_ms_p50", "ttft_ms_p90", "ttft_ms_p99",
    "e2e_ms_p50", "e2e_ms_p90", "e2e_ms_p99",
    "throughput_tok_s", "mean_acceptance_length", "accepted_per_guess",
    "ttft_ms_mean_first50", "ttft_ms_mean_last50",
    "makespan_s", "mean_step_ms", "num_steps", "restarts",
]
INT_METRICS = {"num_steps", "restarts"}
# Recorded only when a sweep has rows with prefill and decode pools (disaggregation.*): the mean TTFT and
# its four parts (they add up to it, ms), and each pool's utilisation (busy instance-time / instance-time).
# Colocated rows of such a sweep leave them empty; a sweep without pools has no such columns.
POOL_METRIC_COLUMNS = [
    "ttft_ms_mean", "ttft_queue_ms_mean", "ttft_prefill_ms_mean", "ttft_kv_transfer_ms_mean",
    "ttft_first_decode_ms_mean", "prefill_utilization", "decode_utilization",
]


def metrics_problem(metrics) -> Optional[str]:
    """Why ``metrics`` (a journal line's or a worker's) is not a row's numbers, or None when it is.

    A row's numbers are exactly :data:`METRIC_COLUMNS`, each a finite number or
    null (an empty cell: e.g. no TPOT when every request emits one token);
    :data:`INT_METRICS` are non-negative integers.
    """
    if not isinstance(metrics, Mapping):
        return f"metrics is {type(metrics).__name__}, not a mapping"
    missing = [c for c in METRIC_COLUMNS if c not in metrics]
    if missing:
        return f"metric {missing[0]} is missing"
    extra = sorted(k for k in metrics if k not in METRIC_COLUMNS and k not in POOL_METRIC_COLUMNS)
    if extra:
        return f"unknown metric {extra[0]}"
    for c in METRIC_COLUMNS + [c for c in POOL_METRIC_COLUMNS if c in metrics]:
        v = metrics[c]
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            return f"metric {c} is {v!r}, not a finite number"
        if c in INT_METRICS and (v != int(v) or v < 0):
            return f"metric {c} is {v!r}, not a count"
    return None

def row_metrics(result) -> Dict[str, float]:
    """The per-row numbers recorded in the journal and the CSV, from a :class:`SimulationResult`."""
    s = result.summary
    req = result.requests.sort_values(["arrived_at_s", "request_id"])
    m = {}
    for metric in ("tpot_ms", "ttft_ms", "e2e_ms"):
        for p in ("p50", "p90", "p99"):
            m[f"{metric}_{p}"] = s[metric][p]
    m["throughput_tok_s"] = s["throughput_tok_s"]
    m["mean_acceptance_length"] = s["mean_acceptance_length"]
    m["accepted_per_guess"] = s["accepted_per_guess"]
    m["ttft_ms_mean_first50"] = float(req["ttft_ms"].iloc[:50].mean())
    m["ttft_ms_mean_last50"] = float(req["ttft_ms"].iloc[-50:].mean())
    m["makespan_s"] = s["makespan_s"]
    m["mean_step_ms"] = s["mean_step_ms"]
    m["num_steps"] = s["num_steps"]
    m["restarts"] = s["restarts"]
    if "ttft_parts_ms" in s:  # prefill and decode pools
        m["ttft_ms_mean"] = s["ttft_ms"]["mean"]
        for part, v in s["ttft_parts_ms"].items():
            m[f"ttft_{part}_ms_mean"] = v["mean"]
        for role in ("prefill", "decode"):
            m[f"{role}_utilization"] = s["pools"][role]["utilization"]
    return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in m.items()}


def run_row(config_dict: Dict) -> Dict:
    """Run one sweep row (in a worker): ``{"metrics", "wall_s", "code", "profiles"}``."""
    # lazy: start-up cost of scipy, sklearn, vidur
    from vidur_specdec.engine.simulation import simulate

    t0 = time.perf_counter()
    result = simulate(from_dict(config_dict, shared=[unused.CHECKED]))  # a row load_sweep checked
    wall = time.perf_counter() - t0
    return {"metrics": row_metrics(result), "wall_s": wall, "code": code_digest(),
            "profiles": profile_digests(result.config, fresh=True)}


def _warm(config_dicts: Sequence[Dict]) -> None:
    """Fit (and cache, in this process) the predictors the rows need; check each row prepares."""
    # lazy: start-up cost of scipy, sklearn, vidur
    from vidur_specdec.engine.simulation import prepare

    for d in config_dicts:
        prepare(from_dict(d, shared=[unused.CHECKED]))
