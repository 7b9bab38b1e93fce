"""Acceptance models: how many of a request's guesses the target keeps.

Acceptance is an *input* to the simulator, never predicted. It is given as one of
(most specific first; ``SpeculativeConfig.acceptance_input``):

* ``acceptance_trace`` — per request and output position, the run of guesses a
  draft started there gets accepted (:mod:`vidur_specdec.speculation.acceptance_trace`):
  a step at position p with g guesses keeps ``min(accept_run[p], g)``;
* ``acceptance_histogram`` — P(accepted = 0..k) at full k;
* ``acceptance_per_position`` — conditional rates α_1..α_k;
* ``mean_acceptance_length`` — vLLM's "mean acceptance length" L (tokens per
  decode step including the bonus token, at the configured k) turned into the
  i.i.d. α solving ``(1 − α^(k+1)) / (1 − α) = L`` (bisection; L = k + 1 is α = 1);
* ``acceptance_rate`` — i.i.d. α.

Every pmf model is one probability mass function over accepted guesses ``0..k``
at full k (verification stops at the first rejected guess). A step proposing
``g < k`` guesses keeps ``min(A, g)``: the first g positions of a draft are
accepted exactly as in a full draft. With a token tree, k is the tree's depth
and A the depth of the accepted path.

**Per-request variation** (``acceptance_spread`` = s, with an i.i.d. α): each
request draws its own α_i ~ Beta(α·c, (1 − α)·c) with concentration
``c = α(1 − α)/s² − 1``, so E[α_i] = α and sd(α_i) = s. The mean acceptance
length, convex in α, then comes out *above* L(α) (Jensen): spread keeps the
mean rate, not the mean length.

**Per-request factors** (published acceptance only): with ``context`` in
``speculative.acceptance_factors`` each request's α_1 is scaled by the factor of its prompt length
(:func:`vidur_specdec.speculation.acceptance_factors.context_factor`; 1 up to 2k tokens); with
``dataset``, a request whose trace gives a ``category`` is scaled by c(its category) / c(the row's)
(:func:`~vidur_specdec.speculation.acceptance_factors.category_ratio`; 1 for an unknown category).

Draws come from one seeded stream per request (keyed by the run seed, a tag that
sets them apart from the workload's stream, and the request's index), one
uniform per decode step, so a request's acceptance does not depend on what else
shares its batches.
"""

from __future__ import annotations

from bisect import bisect_right
from typing import List, Optional, Sequence

import numpy as np

from vidur_specdec.config.seeds import ACCEPTANCE_SPREAD_STREAM, ACCEPTANCE_STREAM, beta_around, uniform_stream
from vidur_specdec.speculation.acceptance_factors import category_ratio, context_factor, scale_first
from vidur_specdec.speculation.tree import acceptance_positions


def pmf_from_rates(rates: Sequence[float]) -> np.ndarray:
    """P(accepted = j), j = 0..k, from conditional per-position rates alpha_1..alpha_k.

    alpha_j is P(guess j accepted | guesses 1..j-1 accepted).
    """
    k = len(rates)
    pmf = np.zeros(k + 1)
    survive = 1.0
    for j, a in enumerate(rates):
        pmf[j] = survive * (1.0 - a)
        survive *= a
    pmf[k] = survive
    return pmf


def expected_tokens_per_step(alpha: float, k: int) -> float:
    """Mean tokens advanced by a full-k decode step under i.i.d. alpha: (1-alpha^(k+1))/(1-alpha)."""
    if alpha >= 1.0:
        return float(k + 1)
    return (1.0 - alpha ** (k + 1)) / (1.0 - alpha)


def alpha_from_mean_length(length: float, k: int, tol: float = 1e-13) -> float:
    """The i.i.d. α whose full-k mean acceptance length is ``length`` (1 ≤ length ≤ k + 1)."""
    if length <= 1.0 or k < 1:
        return 0.0
    if length >= k + 1:
        return 1.0
    lo, hi = 0.0, 1.0
    while hi - lo > tol:
        mid = 0.5 * (lo + hi)
        if expected_tokens_per_step(mid, k) < length:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def alpha_for_config(spec) -> float:
    """The i.i.d. α of a config that gives ``mean_acceptance_length`` or ``acceptance_rate``."""
    if spec.acceptance_input() == "mean_acceptance_length":
        return alpha_from_mean_length(spec.mean_acceptance_length, acceptance_positions(spec))
    return float(spec.acceptance_rate)


class RequestAcceptance:
    """One request's acceptance: ``next(guesses, position)`` -> accepted guesses of its next decode step."""

    def __init__(self, cdf: List[float], k: int, uniforms) -> None:
        self._cdf, self._k = cdf, k
        self._u = uniforms.tolist() if isinstance(uniforms, np.ndarray) else uniforms  # Python floats: fast (read only)
        self._n = len(self._u)
        self._i = 0

    def next(self, guesses: int, position: int) -> int:
        i = self._i
        u = self._u[i] if i < self._n else self._u[-1]
        self._i = i + 1
        a = bisect_right(self._cdf, u)
        if guesses < a:
            a = guesses
        return a if a < self._k else self._k


class AcceptanceModel:
    """A pmf over accepted guesses 0..k plus per-request seeded draws (and an optional per-request rate)."""

    def __init__(self, pmf: Sequence[float], seed: int, alpha: Optional[float] = None,
                 spread: Optional[float] = None, context_rates: Optional[Sequence[float]] = None) -> None:
        pmf = np.asarray(pmf, dtype=float)
        if pmf.ndim != 1 or len(pmf) < 1 or (pmf < 0).any() or abs(pmf.sum() - 1.0) > 1e-6:
            raise ValueError(f"acceptance pmf must be non-negative and sum to 1, got {pmf.tolist()}")
        self.k = len(pmf) - 1
        self.pmf = pmf / pmf.sum()
        self._cdf_list = self._cdf(self.pmf)
        self._seed = int(seed)
        self.alpha = alpha
        self.spread = spread or 0.0
        self._context_rates = list(context_rates) if context_rates is not None else None  # scaled per request
        self._context_cdfs = {}
        self._use_context = True
        self._categories: Optional[List[Optional[str]]] = None  # per request index, with the row's category
        self._row_category: Optional[str] = None

    @staticmethod
    def _cdf(pmf) -> List[float]:
        cdf = np.cumsum(pmf)
        cdf[-1] = 1.0
        return cdf.tolist()

    @classmethod
    def from_config(cls, spec, seed: int) -> "AcceptanceModel":
        """Build from a :class:`~vidur_specdec.config.SpeculativeConfig` (its most specific pmf input)."""
        k = acceptance_positions(spec)
        used = spec.acceptance_input()
        if used == "acceptance_histogram":
            return cls(spec.acceptance_histogram, seed)
        if used == "acceptance_per_position":
            rates = spec.acceptance_per_position
            published = spec.acceptance_source == "published" and bool(spec.acceptance_factors)
            model = cls(pmf_from_rates(rates), seed, context_rates=rates if published else None)
            model._use_context = "context" in spec.acceptance_factors
            return model
        alpha = alpha_for_config(spec)
        return cls(pmf_from_rates([alpha] * k), seed, alpha, spec.acceptance_spread)

    @property
    def mean_accepted(self) -> float:
        """Expected accepted guesses in a full-k step (at the mean rate)."""
        return float(np.dot(np.arange(self.k + 1), self.pmf))

    def request_alpha(self, request_index: int) -> Optional[float]:
        """The request's own α (Beta around the mean), or None without spread."""
        return beta_around(self.alpha, self.spread, self._seed, ACCEPTANCE_SPREAD_STREAM, request_index)

    def stream(self, request_index: int, max_draws: int) -> List[float]:
        """The request's uniforms, one per decode step (``max_draws`` bounds its steps)."""
        return uniform_stream(self._seed, ACCEPTANCE_STREAM, request_index, max_draws)

    def for_request(self, request) -> RequestAcceptance:
        """The acceptance source of one request (keyed by its workload index)."""
        a = self.request_alpha(request.index)
        cdf = self._cdf_list if a is None else self._cdf(pmf_from_rates([a] * self.k))
        if self._context_rates is not None:
            cdf = self._context_cdf(request.prompt_tokens, self._category_of(request.index))
        return RequestAcceptance(cdf, self.k, self.stream(request.index, request.output_tokens))

    def set_categories(self, categories: Sequence[Optional[str]], row_category: str) -> None:
        """Per-request workload categories (by request index) and the category of the published row.

        A category without a published factor (:func:`~.acceptance_factors.category_factors`), or a row whose own
        category has none, is refused in one line: its requests would silently keep the row's rates.
        """
        if self._context_rates is None or all(c is None for c in categories):
            return
        from vidur_specdec.config import ConfigError
        from vidur_specdec.speculation.acceptance_factors import category_factors

        known = category_factors()
        names = ", ".join(sorted(known))
        for i, c in enumerate(categories):
            if c is not None and c not in known:
                raise ConfigError(f"workload.trace_file: request {i} (by arrival) has category {str(c)[:40]!r}, "
                                  f"which published acceptance has no factor for (factors: {names}); leave the "
                                  "cell empty for the published row's own category, or remove dataset from "
                                  "speculative.acceptance_factors")
        if row_category not in known:
            raise ConfigError(f"speculative.acceptance_factors: the published row's category {row_category!r} has no "
                              f"factor (factors: {names}) to scale the trace's categories from; remove dataset "
                              "from speculative.acceptance_factors, or the trace's category column")
        self._categories, self._row_category = list(categories), row_category

    def _category_of(self, index: int) -> Optional[str]:
        if self._categories is None or index >= len(self._categories):
            return None
        return self._categories[index]

    def _context_cdf(self, prompt_tokens: int, category: Optional[str] = None) -> List[float]:
        """The cdf of a request whose context is ``prompt_tokens`` long and whose workload category is
        ``category`` (the published rates below 2k tokens and in the row's own category)."""
        f = context_factor(prompt_tokens) if self._use_context else 1.0
        if category is not None and self._row_category is not None:
            f *= category_ratio(category, self._row_category) or 1.0
        if f == 1.0:
            return self._cdf_list
        if f not in self._context_cdfs:
            self._context_cdfs[f] = self._cdf(pmf_from_rates(scale_first(self._context_rates, f)))
        return self._context_cdfs[f]


def build(spec, seed: int):
    """The acceptance model for a run (a trace replay or a pmf model), or None when speculation is off."""
    if not spec.enabled:
        return None
    if spec.acceptance_input() == "acceptance_trace":
        # lazy: start-up cost of pandas
        from vidur_specdec.speculation.acceptance_trace import TraceAcceptance, read_trace

        return TraceAcceptance(read_trace(spec.acceptance_trace), acceptance_positions(spec))
    return AcceptanceModel.from_config(spec, seed)
