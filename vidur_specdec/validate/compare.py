"""Matched simulation and the request-by-request comparison.

The simulator runs on the replayed trace (``workload.arrival: trace``) with
the calibrated acceptance and the server's KV block budget merged over the
user's run config (calibration first, then ``--set`` overrides, then the
trace). Measured and simulated requests are joined on ``request_id``; a
request that failed or timed out keeps its row in ``comparison.csv`` with its
status and reason and is left out of the statistics, which say how many were
left out and why.

Errors are signed, ``error_pct = (simulated − measured) / measured × 100``;
ratios are ``simulated / measured``; ``ratio_p50`` compares the two
distributions' medians (not a per-request median).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Union

import numpy as np
import pandas as pd

from vidur_specdec.config import RunConfig, apply_overrides, read_yaml
from vidur_specdec.engine.resolve import load
from vidur_specdec.engine.topology import refuse_pools
from vidur_specdec.validate.calibrate import Calibration, fragment, merge
from vidur_specdec.validate.common import ValidateError

METRICS = ("ttft", "tpot", "e2e")


def matched_config(config: Union[str, Path, Mapping, None], trace_path: Union[str, Path],
                   cal: Optional[Calibration] = None, use: str = "per_position",
                   overrides: Optional[List[str]] = None) -> RunConfig:
    """The run config of the matched simulation (validated; raises ConfigError naming the key)."""
    if isinstance(config, (str, Path)):
        data = read_yaml(config)
    else:
        data = dict(config or {})
    if cal is not None:
        data = merge(data, fragment(cal, use))
    data = apply_overrides(data, overrides or [])
    # the trace replaces the config's arrivals and lengths: given as overrides, so the config's own workload
    # keys (qps, num_requests, lengths) stay a template and are not refused as unread (docs/config.md)
    trace = json.dumps(str(Path(trace_path).resolve()))
    cfg = load(data, ["workload.arrival=trace", f"workload.trace_file={trace}"])
    refuse_pools(cfg, "validate")
    return cfg


def simulate_matched(cfg: RunConfig, trace: pd.DataFrame):
    """Run the simulation; its ``requests`` get the trace's ``request_id`` values (same row order)."""
    # lazy: start-up cost of scipy, sklearn, vidur
    from vidur_specdec.engine.simulation import prepare, run_prepared

    res = run_prepared(prepare(cfg))
    sim = res.requests.copy()
    if len(sim) != len(trace):
        raise RuntimeError(f"simulated {len(sim)} requests for a trace of {len(trace)}")
    by_index = dict(zip(trace["sim_index"], trace["request_id"]))
    sim["request_id"] = [by_index[i] for i in sim["request_id"]]
    return res, sim


MEASURED_NUMBERS = ("ttft_ms", "tpot_ms", "e2e_ms", "accepted_tokens", "decode_steps")  # compared per request


def checked_measured(measured, path):
    """``measured.csv`` as compare reads it: the columns present, numbers where numbers belong (one line)."""
    missing = [c for c in ("request_id",) + MEASURED_NUMBERS if c not in measured]
    if missing:
        raise ValidateError(f"--measured: {path} has no {', '.join(missing)} column{'s' if len(missing) > 1 else ''} "
                          "(write it with `validate replay`)")
    if measured.empty:
        raise ValidateError(f"--measured: {path} has a header but no rows")
    for col in MEASURED_NUMBERS:
        num = pd.to_numeric(measured[col], errors="coerce")
        bad = (num.isna() & measured[col].notna()) | ~np.isfinite(num.fillna(0)) | num.lt(0)
        if bad.any():
            i = int(bad.to_numpy().argmax())
            raise ValidateError(f"--measured: {path} line {i + 2}, column {col}: {str(measured[col].iloc[i])[:40]!r} "
                              "is not a finite number >= 0")
    return measured


def _key(s: pd.Series) -> pd.Series:
    return s.map(lambda v: str(v.item() if hasattr(v, "item") else v))


def join(trace: pd.DataFrame, measured: pd.DataFrame, simulated: pd.DataFrame) -> pd.DataFrame:
    """One row per trace request: measured and simulated TTFT/TPOT/E2E, errors, ratios, status."""
    t = trace[["request_id", "arrival_offset_s", "prompt_tokens", "output_tokens"]].copy()
    t["_k"] = _key(t["request_id"])
    m = measured.copy()
    m["_k"] = _key(m["request_id"])
    if m["_k"].duplicated().any():
        raise ValueError("measured requests have duplicate request_id values")
    s = simulated.copy()
    s["_k"] = _key(s["request_id"])
    mcols = {c: f"measured_{c}" for c in ("ttft_ms", "tpot_ms", "e2e_ms", "accepted_tokens", "decode_steps")}
    scols = {c: f"simulated_{c}" for c in ("ttft_ms", "tpot_ms", "e2e_ms", "accepted_tokens", "decode_steps")}
    keep_m = ["_k"] + list(mcols) + [c for c in ("status", "error", "lateness_ms") if c in m]
    out = t.merge(m[keep_m].rename(columns=mcols), on="_k", how="left")
    out = out.merge(s[["_k"] + list(scols)].rename(columns=scols), on="_k", how="left")
    if "status" not in out:
        out["status"] = "ok"
    out["status"] = out["status"].fillna("missing")
    if "error" not in out:
        out["error"] = ""
    out["error"] = out["error"].fillna("")
    out.loc[out["status"] == "missing", "error"] = "no measured row for this request"
    out["compared"] = out["status"].eq("ok")
    for name in METRICS:
        meas, sim = out[f"measured_{name}_ms"], out[f"simulated_{name}_ms"]
        ok = out["compared"] & meas.gt(0) & sim.notna()
        out[f"{name}_error_pct"] = np.where(ok, (sim - meas) / meas * 100.0, np.nan)
        out[f"{name}_ratio"] = np.where(ok, sim / meas, np.nan)
    order = (["request_id", "status", "compared", "error", "arrival_offset_s", "prompt_tokens", "output_tokens"]
             + [c for name in METRICS for c in (f"measured_{name}_ms", f"simulated_{name}_ms",
                                                f"{name}_error_pct", f"{name}_ratio")]
             + ["measured_accepted_tokens", "simulated_accepted_tokens", "measured_decode_steps",
                "simulated_decode_steps"] + (["lateness_ms"] if "lateness_ms" in out else []))
    return out[order].reset_index(drop=True)


def _pct(x: pd.Series, q: float) -> float:
    x = x.dropna()
    return float(np.percentile(x, q)) if len(x) else math.nan


def _div(a: float, b: float) -> float:
    return a / b if b and not math.isnan(a) and not math.isnan(b) else math.nan


def summarize(comp: pd.DataFrame, cal: Optional[Calibration] = None, sim_summary: Optional[Dict] = None,
              sim_config: Optional[RunConfig] = None) -> Dict:
    """Statistics of the comparison: exclusions, errors and ratios per metric, acceptance measured vs used."""
    ok = comp[comp["compared"]]
    excluded = comp[~comp["compared"]]
    out: Dict = {
        "requests": int(len(comp)),
        "compared": int(len(ok)),
        "excluded": {str(k): int(v) for k, v in excluded["status"].value_counts().items()},
        "excluded_requests": [
            {"request_id": r.request_id, "status": r.status, "error": r.error}
            for r in excluded.head(100).itertuples(index=False)
        ],
        "metrics": {},
    }
    for name in METRICS:
        meas, sim = ok[f"measured_{name}_ms"], ok[f"simulated_{name}_ms"]
        err = ok[f"{name}_error_pct"]
        mp50, sp50, mp90, sp90 = _pct(meas, 50), _pct(sim, 50), _pct(meas, 90), _pct(sim, 90)
        out["metrics"][name] = {
            "n": int(err.notna().sum()),
            "median_abs_pct_error": _pct(err.abs(), 50),
            "median_pct_error": _pct(err, 50),
            "p90_abs_pct_error": _pct(err.abs(), 90),
            "measured_p50_ms": mp50, "simulated_p50_ms": sp50, "ratio_p50": _div(sp50, mp50),
            "measured_p90_ms": mp90, "simulated_p90_ms": sp90, "ratio_p90": _div(sp90, mp90),
            "median_request_ratio": _pct(ok[f"{name}_ratio"], 50),
        }
    acc: Dict = {}
    mv, sv = ok["measured_decode_steps"].sum(), ok["simulated_decode_steps"].sum()
    acc["measured_tokens_per_decode_chunk"] = _div(ok["measured_accepted_tokens"].sum() + mv, mv)
    acc["simulated_tokens_per_verify_step"] = _div(ok["simulated_accepted_tokens"].sum() + sv, sv)
    if cal is not None:
        acc["measured"] = {
            "alpha": cal.alpha, "mean_acceptance_length": cal.mean_acceptance_length,
            "per_position": cal.per_position, "draft_acceptance_rate": cal.draft_acceptance_rate,
            "num_speculative_tokens": cal.num_speculative_tokens, "num_drafts": cal.num_drafts,
            "num_gpu_blocks": cal.num_gpu_blocks,
        }
    if sim_config is not None:
        spec = sim_config.speculative
        used = spec.acceptance_input() if spec.enabled else None
        acc["used"] = {
            "method": spec.method if spec.enabled else "none",
            "num_speculative_tokens": spec.num_speculative_tokens if spec.enabled else 0,
            "input": used,
            "value": getattr(spec, used) if used else None,
            "num_blocks": sim_config.scheduler.num_blocks,
        }
    if sim_summary is not None:
        e = sim_summary.get("expected_accepted_per_full_step")
        acc.setdefault("used", {})["mean_acceptance_length"] = 1.0 + e if e is not None else None
        acc["used"]["kv_blocks"] = sim_summary.get("kv_blocks_target")
    out["acceptance"] = acc
    return out
