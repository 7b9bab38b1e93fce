"""Acceptance across k: one per-position model per method family, fitted on the acceptance library.

A chain draft's guess j is accepted only if guesses 1..j-1 were; its conditional rate
α_j does not depend on how many guesses follow it, so the mean acceptance length at k is

    L(k) = 1 + Σ_{j=1..k} Π_{i=1..j} α_i          (tokens per decode step, bonus included)

and a figure known at one k fixes the rates needed at another once the shape of α_j in
j is known. The model: **α_j = min(1, α_1 · d^(j−1))**, one decay d per method family
(d = 1 is the constant-α rule; d < 1 a drafter that loses its way along the draft, an MTP
module reused for every position most; d > 1 an n-gram match that, once right, stays
right). Given L at k0 (``speculative.acceptance_at_k``), α_1 is the value that gives L(k0)
= L under the family's d (bisection), and the run's k uses α_1..α_k.

d is fitted per family on every chain curve of the library (a drafter on a target and
dataset measured at two or more k, or one row's published per-position rates, which give
L(1..k)): for each trial d on a grid of 0.005 each curve gets its own α_1 (the one that
matches the curve's summed L), and d minimises the squared relative error of L over all
points of all curves. Families without a curve (draft_model, medusa) keep d = 1: the
constant-α rule, named as such in ``docs/model.md``. :func:`held_out` leaves each curve
out in turn, fits d on the others, anchors at k = 3 and predicts the rest — the table in
``docs/model.md`` (``scripts/acceptance_across_k.py``).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from vidur_specdec.speculation import library

#: vLLM method -> the family whose decay it uses (suffix decoding proposes from matches, as n-gram does).
#: Block drafters (dflash, dspark) draft every position in one pass from the same context, so no autoregressive
#: family's decay stands in for theirs, and no curve of theirs at two or more k is in the library: a run of one
#: with ``speculative.acceptance_at_k`` is refused (:mod:`vidur_specdec.speculation.acceptance_source`).
FAMILY = {"eagle": "eagle", "eagle3": "eagle3", "mtp": "mtp", "ngram": "ngram", "suffix": "ngram",
          "draft_model": "draft_model", "medusa": "medusa", "fixed": "draft_model"}
FAMILIES = ("eagle", "eagle3", "mtp", "ngram", "draft_model", "medusa")
DECAY_GRID = np.round(np.arange(0.30, 1.3001, 0.005), 3)
ANCHOR_K = 3  # held-out curves are anchored at this k (the k vLLM's acceptance test pins)


@dataclass(frozen=True)
class Curve:
    """L at two or more k for one drafter, target, dataset and setting; ``lines``: the rows it came from."""

    family: str
    label: str
    points: Tuple[Tuple[int, float], ...]  # (k, L), k ascending
    lines: Tuple[int, ...]


def rates(alpha1: float, decay: float, k: int) -> np.ndarray:
    """Conditional rates α_1..α_k = min(1, α_1 d^(j−1))."""
    return np.minimum(1.0, alpha1 * decay ** np.arange(k))


def mean_length(conditional: Sequence[float]) -> float:
    """1 + Σ_j Π_{i≤j} α_i: the mean acceptance length of a full draft."""
    return float(1.0 + np.cumprod(np.asarray(conditional, dtype=float)).sum())


def alpha1_for(length: float, k0: int, decay: float) -> float:
    """The α_1 whose model rates give mean length ``length`` at ``k0`` (clipped to [1, k0 + 1])."""
    if length <= 1.0:
        return 0.0
    lo, hi = 0.0, 1.0
    if mean_length(rates(hi, decay, k0)) <= length:
        return hi
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if mean_length(rates(mid, decay, k0)) < length:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def _curves_from(rows: Sequence[library.Row]) -> List[Curve]:
    groups: Dict[tuple, List[library.Row]] = {}
    for r in rows:
        if r.structure != "chain" or r.method not in FAMILY:
            continue
        key = (r.target, r.drafter, r.method, r.dataset, r.temperature, r.variant, r.source.split("@")[0])
        groups.setdefault(key, []).append(r)
    out = []
    for key, rs in groups.items():
        pts: Dict[int, float] = {}
        for r in rs:
            u = r.unconditional()
            for j in range(1, len(u)):  # L(j) below the row's own k, from its per-position rates
                pts.setdefault(j, 1.0 + sum(u[:j]))
        for r in rs:
            pts[r.k] = r.drafted_length()  # per proposing step, as its per-position rates
        if len(pts) >= 2:
            label = f"{key[0]} + {key[1]} on {key[3]}" + (f" {key[5]}" if key[5] else "")
            out.append(Curve(FAMILY[key[2]], label, tuple(sorted(pts.items())), tuple(r.line for r in rs)))
    return out


@functools.lru_cache(maxsize=1)
def curves() -> Tuple[Curve, ...]:
    """Every chain curve of the shipped library."""
    return tuple(_curves_from(library.rows()))


def _predict(alpha1: np.ndarray, decays: np.ndarray, ks: np.ndarray) -> np.ndarray:
    """L at each (decay, curve, point): alpha1 (decays, curves), ``decays`` (decays,), ks (curves, points; 0 =
    padding)."""
    kmax = int(ks.max())
    a = np.minimum(1.0, alpha1[:, :, None] * (decays[:, None] ** np.arange(kmax)[None, :])[:, None, :])
    cum = np.cumsum(np.cumprod(a, axis=2), axis=2)  # Σ_{j≤k} Π α for k = 1..kmax
    idx = np.broadcast_to(np.clip(ks - 1, 0, kmax - 1), (len(decays),) + ks.shape)
    return np.where(ks > 0, 1.0 + np.take_along_axis(cum, idx, axis=2), 0.0)


def _errors(decays: np.ndarray, ks: np.ndarray, obs: np.ndarray) -> np.ndarray:
    """Per (decay, curve): squared relative error of L over the curve's points, its α_1 matching its summed L
    (bisected for every decay at once)."""
    shape = (len(decays), len(ks))
    lo, hi = np.zeros(shape), np.ones(shape)
    target = obs.sum(axis=1)
    for _ in range(40):
        mid = 0.5 * (lo + hi)
        low = _predict(mid, decays, ks).sum(axis=2) < target
        lo, hi = np.where(low, mid, lo), np.where(low, hi, mid)
    pred = _predict(0.5 * (lo + hi), decays, ks)
    mask = ks > 0
    return np.where(mask, ((pred - obs) / np.where(mask, obs, 1.0)) ** 2, 0.0).sum(axis=2)


def error_table(cs: Sequence[Curve]) -> np.ndarray:
    """Squared relative error of each curve (rows) at each trial decay of :data:`DECAY_GRID` (columns).

    Each curve's α_1 is fitted on its own, so a family's error at d is the column's sum and
    leaving a curve out is dropping its row.
    """
    if not cs:
        return np.zeros((0, len(DECAY_GRID)))
    width = max(len(c.points) for c in cs)
    ks = np.zeros((len(cs), width), dtype=int)
    obs = np.zeros((len(cs), width))
    for i, c in enumerate(cs):
        for j, (k, v) in enumerate(c.points):
            ks[i, j], obs[i, j] = k, v
    return np.ascontiguousarray(_errors(DECAY_GRID, ks, obs).T)


def fit_decay(cs: Sequence[Curve], table: Optional[np.ndarray] = None) -> Optional[float]:
    """The family decay d minimising the summed error over ``cs`` (None without curves)."""
    if not cs:
        return None
    table = error_table(cs) if table is None else table
    return float(DECAY_GRID[int(np.argmin(table.sum(axis=0)))])


@functools.lru_cache(maxsize=None)
def _family_table(family: str) -> np.ndarray:
    return error_table([c for c in curves() if c.family == family])


@functools.lru_cache(maxsize=None)
def decay(family: str) -> float:
    """The fitted decay of a family (1.0, the constant-α rule, for a family without curves)."""
    cs = [c for c in curves() if c.family == family]
    d = fit_decay(cs, _family_table(family)) if cs else None
    return 1.0 if d is None else d


def family_of(method: str) -> str:
    """The family a vLLM method's acceptance follows."""
    return FAMILY.get(method, "draft_model")


def rates_at(method: str, k: int, length: Optional[float] = None, at_k: Optional[int] = None,
             known: Optional[Sequence[float]] = None) -> List[float]:
    """Conditional rates α_1..α_k for a run with ``k`` guesses.

    ``known``: published conditional rates at their own k (used as they are up to their length,
    extended past it by the family decay from the last one); otherwise ``length`` L stated at
    ``at_k`` anchors the family's model.
    """
    d = decay(family_of(method))
    if known:
        known = [float(x) for x in known]
        out = known[:k]
        while len(out) < k:
            out.append(min(1.0, out[-1] * d))
        return [round(x, 12) for x in out]
    a1 = alpha1_for(float(length), int(at_k), d)
    return [round(float(x), 12) for x in rates(a1, d, k)]


def held_out(anchor_k: int = ANCHOR_K) -> List[Dict]:
    """Per family: leave each curve out, fit d on the rest, anchor at ``anchor_k`` (the curve's point
    nearest it) and predict its other points; the same with the constant-α rule (d = 1).

    Rows: family, curves, points, d (fitted on all), mean and max relative error of L (model, constant α),
    and the mean error at the curve's largest k.
    """
    out = []
    for fam in FAMILIES:
        cs = [c for c in curves() if c.family == fam]
        table = _family_table(fam)
        errs, const, tail_m, tail_c = [], [], [], []
        for i, c in enumerate(cs):
            if len(cs) < 2:
                continue
            d = float(DECAY_GRID[int(np.argmin(table.sum(axis=0) - table[i]))])  # fitted without curve i
            k0, l0 = min(c.points, key=lambda p: (abs(p[0] - anchor_k), p[0]))
            for dd, bucket, tail in ((d, errs, tail_m), (1.0, const, tail_c)):
                a1 = alpha1_for(l0, k0, dd)
                for k, v in c.points:
                    if k == k0:
                        continue
                    e = abs(mean_length(rates(a1, dd, k)) - v) / v
                    bucket.append(e)
                    if k == c.points[-1][0]:
                        tail.append(e)
        out.append({"family": fam, "curves": len(cs), "points": sum(len(c.points) for c in cs),
                    "decay": decay(fam), "held_out_points": len(errs),
                    "model_mean": float(np.mean(errs)) if errs else None,
                    "model_max": float(np.max(errs)) if errs else None,
                    "constant_mean": float(np.mean(const)) if const else None,
                    "constant_max": float(np.max(const)) if const else None,
                    "model_at_largest_k": float(np.mean(tail_m)) if tail_m else None,
                    "constant_at_largest_k": float(np.mean(tail_c)) if tail_c else None})
    return out
