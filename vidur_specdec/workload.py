"""Workloads: seeded arrivals and exact prompt/output lengths, fed to Vidur.

The workload is drawn once, up front, from its own seeded stream
(``numpy.random.default_rng([seed, 1])``) and handed to Vidur through the
request generator registered in :mod:`vidur_specdec.simulation`, so the same
config and seed give the same requests whatever the scheduler. This module
does not import Vidur.

Arrivals: ``poisson`` (exponential gaps at ``qps``, not truncated — Vidur's own
generator caps gaps at 3× the mean), ``static`` (all at t = 0) or ``trace``
(a CSV or JSONL file with ``arrived_at_s``, ``prompt_tokens``,
``output_tokens``; ``arrival_offset_s`` is accepted for the arrival column).
"""

from __future__ import annotations

import importlib.util
import json
from dataclasses import dataclass
from pathlib import Path
from typing import List

import numpy as np
import pandas as pd

from vidur_specdec.config import ConfigError, LengthDist, WorkloadConfig


@dataclass(frozen=True)
class RequestSpec:
    """One request of a workload: arrival (s) and exact token counts."""

    arrived_at_s: float
    prompt_tokens: int
    output_tokens: int


def draw_lengths(d: LengthDist, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` token lengths from ``d`` (integers)."""
    if d.dist == "fixed":
        return np.full(n, d.value, dtype=np.int64)
    if d.dist == "uniform":
        return rng.integers(d.min, d.max + 1, size=n)
    if d.dist == "lognormal":
        x = np.exp(rng.normal(np.log(d.median), d.sigma, size=n))
        return np.clip(np.rint(x), d.min, d.max).astype(np.int64)
    raise ValueError(f"unknown length distribution {d.dist!r}")


def read_table(path, key: str) -> pd.DataFrame:
    """Read a CSV, JSONL, or (where pyarrow is installed) Parquet table; :class:`ConfigError` naming ``key``."""
    p = Path(path).expanduser()
    if not p.is_file():
        raise ConfigError(f"{key}: file not found: {p}")
    try:
        if p.suffix in (".jsonl", ".json"):
            return pd.DataFrame([json.loads(line) for line in p.read_text().splitlines() if line.strip()])
        if p.suffix == ".parquet":
            if importlib.util.find_spec("pyarrow") is None:
                raise ConfigError(f"{key}: {p} is Parquet and pyarrow is not installed")
            return pd.read_parquet(p)
        return pd.read_csv(p)
    except (ValueError, pd.errors.ParserError, UnicodeDecodeError) as e:
        raise ConfigError(f"{key}: cannot parse {p}: {str(e).splitlines()[0] if str(e) else type(e).__name__}") from None


def read_trace_frame(path, key: str = "workload.trace_file") -> pd.DataFrame:
    """Read a trace (CSV, JSONL, or Parquet where pyarrow is installed), checked and sorted by arrival.

    Returns every column of the file with the arrival column named
    ``arrived_at_s`` (``arrival_offset_s`` is accepted), rows in stable arrival
    order. Raises :class:`ConfigError` naming ``key`` and the file on bad input.
    """
    p = Path(path).expanduser()
    df = read_table(p, key)
    if "arrived_at_s" not in df and "arrival_offset_s" in df:
        df = df.rename(columns={"arrival_offset_s": "arrived_at_s"})
    missing = {"arrived_at_s", "prompt_tokens", "output_tokens"} - set(df.columns)
    if missing:
        raise ConfigError(f"{key}: {p} lacks columns {sorted(missing)}")
    if len(df) == 0:
        raise ConfigError(f"{key}: {p} has no requests")
    for col in ("prompt_tokens", "output_tokens"):
        v = df[col]
        if (not pd.api.types.is_numeric_dtype(v) or not np.isfinite(v).all() or (v < 1).any()
                or (v != np.floor(v)).any()):
            raise ConfigError(f"{key}: {p}: {col} must be whole numbers >= 1")
    a = df["arrived_at_s"]
    if not pd.api.types.is_numeric_dtype(a) or not np.isfinite(a).all() or (a < 0).any():
        raise ConfigError(f"{key}: {p}: arrived_at_s must be finite numbers >= 0")
    return df.sort_values("arrived_at_s", kind="stable").reset_index(drop=True)


def read_trace(path) -> List[RequestSpec]:
    """The requests of a trace file (see :func:`read_trace_frame`)."""
    df = read_trace_frame(path)
    return [RequestSpec(float(a), int(pr), int(o))
            for a, pr, o in zip(df["arrived_at_s"], df["prompt_tokens"], df["output_tokens"])]


def generate(w: WorkloadConfig, seed: int) -> List[RequestSpec]:
    """The workload's requests, sorted by arrival."""
    if w.arrival == "trace":
        return read_trace(w.trace_file)
    rng = np.random.default_rng([seed, 1])
    n = w.num_requests
    if w.arrival == "poisson":
        arrivals = np.cumsum(rng.exponential(1.0 / w.qps, size=n))
    else:  # static
        arrivals = np.zeros(n)
    prompts = draw_lengths(w.prompt_tokens, n, rng)
    outputs = draw_lengths(w.output_tokens, n, rng)
    return [RequestSpec(float(a), int(p), int(o)) for a, p, o in zip(arrivals, prompts, outputs)]
