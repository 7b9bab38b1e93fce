"""Named, cited factors on published acceptance: context length, workload category, temperature.

Each factor f scales the mean number of accepted guesses of a full draft, L − 1, and is
applied by scaling the first conditional rate α_1 (every unconditional rate
P(guess j accepted) = α_1 ⋯ α_j then scales by f; α_1 is capped at 1, which loses the
part of a factor above 1/α_1). They apply only to acceptance taken from the library
(``speculative.acceptance_source: published``), each switched by its name in
``speculative.acceptance_factors``; acceptance the user gives is used as given.

* ``context`` — acceptance falls as the request's context grows past what the drafter was
  trained on. Table: Qwen3-8B with its EAGLE-3 speculator (full attention), LongBench-v2
  prompts cut to 2k..20k tokens, 128 output tokens, T = 0 (vllm-project/speculators PR
  #684, "Acceptance Length vs Context Length"). f(n) = (L(n) − 1) / (L(2k) − 1), linear
  between the table's points, 1 at or below 2k tokens and the 20k value beyond. n is the
  request's prompt length (tokens; "2k" read as 2048).
* ``dataset`` — when the library has the pair but not on the run's dataset, the pair's
  row on another dataset is scaled by c(wanted category) / c(row's category), c(cat) the
  median over the SpecBundle curves (one drafter on one target at one k, measured on
  several datasets; sgl-project/SpecForge docs/spec_bundle/public/raw_data/data.json)
  of (L_cat − 1) / (L_mt-bench − 1).
* ``temperature`` — sampling at temperature T accepts less than greedy: f(T) = 1 − (1 −
  0.50 / 0.69) · min(T, 1), from EAGLE on Qwen2-7B-Instruct on MT-Bench with a chain
  draft: L = 1.69 at T = 0 and 1.50 at T = 1 (SafeAILab/EAGLE issue #143). A row
  measured at T_row and a run at T get f(T) / f(T_row) (a row without a stated
  temperature is taken as T = 0).
"""

from __future__ import annotations

import functools
import statistics
from typing import Dict, Optional

import numpy as np

from vidur_specdec.speculation import library

FACTORS = ("context", "dataset", "temperature")

CONTEXT_SOURCE = "vllm-project/speculators PR #684 (acceptance length vs context length, Qwen3-8B EAGLE-3)"
# (context tokens, mean acceptance length) of the PR's table, EAGLE-3 with full attention
CONTEXT_TABLE = ((2048, 2.295), (4096, 2.040), (6144, 1.863), (8192, 1.687), (10240, 1.400), (12288, 1.289),
                 (14336, 1.161), (16384, 1.090), (18432, 1.092), (20480, 1.084))
TEMPERATURE_SOURCE = "SafeAILab/EAGLE issue #143 (EAGLE-Qwen2-7B-Instruct, MT-Bench, chain draft: T=0 1.69, T=1 1.50)"
TEMPERATURE_T0, TEMPERATURE_T1 = 1.69, 1.50
DATASET_SOURCE = "sgl-project/SpecForge docs/spec_bundle/public/raw_data/data.json (median over its curves)"
REFERENCE_DATASET = "mt-bench"


def context_factor(tokens: float) -> float:
    """f(context) on L − 1: 1 up to 2k tokens, the published fall beyond."""
    xs = [x for x, _ in CONTEXT_TABLE]
    ys = [(y - 1.0) / (CONTEXT_TABLE[0][1] - 1.0) for _, y in CONTEXT_TABLE]
    return float(np.interp(float(tokens), xs, ys, left=1.0, right=ys[-1]))


def temperature_factor(t: Optional[float]) -> float:
    """f(T) on L − 1 relative to greedy sampling."""
    t = 0.0 if t is None else min(max(float(t), 0.0), 1.0)
    return 1.0 - (1.0 - (TEMPERATURE_T1 - 1.0) / (TEMPERATURE_T0 - 1.0)) * t


@functools.lru_cache(maxsize=1)
def category_factors() -> Dict[str, float]:
    """c(category): median (L_cat − 1) / (L_mt-bench − 1) over the SpecBundle curves; chat = 1."""
    rows = [r for r in library.rows() if "SpecForge" in r.source and r.structure == "chain"]
    ref = {(r.target, r.drafter, r.k): r.mean_acceptance_length for r in rows if r.dataset == REFERENCE_DATASET}
    ratios: Dict[str, list] = {}
    for r in rows:
        base = ref.get((r.target, r.drafter, r.k))
        if r.dataset == REFERENCE_DATASET or base is None or base <= 1.0:
            continue
        ratios.setdefault(r.category, []).append((r.mean_acceptance_length - 1.0) / (base - 1.0))
    out = {cat: round(statistics.median(v), 4) for cat, v in sorted(ratios.items())}
    out["chat"] = 1.0
    return out


def category_ratio(wanted: str, have: str) -> Optional[float]:
    """c(wanted) / c(have), or None when either category has no factor."""
    c = category_factors()
    if wanted not in c or have not in c:
        return None
    return c[wanted] / c[have]


def scale_first(rates, factor: float):
    """Conditional rates with α_1 scaled by ``factor`` (capped at 1): L − 1 scales by ``factor`` below the cap."""
    rates = [float(x) for x in rates]
    if rates:
        rates[0] = min(1.0, rates[0] * factor)
    return rates
