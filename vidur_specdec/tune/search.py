"""The searches of a tune: capacity under the SLOs, the load grid, each static k's crossover, the checks.

Loads are searched on a log scale. A *bracket* ``[lo, hi]`` holds two simulated
loads on either side of what is sought (SLOs met / not met; speedup >= 1 / < 1);
it is bisected at its geometric midpoint (a whole number on the concurrency
axis) until ``hi <= lo * (1 + tolerance)`` or no load is left between the two.
Each round of a search submits all its points at once (every k's crossover
bisects in the same round), so ``--jobs`` workers stay busy; the points and so
every output depend only on the config and the options, never on ``--jobs``.

* **capacity** of a setting: the highest simulated load whose TTFT and TPOT
  at the SLO percentile meet the SLOs. Starting at the axis' first load,
  2 loads a factor 2 apart per round are tried upwards (downwards when the first
  fails) until one fails (meets), then the bracket is bisected.
* **grid**: loads ``cap * 2**e`` for e in :data:`GRID_EXPONENTS` (cap/4 to
  2 cap, a factor 2**0.25 apart above cap/2; cap: the capacity without
  speculation), every static k = 0 .. k_max at each.
* **crossover** of k: the first grid interval where the TPOT p50 speedup
  over k = 0 goes from >= 1 to < 1, bisected; null when the speedup is
  already below 1 at the lowest grid load or never falls below 1.
* **checks**: the chosen schedule at ``cap/4`` (low), ``cap/2`` (middle) and
  ``cap`` (high), against every static k there.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

from vidur_specdec.config import ConfigError
from vidur_specdec.tune.points import Evaluator, Point, Setting
from vidur_specdec.tune.loads import load_bounds
from vidur_specdec.tune.loads import point_overloaded

# Grid loads: capacity * 2**e, denser from cap/2 to 2 cap, where speedups change fastest (queues build).
GRID_EXPONENTS = (-2, -1, -0.5, -0.25, 0, 0.25, 0.5, 0.75, 1)
CHECK_EXPONENTS = (-2, -1, 0)            # low, middle, high
EXPAND_PER_ROUND = 2                     # loads tried per round while looking for a capacity bracket
MAX_EXPAND_ROUNDS = 6                    # 12 doublings: a factor 4096 either way


# --------------------------------------------------------------------------- objectives


@dataclass(frozen=True)
class Objective:
    """What "best" means when comparing settings at one load (``column`` of a point's metrics)."""

    name: str
    column: str
    higher_is_better: bool

    def value(self, m: Dict) -> Optional[float]:
        return m.get(self.column)

    def better(self, a: Optional[float], b: Optional[float]) -> bool:
        if a is None:
            return False
        if b is None:
            return True
        return a > b if self.higher_is_better else a < b

    def shortfall(self, value: Optional[float], best: Optional[float]) -> Optional[float]:
        """How much worse ``value`` is than ``best``, as a fraction of ``best`` (<= 0: as good or better)."""
        if value is None or best is None or best == 0:
            return None
        return (best - value) / best if self.higher_is_better else (value - best) / best


OBJECTIVES = {
    "tpot": Objective("tpot", "tpot_ms_p50", False),
    "throughput": Objective("throughput", "throughput_tok_s", True),
    "goodput": Objective("goodput", "goodput_req_s", True),
}


def speedup(base: Dict, m: Dict) -> Optional[float]:
    """TPOT p50 speedup over no speculation at the same load."""
    b, t = base.get("tpot_ms_p50"), m.get("tpot_ms_p50")
    return b / t if b is not None and t else None


# --------------------------------------------------------------------------- the tune


@dataclass
class TuneResult:
    capacity: Dict[str, Optional[float]] = field(default_factory=dict)
    capacity_bracket: Dict[str, Optional[List[float]]] = field(default_factory=dict)
    grid: List[float] = field(default_factory=list)
    best_k: Dict[float, int] = field(default_factory=dict)
    crossover: Dict[int, Optional[float]] = field(default_factory=dict)
    crossover_bracket: Dict[int, Optional[List[float]]] = field(default_factory=dict)
    crossover_note: Dict[int, str] = field(default_factory=dict)
    schedule: List[Tuple[int, int, int]] = field(default_factory=list)
    schedule_table: Dict = field(default_factory=dict)
    checks: List[Dict] = field(default_factory=list)
    schedule_setting: Optional[Setting] = None
    ttft_reference: Dict = field(default_factory=dict)  # {"load", "ttft_ms_p50"}: the TTFT overload reference
    drafters: Optional[Dict] = None  # the drafter comparison (:mod:`.drafters`), when asked for
    evidence_top: Optional[int] = None  # the largest batch size a non-overloaded simulated point reached


class Tuner:
    def __init__(self, ev: Evaluator, k_max: int, tolerance: float, objective: Objective, slo: Dict,
                 loads: Optional[List[float]] = None, compare_drafters: Optional[str] = None) -> None:
        self.ev, self.k_max, self.tol, self.objective, self.slo = ev, k_max, tolerance, objective, slo
        self.axis = ev.axis
        self.user_loads = [self.axis.norm(x) for x in (loads or [])]
        self.bounds = load_bounds(ev.base, self.axis)
        self.ttft_reference_ms: Optional[float] = None  # set once the grid has run
        self.compare_drafters = compare_drafters  # None: no comparison; "": the default dataset

    def clamp(self, x: float) -> float:
        """A load inside the config's valid range (:func:`vidur_specdec.tune.loads.load_bounds`)."""
        return min(max(self.axis.norm(x), self.bounds["lo"]), self.bounds["hi"])

    def over(self, m: Dict) -> bool:
        """Overloaded by the queue rule or by TTFT growth (:mod:`vidur_specdec.tune.loads`)."""
        return point_overloaded(m, self.ttft_reference_ms)

    def evidence_top(self) -> Optional[int]:
        """The largest batch size (requests in a step) any simulated point reached without being overloaded:
        where the schedule's evidence ends (an overloaded run fills every batch it is allowed)."""
        sizes = [p.metrics.get("batch_size_max") for p in self.ev.points
                 if p.metrics is not None and not self.over(p.metrics)]
        sizes = [int(x) for x in sizes if x is not None]
        return max(sizes) if sizes else None

    # ------------------------------------------------------------------ helpers
    def _latencies(self, m: Dict) -> Tuple[Optional[float], Optional[float]]:
        """A point's (TTFT, TPOT) in ms at the SLO percentile (None: not in its metrics)."""
        pct = self.slo["percentile"]
        return m.get(f"ttft_ms_p{pct}"), m.get(f"tpot_ms_p{pct}")

    def meets(self, m: Dict) -> bool:
        ttft, tpot = self._latencies(m)
        return (ttft is not None and ttft <= self.slo["ttft_ms"]) and (tpot is None or tpot <= self.slo["tpot_ms"])

    def _run(self, phase: str, pairs: List[Tuple[float, Setting]],
             ahead: Sequence[Tuple[float, Setting]] = ()) -> List[Point]:
        pts = [self.ev.point(phase, load, s) for load, s in pairs]
        self.ev.run(pts, ahead)
        return pts

    def margin(self, m: Dict) -> Optional[float]:
        """How far a point is from the SLOs: the larger of TTFT / its SLO and TPOT / its SLO at the SLO
        percentile (<= 1: met); None when its TTFT is missing."""
        ttft, tpot = self._latencies(m)
        if ttft is None:
            return None
        return max(ttft / self.slo["ttft_ms"], tpot / self.slo["tpot_ms"] if tpot is not None else 0.0)

    def _next_mid(self, lo: Point, hi: Point, mid: float) -> Optional[float]:
        """The bisection's likely next midpoint once ``mid`` is known: the SLO margin interpolated on a log scale
        between the bracket's ends (a guess; it only picks which point to simulate ahead, :meth:`Evaluator.run`),
        None when the bracket would be converged."""
        a, b = self.margin(lo.metrics), self.margin(hi.metrics)
        meets = True
        if a is not None and b is not None and a > 0 and b > a:
            t = math.log(1.0 / a) / math.log(b / a)  # where the margin crosses 1, as a share of the bracket
            meets = math.log(mid / lo.load) < t * math.log(hi.load / lo.load)
        x, y = (mid, hi.load) if meets else (lo.load, mid)
        return None if self.axis.converged(x, y, self.tol) else self.axis.mid(x, y)

    # ------------------------------------------------------------------ capacity
    def capacity(self, setting: Setting, start: float) -> Tuple[Optional[float], Optional[List[float]]]:
        """(highest load meeting the SLOs, its bracket); (None, None) when even the lowest load tried fails."""
        ax = self.axis
        ok: Optional[float] = None
        bad: Optional[float] = None
        # each round simulates ahead the load the next round likely asks for (Evaluator.run: on an idle worker); the
        # first round, both loads the first expansion round asks for when the start meets the SLOs: below capacity a
        # point's steps, so its cost, fall about as 1/load, so the two doublings (~3/4 of the start's cost, one after
        # the other on the worker) end about when the start does
        first = self._run("capacity", [(self.clamp(start), setting)],
                          [(self.clamp(start * 2.0 ** i), setting) for i in range(1, EXPAND_PER_ROUND + 1)])[0]
        at = {first.load: first}  # this search's points by load (the bracket's ends are among them)
        up = self.meets(first.metrics)
        if up:
            ok = first.load
        else:
            bad = first.load
        for r in range(MAX_EXPAND_ROUNDS):
            base = ok if up else bad
            loads = []
            for i in range(1, EXPAND_PER_ROUND + 1):
                x = self.clamp(base * (2.0 ** i if up else 2.0 ** -i))
                if x not in loads and x != base:
                    loads.append(x)
            if not loads:
                break
            pts = self._run("capacity", [(x, setting) for x in loads],
                            [(self.clamp(loads[-1] * (2.0 if up else 0.5)), setting)])
            at.update((p.load, p) for p in pts)
            for p in pts:  # in order away from base: the first that flips ends the expansion
                if self.meets(p.metrics) == up:
                    if up:
                        ok = p.load
                    else:
                        bad = p.load
                    continue
                if up:
                    bad = p.load
                else:
                    ok = p.load
                break
            if ok is not None and bad is not None:
                break
        if ok is None:
            return None, None
        if bad is None:
            return ok, None  # meets the SLOs at every load tried
        lo, hi = ok, bad
        while not ax.converged(lo, hi, self.tol):
            mid = ax.mid(lo, hi)
            nxt = self._next_mid(at[lo], at[hi], mid)
            p = at[mid] = self._run("capacity", [(mid, setting)], [(nxt, setting)] if nxt is not None else ())[0]
            if self.meets(p.metrics):
                lo = mid
            else:
                hi = mid
        return lo, [lo, hi]

    # ------------------------------------------------------------------ grid and crossovers
    def grid_loads(self, cap: float) -> List[float]:
        loads: List[float] = []
        for e in GRID_EXPONENTS:
            x = self.clamp(cap * 2.0 ** e)
            if x not in loads:
                loads.append(x)
        return sorted(set(loads) | set(self.user_loads))

    def run_grid(self, loads: List[float]) -> Dict[Tuple[float, int], Dict]:
        pairs = [(x, Setting(k)) for x in loads for k in range(self.k_max + 1)]
        pts = self._run("grid", pairs)
        return {(p.load, p.setting.k): p.metrics for p in pts}

    def crossovers(self, loads: List[float], table: Dict[Tuple[float, int], Dict], res: TuneResult) -> None:
        brackets: Dict[int, List[float]] = {}
        all_loads = loads
        for k in range(1, self.k_max + 1):
            loads = [x for x in all_loads if not self.over(table[(x, 0)]) and not self.over(table[(x, k)])]
            if not loads:
                res.crossover[k], res.crossover_bracket[k] = None, None
                res.crossover_note[k] = "every load searched is overloaded"
                continue
            s = [speedup(table[(x, 0)], table[(x, k)]) for x in loads]
            res.crossover[k], res.crossover_bracket[k] = None, None
            if s[0] is not None and s[0] < 1:
                res.crossover_note[k] = f"speedup {s[0]:.3f} < 1 already at the lowest load searched"
                continue
            for i in range(1, len(loads)):
                if s[i] is not None and s[i] < 1 <= (s[i - 1] or 0):
                    brackets[k] = [loads[i - 1], loads[i]]
                    break
            else:
                res.crossover_note[k] = "speedup >= 1 at every load searched that is not overloaded"
        while True:
            live = {k: b for k, b in brackets.items() if not self.axis.converged(b[0], b[1], self.tol)}
            if not live:
                break
            pairs = []
            for k, (lo, hi) in sorted(live.items()):
                mid = self.axis.mid(lo, hi)
                pairs += [(mid, Setting(0)), (mid, Setting(k))]
            pts = self._run("crossover", pairs)
            for j, k in enumerate(sorted(live)):
                base, pk = pts[2 * j], pts[2 * j + 1]
                sp = speedup(base.metrics, pk.metrics)
                if sp is not None and sp >= 1:
                    brackets[k][0] = pk.load
                else:
                    brackets[k][1] = pk.load
        for k, (lo, hi) in brackets.items():
            res.crossover_bracket[k] = [lo, hi]
            res.crossover[k] = self.axis.norm(math.sqrt(lo * hi)) if not self.axis.integer else hi

    def best_k(self, loads: List[float], table: Dict[Tuple[float, int], Dict]) -> Dict[float, int]:
        out = {}
        for x in loads:
            live = [k for k in range(self.k_max + 1) if not self.over(table[(x, k)])]
            if not live:
                continue  # overloaded with and without speculation: no best k there
            best = live[0]
            for k in live[1:]:
                if self.objective.better(self.objective.value(table[(x, k)]), self.objective.value(table[(x, best)])):
                    best = k
            out[x] = best
        return out

    # ------------------------------------------------------------------ the whole tune
    def tune(self, choose) -> TuneResult:
        """Run every search; ``choose(limit)`` returns (schedule ranges over batch sizes 1..limit, table) from the
        step-cost model, ``limit`` the largest batch size the simulated points reached (:meth:`evidence_top`)."""
        res = TuneResult()
        none = Setting(0)
        if self.user_loads:  # the loads asked for, every k, first (they keep the phase name "loads")
            self._run("loads", [(x, Setting(k)) for x in self.user_loads for k in range(self.k_max + 1)])
        cap, bracket = self.capacity(none, self.axis.default_start)
        if cap is None:
            raise ConfigError(f"--slo-ttft-ms/--slo-tpot-ms: not met without speculation even at "
                              f"{self.axis.name} {self.axis.fmt(self.axis.norm(self.axis.default_start * 2.0 ** -12))}; "
                              "loosen the SLOs")
        res.capacity["none"], res.capacity_bracket["none"] = cap, bracket
        loads = self.grid_loads(cap)
        res.grid = loads
        table = self.run_grid(loads)
        ref = table[(loads[0], 0)].get("ttft_ms_p50")
        self.ttft_reference_ms = ref
        res.ttft_reference = {"load": loads[0], "ttft_ms_p50": ref}
        res.best_k = self.best_k(loads, table)
        self.crossovers(loads, table, res)

        res.evidence_top = self.evidence_top()
        ranges, sched_table = choose(res.evidence_top)
        res.schedule, res.schedule_table = ranges, sched_table
        # num_speculative_tokens: the schedule's largest k (at least 1, as vLLM requires; all-zero = plain decoding)
        sched = Setting(max(1, max(k for _, _, k in ranges)), tuple(ranges))
        res.schedule_setting = sched
        check_loads = []
        for x in [self.clamp(cap * 2.0 ** e) for e in CHECK_EXPONENTS] + self.user_loads:
            if x not in check_loads:
                check_loads.append(x)
        pts = self._run("check", [(x, sched) for x in check_loads])
        from vidur_specdec.speculation.schedule import KSchedule

        lookup = KSchedule(ranges, sched.k, max(hi for _, hi, _ in ranges))
        for x, p in zip(check_loads, pts):
            statics = {k: table[(x, k)] for k in range(self.k_max + 1)}
            best = res.best_k.get(x, 0)
            v, vb, v0 = (self.objective.value(p.metrics), self.objective.value(statics[best]),
                         self.objective.value(statics[0]))
            res.checks.append({
                "load": x, "best_static_k": best,
                "schedule": v, "best_static": vb, "k0": v0,
                "shortfall_vs_best": self.objective.shortfall(v, vb),
                "shortfall_vs_k0": self.objective.shortfall(v, v0),
                "schedule_speedup": speedup(statics[0], p.metrics),
                "best_static_speedup": speedup(statics[0], statics[best]),
                "k_flips": p.metrics.get("k_flips"), "num_steps": p.metrics.get("num_steps"),
                "overloaded": self.over(p.metrics),
                # the schedule's k at the median batch size its run reached at this load
                "batch_size_p50": p.metrics.get("batch_size_p50"),
                "schedule_k": (lookup.k_for(max(1, int(round(p.metrics["batch_size_p50"]))))
                               if p.metrics.get("batch_size_p50") is not None else None),
            })
        res.capacity["speculative"], res.capacity_bracket["speculative"] = self.capacity(sched, cap)
        if self.compare_drafters is not None:
            from vidur_specdec.tune.drafters import compare

            res.drafters = compare(self, self.user_loads or check_loads, self.compare_drafters or None)
        return res
