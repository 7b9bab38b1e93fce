"""The results page's answer in sentences: per deployment and acceptance rate, up to which load speculation pays.

For each deployment and acceptance rate of a sweep, at each recorded load, the
best speculative row is the one with the highest TPOT speedup under the
conservative verify-attention bound (``per_token``, the upper bound on verify
cost) when the sweep recorded it, else under the only bound it has. Speculation
"pays" at a load when that best speedup is above 1. The sentence names the
highest load up to which it pays without a break and the first load where it
does not, with the setting that is best there. Loads are requests per second.
"""

from __future__ import annotations

from typing import Dict, List

CONSERVATIVE = "per_token"


def _best(rows: List[Dict]) -> Dict:
    """The row with the highest TPOT speedup (ties: the smaller k, then the method name)."""
    return max(rows, key=lambda r: (r["tpot_speedup"], -r["k"], r["method"]))


def answer(rows: List[Dict], label_of, deployment_key, deployment_label) -> List[str]:
    """One sentence per (deployment, acceptance rate) of ``rows`` (the page's parsed rows, in sweep order).

    ``label_of(method)`` names a proposer, ``deployment_key(row)`` a row's deployment and
    ``deployment_label(key)`` says it in words (the page's own functions).
    """
    spec = [r for r in rows if r["method"] != "none" and r.get("tpot_speedup") is not None]
    out = []
    for dep in dict.fromkeys(deployment_key(r) for r in spec):
        mine = [r for r in spec if deployment_key(r) == dep]
        for alpha in dict.fromkeys(r.get("acceptance_rate") for r in mine):
            group = [r for r in mine if r.get("acceptance_rate") == alpha]
            if any(r["verify_attention"] == CONSERVATIVE for r in group):
                group = [r for r in group if r["verify_attention"] == CONSERVATIVE]
            loads = sorted({r["qps"] for r in group})
            best = {q: _best([r for r in group if r["qps"] == q]) for q in loads}

            def name(r):
                return f"{label_of(r['method'])} k = {r['k']} ({r['tpot_speedup']:.2f}×)"

            head = f"{deployment_label(dep)}" + (f", α {alpha:g}" if alpha is not None else "")
            lost = next((q for q in loads if best[q]["tpot_speedup"] <= 1.0), None)
            if lost is None:
                out.append(f"{head}: speculation pays at every recorded load ({loads[0]:g}–{loads[-1]:g} req/s); "
                           f"best {name(best[loads[0]])} at {loads[0]:g}, {name(best[loads[-1]])} at {loads[-1]:g}.")
            elif lost == loads[0]:
                out.append(f"{head}: speculation does not pay even at {lost:g} req/s (best {name(best[lost])}).")
            else:
                last = loads[loads.index(lost) - 1]
                out.append(f"{head}: speculation pays up to {last:g} req/s ({name(best[last])}); at {lost:g} req/s "
                           f"nothing recorded pays (best {name(best[lost])}).")
    return out
