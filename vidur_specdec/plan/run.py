"""A plan's two stages, end to end: the screen (no simulation), then the search under load and the answer.

:func:`screen_stage` enumerates the candidates (:mod:`.candidates`) and screens
them (:mod:`.screen`); it raises the one-line refusals when nothing fits the GPUs
or nothing can meet the SLOs, before anything is written. :func:`search_stage`
simulates the survivors (:mod:`.search`), checks a sample of what the screen
dropped, and builds the answer (:mod:`.frontier`): the rows of ``plan.csv``, the
frontiers, the best deployment and ``summary.json``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

from vidur_specdec import __version__
from vidur_specdec.config import ConfigError
from vidur_specdec.config.vllm_defaults import VLLM_VERSION, serve_batch_defaults
from vidur_specdec.plan import candidates as cand_mod
from vidur_specdec.plan import frontier as fr
from vidur_specdec.plan.inputs import PlanSpec
from vidur_specdec.plan.points import Runner, measured_requests
from vidur_specdec.plan.screen import Screened, finish, screen, what_fits
from vidur_specdec.plan.search import check_rows, check_tracks, search
from vidur_specdec.sweep.definition import identity
from vidur_specdec.sweep.digest import canonical_json, short_sha

VERDICTS = ("survivor", "ranked", "estimate", "bound", "refused")


@dataclass
class Stage1:
    """What the screen gives the search."""

    spec: PlanSpec
    contexts: List[cand_mod.SearchContext]
    options: List[cand_mod.SpecOption]
    skipped_drafters: List[Dict]
    screened: List[Screened]
    budgets_given: bool
    notes: List[str] = field(default_factory=list)


@dataclass
class Answer:
    """A finished plan: the rows of plan.csv and screen.csv, and summary.json."""

    rows: List[Dict]
    screen_rows: List[Dict]
    summary: Dict[str, Any]
    best_config: Dict[str, Any]


def _slo_text(spec: PlanSpec) -> str:
    p = spec.slo_percentile
    return (f"TTFT p{p} <= {spec.slo_ttft_ms:g} ms and TPOT p{p} <= {spec.slo_tpot_ms:g} ms "
            f"({1000 / spec.slo_tpot_ms:.4g} tokens/s per user)")


def screen_stage(spec: PlanSpec, say: Callable[[str], None], jobs: int = 1) -> Stage1:
    """Enumerate and screen; ConfigError when nothing fits or nothing can meet the SLOs."""
    from vidur_specdec.engine.resolve import resolve
    from vidur_specdec.hardware.devices import get_device

    model = resolve(spec.base).deployment.model
    ctxs = [cand_mod.SearchContext(spec.gpus, d, spec.max_gpus_per_instance, spec.gpus_per_node, model.is_moe,
                                   int(getattr(model, "num_experts", 0) or 0)) for d in spec.devices]
    options, skipped = cand_mod.spec_options(spec.base, spec.k_max, spec.methods, spec.dataset)
    if not options:
        raise ConfigError(f"--methods: none of {', '.join(spec.methods)} is available for {spec.model} "
                          "(no speculation is 'none'; the library's drafters: python -m vidur_specdec acceptance "
                          f"--target {spec.model})")
    budgets = {d: spec.max_num_batched_tokens or (serve_batch_defaults(get_device(d))[0],) for d in spec.devices}
    cands = cand_mod.enumerate_candidates(ctxs, spec.modes, options, budgets)
    say(f"plan: {spec.model} on {spec.gpus} x {'/'.join(spec.devices)}, {_slo_text(spec)}; {len(cands)} candidates "
        f"({len(options)} speculation option{'s' if len(options) > 1 else ''}: "
        f"{', '.join(o.name for o in options)})")
    if not cands:
        raise ConfigError(f"--gpus: no deployment shape uses exactly {spec.gpus} GPUs within --max-gpus-per-instance "
                          f"{spec.max_gpus_per_instance} ({', '.join(spec.modes)})")
    screened = screen(spec.base, cands, spec.slo, spec.top, spec.max_num_seqs, say, jobs)
    live = [s for s in screened if s.verdict != "refused"]
    if not live:
        reasons = {}
        for s in screened:
            if not s.reason.startswith("as "):
                reasons.setdefault(s.reason, s.cand.shape.label)
        first = "; ".join(f"{shape}: {why}" for why, shape in list(reasons.items())[:2])
        raise ConfigError(f"--gpus: no deployment of {spec.model} on {spec.gpus} x {'/'.join(spec.devices)} fits "
                          f"({first}); {what_fits(spec.base, ctxs, spec.gpus)}")
    notes: List[str] = []
    if not any(s.verdict == "survivor" for s in screened):
        est = [s for s in screened if s.verdict == "estimate"]
        if not est:
            ttft = min(live, key=lambda s: s.estimate.ttft_lb_ms)
            tpot = min(live, key=lambda s: s.estimate.tpot_lb_ms)
            raise ConfigError(
                f"--slo-ttft-ms/--slo-tpot-ms: no deployment can meet {_slo_text(spec)} at any load: TTFT is at "
                f"least {ttft.estimate.ttft_lb_ms:.0f} ms ({ttft.cand.label}) and TPOT at least "
                f"{tpot.estimate.tpot_lb_ms:.1f} ms ({tpot.cand.label}) (lower bounds, docs/plan.md); only SLOs "
                "above both can be met")
        est.sort(key=lambda s: -max((r["tok_s_gpu"] for r in s.estimate.curve), default=0.0))
        for s in est[:spec.top]:
            s.verdict = "survivor"
            s.reason = "the estimate meets the SLOs at no batch size; simulated because nothing else is left"
            finish(s, spec.base, spec.max_num_seqs, spec.slo)
        notes.append("no candidate met the SLOs in the static estimate; the best by it were simulated anyway")
    return Stage1(spec, ctxs, options, skipped, screened, spec.max_num_batched_tokens is not None, notes)


def plan_hash(spec: PlanSpec) -> str:
    return short_sha(canonical_json({"format": 1, "base": identity(spec.base), "options": spec.options,
                                     "version": __version__}))


def make_runner(spec: PlanSpec, out_dir: Path, jobs: int, executor: str, address: Optional[str], overwrite: bool,
                say: Callable[[str], None]) -> Runner:
    return Runner(out_dir, plan_hash(spec), jobs, executor, address, overwrite, spec.slo, say)


def _kernel_sources(tracks) -> Dict[str, Any]:
    """``summary.json`` sources: which kernel tables priced each simulated deployment (per pool)."""
    from vidur_specdec.engine.simulation import prepare

    out = {}
    for t in tracks:
        shape = t.screened.cand.shape.label
        if shape in out:
            continue
        p = prepare(t.cfg)
        preps = [(pl.role, pl.prepared) for pl in p.pools] if hasattr(p, "pools") else [("colocated", p)]
        out[shape] = {}
        for role, pr in preps:
            dep = pr.deployment
            if dep is None or dep.kernels is None:
                continue
            models = [m for m in (dep.model, dep.draft) if m is not None]
            out[shape][role] = dep.kernels.sources(dep.tp, models, dep.ep)
    return out


def _no_answer(spec: PlanSpec, rows: List[Dict]) -> ConfigError:
    """The one line when no simulated point meets the SLOs: the closest point and what it does meet."""
    p = spec.slo_percentile

    def miss(r):
        return max((r["ttft_ms_at_slo_percentile"] or 1e18) / spec.slo_ttft_ms,
                   (r["tpot_ms_at_slo_percentile"] or 0.0) / spec.slo_tpot_ms)

    ran = [r for r in rows if r["ttft_ms_at_slo_percentile"] is not None]
    if not ran:
        return ConfigError(f"plan: the simulator refused every load it was asked to run ({rows[0]['refused']})")
    r = min(ran, key=lambda r: (miss(r), r["point"]))
    return ConfigError(
        f"--slo-ttft-ms/--slo-tpot-ms: no simulated deployment meets {_slo_text(spec)}; the closest, "
        f"{r['deployment']} at concurrency {r['concurrency']}, has TTFT p{p} {r['ttft_ms_at_slo_percentile']:.0f} ms "
        f"and TPOT p{p} {r['tpot_ms_at_slo_percentile']:.1f} ms: SLOs of TTFT >= "
        f"{r['ttft_ms_at_slo_percentile']:.0f} ms and TPOT >= {r['tpot_ms_at_slo_percentile']:.1f} ms would fit")


def screen_row(s: Screened) -> Dict[str, Any]:
    e = s.estimate
    b = e.best if e else None
    return {"candidate": s.cand.label, "class": s.cand.cls, "mode": s.cand.mode, "device": s.cand.shape.device,
            "shape": s.cand.shape.label, "gpus": s.cand.shape.gpus, "speculation": s.cand.spec.name,
            "max_num_batched_tokens": s.cand.budget, "verdict": s.verdict, "reason": s.reason,
            "ttft_lower_bound_ms": round(e.ttft_lb_ms, 3) if e else None,
            "tpot_lower_bound_ms": round(e.tpot_lb_ms, 4) if e else None,
            "estimate_tok_s_gpu": round(b["tok_s_gpu"], 3) if b else None,
            "estimate_tok_s_user": round(b["tok_s_user"], 3) if b else None,
            "estimate_batch": b["batch"] if b else None, "estimate_k": b["k"] if b else None,
            "estimate_ttft_ms": round(b["ttft_ms"], 3) if b else None,
            "max_num_seqs": s.max_num_seqs, "start_concurrency": s.start_load}


def search_stage(spec: PlanSpec, st: Stage1, runner: Runner, say: Callable[[str], None]) -> Answer:
    """Simulate the survivors and a sample of the drops; the answer (ConfigError when no point meets the SLOs)."""
    survivors = [s for s in st.screened if s.verdict == "survivor"]
    checked, unbuilt = check_tracks(st.screened, spec.base, spec.slo, spec.check_dropped, spec.max_num_seqs,
                                    runner.jobs)
    tracks = search(runner, survivors, spec.base, spec.slo, spec.tolerance, st.budgets_given, checked)
    every = tracks + checked
    by_key = {t.key: t for t in every}
    rows = sorted((fr.point_row(t, p, spec.slo) for t in every for p in t.points), key=lambda r: r["point"])
    search_rows = [r for r in rows if r["phase"] != "check"]
    front = fr.frontiers(search_rows, spec.slo)
    best = fr.best_of(search_rows)
    if best is None:
        raise _no_answer(spec, search_rows)
    checks = check_rows(checked, unbuilt, spec.slo, best["tok_s_gpu"])
    on = {p: cls for cls, pts in front.items() if cls != "all" for p in pts}
    for r in rows:
        r["frontier"] = on.get(r["point"], "")
        r["frontier_all"] = r["point"] in front["all"]
        r["best"] = r["point"] == best["point"]
    shape_of = lambda r: (r["shape"], r["speculation"])  # noqa: E731 - one deployment, any token budget
    runner_up = fr.best_of(search_rows, lambda r: shape_of(r) != shape_of(best))
    no_spec = fr.best_of(search_rows, lambda r: r["speculation"] == "none")
    with_spec = fr.best_of(search_rows, lambda r: r["speculation"] != "none")
    per_class = {cls: fr.best_of(search_rows, lambda r, c=cls: r["class"] == c)
                 for cls in sorted({r["class"] for r in search_rows})}
    best_desc = fr.describe(best, by_key)
    best_desc.update({
        "runner_up": fr.describe(runner_up, by_key) if runner_up else None,
        "margin_over_runner_up": fr.margin(best, runner_up),
        "no_speculation": fr.describe(no_spec, by_key) if no_spec and no_spec is not best else None,
        "margin_over_no_speculation": fr.margin(best, no_spec),
        "speculation_margin": fr.margin(with_spec, no_spec),
    })
    t_best = by_key[best["deployment"]]
    best_point = next(p for p in t_best.points if p.index == best["point"])
    counts = {v: sum(1 for s in st.screened if s.verdict == v) for v in VERDICTS}
    summary = {
        "vidur_specdec_version": __version__, "vllm_version": VLLM_VERSION, "plan_hash": plan_hash(spec),
        "question": spec.options, "slo": spec.slo,
        "screen": {"candidates": len(st.screened), **counts,
                   "rules": {"refused": "the simulator's own refusal (load, prepare: divisibility, vLLM's "
                                        "refusals, memory per GPU)",
                             "bound": "a lower bound on TTFT or TPOT over its SLO (docs/plan.md)",
                             "estimate": "the static estimate meets both SLOs at no batch size",
                             "ranked": f"below the {spec.top} best static estimates of its class",
                             "survivor": "simulated under load"},
                   "dropped_checked": checks,
                   "dropped_checked_summary": {
                       "simulated": sum(1 for c in checks if c.get("simulated")),
                       "met_slo": sum(1 for c in checks if c.get("meets_slo")),
                       "beat_best": sum(1 for c in checks if c.get("beats_best"))}},
        "simulated_points": len(rows), "search_points": len(search_rows),
        "requests_per_point": f"concurrency (warm-up, left out) + max({measured_requests(1)}, concurrency)",
        "best": best_desc,
        "best_per_class": {cls: (fr.describe(r, by_key) if r else None) for cls, r in per_class.items()},
        "frontier": {cls: [fr.describe(next(x for x in rows if x["point"] == p), by_key) for p in pts]
                     for cls, pts in front.items()},
        "speculation_options": [{"name": o.name, "method": o.method, "drafter": o.drafter, "source": o.source,
                                 "k_max": o.k_max, **{k: (list(v) if isinstance(v, tuple) else v)
                                                      for k, v in o.acceptance}} for o in st.options],
        "skipped_drafters": st.skipped_drafters,
        "sources": {"kernel_sources": _kernel_sources([t for t in every if t.points]),
                    "acceptance": [{"speculation": o.name, **{k: (list(v) if isinstance(v, tuple) else v)
                                                              for k, v in o.acceptance}}
                                   for o in st.options if o.enabled]},
        "notes": st.notes,
        "base_config": spec.base.to_dict(),
    }
    say(f"plan: {len(st.screened)} candidates screened, {counts['survivor']} simulated under load: "
        f"{len(search_rows)} points, {len(checks)} dropped candidates checked; {runner.simulated} points simulated "
        f"now, {runner.reused} from the journal")
    best_cfg = best_point.config.to_dict()
    return Answer(rows, [screen_row(s) for s in st.screened], summary, best_cfg)
