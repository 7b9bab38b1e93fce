"""Which drafter: every drafter the acceptance library knows for the target, on the same deployment and workload.

``tune --compare-drafters [DATASET]`` (docs/tune.md, "Which drafter"). The candidates are
the drafters the library knows for the config's ``model``
(:func:`vidur_specdec.speculation.acceptance_source.drafters_for`), each at the acceptance
the library gives it on one dataset (the one named, else the config's
``workload.dataset``, else mt-bench) at every k the comparison runs
(:func:`~vidur_specdec.speculation.acceptance_source.acceptance_for`: its rows on that
dataset, or on another scaled by the cited dataset factor, carried across k by the
family's per-position model), the same rule a run with ``acceptance_source: published``
uses, so each drafter runs at its own published acceptance, and the rows are cited.

Each candidate runs at every static k = 1..k_max at the comparison loads (the loads
asked for with ``--loads``, else the checked loads cap/4, cap/2, cap), with the config's
deployment and workload and only ``speculative.method``, ``speculative.model`` and the
acceptance (as per-position rates) changed. At each load a drafter's value is its best k
there under ``--objective`` (overloaded runs left out); the winner is the best value, and
``ahead_by`` is how much the runner-up trails it (a fraction of the winner's value). A
drafter the library cannot give acceptance for, or the simulator cannot price (a head
whose architecture it does not know), is listed under ``skipped`` with the one-line reason.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, Optional, Tuple

from vidur_specdec.config import ConfigError, SpeculativeConfig
from vidur_specdec.tune.points import Setting

# acceptance inputs a candidate's own per-position rates replace (the ones this build has)
ACCEPTANCE_KEYS = ("acceptance_rate", "mean_acceptance_length", "acceptance_histogram", "acceptance_trace",
                   "acceptance_source", "acceptance_at_k")
HEAD_METHODS = ("eagle", "eagle3", "draft_model", "medusa", "dflash", "dspark")  # methods whose speculative.model names the weights


def candidates(cfg, k_max: int, dataset: Optional[str] = None) -> Tuple[str, List[Dict], List[Dict]]:
    """(dataset, candidates, skipped) for the config's target; ConfigError when the library knows no drafter."""
    from vidur_specdec.speculation import acceptance_source as src
    from vidur_specdec.speculation import library

    model = cfg.model
    known = src.drafters_for(model)
    if not known:
        near = sorted({r.target for r in library.nearest(model, "", None, n=5)})
        raise ConfigError(f"--compare-drafters: the acceptance library knows no drafter for {model}; nearest "
                          f"targets: {', '.join(near)}")
    ds = dataset or cfg.workload.dataset or src.DEFAULT_DATASET
    out, skipped = [], []
    for d in known:
        try:
            by_k = {k: src.acceptance_for(model, d["drafter"], k, ds, d["method"], cfg.workload.temperature)
                    for k in range(1, k_max + 1)}
        except ConfigError as e:
            skipped.append({"drafter": d["drafter"], "method": d["method"], "reason": str(e)})
            continue
        top = by_k[k_max]
        out.append({"drafter": d["drafter"], "method": d["method"],
                    "rates": {str(k): [round(x, 6) for x in p.rates] for k, p in by_k.items()},
                    "acceptance_per_position": [round(x, 6) for x in top.rates],
                    "mean_acceptance_length_at_k_max": round(top.mean_acceptance_length, 4),
                    "acceptance_rule": top.how + (f"; factors {top.factors}" if top.factors else ""),
                    "dataset_used": top.dataset, "rows": [r.cite() for r in top.rows]})
        if d["method"] in ("ngram", "suffix"):  # the library's figures count drafted steps only
            rate = cfg.speculative.proposal_rate
            out[-1]["proposal_rate"] = rate
            out[-1]["acceptance_rule"] += (f"; proposal_rate {rate:g} from the config (the share of steps whose "
                                           "context finds a match; the library's figures count drafted steps only"
                                           + (", so 1 is an upper bound for this drafter)" if rate == 1.0 else ")"))
    if not out:
        raise ConfigError(f"--compare-drafters: no drafter of {model} has published acceptance for {ds}: "
                          + "; ".join(f"{x['drafter']}: {x['reason']}" for x in skipped))
    return ds, out, skipped


def setting(cand: Dict, k: int) -> Setting:
    """The point setting of candidate ``cand`` at ``k`` guesses (its first k conditional rates)."""
    fields = {f.name for f in dataclasses.fields(SpeculativeConfig)}
    spec: List[Tuple[str, Any]] = [("speculative.method", cand["method"]),
                                   ("speculative.model", cand["drafter"] if cand["method"] in HEAD_METHODS
                                    else None),
                                   ("speculative.acceptance_per_position", tuple(cand["rates"][str(k)]))]
    spec += [(f"speculative.{key}", None) for key in ACCEPTANCE_KEYS if key in fields]
    return Setting(k, None, cand["drafter"], tuple(spec))


def compare(tuner, loads: List[float], dataset: Optional[str]) -> Dict:
    """Run every candidate at every k at ``loads``; the comparison for summary.json."""
    ev, k_max, obj = tuner.ev, tuner.k_max, tuner.objective
    ds, cands, skipped = candidates(ev.base, k_max, dataset)
    live = []
    pairs = []
    from vidur_specdec.engine.simulation import prepare
    from vidur_specdec.tune.points import build_config, setting_overrides

    for c in cands:
        try:  # the drafter's weights and profiles resolve (an unknown head is refused here, not in a worker)
            prepare(build_config(ev.base, setting_overrides(ev.base, setting(c, k_max))))
            pts = [ev.point("drafters", x, setting(c, k)) for x in loads for k in range(1, k_max + 1)]
        except ConfigError as e:
            skipped.append({"drafter": c["drafter"], "method": c["method"], "reason": str(e)})
            continue
        live.append(c)
        pairs += pts
    base = [ev.point("drafters", x, Setting(0)) for x in loads]
    ev.run(base + pairs)
    by_load = []
    for x, b in zip(loads, base):
        ranking = []
        for c in live:
            best = None
            for k in range(1, k_max + 1):
                m = ev.point("drafters", x, setting(c, k)).metrics
                if tuner.over(m):
                    continue
                if best is None or obj.better(obj.value(m), obj.value(best[1])):
                    best = (k, m)
            if best is None:
                ranking.append({"drafter": c["drafter"], "method": c["method"], "k": None, "value": None,
                                "overloaded": True})
                continue
            k, m = best
            ranking.append({"drafter": c["drafter"], "method": c["method"], "k": k,
                            "value": round(float(obj.value(m)), 6),
                            "tpot_speedup": round(b.metrics["tpot_ms_p50"] / m["tpot_ms_p50"], 4)
                            if m.get("tpot_ms_p50") else None})
        scored = [r for r in ranking if r["value"] is not None]
        scored.sort(key=lambda r: (-r["value"] if obj.higher_is_better else r["value"], r["drafter"]))
        rest = [r for r in ranking if r["value"] is None]
        entry = {"load": ev.axis.fmt(x), "objective": obj.name, "k0": round(float(obj.value(b.metrics)), 6),
                 "ranking": scored + rest}
        if scored:
            entry["winner"] = scored[0]["drafter"]
            entry["ahead_by"] = (round(float(obj.shortfall(scored[1]["value"], scored[0]["value"])), 6)
                                 if len(scored) > 1 else None)
        by_load.append(entry)
    return {"dataset": ds, "candidates": live, "skipped": skipped, "loads": by_load}


def lines(d: Dict, axis_name: str) -> List[str]:
    """The comparison in words, one line per load (the command's report and the docs)."""
    out = []
    for e in d.get("loads", []):
        if "winner" not in e:
            out.append(f"drafters at {axis_name} {e['load']}: every candidate overloaded")
            continue
        w = e["ranking"][0]
        tail = (f", ahead of {e['ranking'][1]['drafter']} (k = {e['ranking'][1]['k']}) by "
                f"{100 * e['ahead_by']:.1f} %" if e.get("ahead_by") is not None else "")
        cand = next((c for c in d.get("candidates", []) if c["drafter"] == w["drafter"]), {})
        bound = (f" (at proposal_rate {cand['proposal_rate']:g}, every step proposing: an upper bound)"
                 if cand.get("proposal_rate") == 1.0 else "")
        out.append(f"drafters at {axis_name} {e['load']} on {d['dataset']}: {w['drafter']} ({w['method']}, "
                   f"k = {w['k']}) wins{bound}, {w['tpot_speedup']:.2f}x TPOT over no speculation{tail}")
    return out
