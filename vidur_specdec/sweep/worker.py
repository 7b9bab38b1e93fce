"""One sweep row, run in a worker: the simulation and the numbers recorded for it."""

from __future__ import annotations

import math
import time
from typing import Dict, Sequence

from vidur_specdec.config import from_dict
from vidur_specdec.sweep.digest import code_digest, profile_digests


def row_metrics(result) -> Dict[str, float]:
    """The per-row numbers recorded in the journal and the CSV, from a :class:`SimulationResult`."""
    s = result.summary
    req = result.requests.sort_values(["arrived_at_s", "request_id"])
    m = {}
    for metric in ("tpot_ms", "ttft_ms", "e2e_ms"):
        for p in ("p50", "p90", "p99"):
            m[f"{metric}_{p}"] = s[metric][p]
    m["throughput_tok_s"] = s["throughput_tok_s"]
    m["mean_tokens_per_step"] = s["mean_tokens_per_verify_step"]
    m["accepted_per_proposed"] = s["accepted_per_proposed"]
    m["ttft_ms_mean_first50"] = float(req["ttft_ms"].iloc[:50].mean())
    m["ttft_ms_mean_last50"] = float(req["ttft_ms"].iloc[-50:].mean())
    m["makespan_s"] = s["makespan_s"]
    m["mean_step_ms"] = s["mean_step_ms"]
    m["num_steps"] = s["num_steps"]
    m["restarts"] = s["restarts"]
    return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in m.items()}


def run_row(config_dict: Dict) -> Dict:
    """Run one sweep row (in a worker): ``{"metrics", "wall_s", "code", "profiles"}``."""
    from vidur_specdec.simulation import simulate

    t0 = time.perf_counter()
    result = simulate(config_dict)
    wall = time.perf_counter() - t0
    return {"metrics": row_metrics(result), "wall_s": wall, "code": code_digest(),
            "profiles": profile_digests(result.config, fresh=True)}


def _warm(config_dicts: Sequence[Dict]) -> None:
    """Fit (and cache, in this process) the predictors the rows need; check each row prepares."""
    from vidur_specdec.simulation import prepare

    for d in config_dicts:
        prepare(from_dict(d))
