"""Why capacity is where it is: which SLO fails first, at the SLOs' percentile, with and without the schedule.

Capacity (:meth:`vidur_specdec.tune.search.Tuner.capacity`) is the highest
simulated load whose TTFT and TPOT at the SLO percentile (``--slo-percentile``,
default p99) meet the SLOs. For each setting this reads the two ends of its
capacity bracket from the simulated points: the load that met the SLOs, the
next one that did not, and at that one which SLO failed and by how much (ms).
When no speculation was also simulated at the schedule's failing load, the two
are compared there, so a reader sees what speculation did to the binding
percentile.
"""

from __future__ import annotations

from typing import Dict, Optional

from vidur_specdec.tune.points import Evaluator, Setting


def _at(ev: Evaluator, load: float, setting: Setting) -> Optional[Dict]:
    for p in ev.points:
        if p.load == load and p.setting == setting and p.metrics is not None:
            return p.metrics
    return None


def _tails(m: Dict, slo: Dict) -> Dict:
    pct = slo["percentile"]
    ttft, tpot = m.get(f"ttft_ms_p{pct}"), m.get(f"tpot_ms_p{pct}")
    failed = []
    if ttft is None or ttft > slo["ttft_ms"]:
        failed.append("ttft")
    if tpot is not None and tpot > slo["tpot_ms"]:
        failed.append("tpot")
    r = (lambda x: None if x is None else round(float(x), 1))
    return {f"ttft_ms_p{pct}": r(ttft), f"tpot_ms_p{pct}": r(tpot), "ttft_ms_p50": r(m.get("ttft_ms_p50")),
            "failed": failed}


def explain(ev: Evaluator, res, sched: Setting) -> Dict:
    """``{"percentile", "none": {...}, "speculative": {...}}``: per setting, the loads that met and failed and why."""
    slo = ev.slo
    out: Dict = {"percentile": slo["percentile"], "ttft_ms": slo["ttft_ms"], "tpot_ms": slo["tpot_ms"]}
    if ev.base.disaggregation.enabled:
        out["disaggregated"] = True  # prefill and decode pools: speculation meets TTFT only on the decode side
    for name, setting in (("none", Setting(0)), ("speculative", sched)):
        cap, bracket = res.capacity.get(name), res.capacity_bracket.get(name)
        entry: Dict = {"met": None if cap is None else ev.axis.fmt(cap), "failed": None}
        if cap is not None:
            m = _at(ev, cap, setting)
            if m is not None:
                entry["at_met"] = _tails(m, slo)
        if bracket:
            hi = bracket[1]
            entry["failed"] = ev.axis.fmt(hi)
            m = _at(ev, hi, setting)
            if m is not None:
                entry["at_failed"] = _tails(m, slo)
            if name == "speculative":
                m0 = _at(ev, hi, Setting(0))
                if m0 is not None:
                    entry["no_speculation_at_failed"] = _tails(m0, slo)
        out[name] = entry
    return out


# A failing TTFT tail this many times its median is a burst of prefills queueing, not slow steps.
BURST_FACTOR = 3.0


def sentence(expl: Dict, unit_words, closed_loop: bool = False) -> str:
    """The explanation in plain words (the page and the docs' blocks): what binds, and why speculation moves it."""
    if not expl:
        return ""
    pct = expl["percentile"]
    names = {"ttft": f"TTFT p{pct}", "tpot": f"TPOT p{pct}"}
    slo_of = {"ttft": expl["ttft_ms"], "tpot": expl["tpot_ms"]}
    parts = [f"Capacity is the highest load whose TTFT p{pct} <= {expl['ttft_ms']:g} ms and TPOT p{pct} <= "
             f"{expl['tpot_ms']:g} ms (the SLOs apply to p{pct}, not to the median)."]
    binds = set()
    for name, label in (("none", "Without speculation"), ("speculative", "With the schedule")):
        e = expl.get(name) or {}
        if e.get("met") is None:
            parts.append(f"{label} no load tried met them.")
            continue
        if e.get("failed") is None:
            parts.append(f"{label} every load tried up to the search's end met them ({unit_words(e['met'])}).")
            continue
        f = e.get("at_failed") or {}
        why = ", ".join(f"{names[w]} {f.get(f'{w}_ms_p{pct}'):g} ms > {slo_of[w]:g} ms" for w in f.get("failed", []))
        binds.update(f.get("failed", []))
        parts.append(f"{label} {unit_words(e['met'])} meets them and {unit_words(e['failed'])} does not "
                     f"({why or 'see tune.csv'}).")
    sp = expl.get("speculative") or {}
    if sp.get("no_speculation_at_failed") and sp.get("at_failed"):
        a, b = sp["no_speculation_at_failed"], sp["at_failed"]
        cmp = []
        for w in ("ttft", "tpot"):
            x, y = a.get(f"{w}_ms_p{pct}"), b.get(f"{w}_ms_p{pct}")
            if x is not None and y is not None:
                cmp.append(f"{names[w]} {x:g} ms without, {y:g} ms with")
        parts.append(f"At {unit_words(sp['failed'])}: " + "; ".join(cmp) + ".")
    burst = [e["at_failed"] for e in (expl.get("none") or {}, sp) if e.get("at_failed")
             and "ttft" in e["at_failed"]["failed"] and e["at_failed"].get("ttft_ms_p50")
             and e["at_failed"][f"ttft_ms_p{pct}"] > BURST_FACTOR * e["at_failed"]["ttft_ms_p50"]]
    if burst:
        f = burst[0]
        parts.append(f"The binding TTFT p{pct} ({f[f'ttft_ms_p{pct}']:g} ms) is over {BURST_FACTOR:g}x the median "
                     f"({f['ttft_ms_p50']:g} ms): prefills queue behind each other"
                     + (" when the closed loop starts all its requests at once, and with a few requests per "
                        "concurrency the p99 is that start; --warmup-requests N leaves the first N out"
                        if closed_loop else " in bursts of arrivals") + ".")
    worse = (sp.get("at_failed") or {}).get(f"ttft_ms_p{pct}", 0) > (
        (sp.get("no_speculation_at_failed") or {}).get(f"ttft_ms_p{pct}") or float("inf"))
    lower = (expl.get("speculative") or {}).get("met") is not None and (expl.get("none") or {}).get("met") \
        is not None and float(expl["speculative"]["met"]) < float(expl["none"]["met"])
    if "ttft" in binds and (worse or lower) and expl.get("disaggregated"):
        parts.append("What lowers capacity with speculation here: prefills run on their own pool, so guesses "
                     "reach TTFT only on the decode pool, through each request's first decode step (it shares "
                     "a step with the other requests' k + 1 verify tokens) and through the decode KV room a "
                     "transfer waits for (each decoding request holds k lookahead slots more)"
                     + (", so capacity with the schedule is lower" if lower else "") + ".")
    elif "ttft" in binds and (worse or lower):
        parts.append("What lowers capacity with speculation: each decoding request's guesses are verified in the "
                     "same step as new prompts' prefill chunks, so steps are longer and prefills share the token "
                     "budget with k + 1 tokens per decoding request; TPOT falls but the tail of TTFT grows, and "
                     "TTFT's tail is what the SLO binds" + (", so capacity with the schedule is lower" if lower else "")
                     + ".")
    return " ".join(parts)
