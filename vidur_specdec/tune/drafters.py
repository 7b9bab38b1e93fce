"""Which drafter: every drafter with published acceptance for the target on the dataset, on the same deployment.

``tune --compare-drafters [DATASET]`` (docs/tune.md, "Which drafter"). The dataset is the one
named, else the config's ``workload.dataset``, else mt-bench. A drafter is **ranked** only on
evidence for that dataset:

* each drafter the library knows for the config's ``model``
  (:func:`vidur_specdec.speculation.acceptance_source.drafters_for`) that has rows of its own on
  the dataset (:func:`~vidur_specdec.speculation.acceptance_source.acceptance_for` without another
  pair's rows and without the cross-dataset factor), at those rows carried across k by the family's
  per-position model; n-gram and suffix proposals at the proposal rate of the same rows (their
  figures count every decode step, a step without a match included);
* the config's own drafter at the acceptance the user gave (``acceptance_source: given``), labelled
  ``(your input)``.

Every other drafter of the target is listed as **not ranked**, with the datasets it does have: a
figure from another dataset (or another model) is not evidence for this one.

Each ranked candidate runs at every static k = 1..k_max at the comparison loads (``--loads``, else
the checked loads cap/4, cap/2, cap), with the config's deployment and workload and only
``speculative.method``, ``speculative.model`` and the acceptance (per-position rates) changed. At
each load a candidate's value is its best k there under ``--objective`` (overloaded runs left out);
the winner is the best value and ``ahead_by`` how much the runner-up trails it (a fraction of the
winner's value). :func:`lines` says it per load and sums up which drafter leads where. A drafter the
simulator cannot price (a head whose architecture it does not know) is listed with its one-line reason.
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
    """(dataset, ranked candidates, not ranked) for the config's target; ConfigError when nothing can be ranked."""
    from vidur_specdec.speculation import acceptance_source as src
    from vidur_specdec.speculation import library

    model = cfg.model
    known = src.drafters_for(model)
    own = cfg.speculative.acceptance_source == "given"
    if not known and not own:
        near = sorted({r.target for r in library.nearest(model, "", None, n=5)})
        raise ConfigError(f"--compare-drafters: the acceptance library knows no drafter for {model}; nearest "
                          f"targets: {', '.join(near)}")
    ds = dataset or cfg.workload.dataset or src.DEFAULT_DATASET
    out, skipped = [], []
    if own:  # the user's own drafter at the user's own acceptance: evidence the user vouches for
        drafter = src.drafter_name(cfg) or cfg.speculative.method
        out.append({"drafter": drafter, "method": cfg.speculative.method, "input": "yours",
                    "label": f"{drafter} (your input)", "rows": [],
                    "acceptance_rule": f"your speculative.{cfg.speculative.acceptance_input()}",
                    **({"proposal_rate": cfg.speculative.proposal_rate}
                       if cfg.speculative.method in library.MATCH_METHODS else {})})
    for d in known:
        try:  # the pair's own rows on this dataset only: no other pair's, no cross-dataset factor
            by_k = {k: src.acceptance_for(model, d["drafter"], k, ds, d["method"], cfg.workload.temperature,
                                          borrow=False, use=("temperature",))
                    for k in range(1, k_max + 1)}
        except ConfigError:
            skipped.append({"drafter": d["drafter"], "method": d["method"],
                            "reason": f"not ranked: no published acceptance for {ds} (the library has "
                                      f"{', '.join(d['datasets'])})"})
            continue
        top = by_k[k_max]
        out.append({"drafter": d["drafter"], "method": d["method"], "input": "published",
                    "label": d["drafter"],
                    "rates": {str(k): [round(x, 6) for x in p.rates] for k, p in by_k.items()},
                    "acceptance_per_position": [round(x, 6) for x in top.rates],
                    "mean_acceptance_length_at_k_max": round(top.mean_acceptance_length, 4),
                    "acceptance_rule": top.how + (f"; factors {top.factors}" if top.factors else ""),
                    "dataset_used": top.dataset, "rows": [r.cite() for r in top.rows],
                    **({"proposal_rate": top.proposal_rate} if d["method"] in library.MATCH_METHODS else {})})
    if not out:
        raise ConfigError(f"--compare-drafters: no drafter of {model} has published acceptance for {ds}: "
                          + "; ".join(f"{x['drafter']}: {x['reason']}" for x in skipped))
    return ds, out, skipped


def setting(cand: Dict, k: int) -> Setting:
    """The point setting of candidate ``cand`` at ``k`` guesses: the config's own (your input), or its first k
    conditional rates (and an n-gram row's proposal rate)."""
    if cand.get("input") == "yours":
        return Setting(k)
    fields = {f.name for f in dataclasses.fields(SpeculativeConfig)}
    spec: List[Tuple[str, Any]] = [("speculative.method", cand["method"]),
                                   ("speculative.model", cand["drafter"] if cand["method"] in HEAD_METHODS
                                    else None),
                                   ("speculative.acceptance_per_position", tuple(cand["rates"][str(k)]))]
    spec += [(f"speculative.{key}", None) for key in ACCEPTANCE_KEYS if key in fields]
    if "proposal_rate" in cand:
        spec.append(("speculative.proposal_rate", cand["proposal_rate"]))
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
            why = str(e).split("; known:")[0]  # an unknown head's message lists every known one: not needed here
            skipped.append({"drafter": c["drafter"], "method": c["method"],
                            "reason": f"not priced (the simulator cannot price this drafter): {why}"})
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
                ranking.append({"drafter": c["label"], "method": c["method"], "k": None, "value": None,
                                "overloaded": True})
                continue
            k, m = best
            ranking.append({"drafter": c["label"], "method": c["method"], "k": k,
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
    """The comparison in words (the command's report and the docs): one line per load, which drafter leads
    where and by how much, and the drafters not ranked."""
    out = []
    leads: Dict[str, List[Tuple[str, Optional[float]]]] = {}
    for e in d.get("loads", []):
        if "winner" not in e:
            out.append(f"drafters at {axis_name} {e['load']}: every candidate overloaded")
            continue
        w = e["ranking"][0]
        tail = (f", ahead of {e['ranking'][1]['drafter']} (k = {e['ranking'][1]['k']}) by "
                f"{100 * e['ahead_by']:.1f} %" if e.get("ahead_by") is not None else "")
        out.append(f"drafters at {axis_name} {e['load']} on {d['dataset']}: {w['drafter']} ({w['method']}, "
                   f"k = {w['k']}) wins, {w['tpot_speedup']:.2f}x TPOT over no speculation{tail}")
        leads.setdefault(w["drafter"], []).append((e["load"], e.get("ahead_by")))
    for name, where in leads.items():
        gaps = [g for _, g in where if g is not None]
        by = (f" by {100 * min(gaps):.1f}-{100 * max(gaps):.1f} %" if len(gaps) > 1 and min(gaps) != max(gaps)
              else f" by {100 * gaps[0]:.1f} %" if gaps else "")
        out.append(f"drafters: {name} leads at {axis_name} {', '.join(x for x, _ in where)}{by}")
    for sk in d.get("skipped", []):
        out.append(f"drafter {sk['drafter']} ({sk['method']}) {sk['reason']}")
    return out
