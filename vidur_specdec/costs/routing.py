"""Routing model: expected routed experts one MoE layer wakes in one scheduler step.

A step is a list of *groups*; each group is a run of consecutive tokens of ONE request:
  * a prefill chunk of c tokens            -> group of size c
  * a plain decode                         -> group of size 1
  * a verify block of k speculative tokens -> group of size k + 1
Tokens of different groups (different requests) route independently; tokens inside a
group are correlated by *within-request locality*.

Per-expert model (closed form, deterministic, no Monte Carlo):
  * popularity: each token picks expert e with marginal probability p_e, sum_e p_e = top_k,
    p_e <= 1.  p = top_k * w, w_i ~ (i+1)^(-zipf_s) (s = 0: uniform), water-filled so no
    p_e exceeds 1.
  * locality: along a request, "expert e is picked" is a two-state Markov chain with
    P(pick e | predecessor picked e) = a_e = rho + (1 - rho) p_e and
    P(pick e | predecessor did not) = b_e = p_e (1 - a_e) / (1 - p_e),
    which keeps the stationary marginal at p_e (rho = 0: independent tokens; rho = 1: every
    token of a request re-picks its predecessor's experts).
  * P(e not woken by a group of n) = (1 - p_e) (1 - b_e)^(n - 1)
    expected distinct experts = sum_e [1 - prod_groups P(e not woken by group)].
  Uniform, rho = 0 limit: E (1 - (1 - k/E)^n) for n independent tokens.

Load (EP imbalance): tokens routed to e, X_e = sum over tokens of the indicator.
  E[X_e] = T p_e; Var within a group of n = n p(1-p) [1 + 2 sum_{j=1}^{n-1} (1 - j/n) lam^j],
  lam = a - b (lag-1 autocorrelation of the chain).  Expected max over experts ~
  max_e min(n_tok, mu_e + sigma_e sqrt(2 ln E)) (Gaussian extreme-value bound; an estimate).

Named parameters (``DEFAULT_RHO``, ``DEFAULT_ZIPF_S``) and their sources:
  * rho (within-request locality) = 0.55, fitted to ONE published point
    (openvinotoolkit/openvino.genai issue 4390, comment of 2026-09-23: Qwen3-30B-A3B wakes
    8 experts for a single token and "an average of 24 experts for 6 tokens" of one
    verify block).
  * zipf_s (popularity skew) = 0 (``moe_routing`` ``uniform``, the default): every expert
    alike, the upper bound on distinct experts at a given token count and what vLLM's
    ``benchmark_moe.py`` random gating and its ``uniform_random`` routing simulation draw.
    ``moe_routing`` ``zipf``: :data:`PUBLISHED_ZIPF_S`, fitted (:func:`fit_zipf_s`) to the
    per-expert loads of one GPU of DeepSeek-V3 under EP16 that :data:`PUBLISHED_LOADS` cites.
  Held out: vllm-project/vllm issue 46295 unique-expert ratios (about 1.3x at K=1, 3.2x at
  K=4, 6.1x at K=8 over K=0); jundot/omlx issue 2077 (GLM-5.2: adjacent tokens share almost
  no experts, rho about 0). docs/model.md reports the held-out error.
Counts are experts (expected values, not integers); groups are token counts.
"""

from __future__ import annotations

import math
from collections import Counter
from functools import lru_cache
from typing import Iterable, Sequence, Tuple

import numpy as np

from vidur_specdec.config.memo import BoundedMemo

DEFAULT_RHO = 0.55
DEFAULT_ZIPF_S = 0.0

#: Tokens routed to each of the 16 experts of one GPU of DeepSeek-V3 (256 experts, top-8) under SGLang EP16 with
#: DeepEP, one MoE layer, over a serving run: sgl-project/sglang pull request 5524, comment of 2025-05-13 (the
#: expert-distribution recorder's ``logical_count``; the other 240 experts live on other GPUs). An EP rank holds a
#: contiguous block of expert ids, which says nothing of their popularity, so the 16 are a sample of the 256.
PUBLISHED_LOADS = (162554, 147879, 102827, 108924, 46123, 505540, 98864, 184719, 322237, 128708, 117722, 118096,
                   73528, 245469, 119943, 69937)
PUBLISHED_EXPERTS = 256
#: The Zipf exponent whose 256 popularities have the coefficient of variation of :data:`PUBLISHED_LOADS` (0.70):
#: :func:`fit_zipf_s` (tests/test_routing.py checks the two agree).
PUBLISHED_ZIPF_S = 0.45
#: ``ModelSpec.moe_routing`` -> the routing model's popularity skew ``zipf_s`` ("" is ``uniform``).
POPULARITY = {"": DEFAULT_ZIPF_S, "uniform": DEFAULT_ZIPF_S, "zipf": PUBLISHED_ZIPF_S}


def fit_zipf_s(loads: Sequence[float] = PUBLISHED_LOADS, num_experts: int = PUBLISHED_EXPERTS) -> float:
    """The Zipf exponent s whose ``num_experts`` popularities ``i^-s`` have the coefficient of variation
    (population standard deviation over mean) of ``loads``: a method-of-moments fit, by bisection."""
    x = np.asarray(loads, dtype=float)
    target = float(x.std() / x.mean())
    cv = lambda s: float(np.std(np.arange(1, num_experts + 1) ** -s) / np.mean(np.arange(1, num_experts + 1) ** -s))  # noqa: E731
    lo, hi = 0.0, 5.0
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if cv(mid) < target else (lo, mid)
    return 0.5 * (lo + hi)


def zipf_of(spec) -> float:
    """The popularity skew ``zipf_s`` of ``spec``'s ``moe_routing`` (:data:`POPULARITY`)."""
    return POPULARITY[getattr(spec, "moe_routing", "") or ""]


def describe(spec) -> str:
    """``summary.json``'s ``kernel_sources.moe_routing``: the routing model a MoE target's steps are priced with."""
    name = getattr(spec, "moe_routing", "") or "uniform"
    pop = ("every expert alike" if zipf_of(spec) == 0 else
           f"Zipf s {zipf_of(spec):g}, fitted to published DeepSeek-V3 expert loads")
    return (f"{name} ({pop}; within-request locality rho {DEFAULT_RHO:g}); routed experts read by the experts a "
            "step wakes")


def _check(num_experts: int, top_k: int, rho: float, zipf_s: float) -> None:
    if not (isinstance(num_experts, (int, np.integer)) and num_experts >= 1):
        raise ValueError(f"num_experts must be a positive integer, got {num_experts!r}")
    if not (isinstance(top_k, (int, np.integer)) and 1 <= top_k <= num_experts):
        raise ValueError(f"top_k must be an integer in [1, num_experts], got {top_k!r}")
    if not 0.0 <= rho <= 1.0:
        raise ValueError(f"rho (within-request locality) must be in [0, 1], got {rho!r}")
    if not zipf_s >= 0.0:
        raise ValueError(f"zipf_s (popularity skew) must be >= 0, got {zipf_s!r}")


@lru_cache(maxsize=256)
def _marginals(num_experts: int, top_k: int, zipf_s: float) -> Tuple[float, ...]:
    """Per-token pick probability of each expert (sum top_k, each <= 1), most popular first."""
    w = np.arange(1, num_experts + 1, dtype=float) ** (-zipf_s)
    p = np.zeros(num_experts)
    free = np.ones(num_experts, dtype=bool)
    budget = float(top_k)
    for _ in range(num_experts):  # water-filling: cap at 1, spread the excess over the rest
        q = budget * w[free] / w[free].sum()
        over = q >= 1.0
        if not over.any():
            p[free] = q
            break
        idx = np.flatnonzero(free)[over]
        p[idx] = 1.0
        free[idx] = False
        budget -= len(idx)
    return tuple(float(x) for x in p)


@lru_cache(maxsize=256)
def _chain(num_experts: int, top_k: int, rho: float, zipf_s: float):
    p = np.asarray(_marginals(num_experts, top_k, zipf_s))
    a = rho + (1.0 - rho) * p
    with np.errstate(divide="ignore", invalid="ignore"):
        b = np.where(p < 1.0, p * (1.0 - a) / (1.0 - p), 1.0)
    return p, a, b


def _group_sizes(groups: Iterable[int]) -> np.ndarray:
    g = np.asarray(list(groups), dtype=np.int64)
    if g.size and (g < 1).any():
        raise ValueError("every group (prefill chunk, decode, verify block) needs >= 1 token")
    return g


def _size_counts(n: np.ndarray):
    """(size, count) of each distinct group size in ``n``, smallest first: what ``np.unique(n, return_counts=True)``
    gives (its order and integer type), counted in Python (faster for a step's few groups)."""
    return [(np.int64(size), np.int64(c)) for size, c in sorted(Counter(n.tolist()).items())]


def _masked_logs(p, b):
    """log P(not picked) per expert for a group's first token and for each later one, with an expert every token
    picks (p = 1) at -inf and 0: any group wakes it."""
    with np.errstate(divide="ignore"):
        l1p = np.log1p(-p)  # -inf where p == 1
        l1b = np.log1p(-b)
    always = p >= 1.0
    return np.where(always, -np.inf, l1p), np.where(always, 0.0, l1b)


@lru_cache(maxsize=256)
def _chain_logs(num_experts: int, top_k: int, rho: float, zipf_s: float):
    p, _, b = _chain(num_experts, top_k, rho, zipf_s)
    return _masked_logs(p, b)


def _log_not_woken(n: np.ndarray, p, b, logs=None, counts=None) -> np.ndarray:
    """log P(expert not woken by a group of n tokens), summed over groups: shape (E,). ``logs``: p and b's
    :func:`_masked_logs`, ``counts`` n's :func:`_size_counts`, when the caller has them."""
    first, later = logs if logs is not None else _masked_logs(p, b)
    tot = np.zeros_like(p)
    for size, c in (counts if counts is not None else _size_counts(n)):
        term = first + (size - 1) * later if size > 1 else first
        tot = tot + c * term  # an expert every token picks is always woken (-inf)
    return tot


def expected_distinct(groups: Sequence[int], num_experts: int, top_k: int,
                      rho: float = DEFAULT_RHO, zipf_s: float = DEFAULT_ZIPF_S) -> float:
    """Expected distinct routed experts woken by a step made of ``groups`` (token runs of one request each)."""
    _check(num_experts, top_k, rho, zipf_s)
    n = _group_sizes(groups)
    if n.size == 0:
        return 0.0
    key = (num_experts, top_k, float(rho), float(zipf_s))
    return float(np.sum(_woken(n, key)))


WOKEN_MEMO_LIMIT = 4096
_WOKEN = BoundedMemo(WOKEN_MEMO_LIMIT)  # (chain key, group-size counts) -> P(each expert woken), read only


def _woken(n: np.ndarray, key: tuple) -> np.ndarray:
    """P(each expert woken) by groups of sizes ``n`` on the routing chain ``key`` (E, top_k, rho, zipf_s),
    memoised by the sizes' counts: a MoE layer's price reads it twice (the distinct experts, the busiest GPU)."""
    counts = _size_counts(n)
    memo_key = (key, tuple(counts))
    got = _WOKEN.get(memo_key)
    if got is None:
        p, _, b = _chain(*key)
        got = -np.expm1(_log_not_woken(n, p, b, _chain_logs(*key), counts))
        got.setflags(write=False)
        _WOKEN.put(memo_key, got)
    return got


def _group_var(n: np.ndarray, p, a, b, key=None) -> np.ndarray:
    """Variance of the count of expert e within groups of sizes n (summed over groups): (E,). ``key``: the routing
    chain (E, top_k, rho, zipf_s) p, a and b come from, when the caller has it (each size's factor is memoised)."""
    lam, base = _var_parts(key) if key is not None else _lam_base(p, a, b)
    tot = np.zeros_like(p)
    for size, c in _size_counts(n):
        f = _var_factor(size, lam, key)
        tot = tot + c * size * base * f
    return tot


def _lam_base(p, a, b):
    return np.clip(a - b, -1.0, 1.0), p * (1.0 - p)


@lru_cache(maxsize=256)
def _var_parts(key: tuple):
    p, a, b = _chain(*key)
    return _lam_base(p, a, b)


_VAR_FACTOR = BoundedMemo(WOKEN_MEMO_LIMIT)  # (chain key, group size) -> 1 + 2 sum_{j<n} (1 - j/n) lam^j, read only


def _var_factor(size, lam, key=None) -> np.ndarray:
    """A group of ``size`` tokens' factor on an expert's single-token count variance (memoised per chain; ``size``
    as :func:`_size_counts` gives it, an ``np.int64``)."""
    got = _VAR_FACTOR.get((key, int(size))) if key is not None else None
    if got is None:
        if size == 1:
            got = np.ones_like(lam)
        else:  # sum_{j=1}^{n-1} (1 - j/n) lam^j in closed form; (n-1)/2 at lam -> 1
            one = np.abs(1.0 - lam) < 1e-9
            d = np.where(one, 1.0, 1.0 - lam)
            s = lam / d - lam * (1.0 - lam ** size) / (size * d * d)
            got = 1.0 + 2.0 * np.where(one, (size - 1) / 2.0, s)
        if key is not None:
            got.setflags(write=False)
            _VAR_FACTOR.put((key, int(size)), got)
    return got


def _owner(num_experts: int, ep: int, placement: str) -> np.ndarray:
    """The EP rank holding each expert (popularity order): ``contiguous`` is vLLM's default ``linear``
    placement (GPU r holds experts ``[r E/ep, (r+1) E/ep)``), ``interleaved`` puts expert i on GPU i % ep."""
    if placement == "contiguous":
        return np.arange(num_experts) // (num_experts // ep)
    if placement == "interleaved":
        return np.arange(num_experts) % ep
    raise ValueError(f"placement must be 'interleaved' or 'contiguous', got {placement!r}")


def _rank_loads(n: np.ndarray, num_experts: int, top_k: int, ep: int, rho: float, zipf_s: float, placement: str):
    """Per EP rank: (mean, sd) of distinct experts woken and (mean, sd) of token rows, for group sizes ``n``."""
    key = (num_experts, top_k, float(rho), float(zipf_s))
    p, a, b = _chain(*key)
    woken = _woken(n, key)
    owner = _owner(num_experts, ep, placement)
    w_mean = np.bincount(owner, woken, ep)
    w_sd = np.sqrt(np.bincount(owner, woken * (1.0 - woken), ep))
    r_mean = np.bincount(owner, n.sum() * p, ep)
    r_sd = np.sqrt(np.bincount(owner, _group_var(n, p, a, b, key), ep))
    return (w_mean, w_sd), (r_mean, r_sd)


def ep_busiest_rank(groups: Sequence[int], num_experts: int, top_k: int, ep: int,
                    rho: float = DEFAULT_RHO, zipf_s: float = DEFAULT_ZIPF_S,
                    placement: str = "contiguous") -> Tuple[float, float]:
    """(distinct experts woken, token rows) on the busiest of ``ep`` expert-parallel GPUs, expected.

    Per rank, :func:`_rank_loads` gives the expected experts woken and rows; the
    busiest rank is estimated by the same Gaussian extreme-value bound as the
    busiest expert: ``mean + sd sqrt(2 ln ep)`` over ranks, capped at what a rank
    can hold (its ``E/ep`` experts; every row of the step ``top_k`` times at most,
    one per expert it owns). Woken experts are independent Bernoullis per
    expert; row counts add the per-expert variances (the negative correlation of
    one token's top-k picks is left out: the spread errs high). ``placement``
    ``contiguous`` is vLLM's default ``linear`` expert placement (GPU r holds
    experts ``[r E/ep, (r+1) E/ep)``); with ``zipf_s`` 0 placement does not matter.
    """
    if ep <= 1:
        return expected_distinct(groups, num_experts, top_k, rho, zipf_s), float(sum(int(g) for g in groups) * top_k)
    _check(num_experts, top_k, rho, zipf_s)
    if num_experts % ep:
        raise ValueError(f"ep={ep} must divide num_experts={num_experts}")
    n = _group_sizes(groups)
    if n.size == 0:
        return 0.0, 0.0
    (w_mean, w_sd), (r_mean, r_sd) = _rank_loads(n, num_experts, top_k, ep, rho, zipf_s, placement)
    z = math.sqrt(2.0 * math.log(ep))
    per_rank = num_experts // ep
    busiest_w = float(np.max(np.minimum(per_rank, w_mean + z * w_sd)))
    busiest_r = float(np.max(np.minimum(float(n.sum()) * min(top_k, per_rank), r_mean + z * r_sd)))
    return busiest_w, busiest_r
