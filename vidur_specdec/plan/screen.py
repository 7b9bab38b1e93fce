"""Stage 1, the screen: every candidate checked by the simulator's own refusals, then by analytic bounds.

Each candidate gets one verdict (``screen.csv``, docs/plan.md "The screen"):

* ``refused``: the simulator's own checks refuse it (``load``: the model's
  divisibility rules and vLLM's refusals; ``prepare``: weights, KV and
  activations per GPU, the longest request). These are the ConfigErrors a run of
  that config gives, called here, not re-implemented; the reason is their line.
* ``bound``: an analytic lower bound on TTFT or TPOT (:mod:`.estimate`) is over its
  SLO: no load can meet the SLOs.
* ``estimate``: the static estimate finds no batch that meets both SLOs (an
  estimate, not a bound: checked by simulating a sample, :mod:`.search`).
* ``ranked``: below the ``--top`` best static estimates of its class (colocated /
  disaggregated, with / without speculation), or more than :data:`BAND` below the
  class's best.
* ``survivor``: simulated under load.

The speculation schedule of each survivor is chosen here too (tune's chooser), and
``max_num_seqs`` when ``auto``: a multiple of 8 at least :data:`SEQS_MARGIN` times
the requests the estimate holds per scheduler at the SLOs (its batch, times the
pipeline's micro-batches), at most vLLM's serve default.
"""

from __future__ import annotations

import concurrent.futures as cf
import dataclasses
import math
import multiprocessing as mp
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Tuple

from vidur_specdec.config import ConfigError, RunConfig
from vidur_specdec.plan import estimate as est_mod
from vidur_specdec.plan.candidates import Candidate, SearchContext, instance_shapes
from vidur_specdec.tune.points import build_config

SCREEN_REQUESTS = 64  # requests drawn for the estimate's workload (lengths only; nothing is simulated)
SEQS_MARGIN = 1.5  # auto max_num_seqs: this many times the estimated batch at the SLOs (the estimate errs both ways)
SEQS_STEP = 8
BAND = 0.25  # a class's second and later survivors are within this fraction of its best estimate (its error scale)


@dataclass
class Screened:
    """One candidate's screen: verdict, reason, the checked config and the estimate (None when refused)."""

    cand: Candidate
    verdict: str
    reason: str = ""
    cfg: Optional[RunConfig] = None
    estimate: Optional[est_mod.Estimate] = None
    max_num_seqs: Optional[int] = None
    schedule: Optional[List[Tuple[int, int, int]]] = None
    start_load: Optional[int] = None
    overrides: Dict[str, Any] = field(default_factory=dict)  # its keys over the plan's base (load excluded)
    default_seqs: Optional[int] = None  # vLLM's max_num_seqs for it (the decode pool's with pools)
    pricing: Dict[str, Any] = field(default_factory=dict)
    workload: Optional[est_mod.Workload] = None

    @property
    def est_tok_s_gpu(self) -> Optional[float]:
        b = self.estimate.best if self.estimate else None
        return b["tok_s_gpu"] if b else None


def screen_overrides(cand: Candidate) -> Dict[str, Any]:
    """The candidate's keys plus a small closed-loop workload (its lengths are what the estimate reads)."""
    ov = cand.overrides()
    ov.update({"workload.arrival": "closed", "workload.concurrency": 1, "workload.num_requests": SCREEN_REQUESTS,
               "workload.warmup_requests": 0})
    return ov


def _first_line(e: Exception) -> str:
    return str(e).splitlines()[0] if str(e) else type(e).__name__


def check_and_prepare(base: RunConfig, cand: Candidate):
    """``(config, prepared)`` or ConfigError: the simulator's own refusals (load, then prepare)."""
    from vidur_specdec.engine.simulation import prepare

    cfg = build_config(base, screen_overrides(cand))
    return cfg, prepare(cfg)


def advanced(cfg: RunConfig, cand: Candidate) -> List[float]:
    if not cand.spec.enabled:
        return [1.0]
    from vidur_specdec.tune.choose import expected_advanced

    return expected_advanced(cfg, cand.spec.k_max)


def estimate_one(cand: Candidate, cfg: RunConfig, prepared, slo: Dict) -> Tuple[est_mod.Estimate, est_mod.Workload]:
    """Bounds and the static estimate of a prepared candidate."""
    adv = advanced(cfg, cand)
    shape = cand.shape
    if shape.mode == "disaggregated":
        top = prepared
        w = est_mod.workload_of(top.specs, slo["percentile"])
        pre, dec = top.pool("prefill").prepared, top.pool("decode").prepared
        e = est_mod.disaggregated(est_mod.Pricing(pre.pricer, pre.scheduler.chunk_size),
                                  est_mod.Pricing(dec.pricer, dec.scheduler.chunk_size), top.link, w, adv,
                                  shape.prefill.instances, shape.decode.instances, shape.gpus,
                                  dec.scheduler.batch_size_cap, slo)
        return e, w
    w = est_mod.workload_of(prepared.specs, slo["percentile"])
    pr = est_mod.Pricing(prepared.pricer, prepared.scheduler.chunk_size)
    return est_mod.colocated(pr, w, adv, shape.gpus_per_instance, prepared.scheduler.batch_size_cap, slo), w


def auto_seqs(batch: int, default_cap: int) -> int:
    return int(min(default_cap, max(SEQS_STEP, SEQS_STEP * math.ceil(SEQS_MARGIN * batch / SEQS_STEP))))


def parents(c: Candidate) -> List[Candidate]:
    """Smaller deployments whose refusal refuses ``c`` too: a drafter and EPLB's spare experts only add to
    what each GPU holds, and a pool's instance is refused as a colocated instance of its shape would be."""
    from vidur_specdec.plan.candidates import NONE, Shape

    sh = c.shape
    out = []
    if c.spec.enabled:
        out.append(dataclasses.replace(c, spec=NONE))
    if sh.mode == "colocated" and sh.redundant_experts is not None:
        out.append(dataclasses.replace(c, shape=dataclasses.replace(sh, redundant_experts=None)))
    if sh.mode == "disaggregated":
        for p in (sh.prefill, sh.decode):
            inst = Shape("colocated", sh.device, tp=p.tp, dp=p.dp, ep=p.ep, replicas=1)
            out.append(Candidate(inst, c.spec, c.budget))
    return out


# what the screen's worker processes read (set before they fork; never pickled)
_SHARED: Dict[str, Any] = {}
# a process's verdicts so far: the refusal line, or (config, prepared run); parents are checked before children
_CHECKED: Dict[Candidate, Any] = {}


def _check(base: RunConfig, c: Candidate):
    """``c``'s refusal line or its ``(config, prepared run)``; a refused parent refuses it without a check."""
    got = _CHECKED.get(c)
    if got is not None:
        return got
    for p in parents(c):
        r = _check(base, p)
        if isinstance(r, str):
            got = _CHECKED[c] = r if r.startswith("as ") else f"as {p.shape.label} ({p.spec.name}): {r}"
            return got
    try:
        got = check_and_prepare(base, c)
    except ConfigError as e:
        got = _first_line(e)
    _CHECKED[c] = got
    return got


def _bundle(c: Candidate):
    """What a worker takes at once, so that one worker builds and fits each profile: a candidate with the others
    of its GPU, token budget and attention tensor parallel size (with pools, the prefill pool's, whose profile
    is the pools' own: its context is the prompt's); its parents (:func:`parents`: itself without speculation or
    spare experts) among them."""
    sh = c.shape
    return (sh.mode, sh.device, c.budget, sh.tp if sh.mode == "colocated" else sh.prefill.tp)


def screen_job(group: int) -> List:
    """One bundle of candidates in a worker (:func:`_bundle`; in candidate order, so a parent's check serves its
    children): per candidate its refusal line, or ``(estimate, workload, vLLM's max_num_seqs for it)``."""
    base, slo = _SHARED["base"], _SHARED["slo"]
    out: List = []
    for c in _SHARED["groups"][group]:
        r = _check(base, c)
        if isinstance(r, str):
            out.append(r)
            continue
        cfg, prepared = r
        e, w = estimate_one(c, cfg, prepared, slo)
        seqs = cfg.scheduler.max_num_seqs if c.mode == "colocated" else \
            (cfg.disaggregation.decode.max_num_seqs or cfg.scheduler.max_num_seqs)
        out.append((e, w, seqs))
    return out


def _map(fn, n: int, jobs: int) -> List:
    """``fn(i)`` for i < n on ``jobs`` forked processes (inline for one), in order."""
    if jobs <= 1 or n <= 1 or "fork" not in mp.get_all_start_methods():
        return [fn(i) for i in range(n)]
    with cf.ProcessPoolExecutor(max_workers=min(jobs, n), mp_context=mp.get_context("fork")) as ex:
        return list(ex.map(fn, range(n)))


def checked(base: RunConfig, cands: List[Candidate], slo: Dict, jobs: int) -> Dict[Candidate, Any]:
    """Each candidate's refusal line or its ``(estimate, workload, max_num_seqs)``, on ``jobs`` forked workers by
    bundle (:func:`_bundle`): the simulator's refusals and the estimates, the same whatever ``jobs``. The prepared
    runs stay in the workers; a survivor is prepared again in this process (:func:`finish`), where the
    simulations' workers fork from, its profiles and fitted predictors then read from the disk cache."""
    groups: Dict[Any, List[Candidate]] = {}
    for c in cands:  # families that read the same built profile together: one worker builds and fits it
        groups.setdefault(_bundle(c), []).append(c)
    order = list(groups.values())
    _SHARED.update(base=base, slo=slo, groups=order)
    try:
        if jobs > 1:  # this process first, up to a candidate the simulator accepts: the kernel tables, imports
            for c in cands:  # and first fit every worker needs, made once (its checks are the workers' too)
                if not isinstance(_check(base, c), str):
                    break
        results = _map(screen_job, len(order), jobs)
    finally:
        _SHARED.clear()
        _CHECKED.clear()
    return {c: r for members, rs in zip(order, results) for c, r in zip(members, rs)}


def screen(base: RunConfig, cands: List[Candidate], slo: Dict, top: int, max_num_seqs,
           log: Callable[[str], None], jobs: int = 1) -> List[Screened]:
    """Every candidate's verdict (in candidate order); survivors carry their config, schedule and first load."""
    out: List[Screened] = []
    verdicts = checked(base, cands, slo, jobs)
    for c in cands:
        r = verdicts[c]
        if isinstance(r, str):
            out.append(Screened(c, "refused", r))
            continue
        e, w, seqs = r
        s = Screened(c, "", estimate=e, workload=w, default_seqs=seqs)
        s.pricing = {"workload": {"isl_mean": round(w.isl, 3), "osl_mean": round(w.osl, 3),
                                  "prompt_at_percentile": w.prompt_at_p, "context": w.context}}
        if e.ttft_lb_ms > slo["ttft_ms"]:
            s.verdict, s.reason = "bound", (f"TTFT >= {e.ttft_lb_ms:.0f} ms at any load (the {w.prompt_at_p}-token "
                                            f"prompt prefilled alone) > the SLO {slo['ttft_ms']:g} ms")
        elif e.tpot_lb_ms > slo["tpot_ms"]:
            s.verdict, s.reason = "bound", (f"TPOT >= {e.tpot_lb_ms:.1f} ms at any load (one request decoding "
                                            f"alone) > the SLO {slo['tpot_ms']:g} ms")
        elif e.best is None:
            s.verdict, s.reason = "estimate", "the static estimate meets both SLOs at no batch size"
        out.append(s)
    _rank(out, top)
    finish_all([s for s in out if s.verdict == "survivor"], base, max_num_seqs, slo, jobs)
    log(f"plan: screened {len(out)} candidates: " + ", ".join(
        f"{n} {v}" for v, n in _counts(out).items() if n))
    return out


def _counts(out: List[Screened]) -> Dict[str, int]:
    counts = {v: 0 for v in ("survivor", "ranked", "estimate", "bound", "refused")}
    for s in out:
        counts[s.verdict] += 1
    return counts


def _rank(out: List[Screened], top: int) -> None:
    """Survivors: per class, the ``top`` best static estimates (ties: candidate order) within :data:`BAND` of
    the class's best, one per shape (EPLB on and off, and token budgets, are one shape: the better estimate of
    them is simulated)."""
    live = [s for s in out if s.verdict == ""]
    by_cls: Dict[str, List[Screened]] = {}
    for s in live:
        by_cls.setdefault(s.cand.cls, []).append(s)
    for cls, group in by_cls.items():
        group.sort(key=lambda s: -s.est_tok_s_gpu)  # stable: candidate order breaks ties
        best = group[0].est_tok_s_gpu
        kept: Dict[Any, Screened] = {}
        for i, s in enumerate(group):
            family = (dataclasses.replace(s.cand.shape, redundant_experts=None), s.cand.spec)
            if len(kept) < top and family not in kept and (not kept or s.est_tok_s_gpu >= (1 - BAND) * best):
                s.verdict = "survivor"
                kept[family] = s
            elif family in kept:
                s.verdict, s.reason = "ranked", (f"static estimate {s.est_tok_s_gpu:.1f} tokens/s/GPU at the SLOs; "
                                                 f"{kept[family].cand.label} (the same shape) is simulated")
            else:
                s.verdict, s.reason = "ranked", (f"static estimate {s.est_tok_s_gpu:.1f} tokens/s/GPU at the SLOs, "
                                                 f"{100 * (1 - s.est_tok_s_gpu / best):.0f} % below the best of "
                                                 f"its class ({best:.1f}); rank {i + 1} of {len(group)}")


def _schedule_of(s: Screened, base: RunConfig, max_num_seqs) -> Tuple[int, Dict[str, Any], Optional[List], Any]:
    """``(max_num_seqs, overrides, schedule ranges or None, the schedule's context tokens)`` of a candidate."""
    c = s.cand
    best = s.estimate.best or (s.estimate.curve[-1] if s.estimate.curve else {"batch": 1})
    b = best["batch"] * (c.shape.pp if c.mode == "colocated" else 1)  # PP micro-batches in flight
    seqs = auto_seqs(b, s.default_seqs) if max_num_seqs == "auto" else int(max_num_seqs)
    ov = c.overrides()
    if c.mode == "disaggregated":  # only the decode pool's batch is capped; the prefill pool keeps vLLM's default
        ov["disaggregation.decode.max_num_seqs"] = seqs
    else:
        ov["scheduler.max_num_seqs"] = seqs
    if not c.spec.enabled:
        return seqs, ov, None, None
    from vidur_specdec.tune.choose import choose_schedule

    ranges, table = choose_schedule(build_config(base, ov), c.spec.k_max)
    return seqs, ov, [tuple(r) for r in ranges], table["context_tokens"]


def _schedule_job(i: int):
    """A survivor's schedule in a worker: :func:`_schedule_of`'s tuple, or the ConfigError's line."""
    s, base, max_num_seqs = _SHARED["finish"][i]
    try:
        return _schedule_of(s, base, max_num_seqs)
    except ConfigError as e:
        return _first_line(e)


def finish_all(items: List[Screened], base: RunConfig, max_num_seqs, slo: Dict, jobs: int = 1) -> List[Optional[str]]:
    """:func:`finish` for each, the schedules chosen on ``jobs`` forked workers (the step prices of every batch
    size and k), the configs prepared here; per item None, or the line of the ConfigError that stopped it."""
    _SHARED.update(finish=[(s, base, max_num_seqs) for s in items])
    try:
        chosen = _map(_schedule_job, len(items), jobs)
    finally:
        _SHARED.clear()
    out: List[Optional[str]] = []
    for s, ch in zip(items, chosen):
        if isinstance(ch, str):
            out.append(ch)
            continue
        try:
            finish(s, base, max_num_seqs, slo, ch)
            out.append(None)
        except ConfigError as e:
            out.append(_first_line(e))
    return out


def finish(s: Screened, base: RunConfig, max_num_seqs, slo: Dict, chosen=None) -> None:
    """The survivor's max_num_seqs, its run config and schedule (``chosen``: :func:`_schedule_of`'s, when a worker
    made it), and the first load to simulate (also run on the dropped candidates the search checks)."""
    c = s.cand
    seqs, ov, ranges, ctx = chosen if chosen is not None else _schedule_of(s, base, max_num_seqs)
    s.max_num_seqs = seqs
    if ranges is not None:
        s.schedule = list(ranges)
        s.pricing["schedule_context_tokens"] = ctx
        ov.update({"speculative.num_speculative_tokens": max(1, max(k for _, _, k in ranges)),
                   "speculative.num_speculative_tokens_per_batch_size": [list(r) for r in ranges]})
    cfg = build_config(base, ov)
    from vidur_specdec.engine.simulation import prepare

    prepare(cfg)  # its predictors fitted here, where the simulations' workers fork from
    s.cfg, s.overrides = cfg, ov
    if s.estimate.best is not None:
        s.start_load = max(1, int(round(est_mod.concurrency(s.estimate.best, s.workload, c.shape.gpus))))
    else:  # a dropped candidate checked by simulation: the lightest load, one request per scheduler
        s.start_load = c.shape.ranks


# --------------------------------------------------------------------------- what would fit


def what_fits(base: RunConfig, ctxs: List[SearchContext], gpus: int) -> str:
    """For the one-line refusal when nothing fits: the smallest instance of each GPU kind the simulator accepts
    (memory, divisibility), and the GPU counts near ``gpus`` it divides."""
    from vidur_specdec.plan.candidates import NONE, Shape

    found = []
    for ctx in ctxs:
        wide = SearchContext(64, ctx.device, 64, ctx.gpus_per_node if gpus > 8 else 8, ctx.is_moe, ctx.num_experts)
        best = None
        # the fewest GPUs first, then the widest tensor parallelism (what vLLM users reach for first)
        for tp, pp, dp, ep in sorted(instance_shapes(wide, 64), key=lambda t: (t[0] * t[1] * t[2], -t[0], t[1], t[2])):
            shape = Shape("colocated", ctx.device, tp=tp, pp=pp, dp=dp, ep=ep, replicas=1)
            try:
                check_and_prepare(base, Candidate(shape, NONE, base.scheduler.max_num_batched_tokens))
            except ConfigError:
                continue
            best = (tp * pp * dp, shape.label)
            break
        if best is None:
            found.append(f"no instance of up to 64 {ctx.device} GPUs fits")
            continue
        n, label = best
        below = (gpus // n) * n
        near = [x for x in (below, below + n) if x > 0 and x != gpus]
        found.append(f"the smallest {ctx.device} instance that fits is {label} ({n} GPUs)"
                     + (f"; --gpus {' or '.join(map(str, near))} would fit" if near else ""))
    return "; ".join(found)
