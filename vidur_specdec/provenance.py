"""Where a result's numbers come from, in one console line and in the outputs: kernels and acceptance.

Every command that simulates (``run``, ``tune``, ``sweep``) prints one line naming

* the **kernel source** of the target's operators: vLLM's measured kernel tables (``measured vLLM 0.24.0
  tables on h200_sxm (aiconfigurator-core 0.12.0)``, with the op families the calibrated roofline prices
  beside them), the roofline alone, the shipped analytical A100 profiles, or a folder of measured Vidur
  profiles (from ``summary.json``'s ``kernel_sources`` and ``profile_source``);
* the **acceptance source**: the user's input (which key), a cited library row, a borrowed row (another
  pair's, :mod:`vidur_specdec.speculation.nearness`), or the default α.

:func:`for_config` gives the same facts for a config without running it (what ``tune`` writes into its
``summary.json`` and a sweep into ``<name>.provenance.json``), with the version note: the tables were
measured on one vLLM release, the simulator follows another's semantics
(:func:`vidur_specdec.costs.kernels.versions`).
"""

from __future__ import annotations

import re
from typing import Dict, Optional


def kernels_line(kernel_sources: Optional[Dict], profile_source: Optional[Dict] = None) -> str:
    """The kernel source in words (``kernel_sources``/``profile_source`` as ``summary.json`` has them)."""
    target = (profile_source or {}).get("target")
    if target == "shipped":
        return "the shipped analytical A100 profiles (the calibrated roofline)"
    if target == "measured":
        return "measured Vidur operator profiles (the profiles folder)"
    ks = kernel_sources or {}
    measured = {fam: str(src) for fam, src in ks.items() if str(src).startswith("measured")}
    if not measured:
        return "the calibrated analytical roofline (no measured kernel table)"
    first = measured.get("gemm") or next(iter(measured.values()))
    m = re.match(r"measured: ([^,]+), vllm (\S+) \(([^)]+)\)", first)
    head = f"measured vLLM {m.group(2)} tables on {m.group(1)} ({m.group(3)})" if m else first
    built = sorted(fam for fam, src in ks.items() if str(src).startswith("built"))
    return head + (f"; roofline for {', '.join(built)}" if built else "")


def acceptance_line(acc: Dict, spec=None) -> str:
    """The acceptance source in words: ``acc`` is ``summary.json``'s acceptance keys (``acceptance_source``,
    ``acceptance_rows``, ``acceptance_borrowed``, ...), ``spec`` the run's speculative config."""
    if spec is not None and not spec.enabled:
        return "none (no speculation)"
    src = acc.get("acceptance_source")
    if src == "default":
        rate = (acc.get("acceptance_default") or {}).get("acceptance_rate")
        return f"the default alpha {rate:g} (no published figure for this pair)"
    if src == "published":
        rows = acc.get("acceptance_rows") or [{}]
        r = rows[0]
        cited = f"row {r.get('line')} [{r.get('source')}]"
        b = acc.get("acceptance_borrowed")
        if b:
            whose = (f"{b['target']}'s own {b['method']}" if b["drafter"] == b["target"]
                     else f"{b['drafter']} on {b['target']}")
            return f"borrowed library {cited}: {whose} ({b['why']})"
        return f"cited library {cited}"
    if acc.get("acceptance_model", {}).get("acceptance_at_k") is not None:
        return "your input (mean_acceptance_length at acceptance_at_k, the family's per-position model)"
    used = spec.acceptance_input() if spec is not None else None
    return f"your input (speculative.{used})" if used else "your input"


def line(summary: Dict, spec=None) -> str:
    """``kernels: ...; acceptance: ...`` for a run's summary (or :func:`for_config`'s facts)."""
    return (f"kernels: {kernels_line(summary.get('kernel_sources'), summary.get('profile_source'))}; "
            f"acceptance: {acceptance_line(summary, spec)}")


def for_config(cfg) -> Dict:
    """A config's provenance without running it: ``kernel_sources``, ``profile_source`` (the profiles the run
    would read: shipped, measured, built or tables), its acceptance (published rows, borrowed or default, as
    ``summary.json`` names them), the pairing warning and ``versions``. Deterministic: the config alone."""
    # lazy: start-up cost of the engine (vidur, pandas)
    from vidur_specdec.costs.kernels import versions
    from vidur_specdec.engine import deployment
    from vidur_specdec.engine.resolve import resolve
    from vidur_specdec.speculation.acceptance_source import describe
    from vidur_specdec.speculation.proposers.pairing import describe_proposer

    dep = resolve(cfg).deployment
    sources = None
    if dep.kernels is not None:
        sources = dep.kernels.sources(dep.tp, [s for s in (dep.model, dep.draft) if s is not None], dep.ep)
    chosen = deployment.profiles(cfg, dep, deployment.longest_request_tokens(cfg))  # built ones are cached
    profile_source = {"target": chosen["target"].source,
                      "draft": chosen["draft"].source if "draft" in chosen else None}
    return {"kernel_sources": sources, "profile_source": profile_source, **describe(cfg),
            "proposer_pairing_warning": describe_proposer(cfg)["proposer_pairing_warning"],
            "versions": versions(sources)}
