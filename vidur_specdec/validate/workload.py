"""Workload generation: one trace file that both the replay client and the simulator read.

A trace holds one row per request, sorted by arrival::

    request_id, arrival_offset_s, prompt_tokens, output_tokens, prompt_token_ids

``prompt_token_ids`` is space-separated in CSV and a list in JSONL. The
simulator's ``workload: {arrival: trace, trace_file: PATH}`` reads the same
file (it takes ``arrival_offset_s`` for ``arrived_at_s`` and ignores the other
extra columns), so both sides see the same requests.

Arrivals and lengths are seeded. ``poisson`` and ``static`` draw exactly what
the simulator itself draws for the same workload section and seed (the same
function is called). ``gamma`` draws inter-arrival gaps from a gamma
distribution with mean ``1/qps`` and coefficient of variation ``cv`` (``cv = 1``
is Poisson; ``cv > 1`` is burstier), in the same random stream. Prompt token
ids come from their own stream (``[seed, 2]``), uniform in ``token_id_range``.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import List, Optional, Sequence, Tuple, Union

import numpy as np
import pandas as pd

from vidur_specdec.config import RunConfig
from vidur_specdec.config.seeds import PROMPT_IDS_STREAM, WORKLOAD_STREAM
from vidur_specdec.validate.common import ValidateError, write_text
from vidur_specdec.engine.workload import draw_lengths, generate, read_trace_frame

ARRIVALS = ("poisson", "gamma", "static")
TRACE_COLUMNS = ["request_id", "arrival_offset_s", "prompt_tokens", "output_tokens", "prompt_token_ids"]
DEFAULT_TOKEN_RANGE = (1000, 30000)  # inside every Llama-2 vocabulary and clear of special tokens


def draw_arrivals_and_lengths(cfg: RunConfig, arrival: str, cv: float = 1.0,
                              seed: Optional[int] = None) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Arrival offsets (s), prompt and output lengths for ``cfg.workload`` (num_requests, qps, lengths)."""
    seed = cfg.seed if seed is None else seed
    w = copy.deepcopy(cfg.workload)
    if arrival in ("poisson", "static"):
        w.arrival = arrival
        specs = generate(w, seed)
        return (np.array([s.arrived_at_s for s in specs]), np.array([s.prompt_tokens for s in specs]),
                np.array([s.output_tokens for s in specs]))
    if arrival != "gamma":
        raise ValidateError(f"--arrival: must be one of {', '.join(ARRIVALS)}, got {arrival!r}")
    if not cv > 0:
        raise ValidateError(f"--cv: must be > 0, got {cv}")
    rng = np.random.default_rng([seed, WORKLOAD_STREAM])
    n = w.num_requests
    shape = 1.0 / cv ** 2
    arrivals = np.cumsum(rng.gamma(shape, 1.0 / (w.qps * shape), size=n))
    prompts = draw_lengths(w.prompt_tokens, n, rng)
    outputs = draw_lengths(w.output_tokens, n, rng)
    return arrivals, prompts, outputs


def prompt_ids(lengths: Sequence[int], seed: int, token_id_range=DEFAULT_TOKEN_RANGE) -> List[List[int]]:
    """Seeded prompt token ids, one list per request, uniform in ``[lo, hi)``."""
    lo, hi = token_id_range
    if not 0 <= lo < hi:
        raise ValidateError(f"--token-id-range: need 0 <= lo < hi, got {lo} {hi}")
    rng = np.random.default_rng([seed, PROMPT_IDS_STREAM])
    return [rng.integers(lo, hi, size=int(n)).tolist() for n in lengths]


def generate_trace(cfg: RunConfig, arrival: Optional[str] = None, cv: float = 1.0, seed: Optional[int] = None,
                   token_id_range=DEFAULT_TOKEN_RANGE) -> pd.DataFrame:
    """The trace for a run config's workload section; ``arrival`` defaults to the config's.

    ``workload.arrival: trace``: the config's own trace (``workload.trace_file``), in this trace format, with
    seeded token ids where it has none (``arrival`` must then be None). ``closed``: refused without
    ``arrival`` (a closed loop's arrival times are set by completions during the run).
    """
    seed = cfg.seed if seed is None else seed
    own = cfg.workload.arrival
    if own == "trace":
        if arrival is not None:
            raise ValidateError(f"--arrival: the config's workload.arrival is trace (its requests come from "
                                f"workload.trace_file {cfg.workload.trace_file}); drop --arrival to write that "
                                f"trace, or give a config whose arrivals are drawn")
        trace = load_trace(cfg.workload.trace_file, "workload.trace_file")
        return with_token_ids(trace, seed, token_id_range)[TRACE_COLUMNS]
    if arrival is None and own == "closed":
        raise ValidateError("workload.arrival: closed has no arrival times to write (a closed loop sends a request "
                            "when one completes); give --arrival poisson, gamma or static")
    arrival = arrival or own
    arrivals, prompts, outputs = draw_arrivals_and_lengths(cfg, arrival, cv, seed)
    return pd.DataFrame({
        "request_id": np.arange(len(arrivals)),
        "arrival_offset_s": arrivals.astype(float),
        "prompt_tokens": prompts.astype(int),
        "output_tokens": outputs.astype(int),
        "prompt_token_ids": prompt_ids(prompts, seed, token_id_range),
    })


def with_token_ids(df: pd.DataFrame, seed: int, token_id_range=DEFAULT_TOKEN_RANGE) -> pd.DataFrame:
    """``df`` with seeded ``prompt_token_ids`` for the rows that have none (a trace in the simulator's format).

    The ids are drawn as :func:`generate_trace` draws them (:func:`prompt_ids`, stream ``[seed, 2]``).
    """
    out = df.copy()
    if "prompt_token_ids" not in out:
        out["prompt_token_ids"] = [None] * len(out)
    missing = [i for i, v in enumerate(out["prompt_token_ids"]) if v is None]
    if missing:
        drawn = prompt_ids([int(out["prompt_tokens"].iloc[i]) for i in missing], seed, token_id_range)
        ids = list(out["prompt_token_ids"])
        for i, lst in zip(missing, drawn):
            ids[i] = lst
        out["prompt_token_ids"] = ids
    return out


def write_trace(df: pd.DataFrame, path: Union[str, Path]) -> Path:
    """Write a trace as CSV (ids space-separated) or JSONL (ids as lists), chosen by the suffix."""
    path = Path(path)
    if any(v is None for v in df["prompt_token_ids"]):
        raise ValidateError(f"{path}: rows without prompt_token_ids; draw them with with_token_ids() first")
    out = df[TRACE_COLUMNS].copy()
    if path.suffix in (".jsonl", ".json"):
        lines = []
        for r in out.itertuples(index=False):
            lines.append(json.dumps({
                "request_id": _py(r.request_id), "arrival_offset_s": float(r.arrival_offset_s),
                "prompt_tokens": int(r.prompt_tokens), "output_tokens": int(r.output_tokens),
                "prompt_token_ids": [int(t) for t in r.prompt_token_ids],
            }))
        return write_text(path, "\n".join(lines) + "\n")
    if path.suffix != ".csv":
        raise ValidateError(f"--out: trace must end in .csv or .jsonl, got {path.name}")
    out["prompt_token_ids"] = [" ".join(map(str, ids)) for ids in out["prompt_token_ids"]]
    text = out.to_csv(index=False, float_format="%.9f")
    return write_text(path, text)


def _py(x):
    return x.item() if hasattr(x, "item") else x


def _parse_ids(v) -> Optional[List[int]]:
    if isinstance(v, (list, tuple, np.ndarray)):
        return [int(t) for t in v]
    if v is None or (isinstance(v, float) and np.isnan(v)):
        return None
    s = str(v).strip()
    if s.startswith("["):
        return [int(t) for t in json.loads(s)]
    return [int(t) for t in s.replace(",", " ").split()]


def load_trace(path: Union[str, Path], what: str = "--trace") -> pd.DataFrame:
    """Read a trace; rows sorted by arrival exactly as the simulator sorts them.

    Adds ``sim_index`` (the row's index in the simulator's requests table).
    ``request_id`` defaults to that index; missing ``prompt_token_ids`` stay
    None (the replay client then draws seeded ids of the right length).
    """
    df = read_trace_frame(path, key=what).rename(columns={"arrived_at_s": "arrival_offset_s"})
    df["sim_index"] = np.arange(len(df))
    if "request_id" not in df:
        df["request_id"] = df["sim_index"]
    if df["request_id"].duplicated().any():
        raise ValidateError(f"{what}: {path}: request_id values must be unique")
    df["prompt_tokens"] = df["prompt_tokens"].astype(int)
    df["output_tokens"] = df["output_tokens"].astype(int)
    ids = [None] * len(df)
    if "prompt_token_ids" in df:
        for i, v in enumerate(df["prompt_token_ids"]):
            try:
                ids[i] = _parse_ids(v)
            except (ValueError, TypeError):
                raise ValidateError(f"{what}: {path}: request {df['request_id'][i]} has prompt_token_ids that "
                                    f"are not integers: {str(v)[:60]!r}") from None
    for i, (lst, n) in enumerate(zip(ids, df["prompt_tokens"])):
        if lst is not None and len(lst) != n:
            raise ValidateError(f"{what}: {path}: request {df['request_id'][i]} has {len(lst)} prompt token ids "
                                f"but prompt_tokens = {n}")
    df["prompt_token_ids"] = ids
    return df[["request_id", "sim_index", "arrival_offset_s", "prompt_tokens", "output_tokens", "prompt_token_ids"]]
