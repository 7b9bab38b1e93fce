"""The per-batch-size schedule, chosen from the step-cost model and the acceptance input.

For each batch size b (1 .. ``scheduler.batch_size_cap``; per rank on a
data-parallel deployment, every rank holding b) and each k (0 ..
k_max) a decode step of b requests with k guesses each is priced by the
simulator's own step pricer (:class:`~vidur_specdec.pricing.pricer.StepPricer`:
target forward, verify attention policy, proposer, what a step costs beyond the
layers), so any change to the step cost flows in. Its value is the expected tokens advanced per ms of step,

    v(b, k) = b * (1 + E[min(A, k)]) / step_ms(b, k),

with A drawn from the acceptance input at k_max (a step proposing k < k_max
keeps the first k positions of a full draft, as in the simulator). Each value
is taken relative to the best k at that size and averaged over batch sizes
within a factor :data:`SMOOTHING_WINDOW` of b (step times jump at GEMM tile
edges). The schedule is then the piecewise-constant k(b) that maximises

    sum over b of that smoothed relative value  -  the price of every change of k,

with every range at least :data:`MIN_RANGE_WIDTH` batch sizes wide
(:func:`ranges_with_priced_changes`, an exact dynamic programme). A change of k between
neighbouring ranges is then kept only where it gains more than the tune's ``--tolerance``
(:func:`merge_small_gains`): on some band of :data:`MIN_RANGE_WIDTH` of a range's sizes its k
beats each neighbour's k by more than that fraction of the neighbour's value, or the range takes
the better neighbour's k (the range that gains least first), so a k = 3 / k = 1 / k = 3 flip
whose middle range gains less than the tolerance is not emitted.

The schedule covers batch sizes 1 .. ``limit``, the largest batch size a simulated point reached
without being overloaded (:meth:`vidur_specdec.tune.search.Tuner.evidence_top`): it ends where the
evidence ends. Larger batches take the last range's k (vLLM's rule for sizes past the last range),
which the summary and the command say no simulation backs. A change is
priced with what it costs in vLLM: vLLM 0.33 looks k up from the requests
scheduled in a step, prefills included, and drafts that many for the *next*
step (``vllm/v1/core/sched/scheduler.py`` lines 1709-1714), so a load whose
batch size moves back and forth across a boundary runs a step at the other
range's k after each crossing, at most every other step. The price of a change
at b* is half the value difference of the two k summed over the band b* - W/2
.. b* + W/2 - 1 (W = :data:`MIN_RANGE_WIDTH`) such a load moves within
(:func:`change_price`): a range is kept only when what it gains over its
neighbour's k exceeds what its edges cost. The same k maximises a request's TPOT and the step's throughput at a
fixed b, so the choice does not depend on ``--objective``.

Shortcuts (docs/model.md, "tune"): every request in the priced step is
decoding, at one context length — the workload's mean prompt plus half its mean
output (tokens); prefill chunks that share real steps are left out, and so is
the token budget's shortening of guesses. The schedule is then checked by
simulation against every static k.
"""

from __future__ import annotations

import math
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from vidur_specdec.config import RunConfig
from vidur_specdec.tune.acceptance_carry import pmf_at


# Step times are not smooth in b (GEMM tiles): the value of k at b is its mean relative value over
# batch sizes b / W .. b * W, so tile edges do not decide the schedule.
SMOOTHING_WINDOW = 1.25
# No range of the schedule is narrower than this many batch sizes. A step's batch size moves between
# consecutive steps: on the README's 70B EAGLE-3 example (vLLM's serve defaults, closed loop) the
# step-to-step change in scheduled requests is at most 1 at the 90th percentile and 1-3 at the 99th at
# concurrency 8, 32 and 64 (docs/tune.md, "The schedule"), so a load sitting inside a range of 8 stays
# there, where a one-size range flips k on a fifth of steps (vLLM issue #49548 reports the thrash).
MIN_RANGE_WIDTH = 8


def step_pricer(cfg: RunConfig):
    """``(prepared run, price(b, k, ctx) -> ms)``: the run's own step pricer on a decode step of b requests with k
    guesses each at context ``ctx`` tokens (a data-parallel deployment: b on every rank; pipeline stages: the
    slowest stage)."""
    # lazy: start-up cost of pandas, scipy, sklearn, vidur
    from vidur_specdec.engine.simulation import prepare
    from vidur_specdec.pricing.plan import decode_plan

    p = prepare(cfg)
    pricer = p.pricer

    def price(b: int, k: int, ctx: int) -> float:
        # under pipeline parallelism b is one micro-batch (vLLM looks k up per schedule() call, one micro-batch)
        # and its price the slowest stage: with the pipeline full, one micro-batch leaves per slowest stage
        return pricer.duration_ms(decode_plan(b, k, ctx, ranks=pricer.dp))

    return p, price


def expected_advanced(cfg: RunConfig, k_max: int) -> List[float]:
    """Tokens advanced per decode step with k = 0..k_max guesses: 1 + E[min(A, k)], A at k_max."""
    from vidur_specdec.tune.points import Setting, build_config, setting_overrides

    spec = build_config(cfg, setting_overrides(cfg, Setting(k_max))).speculative
    pmf = pmf_at(spec, k_max)  # a trace has no pmf of its own: its positions' runs, cut at k_max
    return [1.0 + float(np.dot(np.minimum(np.arange(len(pmf)), k), pmf)) for k in range(k_max + 1)]


def typical_context(prepared) -> int:
    """Context (tokens) of a typical decode step: mean prompt + half the mean output of the drawn workload."""
    prompt = np.mean([s.prompt_tokens for s in prepared.specs])
    output = np.mean([s.output_tokens for s in prepared.specs])
    return int(round(prompt + output / 2))


def choose_schedule(cfg: RunConfig, k_max: int, tolerance: float = 0.0,
                    limit: Optional[int] = None) -> Tuple[List[Tuple[int, int, int]], Dict]:
    """The schedule ``[(lo, hi, k), ...]`` covering 1..``limit`` (default ``scheduler.batch_size_cap``) and the
    table it was chosen from; a change of k gains more than ``tolerance`` (a fraction) or is merged away."""
    # lazy: start-up cost of pandas
    from vidur_specdec.tune.points import Setting, build_config, setting_overrides

    from vidur_specdec.tune.pools import decode_view

    # prefill and decode pools: priced on one decode instance, where every verify step runs (tune.pools)
    priced_cfg = decode_view(build_config(cfg, setting_overrides(cfg, Setting(k_max))))
    prepared, price = step_pricer(priced_cfg)
    ctx = typical_context(prepared)
    adv = expected_advanced(cfg, k_max)
    cap = decode_view(cfg).scheduler.batch_size_cap
    if limit is not None:
        cap = max(1, min(cap, int(limit)))
    table = {"context_tokens": ctx, "tokens_advanced": adv, "window": SMOOTHING_WINDOW, "rows": [],
             "batch_size_limit": cap}
    rel = []  # value relative to the best k at that batch size
    for b in range(1, cap + 1):
        ms = [price(b, k, ctx) for k in range(k_max + 1)]
        value = [b * adv[k] / ms[k] for k in range(k_max + 1)]
        top = max(value)
        rel.append([v / top for v in value])
        table["rows"].append({"batch_size": b, "step_ms": [round(x, 6) for x in ms],
                              "tokens_per_ms": [round(x, 6) for x in value]})
    smoothed = []
    for b in range(1, cap + 1):
        lo = max(1, int(np.floor(b / SMOOTHING_WINDOW)))
        hi = min(cap, int(np.ceil(b * SMOOTHING_WINDOW)))
        smoothed.append([float(np.mean([rel[j - 1][k] for j in range(lo, hi + 1)])) for k in range(k_max + 1)])
    for b in range(1, cap + 1):
        kb = max(range(k_max + 1), key=lambda k: (round(smoothed[b - 1][k], 9), -k))
        table["rows"][b - 1]["k"] = kb  # the best k at that size alone, before changes are priced
    priced = ranges_with_priced_changes(smoothed, MIN_RANGE_WIDTH)
    ranges = merge_small_gains(smoothed, priced, tolerance)
    table["min_range_width"] = MIN_RANGE_WIDTH
    table["tolerance"] = tolerance
    table["merged"] = [list(r) for r in priced] if ranges != priced else []
    table["ranges"] = range_gains(smoothed, ranges)
    return ranges, table


def _gain(value: Sequence[Sequence[float]], lo: int, hi: int, k: int, other: int) -> float:
    """How much better k is than ``other`` over sizes lo..hi: a fraction of ``other``'s summed value."""
    mine = sum(value[b - 1][k] for b in range(lo, hi + 1))
    theirs = sum(value[b - 1][other] for b in range(lo, hi + 1))
    return (mine - theirs) / theirs if theirs > 0 else math.inf


def _best_band_gain(value: Sequence[Sequence[float]], lo: int, hi: int, k: int, other: int,
                    width: int = MIN_RANGE_WIDTH) -> float:
    """The most k gains over ``other`` on any band of ``width`` sizes inside lo..hi (the whole range when it is
    narrower): where a range earns its k, however its gain falls off towards its other end."""
    w = min(width, hi - lo + 1)
    return max(_gain(value, s, s + w - 1, k, other) for s in range(lo, hi - w + 2))


def merge_small_gains(value: Sequence[Sequence[float]], ranges: Sequence[Tuple[int, int, int]],
                      tolerance: float) -> List[Tuple[int, int, int]]:
    """``ranges`` with every range whose k gains no more than ``tolerance`` over a neighbour's merged away.

    A range earns its own k when, on some band of :data:`MIN_RANGE_WIDTH` of its sizes (a load sitting there
    stays there), that k beats each neighbouring range's k by more than ``tolerance`` (of the neighbour's
    value). While some range does not, the one that gains least takes the
    neighbour's k worth more over its sizes (ties: the smaller k), and neighbours left at one k are joined;
    so a k = 3 / k = 1 / k = 3 flip whose middle range gains less than the tolerance becomes one k = 3 range.
    """
    out = [tuple(r) for r in ranges]
    while len(out) > 1:
        worst, at = None, -1
        for i, (lo, hi, k) in enumerate(out):
            nbrs = [out[j][2] for j in (i - 1, i + 1) if 0 <= j < len(out)]
            g = min(_best_band_gain(value, lo, hi, k, kn) for kn in nbrs)
            if g <= tolerance and (worst is None or g < worst):
                worst, at = g, i
        if at < 0:
            break
        lo, hi, _ = out[at]
        nbrs = sorted({out[j][2] for j in (at - 1, at + 1) if 0 <= j < len(out)})
        total = {k: sum(value[b - 1][k] for b in range(lo, hi + 1)) for k in nbrs}
        out[at] = (lo, hi, max(nbrs, key=lambda x: (round(total[x], 9), -x)))
        j = 0
        while j < len(out) - 1:  # neighbours left at one k become one range
            if out[j][2] == out[j + 1][2]:
                out[j:j + 2] = [(out[j][0], out[j + 1][1], out[j][2])]
            else:
                j += 1
    return [(int(lo), int(hi), int(k)) for lo, hi, k in out]


def change_price(value: Sequence[Sequence[float]], start: int, k_from: int, k_to: int, width: int) -> float:
    """Price of changing k from ``k_from`` to ``k_to`` at batch size ``start`` (1-based).

    vLLM 0.33 looks k up from the requests scheduled in a step and verifies that many guesses in the next
    (``vllm/v1/core/sched/scheduler.py`` lines 1709-1714), so a load whose batch size moves back and forth
    across ``start`` runs a step at the other side's k after each crossing: at most every other step. The
    price is that: half the value difference between the two k, summed over the band of sizes
    ``start - width // 2 .. start + width // 2 - 1`` a load near the edge moves within, in units of the
    objective (one batch size at its best k = 1). It does not depend on which side of the band is better,
    so an edge cannot be made cheap by moving it.
    """
    n, h = len(value), width // 2
    lost = 0.0
    for b in range(max(1, start - h), min(n, start + h - 1) + 1):
        row = value[b - 1]
        lost += 0.5 * abs(row[k_from] - row[k_to])
    return lost


def ranges_with_priced_changes(value: Sequence[Sequence[float]], width: int) -> List[Tuple[int, int, int]]:
    """The ranges ``[(lo, hi, k)]`` over sizes 1..n maximising the summed value less the price of each change.

    ``value[b - 1][k]``: the (smoothed, relative) value of k at batch size b. Every range is at least
    ``width`` sizes wide (one range when n < width); adjacent ranges differ in k; each change is charged
    :func:`change_price`. Exact: a dynamic programme over (last size, last k), O(n k^2) after O(n k)
    prefix sums. Ties go to fewer changes, then to the smaller k.
    """
    n = len(value)
    K = len(value[0])
    if n < width:
        total = [sum(value[b][k] for b in range(n)) for k in range(K)]
        k = max(range(K), key=lambda k: (round(total[k], 9), -k))
        return [(1, n, k)]
    prefix = np.zeros((n + 1, K))
    prefix[1:] = np.cumsum(np.asarray(value, dtype=float), axis=0)
    NEG = -math.inf
    # best[e][k]: (score, -changes, -k) of covering 1..e with a last range of k ending at e; back[e][k]: its start
    best = [[(NEG, 0, 0)] * K for _ in range(n + 1)]
    back = [[(0, -1)] * K for _ in range(n + 1)]
    # run[k]: the best (score - prefix_k[s - 1], changes, start, previous k) over the starts s eligible so far
    run = [((NEG, 0, 0), 0, -1) for _ in range(K)]
    for e in range(width, n + 1):
        s = e - width + 1  # the newest start a range ending at e may have
        for k in range(K):
            if s == 1:
                cand = ((-prefix[0][k], 0, 0), 1, -1)
            else:
                cand = ((NEG, 0, 0), 0, -1)
                for kp in range(K):
                    if kp == k or best[s - 1][kp][0] == NEG:
                        continue
                    sc, ch, _ = best[s - 1][kp]
                    v = (round(sc - change_price(value, s, kp, k, width) - prefix[s - 1][k], 9), ch - 1, -kp)
                    if v > cand[0]:
                        cand = (v, s, kp)
            if cand[0] > run[k][0]:
                run[k] = cand
        for k in range(K):
            (sc, ch, _), start, kp = run[k]
            if sc == NEG:
                continue
            best[e][k] = (round(sc + prefix[e][k], 9), ch, -k)
            back[e][k] = (start, kp)
    k = max(range(K), key=lambda k: best[n][k])
    ranges: List[Tuple[int, int, int]] = []
    e = n
    while e > 0:
        start, kp = back[e][k]
        ranges.append((start, e, k))
        e, k = start - 1, kp
    return ranges[::-1]


def range_gains(value: Sequence[Sequence[float]], ranges: Sequence[Tuple[int, int, int]],
                width: int = MIN_RANGE_WIDTH) -> List[Dict]:
    """Per range: its width, its mean value, and what it gains over the previous range's k (summed over its sizes).

    Gain and ``change_price`` are in the objective's units: value relative to the best k at each size, summed
    over batch sizes (1 = one batch size at its best k).
    """
    out = []
    for i, (lo, hi, k) in enumerate(ranges):
        mean = float(np.mean([value[b - 1][k] for b in range(lo, hi + 1)]))
        row = {"lo": lo, "hi": hi, "k": k, "width": hi - lo + 1, "mean_relative_value": round(mean, 6)}
        if i:
            kp = ranges[i - 1][2]
            row["gain_over_previous_k"] = round(sum(value[b - 1][k] - value[b - 1][kp] for b in range(lo, hi + 1)), 6)
            row["change_price"] = round(change_price(value, lo, kp, k, width), 6)
            # what --tolerance is checked against (merge_small_gains): this k over the previous one, on these sizes
            row["change_gain"] = round(_best_band_gain(value, lo, hi, k, kp), 6)
        out.append(row)
    return out
