"""Which drafter: every drafter the acceptance library knows for the target, on the same deployment and workload.

``tune --compare-drafters [DATASET]`` (docs/tune.md, "Which drafter"). The candidates
are the library's chain figures for the config's ``model`` on one dataset (the one
given, else ``mt-bench`` where the target has it, else the dataset with most figures),
one per (drafter, method): the figure measured with vLLM where there is one, then at
temperature 0 without a variant, then at the k nearest the tune's k_max (the larger on
a tie), then the first line. Its acceptance at every k the comparison runs comes from
the across-k model (:func:`vidur_specdec.speculation.across_k.rates_at`: published
per-position rates as they are, extended by the family's decay; a mean length anchored
at its own k otherwise), so each drafter is simulated at its own acceptance.

Each candidate runs at every static k = 1..k_max at the comparison loads (the loads
asked for with ``--loads``, else the checked loads cap/4, cap/2, cap), with the config's
deployment and workload and only ``speculative.method``, ``speculative.model`` and the
acceptance changed. At each load a drafter's value is its best k there under
``--objective`` (overloaded runs left out); the winner is the best value, and
``ahead_by`` is how much the runner-up trails it (a fraction of the winner's value).
A candidate the simulator cannot price (a head whose architecture it does not know)
is listed under ``skipped`` with the one-line reason.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Any, Dict, List, Optional, Tuple

from vidur_specdec.config import ConfigError, SpeculativeConfig
from vidur_specdec.tune.points import Setting

# acceptance inputs a candidate's own per-position rates replace (the ones this build has)
ACCEPTANCE_KEYS = ("acceptance_rate", "mean_acceptance_length", "acceptance_histogram", "acceptance_trace",
                   "acceptance_source", "acceptance_at_k")
HEAD_METHODS = ("eagle", "eagle3", "draft_model", "medusa")  # methods whose speculative.model names the weights


def _pick(rows) -> Any:
    return sorted(rows, key=lambda r: (r.engine != "vllm", r.temperature not in (0, 0.0, None), bool(r.variant),
                                       r.line))


def candidates(model: str, k_max: int, dataset: Optional[str] = None) -> Tuple[str, List[Dict], List[str]]:
    """(dataset, candidates, what the library has for the target elsewhere) for ``model``."""
    from vidur_specdec.speculation import across_k, library

    rows = [r for r in library.find(target=model) if r.structure == "chain"]
    if not rows:
        near = sorted({r.target for r in library.nearest(model, "", None, n=5)})
        raise ConfigError(f"--compare-drafters: the acceptance library has no chain figure for {model}; "
                          f"nearest targets: {', '.join(near)}")
    counts = Counter(r.dataset for r in rows)
    if dataset:
        ds = next((d for d in counts if d.lower() == dataset.lower()), None)
        if ds is None:
            raise ConfigError(f"--compare-drafters: no figure for {model} on {dataset}; datasets with figures: "
                              + ", ".join(sorted(counts)))
    else:
        ds = "mt-bench" if "mt-bench" in counts else max(sorted(counts), key=lambda d: counts[d])
    groups: Dict[Tuple[str, str], List] = {}
    for r in rows:
        if r.dataset == ds:
            groups.setdefault((r.drafter, r.method), []).append(r)
    out = []
    for (drafter, method), rs in sorted(groups.items()):
        best = _pick(rs)
        first = best[0]
        same = [r for r in best if (r.engine, r.temperature, r.variant) == (first.engine, first.temperature,
                                                                          first.variant)]
        row = min(same, key=lambda r: (abs(r.k - k_max), -r.k, r.line))
        known = row.conditional()
        rates = (across_k.rates_at(method, k_max, known=known) if known
                 else across_k.rates_at(method, k_max, length=row.mean_acceptance_length, at_k=row.k))
        out.append({"drafter": drafter, "method": method, "row": row.cite(),
                    "acceptance_per_position": [round(x, 6) for x in rates],
                    "acceptance_rule": "published per-position rates, extended by the family decay" if known
                    else f"mean acceptance length {row.mean_acceptance_length:g} at k = {row.k}, across-k model",
                    "mean_acceptance_length_at_k_max": round(across_k.mean_length(rates), 4)})
    elsewhere = sorted({f"{r.drafter} ({r.method}) on {r.dataset}" for r in rows if r.dataset != ds
                        and (r.drafter, r.method) not in groups})
    return ds, out, elsewhere


def setting(cand: Dict, k: int) -> Setting:
    """The point setting of candidate ``cand`` at ``k`` guesses (its first k conditional rates)."""
    fields = {f.name for f in dataclasses.fields(SpeculativeConfig)}
    spec: List[Tuple[str, Any]] = [("speculative.method", cand["method"]),
                                   ("speculative.model", cand["drafter"] if cand["method"] in HEAD_METHODS
                                    else None),
                                   ("speculative.acceptance_per_position", tuple(cand["acceptance_per_position"][:k]))]
    spec += [(f"speculative.{key}", None) for key in ACCEPTANCE_KEYS if key in fields]
    return Setting(k, None, cand["drafter"], tuple(spec))


def compare(tuner, loads: List[float], dataset: Optional[str]) -> Dict:
    """Run every candidate at every k at ``loads``; the comparison for summary.json."""
    ev, k_max, obj = tuner.ev, tuner.k_max, tuner.objective
    ds, cands, elsewhere = candidates(ev.base.model, k_max, dataset)
    live, skipped = [], []
    pairs = []
    for c in cands:
        try:
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
    return {"dataset": ds, "candidates": live, "skipped": skipped, "not_on_this_dataset": elsewhere,
            "loads": by_load}


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
        out.append(f"drafters at {axis_name} {e['load']} on {d['dataset']}: {w['drafter']} ({w['method']}, "
                   f"k = {w['k']}) wins, {w['tpot_speedup']:.2f}x TPOT over no speculation{tail}")
    return out
