"""Workloads: seeded arrivals and exact prompt/output lengths, fed to Vidur.

The workload is drawn once, up front, from its own seeded stream
(``numpy.random.default_rng([seed, 1])``) and handed to Vidur through a
request generator registered under :data:`SPECDEC_GENERATOR`, so the same
config and seed give the same requests whatever the scheduler.

Arrivals: ``poisson`` (exponential gaps at ``qps``, not truncated — Vidur's own
generator caps gaps at 3× the mean), ``static`` (all at t = 0) or ``trace``
(a CSV or JSONL file with ``arrived_at_s``, ``prompt_tokens``,
``output_tokens``; ``arrival_offset_s`` is accepted for the arrival column).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import List

import numpy as np
import pandas as pd
from vidur.config import BaseRequestGeneratorConfig
from vidur.entities import Request
from vidur.request_generator.base_request_generator import BaseRequestGenerator
from vidur.request_generator.request_generator_registry import RequestGeneratorRegistry
from vidur.types import BaseIntEnum

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


def read_trace(path: str) -> List[RequestSpec]:
    """Read a trace (CSV or JSONL); raises :class:`ConfigError` naming the file on bad input."""
    p = Path(path).expanduser()
    if not p.is_file():
        raise ConfigError(f"workload.trace_file: file not found: {p}")
    try:
        if p.suffix in (".jsonl", ".json"):
            df = pd.DataFrame([json.loads(line) for line in p.read_text().splitlines() if line.strip()])
        else:
            df = pd.read_csv(p)
    except (ValueError, pd.errors.ParserError) as e:
        raise ConfigError(f"workload.trace_file: cannot parse {p}: {str(e).splitlines()[0]}") from None
    if "arrived_at_s" not in df and "arrival_offset_s" in df:
        df = df.rename(columns={"arrival_offset_s": "arrived_at_s"})
    missing = {"arrived_at_s", "prompt_tokens", "output_tokens"} - set(df.columns)
    if missing:
        raise ConfigError(f"workload.trace_file: {p} lacks columns {sorted(missing)}")
    if len(df) == 0:
        raise ConfigError(f"workload.trace_file: {p} has no requests")
    if (df["prompt_tokens"] < 1).any() or (df["output_tokens"] < 1).any() or (df["arrived_at_s"] < 0).any():
        raise ConfigError(f"workload.trace_file: {p} needs prompt_tokens >= 1, output_tokens >= 1, arrived_at_s >= 0")
    df = df.sort_values("arrived_at_s", kind="stable")
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


# --------------------------------------------------------------------------- Vidur generator


class SpecDecGeneratorType(BaseIntEnum):
    """Registry keys of this project (values >= 100 never collide with Vidur's)."""

    PREBUILT = 100


SPECDEC_GENERATOR = SpecDecGeneratorType.PREBUILT


@dataclass
class PrebuiltRequestGeneratorConfig(BaseRequestGeneratorConfig):
    """A fixed list of :class:`RequestSpec`; ``request_class`` builds the Vidur requests."""

    specs: list = field(default_factory=list)
    request_class: type = Request

    @staticmethod
    def get_type():
        return SPECDEC_GENERATOR


class PrebuiltRequestGenerator(BaseRequestGenerator):
    """Turns the prebuilt specs into fresh Vidur requests (one list per simulation)."""

    def generate_requests(self) -> List[Request]:
        cls = self.config.request_class
        out = []
        for i, s in enumerate(self.config.specs):
            if cls is Request:
                out.append(Request(s.arrived_at_s, s.prompt_tokens, s.output_tokens))
            else:
                out.append(cls(s.arrived_at_s, s.prompt_tokens, s.output_tokens, index=i))
        self.requests = out
        return out


RequestGeneratorRegistry.register(SPECDEC_GENERATOR, PrebuiltRequestGenerator)
