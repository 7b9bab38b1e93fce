"""Workloads: seeded arrivals and exact prompt/output lengths, fed to Vidur.

The workload is drawn once, up front, from its own seeded stream
(``numpy.random.default_rng([seed, WORKLOAD_STREAM])``, :mod:`vidur_specdec.config.seeds`) and handed to Vidur through the
request generator registered in :mod:`vidur_specdec.engine.simulation`, so the same
config and seed give the same requests whatever the scheduler. This module
does not import Vidur.

Arrivals: ``poisson`` (exponential gaps at ``qps``, not truncated — Vidur's own
generator caps gaps at 3× the mean), ``static`` (all at t = 0), ``closed``
(lengths drawn exactly as ``static``; the arrival times are set during the run
by :class:`vidur_specdec.engine.reference.closed_loop.ClosedLoopMixin`, so the specs carry 0)
or ``trace`` (a CSV, JSONL or Parquet file in one of the layouts of
:data:`TRACE_LAYOUTS`: this project's, Vidur's or Azure's LLM inference trace).
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional

import numpy as np
import pandas as pd

from vidur_specdec.config import ConfigError, LengthDist, WorkloadConfig
from vidur_specdec.config.seeds import WORKLOAD_STREAM


@dataclass(frozen=True)
class RequestSpec:
    """One request of a workload: arrival (s) and exact token counts."""

    arrived_at_s: float
    prompt_tokens: int
    output_tokens: int
    category: Optional[str] = None  # a trace's ``category`` column (chat, coding, math, ...); published acceptance


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
            from vidur_specdec.config.files import read_jsonl

            return read_jsonl(p, key)
        if p.suffix == ".parquet":
            if importlib.util.find_spec("pyarrow") is None:
                raise ConfigError(f"{key}: {p} is Parquet and pyarrow is not installed")
            return pd.read_parquet(p)
        from vidur_specdec.config.files import read_csv_table

        return read_csv_table(p, key, rows=False)  # empty, non-UTF-8, too large: one line naming the file
    except ConfigError:
        raise
    except (ValueError, pd.errors.ParserError, UnicodeDecodeError, OSError) as e:
        raise ConfigError(f"{key}: cannot parse {p}: {str(e).splitlines()[0] if str(e) else type(e).__name__}") from None


@dataclass(frozen=True)
class TraceLayout:
    """Where a trace format keeps arrival (seconds, or a date-time string) and token counts."""

    arrival: str
    prompt: str
    output: str
    datetime: bool = False  # arrival is a date-time string; arrivals become seconds after the first


#: The trace layouts :func:`read_trace_frame` reads, tried in this order (first whose columns are all present).
MAX_TRACE_REQUESTS = 10_000_000  # requests of one trace: the bound of workload.num_requests (config/schema.py)

TRACE_LAYOUTS = {
    # this project's requests.csv / trace.csv
    "vidur_specdec": TraceLayout("arrived_at_s", "prompt_tokens", "output_tokens"),
    "vidur_specdec_offset": TraceLayout("arrival_offset_s", "prompt_tokens", "output_tokens"),
    # Vidur's processed traces (data/processed_traces/splitwise_*.csv: arrived_at in seconds)
    "vidur": TraceLayout("arrived_at", "num_prefill_tokens", "num_decode_tokens"),
    # Azure LLM inference trace 2023/2024 (AzurePublicDataset: TIMESTAMP, ContextTokens, GeneratedTokens)
    "azure": TraceLayout("TIMESTAMP", "ContextTokens", "GeneratedTokens", datetime=True),
}


def _expected_columns() -> str:
    return " or ".join("(" + ", ".join((t.arrival, t.prompt, t.output)) + ")" for t in TRACE_LAYOUTS.values())


def _to_standard(df: pd.DataFrame, p: Path, key: str) -> pd.DataFrame:
    """Rename the first matching layout's columns to arrived_at_s / prompt_tokens / output_tokens."""
    for layout in TRACE_LAYOUTS.values():
        if {layout.arrival, layout.prompt, layout.output} <= set(df.columns):
            break
    else:
        raise ConfigError(f"{key}: {p} lacks columns of a known trace layout: expected {_expected_columns()}; "
                          f"found {list(df.columns)[:8]}")
    if layout.datetime:
        stamps = pd.to_datetime(df[layout.arrival], errors="coerce")
        if stamps.isna().any():
            bad = df[layout.arrival][stamps.isna()].iloc[0]
            raise ConfigError(f"{key}: {p}: {layout.arrival} must be date-time strings, got {bad!r}")
        df = df.drop(columns=[layout.arrival])
        df[layout.arrival] = (stamps - stamps.min()).dt.total_seconds()
    keep = {"arrived_at_s", "prompt_tokens", "output_tokens"} - {layout.arrival, layout.prompt, layout.output}
    df = df.drop(columns=[c for c in keep if c in df.columns])  # a same-named column of another meaning
    return df.rename(columns={layout.arrival: "arrived_at_s", layout.prompt: "prompt_tokens",
                              layout.output: "output_tokens"})


def read_trace_frame(path, key: str = "workload.trace_file") -> pd.DataFrame:
    """Read a trace (CSV, JSONL, or Parquet where pyarrow is installed), checked and sorted by arrival.

    Accepts the column layouts of :data:`TRACE_LAYOUTS`. Returns every column of
    the file with the arrival, prompt and output columns renamed to
    ``arrived_at_s`` (seconds), ``prompt_tokens`` and ``output_tokens``, rows in
    stable arrival order. Raises :class:`ConfigError` naming ``key`` and the
    file on bad input (an unknown layout: the columns found and those expected).
    """
    p = Path(path).expanduser()
    df = _to_standard(read_table(p, key), p, key)
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
    if len(df) > MAX_TRACE_REQUESTS:
        raise ConfigError(f"{key}: {p} has {len(df):,} requests, more than {MAX_TRACE_REQUESTS:,} (the bound of "
                          "workload.num_requests; about 4.5 KB of memory a request); split the trace")
    return df.sort_values("arrived_at_s", kind="stable").reset_index(drop=True)


def read_trace(path) -> List[RequestSpec]:
    """The requests of a trace file (see :func:`read_trace_frame`)."""
    df = read_trace_frame(path)
    cats = ([None if pd.isna(c) or str(c).strip() == "" else str(c).strip() for c in df["category"]]
            if "category" in df.columns else [None] * len(df))  # an empty cell: no category of its own
    return [RequestSpec(float(a), int(pr), int(o), c)
            for a, pr, o, c in zip(df["arrived_at_s"], df["prompt_tokens"], df["output_tokens"], cats)]


def generate(w: WorkloadConfig, seed: int) -> List[RequestSpec]:
    """The workload's requests, sorted by arrival."""
    if w.arrival == "trace":
        return read_trace(w.trace_file)
    rng = np.random.default_rng([seed, WORKLOAD_STREAM])
    n = w.num_requests
    if w.arrival == "poisson":
        arrivals = np.cumsum(rng.exponential(1.0 / w.qps, size=n))
    else:  # static, or closed (arrivals set during the run)
        arrivals = np.zeros(n)
    prompts = draw_lengths(w.prompt_tokens, n, rng)
    outputs = draw_lengths(w.output_tokens, n, rng)
    return [RequestSpec(float(a), int(p), int(o)) for a, p, o in zip(arrivals, prompts, outputs)]
