"""``python -m vidur_specdec acceptance``: list and filter the cited acceptance library.

Filters are exact names, case-insensitive (``--target``, ``--drafter``, ``--dataset``,
``--method``, ``--category``, ``--k``); ``--contains`` keeps rows whose target or drafter
contains a text. Each row prints as one line: target + drafter (method) on dataset, k,
mean acceptance length L, per-position rates (u: unconditional, c: conditional) and its
source. ``--families`` prints the across-k model's fitted decay per method family instead.
"""

from __future__ import annotations

import argparse


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.description = ("List the published acceptance figures the simulator knows (speculative.acceptance_source: "
                     "published uses them); every row cites where it is.")
    for name, help_text in (("target", "target model (Hugging Face name)"),
                            ("drafter", "drafter checkpoint (Hugging Face name; the target for MTP; ngram)"),
                            ("dataset", "dataset (mt-bench, gsm8k, humaneval, speed-bench-coding, ...)"),
                            ("method", "eagle, eagle3, mtp, ngram, ..."),
                            ("category", "chat, coding, math, qa, mixed"),
                            ("contains", "text the target or drafter name contains")):
        p.add_argument(f"--{name}", default=None, help=help_text)
    p.add_argument("--k", type=int, default=None, help="num_speculative_tokens")
    p.add_argument("--families", action="store_true",
                   help="print the across-k model's decay per method family (fitted on the library's curves)")


def _rates(r) -> str:
    if not r.per_position:
        return "-"
    tag = "u" if r.per_position_kind == "unconditional" else "c"
    return tag + ":" + "/".join(f"{x:g}" for x in r.per_position)


def run(args: argparse.Namespace) -> int:
    from vidur_specdec.config import ConfigError
    from vidur_specdec.speculation import across_k, library

    if args.families:
        print("family       decay  curves")
        for fam in across_k.FAMILIES:
            n = sum(1 for c in across_k.curves() if c.family == fam)
            print(f"{fam:<12} {across_k.decay(fam):<6g} {n}")
        return 0
    rows = library.find(args.target, args.drafter, args.dataset, args.method, args.k, args.category)
    if args.contains:
        t = args.contains.lower()
        rows = [r for r in rows if t in r.target.lower() or t in r.drafter.lower()]
    if not rows:
        raise ConfigError("acceptance: no row matches; python -m vidur_specdec acceptance lists them all")
    for r in rows:
        var = f" [{r.variant}]" if r.variant else ""
        temp = "" if r.temperature is None else f" T={r.temperature:g}"
        print(f"{r.line:>4}  {r.target} + {r.drafter} ({r.method}) on {r.dataset}{var}, k={r.k}{temp}, "
              f"{r.structure}, {r.engine}: L={r.mean_acceptance_length:g} rates {_rates(r)}  <{r.source}>")
    print(f"{len(rows)} rows, {library.pairs(rows)} (target, drafter, dataset) pairs")
    return 0
