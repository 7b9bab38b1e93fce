"""Engine step logs: what is derived from their tables, to check the simulator against them.

The tables are read by :mod:`vidur_specdec.validate.steplog_read` (its layout:
``ROOT/TABLE/GPU/TARGET/SPLIT/DRAFTER-kK/...``, tables ``steps``, ``tokens``,
``requests``, ``runs`` and ``outputs``).

What is derived (all per run key ``gpu, target, split, drafter, k, c, start``):

* acceptance per position from ``steps.hist`` (requests by tokens committed
  in the step: index i = accepted guesses + 1). Requests that do not decode
  (``num_reqs − decode_reqs``) commit 0 tokens (a prefill chunk) or 1 (the
  last chunk, whose sample is the first token); the latter are taken off
  ``hist[1]`` (their number is ``num_reqs − decode_reqs − hist[0]``). A
  decoding request that carried no guesses (an n-gram miss) still counts as a
  draft that accepted nothing: ``drafted_fraction`` (guesses carried /
  (decoding requests × k)) says how often that happened.
* acceptance per position from ``tokens`` (one row per guess, ``accepted``
  true when kept), per category (from a ``category`` column, or by joining
  ``outputs`` / ``requests`` on ``req``) and over all: ``n_j`` = guesses kept
  at position j, ``n_0`` = drafts; conditional rate ``n_j / n_{j−1}``.
* step durations, from the GPU timestamps (ms from the step's start):
  ``fwd_ms = t_fwd_end − t_fwd`` (target forward), ``lm_head_ms = t_lg1 −
  t_lg0``, ``sampling_ms`` = from ``t_samp`` to the drafter's start
  (``t_d0``), or to ``t_end`` without a drafter, ``drafter_ms = t_d1 −
  t_d0``, ``step_ms = t_end``, ``other_ms`` = the rest of ``step_ms``.
* a step-level check: each step's composition (num_tokens, decode_reqs,
  spec_tokens, prefill_tokens, ctx_tokens) priced by the simulator's cost
  model (:mod:`vidur_specdec.validate.cost`, whose notes give the
  approximation and its direction); predicted target time vs ``fwd_ms`` and
  predicted step time vs ``step_ms``.
* per-request TTFT/TPOT/E2E from ``requests`` chunk sizes and times
  (``chunks``, ``times``; times are taken as seconds since the request was
  sent unless a send-time column — ``sent_at``, ``sent``, ``send_time``,
  ``t_send``, ``start_time`` — is present; Unix-epoch times without one give
  no TTFT/E2E), in the column names of ``measured.csv``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import pandas as pd

from vidur_specdec.speculation.steplog_tables import truth_values
from vidur_specdec.validate.calibrate import alpha_from_mean_acceptance_length
from vidur_specdec.validate.common import ValidateError
from vidur_specdec.validate.cost import price_sums
from vidur_specdec.validate.steplog_read import KEY, TABLES, read_table

HIST_LEN = 17
SEND_COLUMNS = ("sent_at", "sent", "send_time", "t_send", "start_time")


# --------------------------------------------------------------------------- parsing helpers


def parse_list(v) -> list:
    """A list cell: a list/array (Parquet), JSON text, or comma/space-separated numbers."""
    if isinstance(v, (list, tuple, np.ndarray)):
        return list(v)
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return []
    s = str(v).strip()
    if s.startswith("["):
        try:
            return json.loads(s)
        except json.JSONDecodeError:
            s = s.strip("[]")
    return [float(x) for x in s.replace(",", " ").split()]


def hist_matrix(col: pd.Series) -> np.ndarray:
    """``hist`` column → (steps × 17) integer array."""
    out = np.zeros((len(col), HIST_LEN), dtype=np.int64)
    for i, v in enumerate(col):
        h = parse_list(v)[:HIST_LEN]
        out[i, :len(h)] = np.asarray(h, dtype=float).astype(np.int64)
    return out


def _groups(df: pd.DataFrame):
    keys = [c for c in KEY if c in df]
    return df.groupby(keys, sort=True, dropna=False), keys


def _rates(n: Sequence[float]) -> Tuple[List[float], List[float]]:
    """Conditional and unconditional rates from n_0 (drafts), n_1..n_k (kept at position j)."""
    cond, unc = [], []
    for j in range(1, len(n)):
        cond.append(n[j] / n[j - 1] if n[j - 1] > 0 else math.nan)
        unc.append(n[j] / n[0] if n[0] > 0 else math.nan)
    return cond, unc


def _acceptance_rows(key: Dict, source: str, category: str, n: Sequence[float], extra: Dict) -> Tuple[List, Dict]:
    k = len(n) - 1
    cond, unc = _rates(n)
    rows = [{**key, "source": source, "category": category, "position": j, "reached": n[j],
             "conditional_rate": cond[j - 1], "unconditional_rate": unc[j - 1]} for j in range(1, k + 1)]
    drafts = n[0]
    mal = 1.0 + sum(n[1:]) / drafts if drafts > 0 else math.nan
    summary = {**key, "source": source, "category": category, "drafts": drafts, "mean_acceptance_length": mal,
               "alpha": alpha_from_mean_acceptance_length(mal, k) if drafts > 0 and k > 0 else math.nan, **extra}
    return rows, summary


# --------------------------------------------------------------------------- acceptance


def acceptance_from_hist(steps: pd.DataFrame) -> Tuple[pd.DataFrame, pd.DataFrame]:
    """Per-position acceptance from ``steps.hist`` (see the module notes). Returns (positions, summary)."""
    rows, summ = [], []
    g, keys = _groups(steps)
    for kv, df in g:
        key = dict(zip(keys, kv if isinstance(kv, tuple) else (kv,)))
        k = int(key.get("k", 0) or 0)
        dec = df[df["decode_reqs"] > 0]
        if k <= 0 or dec.empty:
            continue
        h = hist_matrix(dec["hist"])
        non_decode_one = np.clip(dec["num_reqs"].to_numpy() - dec["decode_reqs"].to_numpy() - h[:, 0], 0, None)
        h[:, 1] = np.clip(h[:, 1] - non_decode_one, 0, None)
        c = h[:, 1:].sum(axis=0).astype(float)  # c[i] = decoding requests that committed i + 1 tokens
        n = [float(c[j:].sum()) for j in range(k + 1)]  # n[j] = requests that accepted >= j guesses
        drafted = float(dec["spec_tokens"].sum()) / (float(dec["decode_reqs"].sum()) * k)
        r, s = _acceptance_rows(key, "hist", "all", n, {"drafted_fraction": drafted})
        rows += r
        summ.append(s)
    return pd.DataFrame(rows), pd.DataFrame(summ)


def _categories(tokens: pd.DataFrame, by_req: Optional[pd.DataFrame]) -> pd.Series:
    if "category" in tokens:
        return tokens["category"].astype(str)
    if by_req is not None and "req" in by_req and "category" in by_req:
        keys = [c for c in KEY if c in tokens and c in by_req] + ["req"]
        m = tokens[keys].merge(by_req[keys + ["category"]].drop_duplicates(keys), on=keys, how="left")
        return m["category"].fillna("unknown").astype(str).set_axis(tokens.index)
    return pd.Series("all", index=tokens.index)


def acceptance_from_tokens(tokens: pd.DataFrame, by_req: Optional[pd.DataFrame] = None
                           ) -> Tuple[pd.DataFrame, pd.DataFrame]:
    """Per-position acceptance from ``tokens``, per category and over all. Returns (positions, summary)."""
    t = tokens.copy()
    t["accepted"] = truth_values(t["accepted"])
    t["draft_pos"] = t["draft_pos"].astype(int)
    t["category"] = _categories(t, by_req)
    rows, summ = [], []
    g, keys = _groups(t)
    for kv, df in g:
        key = dict(zip(keys, kv if isinstance(kv, tuple) else (kv,)))
        k = int(key.get("k", 0) or 0) or int(df["draft_pos"].max())
        cats = [("all", df)] + ([(c, d) for c, d in df.groupby("category")] if df["category"].nunique() > 1
                                or df["category"].iloc[0] != "all" else [])
        for cat, d in cats:
            drafts = float((d["draft_pos"] == 1).sum())
            kept = d[d["accepted"]].groupby("draft_pos").size()
            n = [drafts] + [float(kept.get(j, 0)) for j in range(1, k + 1)]
            r, s = _acceptance_rows(key, "tokens", str(cat), n, {"guesses": int(len(d))})
            rows += r
            summ.append(s)
    return pd.DataFrame(rows), pd.DataFrame(summ)


# --------------------------------------------------------------------------- step times


def step_durations(steps: pd.DataFrame) -> pd.DataFrame:
    """Per-step durations (ms) from the GPU timestamps; NaN where a timestamp is missing."""
    def col(name):
        return pd.to_numeric(steps[name], errors="coerce") if name in steps else pd.Series(np.nan, index=steps.index)

    t_fwd, t_fwd_end, t_lg0, t_lg1 = col("t_fwd"), col("t_fwd_end"), col("t_lg0"), col("t_lg1")
    t_samp, t_end, t_d0, t_d1 = col("t_samp"), col("t_end"), col("t_d0"), col("t_d1")
    out = pd.DataFrame(index=steps.index)
    out["fwd_ms"] = t_fwd_end - t_fwd
    out["lm_head_ms"] = t_lg1 - t_lg0
    out["sampling_ms"] = t_d0.where(t_d0.notna(), t_end) - t_samp
    out["drafter_ms"] = (t_d1 - t_d0).fillna(0.0).where(t_end.notna())
    out["step_ms"] = t_end
    out["other_ms"] = out["step_ms"] - out[["fwd_ms", "lm_head_ms", "sampling_ms", "drafter_ms"]].fillna(0).sum(axis=1)
    out["since_prev_ms"] = col("since_prev_ms")
    return out


def step_time_summary(steps: pd.DataFrame, durations: pd.DataFrame) -> pd.DataFrame:
    """Per run: step count and median / mean / p90 of each duration."""
    df = pd.concat([steps[[c for c in KEY if c in steps]], durations], axis=1)
    g, keys = _groups(df)
    rows = []
    for kv, d in g:
        row = dict(zip(keys, kv if isinstance(kv, tuple) else (kv,)))
        row["steps"] = len(d)
        for c in durations.columns:
            x = d[c].dropna()
            row[f"{c}_median"] = float(x.median()) if len(x) else math.nan
            row[f"{c}_mean"] = float(x.mean()) if len(x) else math.nan
            row[f"{c}_p90"] = float(np.percentile(x, 90)) if len(x) else math.nan
        rows.append(row)
    return pd.DataFrame(rows)


def step_check(steps: pd.DataFrame, durations: pd.DataFrame, pricer, max_steps: Optional[int] = None
               ) -> pd.DataFrame:
    """Each step's sums priced by the simulator's step pricer (:mod:`vidur_specdec.validate.cost`), beside its
    measured times."""
    idx = steps.index
    if max_steps is not None:
        g, _ = _groups(steps)
        picked = []
        for _, d in g:
            if len(d) > max_steps:
                d = d.iloc[np.linspace(0, len(d) - 1, max_steps).round().astype(int)]
            picked.append(d.index)
        idx = picked[0].append(picked[1:]) if picked else idx
    s = steps.loc[idx]
    pt, pd_, px = [], [], []
    for r in s[["num_reqs", "num_tokens", "decode_reqs", "spec_tokens", "prefill_tokens", "ctx_tokens"]].itertuples(
            index=False):
        price = price_sums(pricer, int(r.num_reqs), int(r.decode_reqs), int(r.spec_tokens), int(r.prefill_tokens),
                           int(r.ctx_tokens), num_tokens=int(r.num_tokens))
        pt.append(price.verify_ms)
        pd_.append(price.draft_ms)
        px.append(price.lm_head_ms + price.sampling_ms + price.overhead_ms)
    out = s[[c for c in KEY if c in s] + [c for c in ("wall", "num_reqs", "num_tokens", "decode_reqs", "spec_tokens",
                                                      "prefill_tokens", "ctx_tokens", "padded_tokens") if c in s]].copy()
    out["kind"] = np.where(s["prefill_tokens"] <= 0, "decode",
                           np.where(s["decode_reqs"] <= 0, "prefill", "mixed"))
    out["predicted_target_ms"] = pt
    out["predicted_draft_ms"] = pd_
    out["predicted_step_ms"] = out["predicted_target_ms"] + out["predicted_draft_ms"] + np.asarray(px, float)
    dur = durations.loc[idx]
    out["measured_fwd_ms"] = dur["fwd_ms"]
    out["measured_drafter_ms"] = dur["drafter_ms"]
    out["measured_step_ms"] = dur["step_ms"]
    out["target_error_pct"] = (out["predicted_target_ms"] - out["measured_fwd_ms"]) / out["measured_fwd_ms"] * 100
    out["step_error_pct"] = (out["predicted_step_ms"] - out["measured_step_ms"]) / out["measured_step_ms"] * 100
    return out.reset_index(drop=True)


def step_check_summary(check: pd.DataFrame) -> pd.DataFrame:
    """Per run and step kind (decode, mixed, prefill, all): median |error| and median ratio."""
    rows = []
    g, keys = _groups(check)
    for kv, d in g:
        key = dict(zip(keys, kv if isinstance(kv, tuple) else (kv,)))
        for kind, dk in [("all", d)] + list(d.groupby("kind")):
            row = {**key, "kind": kind, "steps": len(dk)}
            for what, pred, meas in (("target", "predicted_target_ms", "measured_fwd_ms"),
                                     ("step", "predicted_step_ms", "measured_step_ms")):
                ok = dk[meas] > 0
                err = ((dk[pred] - dk[meas]) / dk[meas] * 100)[ok]
                row[f"{what}_median_abs_pct_error"] = float(err.abs().median()) if ok.any() else math.nan
                row[f"{what}_median_ratio"] = float((dk[pred] / dk[meas])[ok].median()) if ok.any() else math.nan
                row[f"{what}_measured_median_ms"] = float(dk[meas].median()) if ok.any() else math.nan
                row[f"{what}_predicted_median_ms"] = float(dk[pred].median())
            rows.append(row)
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- per-request latency


def request_latency(requests: pd.DataFrame, times_unit: str = "s") -> pd.DataFrame:
    """TTFT / TPOT / E2E per request from chunk sizes and times, in ``measured.csv`` column names."""
    if times_unit not in ("s", "ms"):
        raise ValidateError(f"--times-unit: must be s or ms, got {times_unit!r}")
    scale = 1e3 if times_unit == "s" else 1.0
    send_col = next((c for c in SEND_COLUMNS if c in requests), None)
    rows = []
    for r in requests.to_dict("records"):
        sizes = [int(x) for x in parse_list(r.get("chunks"))]
        times = [float(x) for x in parse_list(r.get("times"))]
        n = sum(sizes) if sizes else len(parse_list(r.get("output_ids")))
        if send_col is not None:
            times = [t - float(r[send_col]) for t in times]
            relative = True
        else:
            relative = bool(times) and times[0] < 1e8
        # the first chunk that carries tokens and the last one
        tok = [(t, s) for t, s in zip(times, sizes) if s > 0] if sizes else list(zip(times, [1] * len(times)))
        ok = bool(tok) and len(times) == len(sizes) if sizes else bool(tok)
        first, last = (tok[0][0], tok[-1][0]) if tok else (math.nan, math.nan)
        rows.append({
            **{c: r.get(c) for c in KEY if c in r},
            "request_id": r.get("question_id", r.get("req")),
            "category": r.get("category"),
            "prompt_tokens": r.get("prompt_tokens"),
            "output_tokens": n,
            "ttft_ms": first * scale if ok and relative else math.nan,
            "tpot_ms": (last - first) / (n - 1) * scale if ok and n > 1 else math.nan,
            "e2e_ms": last * scale if ok and relative else math.nan,
            "decode_steps": len(tok) - 1 if ok else math.nan,
            "accepted_tokens": n - len(tok) if ok else math.nan,
            "chunks": len(tok),
            "status": "ok" if ok else "error",
        })
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- everything


def analyze(root, pricer=None, filters: Optional[Dict] = None, max_steps: Optional[int] = None,
            times_unit: str = "s") -> Dict[str, pd.DataFrame]:
    """Read every table under ``root`` and derive all outputs; keys are output file stems."""
    root = Path(root).expanduser()
    if not root.is_dir():
        raise ValidateError(f"--root: not a folder: {root}")
    tables = {t: read_table(root, t, filters) for t in TABLES}
    if all(v is None for v in tables.values()):
        raise ValidateError(f"--root: no step-log tables ({', '.join(TABLES)}) under {root}")
    used = {k: v for k, v in (filters or {}).items() if v is not None}
    if used and all(v is None or not len(v) for v in tables.values()):
        given = " ".join(f"--{k} {v}" for k, v in used.items())
        raise ValidateError(f"{given}: no step-log run under {root} matches (names match in any case); "
                            "see the folder names or run without the filter to list runs.csv")
    out: Dict[str, pd.DataFrame] = {}
    pos, summ = [], []
    steps = tables["steps"]
    if steps is not None and len(steps):
        need = {"num_reqs", "num_tokens", "decode_reqs", "spec_tokens", "prefill_tokens", "ctx_tokens"}
        missing = need - set(steps.columns)
        if missing:
            raise ValidateError(f"--root: steps table lacks columns {sorted(missing)}")
        if "hist" in steps:
            p, s = acceptance_from_hist(steps)
            pos.append(p)
            summ.append(s)
        dur = step_durations(steps)
        out["step_times"] = step_time_summary(steps, dur)
        if pricer is not None:
            chk = step_check(steps, dur, pricer, max_steps)
            out["step_check"] = chk
            out["step_check_summary"] = step_check_summary(chk)
    tokens = tables["tokens"]
    if tokens is not None and len(tokens):
        by_req = tables["outputs"] if tables["outputs"] is not None else tables["requests"]
        p, s = acceptance_from_tokens(tokens, by_req)
        pos.append(p)
        summ.append(s)
    if pos:
        out["acceptance"] = pd.concat(pos, ignore_index=True)
        out["acceptance_summary"] = pd.concat(summ, ignore_index=True)
    if tables["requests"] is not None and len(tables["requests"]) and "times" in tables["requests"]:
        out["request_latency"] = request_latency(tables["requests"], times_unit)
    if tables["runs"] is not None:
        out["runs"] = tables["runs"]
    return out
