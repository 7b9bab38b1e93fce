"""The calibration's check: the builder's error against Vidur's measured A100 profiles, and its report.

Per op group (:func:`error_table`): median and p90 |% error| and the median signed
error of the current parameters on every measured row, for the fitted model
(Llama-2-7B) and the held-out one (Llama-2-70B). Whole layer (:func:`layer_table`):
the per-layer time of typical batches summed from the measured ops vs from the
builder's ops. :func:`format_report` is the text ``python -m vidur_specdec.profiles
calibrate`` prints; :data:`TARGETS` the held-out errors it must meet. The
parameters, the measured data and the fit: :mod:`~vidur_specdec.costs.profiles.calibrate`.
"""

from __future__ import annotations

import math
from typing import Dict, Mapping, Optional, Tuple

import numpy as np
import pandas as pd

from vidur_specdec.costs.ops import LINEAR_OPS
from vidur_specdec.costs.profiles import params as P
from vidur_specdec.costs.profiles.builder import attention_op_times, device_fields, mlp_op_times
from vidur_specdec.costs.profiles.calibrate import DEVICE, SPEC, ModelData, _group_rows, _valid

# Ops that make up one layer's time in the simulator (vidur_specdec.costs.ops.LINEAR_OPS)
# plus the attention kernel; emb runs once per model, not per layer.
LAYER_LINEAR_OPS = LINEAR_OPS

# Held-out targets (median |% error| on Llama-2-70B) the calibration must meet.
TARGETS = {"gemm": 10.0, "elementwise": 10.0, "attn_decode": 10.0, "attn_prefill": 15.0,
           "layer_decode": 10.0, "layer_prefill": 10.0}



def _stats(pred: np.ndarray, meas: np.ndarray) -> Dict[str, float]:
    ok = _valid(pred, meas)
    rel = pred[ok] / meas[ok] - 1.0
    if not len(rel):
        return {"rows": 0, "median": math.nan, "p90": math.nan, "signed": math.nan}
    return {
        "rows": int(len(rel)),
        "median": float(np.median(np.abs(rel)) * 100),
        "p90": float(np.percentile(np.abs(rel), 90) * 100),
        "signed": float(np.median(rel) * 100),
    }


def error_table(measured: Mapping[str, ModelData], efficiency: Optional[Mapping] = None,
                device: str = DEVICE, per_op: bool = False) -> pd.DataFrame:
    """Median / p90 |% error| and median signed % error per op group, model and tp.

    Rows with ``tp == 0`` pool every tp of that model. With ``per_op``, each op of
    a group also gets its own rows.
    """
    eff = P.EFFICIENCY if efficiency is None else efficiency
    dev = device_fields(device)
    out = []
    for role, data in (("fit", measured["fit"]), ("held-out", measured["held_out"])):
        for group in SPEC:
            rows = _group_rows(data, group, eff, dev)
            if not rows:
                continue
            labels = [(group, None)] + ([(group, op) for op in SPEC[group][1]] if per_op and len(SPEC[group][1]) > 1 else [])
            for g, op in labels:
                sel = [r for r in rows if op is None or r[1] == op]
                tps = sorted({r[0] for r in sel})
                for tp in tps + ([0] if len(tps) > 1 else []):
                    chosen = [r for r in sel if tp == 0 or r[0] == tp]
                    pred = np.concatenate([r[2] for r in chosen])
                    meas = np.concatenate([r[3] for r in chosen])
                    out.append({"role": role, "model": data.spec.name, "group": g, "op": op or "(all)",
                                "tp": tp, **_stats(pred, meas)})
    return pd.DataFrame(out)


def _layer_points(data: ModelData, tp: int) -> Tuple[pd.DataFrame, pd.DataFrame]:
    """Measured per-layer times of typical batches: (decode rows, prefill rows).

    Decode: batch in the mlp.csv token grid (1, 2, 4, 8, 16, ..., 128) at every measured
    context 128..4096. Prefill: one 512-token chunk at every measured context 0..3584.
    The layer is the LAYER_LINEAR_OPS at the step's token count plus the attention op.
    """
    mlp = data.mlp[tp].groupby("num_tokens")[[f"time_stats.{op}.median" for op in LAYER_LINEAR_OPS]].mean()
    linear = mlp.sum(axis=1)
    att = data.attention[tp]
    dec = att[(~att["is_prefill"]) & att["batch_size"].isin(linear.index) & att["batch_size"].between(1, 128)
              & att["kv_cache_size"].between(128, 4096)]
    dec = dec.groupby(["batch_size", "kv_cache_size"], as_index=False)["time_stats.attn_decode.median"].mean()
    dec["measured"] = dec["time_stats.attn_decode.median"] + linear.loc[dec["batch_size"]].to_numpy()
    pre = att[att["is_prefill"] & (att["prefill_chunk_size"] == 512) & att["kv_cache_size"].between(0, 3584)]
    pre = pre.groupby("kv_cache_size", as_index=False)["time_stats.attn_prefill.median"].mean()
    pre["measured"] = pre["time_stats.attn_prefill.median"] + float(linear.loc[512])
    return dec, pre


def layer_table(measured: Mapping[str, ModelData], efficiency: Optional[Mapping] = None,
                device: str = DEVICE) -> pd.DataFrame:
    """Whole-layer check: measured vs modelled per-layer time of typical batches.

    70B at TP 2 (held out) and 7B at TP 1 (fitted). Decode rows are also split by batch.
    """
    eff = P.EFFICIENCY if efficiency is None else efficiency
    dev = device_fields(device)
    out = []
    for role, data, tp in (("held-out", measured["held_out"], 2), ("fit", measured["fit"], 1)):
        if tp not in data.attention or tp not in data.mlp:
            continue
        dec, pre = _layer_points(data, tp)
        lin_dec = mlp_op_times(data.spec, dev, tp, dec["batch_size"].to_numpy(), eff)
        att_dec = attention_op_times(data.spec, dev, tp, dec["batch_size"].to_numpy(),
                                     dec["kv_cache_size"].to_numpy(), 0, eff)["attn_decode"]
        pred_dec = att_dec + sum(lin_dec[op] for op in LAYER_LINEAR_OPS)
        lin_pre = mlp_op_times(data.spec, dev, tp, np.full(len(pre), 512), eff)
        att_pre = attention_op_times(data.spec, dev, tp, 1, pre["kv_cache_size"].to_numpy(), 512, eff)["attn_prefill"]
        pred_pre = att_pre + sum(lin_pre[op] for op in LAYER_LINEAR_OPS)
        bsz = dec["batch_size"].to_numpy()
        meas_dec = dec["measured"].to_numpy()
        cases = [
            ("layer_decode", "batch 1-128, context 128-4k", np.ones(len(dec), bool), pred_dec, meas_dec),
            ("layer_decode", "  batch 1-4", bsz <= 4, pred_dec, meas_dec),
            ("layer_decode", "  batch 8-32", (bsz >= 8) & (bsz <= 32), pred_dec, meas_dec),
            ("layer_decode", "  batch 40-128", bsz >= 40, pred_dec, meas_dec),
            ("layer_prefill", "512-token chunk, context 0-3.5k", np.ones(len(pre), bool), pred_pre,
             pre["measured"].to_numpy()),
        ]
        for g, label, mask, p, m in cases:
            st = _stats(p[mask], m[mask])
            st["max"] = float(np.max(np.abs(p[mask] / m[mask] - 1)) * 100) if mask.any() else math.nan
            out.append({"role": role, "model": data.spec.name, "tp": tp, "group": g, "case": label, **st})
    return pd.DataFrame(out)


def summary(errors: pd.DataFrame, layers: pd.DataFrame) -> pd.DataFrame:
    """One row per group: pooled median |% error| on the fit model and the held-out one, and the target."""
    rows = []
    for group in ("gemm", "elementwise", "attn_decode", "attn_prefill"):
        e = errors[(errors["group"] == group) & (errors["op"] == "(all)")]
        def pooled(role):
            x = e[e["role"] == role]
            x = x[x["tp"] == 0] if (x["tp"] == 0).any() else x
            return float(x["median"].iloc[0]) if len(x) else math.nan
        rows.append({"group": group, "fit": pooled("fit"), "held_out": pooled("held-out"), "target": TARGETS[group]})
    for group in ("layer_decode", "layer_prefill"):
        x = layers[(layers["group"] == group) & ~layers["case"].str.startswith(" ")]
        get = lambda role: float(x[x["role"] == role]["median"].iloc[0]) if (x["role"] == role).any() else math.nan
        rows.append({"group": group, "fit": get("fit"), "held_out": get("held-out"), "target": TARGETS[group]})
    return pd.DataFrame(rows)


def _short(name: str) -> str:
    return name.split("/")[-1].replace("-hf", "")


def format_report(errors: pd.DataFrame, layers: pd.DataFrame) -> str:
    """The printed report: per-group table (fit and held-out), whole-layer check, summary."""
    lines = []
    e = errors.copy()
    e["model"] = e["model"].map(_short)
    e["tp"] = e["tp"].map(lambda t: "all" if t == 0 else str(t))
    e = e.rename(columns={"median": "median|%|", "p90": "p90|%|", "signed": "signed%"})
    lines.append("Per-op-group error (model evaluated at each measured row; median/p90 of |pred/meas - 1|;")
    lines.append("signed: median of pred/meas - 1, > 0 = model too slow)")
    lines.append(e.to_string(index=False, float_format=lambda x: f"{x:.1f}"))
    lines.append("")
    lines.append("Whole-layer check (sum of the simulator's per-layer ops + attention; measured ops vs modelled ops)")
    l = layers.copy()
    l["model"] = l["model"].map(_short)
    l = l.rename(columns={"median": "median|%|", "p90": "p90|%|", "signed": "signed%", "max": "max|%|"})
    lines.append(l.to_string(index=False, float_format=lambda x: f"{x:.1f}"))
    lines.append("")
    lines.append("Summary: median |% error|, fit = Llama-2-7B (all tp), held out = Llama-2-70B (all tp; attention tp 2)")
    s = summary(errors, layers)
    s["met"] = np.where(s["held_out"] <= s["target"], "yes", "NO")
    lines.append(s.to_string(index=False, float_format=lambda x: f"{x:.1f}"))
    return "\n".join(lines)
