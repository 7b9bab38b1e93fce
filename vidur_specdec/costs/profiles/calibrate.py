"""Calibrate the analytical profile builder against Vidur's measured A100 profiles: the parameters and the fit.

``python -m vidur_specdec.profiles calibrate [--shared DIR] [--write] [--per-op]``

* **Fit** (only with ``--write``, or ``fit()`` from Python): every parameter of
  ``params.EFFICIENCY`` marked *fitted* in :data:`SPEC` is fitted by bounded
  least squares on log time (``scipy.optimize.least_squares``, ``soft_l1`` loss),
  one op group at a time, from the fixed start point in :data:`SPEC`, on
  **Llama-2-7B only**: every tensor-parallel size of its ``mlp.csv`` and of its
  ``attention.sample.csv``. The fitted values are rounded to 4 significant digits
  and written into ``params.py`` between its ``BEGIN/END CALIBRATED`` markers
  (:mod:`~vidur_specdec.costs.profiles.params_block`).
* **Check** (always, :mod:`~vidur_specdec.costs.profiles.calibration_report`): the
  error of the current parameters per op group, for the fitted model (7B) and the
  held-out one (Llama-2-70B: ``mlp.csv`` at TP 1/2/4/8, ``attention.csv`` at TP 2),
  then the whole-layer check: the per-layer time of typical batches summed from the
  measured ops vs from the builder's ops.

This module holds the parameters (:data:`SPEC`, :data:`ALL_PARAMS`), the measured
data (:func:`load_measured`) and the fit (:func:`fit`). The measured files are read
from ``../shared/vidur-profiles`` (beside the checkout) and never copied into the
repository.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import pandas as pd

from vidur_specdec.architectures.models import ModelSpec, get_model
from vidur_specdec.costs.profiles import params as P
from vidur_specdec.costs.profiles.builder import GEMM_OPS, ELEMENTWISE_OPS, ProfileError, attention_op_times, device_fields, mlp_op_times

REPO = Path(__file__).resolve().parents[3]
DEFAULT_SHARED = REPO.parent / "shared" / "vidur-profiles"
PARAMS_FILE = Path(__file__).resolve().parent / "params.py"
DEVICE = "a100"
FIT_MODEL = "meta-llama/Llama-2-7b-hf"
HELD_OUT_MODEL = "meta-llama/Llama-2-70b-hf"
FIT_FILES = ("mlp.csv", "attention.sample.csv")


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

