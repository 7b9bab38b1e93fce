"""How an acceptance input given for k_max is carried to the smaller k a tune simulates (docs/tune.md).

The input describes drafts of ``k_in`` guesses (``speculative.num_speculative_tokens``;
per-position rates and histograms by their length). A point with k <= k_in guesses uses:

* ``acceptance_rate`` α: α at every k (i.i.d. per guess).
* ``mean_acceptance_length`` L: the α that L implies at k_in,
  L = (1 − α^(k_in+1)) / (1 − α), then that α at every k (L itself changes with k).
* ``acceptance_per_position`` α_1..α_k_in: the first k rates.
* ``acceptance_histogram`` P(A = 0..k_in): turned into per-position rates
  α_j = P(A ≥ j) / P(A ≥ j − 1) (0 where nothing reaches j − 1), then the first k.
* ``acceptance_trace``: replayed as is; a draft of k guesses at output position p
  keeps min(accept_run[p], k) (the trace's own rule at every k).
* ``acceptance_at_k`` with a ``mean_acceptance_length``, and ``acceptance_source: published``: nothing is
  carried; each point resolves its acceptance at its own k as a run at that k does (the family's
  per-position model anchored at the given length; the library's rows at that k).

:func:`point_acceptance` gives what a point used: α for i.i.d. inputs and the
mean acceptance length 1 + E[min(A, k)] (none for a trace: a replay has no pmf).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from vidur_specdec.speculation.acceptance import AcceptanceModel, alpha_from_mean_length, pmf_from_rates


def input_positions(spec) -> int:
    """Guesses the acceptance input describes."""
    used = spec.acceptance_input()
    if used == "acceptance_per_position":
        return len(spec.acceptance_per_position)
    if used == "acceptance_histogram":
        return len(spec.acceptance_histogram) - 1
    return spec.num_speculative_tokens


def rates_from_histogram(h: List[float]) -> List[float]:
    """Conditional per-position rates α_1..α_k from P(A = 0..k)."""
    h = [float(x) for x in h]
    tail = [sum(h[j:]) for j in range(len(h))]  # P(A >= j)
    return [round(tail[j] / tail[j - 1], 12) if tail[j - 1] > 0 else 0.0 for j in range(1, len(h))]


def implied_alpha(spec) -> Optional[float]:
    """α of an i.i.d. input (rate, or the α a mean length implies at its own k); None otherwise."""
    used = spec.acceptance_input()
    if used == "acceptance_rate":
        return float(spec.acceptance_rate)
    if used == "mean_acceptance_length":
        return round(alpha_from_mean_length(spec.mean_acceptance_length, spec.num_speculative_tokens), 12)
    return None


def carried(spec, k: int) -> Dict[str, Any]:
    """Dotted overrides giving a point with ``k`` guesses the input's acceptance."""
    if spec.acceptance_at_k is not None or spec.acceptance_source == "published":
        return {}  # resolved at the point's own k, as a run at that k (module docstring)
    used = spec.acceptance_input()
    if used == "mean_acceptance_length":
        return {"speculative.acceptance_rate": implied_alpha(spec), "speculative.mean_acceptance_length": None}
    if used == "acceptance_per_position":
        return {"speculative.acceptance_per_position": list(spec.acceptance_per_position[:k])}
    if used == "acceptance_histogram":
        return {"speculative.acceptance_histogram": None,
                "speculative.acceptance_per_position": rates_from_histogram(spec.acceptance_histogram)[:k]}
    return {}


def trace_pmf(spec, k: int) -> np.ndarray:
    """P(min(accept_run[p], k) = j) over every drafted position p >= 1 of every trace line."""
    # lazy: start-up cost of pandas
    from vidur_specdec.speculation.acceptance_trace import read_trace

    counts = np.zeros(k + 1)
    for line in read_trace(spec.acceptance_trace):
        for a in line.accept_run[1:]:
            counts[min(int(a), k)] += 1
    return counts / counts.sum() if counts.sum() > 0 else np.eye(k + 1)[0]


def pmf_at(spec, k: int) -> np.ndarray:
    """P(accepted = 0..k) of a full draft of k guesses, for a point's resolved speculative config."""
    if spec.acceptance_input() == "acceptance_trace":
        return trace_pmf(spec, k)
    return AcceptanceModel.from_config(spec, 0).pmf


def point_acceptance(spec) -> Tuple[Optional[float], Optional[float]]:
    """(α per guess or None, mean acceptance length 1 + E[min(A, k)] or None) of a point's config."""
    if not spec.enabled:
        return None, None
    used = spec.acceptance_input()
    alpha = implied_alpha(spec)
    if used == "acceptance_trace":
        return None, None
    pmf = pmf_from_rates([alpha] * spec.num_speculative_tokens) if alpha is not None else pmf_at(spec, 0)
    return alpha, float(1.0 + np.dot(np.arange(len(pmf)), pmf))
