"""Stage 2: the survivors simulated under load, up to the SLO boundary (docs/plan.md, "The search").

Each survivor is a :class:`Track`: a run config (its shape, speculation with the
schedule tune's chooser picked, ``max_num_seqs``, ``max_num_batched_tokens``)
searched on closed-loop concurrency (the whole deployment's requests in flight):

1. from the static estimate's concurrency, up by :data:`STEP` while the SLOs are met
   and down by it while they are not, until one load meets them and the next does not
   (or the search reaches :func:`max_load`, or concurrency 1 fails);
2. bisection between the two (geometric midpoints, whole numbers) until the upper
   end is within ``--tolerance`` of the lower;
3. for the best track of each class, one lighter load, a quarter of the highest that
   met the SLOs, for the frontier's per-user end;
4. for the :data:`REFINE_TOP` best tracks, where the token budget was not given
   (``--max-num-batched-tokens``), one step towards the SLO that bound at the first
   load that failed: twice the budget when TTFT bound (a prompt in fewer chunks), a
   quarter when TPOT bound (less prefill in each decode step); the variant is
   simulated at that load and, when it meets the SLOs there, searched upwards as a
   track of its own.

All active tracks submit their next load together (one round), so ``--jobs``
workers stay busy; which loads run depends only on results, never on timing.
Steps 3 and 4 run together with the check of the screen (:func:`check_tracks`): a
sample of what it dropped, simulated.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from vidur_specdec.config import RunConfig
from vidur_specdec.plan.points import Point, Runner
from vidur_specdec.plan.screen import Screened, finish_all
from vidur_specdec.tune.points import build_config

MAX_BUDGET = 65536
REFINE_TOP = 1  # tracks (best simulated first) whose token budget takes one step towards their binding SLO
CHECK_POINTS = 2  # loads a ranked-out candidate is searched at when the screen is checked
STEP = 1.5  # the search's factor between loads until the SLOs flip
MIN_BUDGET = 512
LOAD_CEILING_FACTOR = 2  # a track stops doubling past twice what its schedulers hold (max_num_seqs x ranks)


def meets(m: Optional[Dict], slo: Dict) -> bool:
    """Both SLOs met at their percentile (a point with no TPOT, every request one token, meets that part)."""
    if not m:
        return False
    p = slo["percentile"]
    ttft, tpot = m.get(f"ttft_ms_p{p}"), m.get(f"tpot_ms_p{p}")
    return ttft is not None and ttft <= slo["ttft_ms"] and (tpot is None or tpot <= slo["tpot_ms"])


def binding(m: Dict, slo: Dict) -> str:
    """The SLO a failing point misses by more (``ttft`` or ``tpot``)."""
    p = slo["percentile"]
    t = (m.get(f"ttft_ms_p{p}") or 0.0) / slo["ttft_ms"]
    d = (m.get(f"tpot_ms_p{p}") or 0.0) / slo["tpot_ms"]
    return "ttft" if t >= d else "tpot"


@dataclass
class Track:
    """One variant's load search: the highest concurrency met (``lo``) and the lowest missed (``hi``)."""

    key: str
    screened: Screened
    cfg: RunConfig
    overrides: Dict
    budget_key: Optional[str]
    next: Optional[int]
    ceiling: int
    phase: str = "search"
    lo: Optional[int] = None
    hi: Optional[int] = None
    points: List[Point] = field(default_factory=list)
    upward_only: bool = False
    max_points: Optional[int] = None  # a check of the screen: a short search
    variant_of: Optional[str] = None

    @property
    def label(self) -> str:
        return self.key

    def best_met(self, slo: Dict) -> Optional[float]:
        """The most tokens/s per GPU among its points that meet the SLOs."""
        got = [p.metrics["throughput_tok_s"] for p in self.points if meets(p.metrics, slo)
               and p.metrics.get("throughput_tok_s")]
        return max(got) / self.screened.cand.shape.gpus if got else None

    def advance(self, c: int, ok: bool, tol: float) -> None:
        if ok:
            self.lo = c if self.lo is None else max(self.lo, c)
        else:
            self.hi = c if self.hi is None else min(self.hi, c)
        if self.max_points is not None and len(self.points) >= self.max_points:
            self.next = None
        elif self.hi is None:
            nxt = max(c + 1, int(round(STEP * c)))
            self.next = nxt if nxt <= self.ceiling else None
        elif self.lo is None:
            self.next = None if (self.upward_only or c <= 1) else max(1, min(c - 1, int(round(c / STEP))))
        else:
            mid = int(round(math.sqrt(self.lo * self.hi)))
            done = self.hi <= self.lo * (1 + tol) or not self.lo < mid < self.hi
            self.next = None if done else mid


def max_load(s: Screened, seqs: int) -> int:
    """The highest load a track tries: twice what its schedulers hold (beyond it requests only queue)."""
    return LOAD_CEILING_FACTOR * seqs * s.cand.shape.ranks


def new_track(s: Screened, budgets_given: bool, phase: str = "search", max_points: Optional[int] = None) -> Track:
    mode = s.cand.mode
    key = "disaggregation.prefill.max_num_batched_tokens" if mode == "disaggregated" else \
        "scheduler.max_num_batched_tokens"
    return Track(s.cand.label, s, s.cfg, dict(s.overrides), None if budgets_given else key, s.start_load,
                 max(s.start_load, max_load(s, s.max_num_seqs)), phase=phase, max_points=max_points)


def _variant(t: Track, base: RunConfig, slo: Dict) -> Optional[Track]:
    """One step of the token budget towards the SLO that bound at the track's first failing load."""
    if t.budget_key is None or t.hi is None:
        return None
    failed = next(p for p in t.points if p.concurrency == t.hi)
    if failed.metrics is None:
        return None  # the simulator refused that load: nothing says which SLO bound
    bind = binding(failed.metrics, slo)
    mode = t.screened.cand.mode
    if mode == "disaggregated" and bind == "tpot":
        return None  # a decode instance's steps carry no prefill chunks: its budget does not move TPOT
    cur = t.cfg.disaggregation.prefill.max_num_batched_tokens if mode == "disaggregated" else None
    if cur is None:
        cur = t.cfg.scheduler.max_num_batched_tokens
    new = cur * 2 if bind == "ttft" else cur // 4
    if not MIN_BUDGET <= new <= MAX_BUDGET:
        return None
    ov = dict(t.overrides)
    ov[t.budget_key] = new
    if t.budget_key == "scheduler.max_num_batched_tokens":
        ov["scheduler.chunk_size"] = None
    from vidur_specdec.config import ConfigError
    from vidur_specdec.engine.simulation import prepare

    try:
        cfg = build_config(base, ov)
        prepare(cfg)  # a larger budget needs more activation memory: the simulator's own check
    except ConfigError:
        return None
    label = t.screened.cand.label.rsplit(", ", 1)[0] + (f", {new} tokens" if mode == "colocated"
                                                        else f", {new} prefill tokens")
    return Track(label, t.screened, cfg, ov, None, t.hi, t.ceiling, phase="refine", upward_only=True,
                 variant_of=t.key)


def run_tracks(runner: Runner, tracks: List[Track], slo: Dict, tol: float, what: str) -> None:
    """Advance every track in rounds (all next loads at once) until none has a next load."""
    rnd = 0
    while True:
        batch = [(t, t.next) for t in tracks if t.next is not None]
        if not batch:
            return
        rnd += 1
        pts = [runner.point(t.key, t.phase, t.cfg, c, t.label) for t, c in batch]
        runner.run(pts, f"{what}, round {rnd}")
        for (t, c), p in zip(batch, pts):
            t.points.append(p)
            t.advance(c, meets(p.metrics, slo), tol)


def search(runner: Runner, survivors: List[Screened], base: RunConfig, slo: Dict, tol: float,
           budgets_given: bool, checks: Optional[List[Track]] = None) -> List[Track]:
    """Every survivor's load search; then, together with ``checks`` (the screen's): a lighter load on the best
    track of each class (the frontier's per-user end) and the budget step of the :data:`REFINE_TOP` best tracks.
    Returns the tracks (variants after their parents)."""
    tracks = [new_track(s, budgets_given) for s in survivors]
    run_tracks(runner, tracks, slo, tol, "search")
    ranked = sorted((t for t in tracks if t.best_met(slo) is not None), key=lambda t: -t.best_met(slo))
    extra: List[Track] = list(checks or [])
    seen_cls = set()
    for t in ranked:
        cls = t.screened.cand.cls
        light = max(1, t.lo // 4)
        if cls not in seen_cls and light < t.lo and all(p.concurrency != light for p in t.points):
            extra.append(Track(t.key, t.screened, t.cfg, t.overrides, None, light, light, phase="curve",
                               max_points=1))
        seen_cls.add(cls)
    variants = [v for v in (_variant(t, base, slo) for t in ranked[:REFINE_TOP]) if v is not None]
    run_tracks(runner, extra + variants, slo, tol, "refine and check")
    for x in extra:  # a curve point belongs to its track
        if x.phase == "curve":
            parent = next(t for t in tracks if t.key == x.key)
            parent.points += [p for p in x.points if p not in parent.points]
    return tracks + variants


def check_tracks(screened: List[Screened], base: RunConfig, slo: Dict, n: int, max_num_seqs, jobs: int = 1) -> Tuple[
        List[Track], List[Dict]]:
    """Up to ``n`` candidates the screen dropped, to simulate (the best static estimate of each kind of drop
    first, in turn): a ranked-out one searched briefly (:data:`CHECK_POINTS` loads from its estimate), one
    dropped by a bound or the estimate at one request per scheduler. Returns their tracks and any that could not
    be built."""
    pools = {v: [s for s in screened if s.verdict == v] for v in ("ranked", "estimate", "bound")}
    # a ranked-out twin of a survivor (the same shape, EPLB on or off) says little about the screen: last
    pools["ranked"].sort(key=lambda s: (s.reason.endswith("is simulated"), -(s.est_tok_s_gpu or 0.0)))
    order = []
    while len(order) < n and any(pools.values()):
        for v in ("ranked", "bound", "estimate"):
            if pools[v] and len(order) < n:
                order.append(pools[v].pop(0))
    tracks, failed = [], []
    for s, why in zip(order, finish_all(order, base, max_num_seqs, slo, jobs)):
        if why is not None:
            failed.append({"candidate": s.cand.label, "verdict": s.verdict, "reason": s.reason, "simulated": False,
                           "note": why})
            continue
        tracks.append(new_track(s, True, phase="check", max_points=CHECK_POINTS if s.verdict == "ranked" else 1))
    return tracks, failed


def check_rows(tracks: List[Track], failed: List[Dict], slo: Dict, best_tok_s_gpu: float) -> List[Dict]:
    """What the check of the screen found, one row per dropped candidate simulated."""
    out = []
    for t in tracks:
        s = t.screened
        got = t.best_met(slo)
        out.append({"candidate": s.cand.label, "verdict": s.verdict, "reason": s.reason, "simulated": True,
                    "points": [p.index for p in t.points], "concurrency": [p.concurrency for p in t.points],
                    "meets_slo": got is not None, "tok_s_gpu": round(got, 3) if got is not None else None,
                    "beats_best": bool(got is not None and got > best_tok_s_gpu)})
    return out + failed
