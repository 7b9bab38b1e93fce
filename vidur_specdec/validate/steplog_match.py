"""Do step logs match the run config they are checked against? One warning per step-log run whose GPU, target
model, drafter or k differs from the config, and a ``config_mismatch`` column on every table of that run
(``validate steps``: the cost-model check then compares different runs, and says so)."""

from __future__ import annotations

from typing import Dict, List

import pandas as pd

# Step-log drafter names (lower case, substring) each config method stands for; a method not
# listed matches a drafter that contains its own name.
_METHOD_DRAFTERS = {"none": ("none", "baseline", "no-spec", "nospec"), "ngram": ("ngram", "n-gram", "prompt_lookup"),
                    "eagle3": ("eagle3",), "eagle": ("eagle",)}


def _norm(text) -> str:
    return "".join(ch for ch in str(text).lower() if ch.isalnum())


def _method_matches(cfg, drafter: str) -> bool:
    s = cfg.speculative
    method = s.method if s.enabled else "none"
    d = str(drafter).lower()
    if method == "draft_model":
        return _norm(s.draft_model.split("/")[-1]) in _norm(d) or "draft" in d
    if method == "fixed":
        return True  # a fixed-cost stand-in for any drafter
    names = _METHOD_DRAFTERS.get(method, (method,))
    return any(n in d for n in names)


def run_mismatch(cfg, gpu, target, drafter, k=None) -> str:
    """What differs between a step-log run (GPU, target model, drafter, k) and a run config; '' when nothing."""
    out = []
    try:
        k = int(k) if k is not None and str(k) != "" else None
    except (TypeError, ValueError):
        k = None
    cfg_k = cfg.speculative.num_speculative_tokens if cfg.speculative.enabled else 0
    if k is not None and k != cfg_k:
        out.append(f"k {k} vs speculative.num_speculative_tokens {cfg_k}")
    if gpu is not None and _norm(cfg.device) not in _norm(gpu):
        out.append(f"GPU {gpu} vs device {cfg.device}")
    if target is not None and _norm(cfg.model.split("/")[-1]) not in _norm(target):
        out.append(f"target {target} vs model {cfg.model}")
    if drafter is not None and not _method_matches(cfg, drafter):
        method = cfg.speculative.method if cfg.speculative.enabled else "none"
        out.append(f"drafter {drafter} vs speculative.method {method}")
    return "; ".join(out)


def config_mismatches(cfg, tables: Dict[str, pd.DataFrame]) -> List[str]:
    """One warning per step-log run whose GPU, model or method differs from ``cfg``.

    Adds a ``config_mismatch`` column ('' where the run matches) to every output
    table that has the run key, so the flag travels with the numbers.
    """
    warnings: List[str] = []
    seen = set()
    for name, df in tables.items():
        if df is None or not len(df) or not {"gpu", "target", "drafter"} <= set(df.columns):
            continue
        flags = []
        ks = df["k"] if "k" in df else [None] * len(df)
        for gpu, target, drafter, k in zip(df["gpu"], df["target"], df["drafter"], ks):
            key = (gpu, target, drafter, k)
            why = run_mismatch(cfg, gpu, target, drafter, k)
            flags.append(why)
            if why and key not in seen:
                seen.add(key)
                warnings.append(f"step logs of {gpu} {target} {drafter} k={k} differ from the config ({why}): "
                                "the cost-model check compares different runs")
        df["config_mismatch"] = flags
    return warnings
