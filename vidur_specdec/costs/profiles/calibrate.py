"""Calibrate the analytical profile builder against Vidur's measured A100 profiles.

``python -m vidur_specdec.profiles calibrate [--shared DIR] [--write] [--per-op]``

* **Fit** (only with ``--write``, or ``fit()`` from Python): every parameter of
  ``params.EFFICIENCY`` marked *fitted* in :data:`SPEC` is fitted by bounded
  least squares on log time (``scipy.optimize.least_squares``, ``soft_l1`` loss),
  one op group at a time, from the fixed start point in :data:`SPEC`, on
  **Llama-2-7B only**: every tensor-parallel size of its ``mlp.csv`` and of its
  ``attention.sample.csv``. The fitted values are rounded to 4 significant digits
  and written into ``params.py`` between its ``BEGIN/END CALIBRATED`` markers.
* **Check** (always): prints the error of the current parameters per op group, for
  the fitted model (7B) and the held-out one (Llama-2-70B: ``mlp.csv`` at TP 1/2/4/8,
  ``attention.csv`` at TP 2), then the whole-layer check: the per-layer time of
  typical batches summed from the measured ops vs from the builder's ops.

The measured files are read from ``../shared/vidur-profiles`` (beside the
checkout) and never copied into the repository.
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import pandas as pd

from vidur_specdec.architectures.models import ModelSpec, get_model
from vidur_specdec.costs.ops import LINEAR_OPS
from vidur_specdec.costs.profiles import params as P
from vidur_specdec.costs.profiles.builder import GEMM_OPS, ELEMENTWISE_OPS, ProfileError, attention_op_times, device_fields, mlp_op_times

REPO = Path(__file__).resolve().parents[3]
DEFAULT_SHARED = REPO.parent / "shared" / "vidur-profiles"
PARAMS_FILE = Path(__file__).resolve().parent / "params.py"
DEVICE = "a100"
FIT_MODEL = "meta-llama/Llama-2-7b-hf"
HELD_OUT_MODEL = "meta-llama/Llama-2-70b-hf"
FIT_FILES = ("mlp.csv", "attention.sample.csv")

# Ops that make up one layer's time in the simulator (vidur_specdec.costs.ops.LINEAR_OPS)
# plus the attention kernel; emb runs once per model, not per layer.
LAYER_LINEAR_OPS = LINEAR_OPS

# Held-out targets (median |% error| on Llama-2-70B) the calibration must meet.
TARGETS = {"gemm": 10.0, "elementwise": 10.0, "attn_decode": 10.0, "attn_prefill": 15.0,
           "layer_decode": 10.0, "layer_prefill": 10.0}


@dataclass(frozen=True)
class Param:
    """One entry of ``params.EFFICIENCY``: start point and bounds of the fit, or a fixed value."""

    key: str  # "group.name"
    start: float
    lo: float = math.nan
    hi: float = math.nan
    unit: str = "-"
    doc: str = ""

    @property
    def fitted(self) -> bool:
        return not math.isnan(self.lo)


# The fit groups, in fit order: name -> (parameters, ops fitted on). A parameter's
# bounds keep it physical (efficiencies <= 1 unless they describe cache hits) and
# keep the model monotone (split_eff >= decode_split_threshold).
SPEC: Dict[str, Tuple[Tuple[Param, ...], Tuple[str, ...]]] = {
    "gemm": (
        (
            Param("gemm.compute_eff_max", 0.7, 0.3, 1.0, "-", "share of peak FLOP/s reached by the GEMM tiles"),
            Param("gemm.mem_eff", 0.8, 0.3, 1.0, "-", "share of peak HBM bandwidth streaming the weights"),
            Param("gemm.wave_weight", 0.2, 0.0, 1.0, "-",
                  "weight of the wave-quantised compute time (whole waves of SMs x 128x128 tiles) vs the ideal one"),
            Param("gemm.overlap_exp", 4.0, 1.0, 50.0, "-",
                  "power-mean exponent joining compute and memory time (1 = sum, large = max)"),
            Param("gemm.launch_ms", 0.005, 0.0, 0.05, "ms", "per GEMM kernel"),
        ),
        GEMM_OPS,
    ),
    "elementwise": (
        (
            Param("l2.resident_fraction", 0.25, 0.0, 1.0, "-",
                  "share of the device's L2 whose bytes are served as L2 hits by a memory-bound op"),
            Param("l2.speedup", 2.0, 1.0, 10.0, "-", "how much faster those bytes move than HBM bytes"),
            Param("token_block.bw", 10e9, 1e9, 200e9, "bytes/s",
                  "bandwidth of one thread block of a one-block-per-token kernel (norm, rope, act)"),
            Param("emb.mem_eff", 0.2, 0.02, 1.0, "-", "embedding lookup (vocab-parallel): share of HBM bandwidth"),
            Param("emb.launch_ms", 0.003, 0.0, 0.02, "ms", "embedding lookup: fixed cost"),
            Param("emb.shard_read", 0.5, 0.0, 2.0, "-",
                  "embedding rows read per output row, times tp (the shard holds 1/tp of the vocabulary)"),
            Param("norm.mem_eff", 0.4, 0.05, 1.0, "-", "RMSNorm (both norms): share of HBM bandwidth"),
            Param("norm.launch_ms", 0.003, 0.0, 0.02, "ms", "RMSNorm: fixed cost"),
            Param("attn_rope.mem_eff", 0.4, 0.05, 1.0, "-", "rotary embedding of q and k: share of HBM bandwidth"),
            Param("attn_rope.launch_ms", 0.003, 0.0, 0.02, "ms", "rotary embedding: fixed cost"),
            Param("mlp_act.mem_eff", 0.5, 0.05, 1.0, "-", "SiLU(gate) x up: share of HBM bandwidth"),
            Param("mlp_act.launch_ms", 0.003, 0.0, 0.02, "ms", "SiLU(gate) x up: fixed cost"),
            Param("add.mem_eff", 0.8, 0.05, 1.0, "-", "residual add: share of HBM bandwidth"),
            Param("add.launch_ms", 0.002, 0.0, 0.02, "ms", "residual add: fixed cost"),
        ),
        ELEMENTWISE_OPS,
    ),
    "attn_output_reshape": (
        (
            Param("attn_output_reshape.mem_eff", 0.8, 0.05, 1.0, "-",
                  "copy of the attention output (not used by the simulator): share of HBM bandwidth"),
            Param("attn_output_reshape.launch_ms", 0.002, 0.0, 0.02, "ms", "copy of the attention output: fixed cost"),
        ),
        ("attn_output_reshape",),
    ),
    "attn_decode": (
        (
            Param("attn_decode.mem_eff", 0.9, 0.3, 1.0, "-",
                  "share of HBM bandwidth streaming K/V within full waves of thread blocks"),
            Param("attn_decode.split_eff", 0.9, P.KERNEL["decode_split_threshold"], 1.0, "-",
                  "extra efficiency factor when FA2 splits the KV sequence (few blocks)"),
            Param("attn_decode.wave_ms", 0.005, 0.0, 0.05, "ms",
                  "fixed cost per wave of thread blocks (load q and block table, write out)"),
            Param("attn_decode.launch_ms", 0.006, 0.0, 0.05, "ms", "per decode attention call"),
        ),
        ("attn_decode",),
    ),
    "attn_prefill": (
        (
            Param("attn_prefill.compute_eff_max", 0.3, 0.05, 1.0, "-", "share of peak FLOP/s with the GPU full"),
            Param("attn_prefill.compute_half", 20.0, 0.0, 2000.0, "tokens",
                  "query tokens (at prefill_ref_heads heads) at half of compute_eff_max"),
            Param("attn_prefill.causal_fraction", 0.75, 0.5, 1.0, "-",
                  "share of the chunk x chunk square computed (0.5 = ideal causal skip)"),
            Param("attn_prefill.context_cost", 0.8, 0.2, 2.0, "-",
                  "FLOP cost of a cached-context key relative to an in-chunk key"),
            Param("attn_prefill.kv_write_ms", 3e-6, 0.0, 1e-4, "ms",
                  "per (chunk token x KV head on this GPU): writing the new K/V into the paged cache"),
            Param("attn_prefill.launch_ms", 0.015, 0.0, 0.05, "ms", "per prefill attention call"),
        ),
        ("attn_prefill",),
    ),
}

# Parameters that are not fitted (a value the data cannot pin down).
FIXED: Tuple[Param, ...] = (
    Param("attn_input_reshape.launch_ms", 0.0, unit="ms", doc="a view, not a kernel: Vidur measures 0.0"),
    Param("attn_prefill.mem_eff", 0.8, unit="-",
          doc="share of HBM bandwidth reading cached K/V (not binding on the measured rows; not fitted)"),
)

ALL_PARAMS: Tuple[Param, ...] = tuple(p for params, _ in SPEC.values() for p in params) + FIXED


def _get(eff: Mapping, key: str) -> float:
    g, n = key.split(".")
    return eff[g][n]


def _with(eff: Mapping, values: Mapping[str, float]) -> Dict[str, Dict]:
    out = {g: dict(v) for g, v in eff.items()}
    for key, v in values.items():
        g, n = key.split(".")
        out.setdefault(g, {})[n] = float(v)
    return out


def start_efficiency() -> Dict[str, Dict]:
    """The fit's deterministic start point (every parameter at its ``start`` value)."""
    return _with({}, {p.key: p.start for p in ALL_PARAMS})


# --------------------------------------------------------------------------- measured data


@dataclass
class ModelData:
    """One model's measured rows (medians), by tensor-parallel size."""

    spec: ModelSpec
    mlp: Dict[int, pd.DataFrame] = field(default_factory=dict)
    attention: Dict[int, pd.DataFrame] = field(default_factory=dict)
    files: Dict[str, str] = field(default_factory=dict)  # relative path -> sha256 (first 16 hex)


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def _load_model(shared: Path, name: str, attention_names: Sequence[str]) -> ModelData:
    spec = get_model(name)
    mdir = shared / DEVICE / name
    data = ModelData(spec)
    mlp_path = mdir / "mlp.csv"
    if not mlp_path.is_file():
        raise ProfileError(f"no measured mlp.csv at {mlp_path}")
    mlp = pd.read_csv(mlp_path)
    data.files[str(mlp_path.relative_to(shared))] = _sha(mlp_path)
    for tp, df in mlp.groupby("num_tensor_parallel_workers"):
        data.mlp[int(tp)] = df.reset_index(drop=True)
    for aname in attention_names:
        apath = mdir / aname
        if apath.is_file():
            att = pd.read_csv(apath)
            data.files[str(apath.relative_to(shared))] = _sha(apath)
            att["is_prefill"] = att["is_prefill"].astype(str).str.lower().eq("true")
            for tp, df in att.groupby("num_tensor_parallel_workers"):
                data.attention[int(tp)] = df.reset_index(drop=True)
            break
    return data


def load_measured(shared: Optional[Path] = None) -> Dict[str, ModelData]:
    """{"fit": 7B data, "held_out": 70B data} from ``shared`` (default ``../shared/vidur-profiles``)."""
    shared = Path(DEFAULT_SHARED if shared is None else shared)
    if not shared.is_dir():
        raise ProfileError(f"measured profiles folder {shared} not found")
    return {
        "fit": _load_model(shared, FIT_MODEL, ("attention.sample.csv", "attention.csv")),
        "held_out": _load_model(shared, HELD_OUT_MODEL, ("attention.csv", "attention.sample.csv")),
    }


# --------------------------------------------------------------------------- predictions


def _group_rows(data: ModelData, group: str, eff: Mapping, device: Mapping) -> List[Tuple[int, str, np.ndarray, np.ndarray]]:
    """[(tp, op, predicted, measured)] for one op group of one model, at the measured points."""
    ops = SPEC[group][1]
    out = []
    if group in ("gemm", "elementwise"):
        for tp, df in sorted(data.mlp.items()):
            pred = mlp_op_times(data.spec, device, tp, df["num_tokens"].to_numpy(), eff)
            for op in ops:
                out.append((tp, op, pred[op], df[f"time_stats.{op}.median"].to_numpy(dtype=float)))
        return out
    for tp, df in sorted(data.attention.items()):
        if group == "attn_decode":
            df = df[~df["is_prefill"]]
        elif group == "attn_prefill":
            df = df[df["is_prefill"]]
        pred = attention_op_times(
            data.spec, device, tp, df["batch_size"].to_numpy(), df["kv_cache_size"].to_numpy(),
            df["prefill_chunk_size"].to_numpy(), eff,
        )
        for op in ops:
            out.append((tp, op, pred[op], df[f"time_stats.{op}.median"].to_numpy(dtype=float)))
    return out


def _valid(pred: np.ndarray, meas: np.ndarray) -> np.ndarray:
    return np.isfinite(pred) & np.isfinite(meas) & (meas > 0)


# --------------------------------------------------------------------------- fit


def fit(measured: Mapping[str, ModelData], device: str = DEVICE, digits: int = 4) -> Tuple[Dict[str, Dict], Dict[str, int]]:
    """Fit every group of :data:`SPEC` on the fit model; returns (efficiency, rows per group).

    Deterministic: fixed start point, fixed group order, values rounded to ``digits``
    significant digits.
    """
    # lazy: start-up cost of scipy
    from scipy.optimize import least_squares

    dev = device_fields(device)
    data = measured["fit"]
    eff = start_efficiency()
    rows: Dict[str, int] = {}
    for group, (params, _) in SPEC.items():
        keys = [p.key for p in params]
        x0 = np.array([p.start for p in params])
        lo = np.array([p.lo for p in params])
        hi = np.array([p.hi for p in params])

        def residuals(x, keys=keys, group=group):
            e = _with(eff, dict(zip(keys, x)))
            res = []
            for _, _, pred, meas in _group_rows(data, group, e, dev):
                ok = _valid(pred, meas)
                res.append(np.log(np.maximum(pred[ok], 1e-9)) - np.log(meas[ok]))
            return np.concatenate(res)

        r = least_squares(residuals, x0, bounds=(lo, hi), loss="soft_l1", f_scale=0.1, x_scale="jac")
        rows[group] = int(len(r.fun))
        fitted = {k: float(f"{np.clip(v, a, b):.{digits}g}") for k, v, a, b in zip(keys, r.x, lo, hi)}
        eff = _with(eff, fitted)
    return eff, rows


# --------------------------------------------------------------------------- error tables


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


# --------------------------------------------------------------------------- writing params.py

BEGIN = "# --- BEGIN CALIBRATED"
END = "# --- END CALIBRATED ---"


def _fmt(v: float) -> str:
    """Shortest text that reads back as exactly ``v`` (exponent form for very large/small values)."""
    v = float(v)
    if v != 0 and (abs(v) >= 1e5 or abs(v) < 1e-3):
        for digits in range(1, 18):
            text = f"{v:.{digits}g}"
            if float(text) == v:
                return text
    return repr(v)


def render_block(efficiency: Mapping, rows: Mapping[str, int], files: Mapping[str, str]) -> str:
    """The generated ``EFFICIENCY`` / ``CALIBRATION`` block of params.py (deterministic text)."""
    docs = {p.key: p for p in ALL_PARAMS}
    out = [
        f"{BEGIN} (generated; see the header of this block) ---",
        "# Generated by `python -m vidur_specdec.profiles calibrate --write`; do not edit by hand.",
        "# Fitted by bounded least squares on log time (scipy.optimize.least_squares, soft_l1 loss),",
        f"# one op group at a time from fixed start points, to Vidur's measured {DEVICE.upper()} profile of",
        f"# {FIT_MODEL}, every tensor-parallel size (files under ../shared/vidur-profiles):",
    ]
    for f, h in sorted(files.items()):
        out.append(f"#   {f}  sha256 {h}")
    out.append(f"# {HELD_OUT_MODEL} is held out: it is only used to report errors (docs/profiles.md).")
    out.append("# 'fitted [lo, hi]' gives the fit's bounds; 'fixed' values are not fitted.")
    out.append("EFFICIENCY: Dict[str, Dict] = {")
    groups: Dict[str, List[str]] = {}
    for key in docs:
        g, _ = key.split(".")
        groups.setdefault(g, []).append(key)
    for g in sorted(groups):
        out.append(f'    "{g}": {{')
        for key in sorted(groups[g]):
            p = docs[key]
            how = f"fitted [{p.lo:g}, {p.hi:g}]" if p.fitted else "fixed"
            unit = f" {p.unit}" if p.unit != "-" else ""
            out.append(f'        "{key.split(".")[1]}": {_fmt(_get(efficiency, key))},  # {how}{unit}: {p.doc}')
        out.append("    },")
    out.append("}")
    out.append("")
    out.append("# What the values above were fitted on.")
    out.append("CALIBRATION: Dict[str, object] = {")
    out.append(f'    "device": "{DEVICE}",')
    out.append(f'    "fit_model": "{FIT_MODEL}",')
    out.append(f'    "held_out_model": "{HELD_OUT_MODEL}",')
    out.append('    "files": {')
    for f, h in sorted(files.items()):
        out.append(f'        "{f}": "{h}",')
    out.append("    },")
    out.append('    "rows": {')
    for g in SPEC:
        out.append(f'        "{g}": {int(rows.get(g, 0))},')
    out.append("    },")
    out.append("}")
    out.append(END)
    return "\n".join(out)


def write_params(block: str, path: Path = PARAMS_FILE) -> None:
    text = path.read_text(encoding="utf-8")
    pattern = re.compile(re.escape(BEGIN) + r".*?" + re.escape(END), re.S)
    if not pattern.search(text):
        raise ProfileError(f"{path} has no '{BEGIN} ... {END}' block to rewrite")
    new = pattern.sub(lambda _: block, text, count=1)
    tmp = path.with_suffix(".py.tmp")
    tmp.write_text(new, encoding="utf-8")
    tmp.replace(path)


def run(shared: Optional[Path] = None, write: bool = False, per_op: bool = False) -> str:
    """The ``calibrate`` command: optionally fit and write, then return the printed report."""
    measured = load_measured(shared)
    eff = P.EFFICIENCY
    head = []
    if write:
        eff, rows = fit(measured)
        write_params(render_block(eff, rows, measured["fit"].files))
        head.append(f"wrote fitted parameters to {PARAMS_FILE}; "
                    "regenerate the shipped profiles with `python -m vidur_specdec.profiles build-shipped`")
        P.EFFICIENCY = eff  # the report below (and a build in the same process) uses the new values
    report = format_report(error_table(measured, eff, per_op=per_op), layer_table(measured, eff))
    return "\n".join(head + [report])
