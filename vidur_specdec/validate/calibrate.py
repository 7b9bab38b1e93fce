"""Calibration: acceptance and KV budget from the server's counter deltas.

With ``k`` guesses per draft and i.i.d. acceptance α that stops at the first
rejection, a draft accepts ``Σ_{j=1..k} α^j`` guesses on average, so the mean
acceptance length (vLLM's name; it counts the bonus token) is::

    L(α) = 1 + accepted / drafts = (1 − α^(k+1)) / (1 − α)

α is found by bisection on that (L is increasing in α). It is *not*
``accepted / draft_tokens`` (vLLM's "draft acceptance rate"): that is
``L − 1`` divided by ``k``, which is lower than α whenever a rejection cuts
a draft short. Conditional per-position rates (the simulator's
``acceptance_per_position``) are ``a_j = n_j / n_{j−1}`` with ``n_j`` the
per-position counter at 0-based position ``j − 1`` and ``n_0`` the drafts.

``k`` is the number of ``position`` labels the server exposes (vLLM exposes
``num_speculative_tokens`` of them), else ``round(draft_tokens / drafts)``.
If drafts are shorter than ``k`` on average (n-gram misses, truncation),
the i.i.d. inversion at ``k`` and the later conditional rates are biased low;
the calibration records ``mean_draft_tokens`` and a warning then.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Union

import yaml

from vidur_specdec.config import MAX_K
from vidur_specdec.engine.resolve import load
from vidur_specdec.validate.common import ValidateError, write_json, write_text
from vidur_specdec.validate.counters import Snapshot, cache_info, spec_counters
from vidur_specdec.speculation.acceptance import alpha_from_mean_length

USES = ("per_position", "alpha")


def mean_acceptance_length(alpha: float, k: int) -> float:
    """(1 − α^(k+1)) / (1 − α): tokens a full-k verify step advances on average."""
    if alpha >= 1.0:
        return float(k + 1)
    return (1.0 - alpha ** (k + 1)) / (1.0 - alpha)


def alpha_from_mean_acceptance_length(mal: float, k: int, tol: float = 1e-12) -> float:
    """Invert :func:`mean_acceptance_length` for α in [0, 1] (clamped at the ends); see
    :func:`vidur_specdec.speculation.acceptance.alpha_from_mean_length`, which the simulator uses too."""
    if k < 1:
        raise ValueError("k must be >= 1")
    return alpha_from_mean_length(mal, k, tol)


@dataclass
class Calibration:
    """What the counters say about one replay (the content of ``calibration.json``)."""

    alpha: Optional[float]
    mean_acceptance_length: Optional[float]
    per_position: List[float]  # conditional rates a_1..a_k
    num_gpu_blocks: Optional[int]
    block_size: Optional[int]
    num_speculative_tokens: int
    num_drafts: float
    num_draft_tokens: float
    num_accepted_tokens: float
    num_accepted_tokens_per_pos: List[float]
    mean_draft_tokens: Optional[float]
    draft_acceptance_rate: Optional[float]  # accepted / draft_tokens (vLLM's "Avg Draft acceptance rate")
    per_position_unconditional: List[float]  # n_j / drafts (vLLM's "Per-position acceptance rate")
    warnings: List[str] = field(default_factory=list)

    def to_dict(self) -> Dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Dict) -> "Calibration":
        names = set(cls.__dataclass_fields__)
        missing = {"alpha", "mean_acceptance_length", "per_position", "num_gpu_blocks"} - set(d)
        if missing:
            raise ValidateError(f"--calibration: lacks keys {sorted(missing)}")
        base = {n: None for n in names}
        base.update(per_position=[], num_speculative_tokens=0, num_drafts=0.0, num_draft_tokens=0.0,
                    num_accepted_tokens=0.0, num_accepted_tokens_per_pos=[], per_position_unconditional=[],
                    warnings=[], block_size=None)
        base.update({k: v for k, v in d.items() if k in names})
        if not base["num_speculative_tokens"] and base["per_position"]:
            base["num_speculative_tokens"] = len(base["per_position"])
        return cls(**base)


def calibrate(before: Snapshot, after: Snapshot, k: Optional[int] = None) -> Calibration:
    """Calibration from two scrapes (before and after the replay)."""
    d = spec_counters(after).minus(spec_counters(before))
    cache = cache_info(after)
    warnings: List[str] = []
    if cache["num_gpu_blocks"] is None:
        warnings.append("the server exposes no vllm:cache_config_info num_gpu_blocks; KV budget not calibrated")
    positions = sorted(d.per_pos)
    if k is None:
        if positions:
            k = positions[-1] + 1
        elif d.drafts > 0:
            k = int(round(d.draft_tokens / d.drafts))
        else:
            k = 0
    if k > MAX_K:
        raise ValidateError(f"--k: {k} guesses per draft exceeds the simulator's limit {MAX_K}")
    if not d.present or d.drafts <= 0 or k == 0:
        warnings.append("no speculative drafts during the replay (spec-decode counters absent or unchanged); "
                        "the matched simulation runs without speculation")
        return Calibration(None, None, [], cache["num_gpu_blocks"], cache["block_size"], 0, d.drafts,
                           d.draft_tokens, d.accepted, [], None, None, [], warnings)
    mal = 1.0 + d.accepted / d.drafts
    alpha = alpha_from_mean_acceptance_length(mal, k)
    mean_draft = d.draft_tokens / d.drafts
    if abs(mean_draft - k) > 0.01 * k:
        warnings.append(f"drafts carried {mean_draft:.3f} guesses on average, not k = {k}: alpha and the later "
                        "per-position rates are biased low")
    n = [d.drafts] + [d.per_pos.get(p, 0.0) for p in range(k)]
    per_position: List[float] = []
    for j in range(1, k + 1):
        if n[j - 1] > 0:
            per_position.append(min(1.0, n[j] / n[j - 1]))
        else:
            per_position.append(alpha)
            warnings.append(f"position {j}: no draft reached it; its rate is set to alpha")
    if not positions:
        warnings.append("no per-position counter; per_position is alpha at every position")
        per_position = [alpha] * k
    return Calibration(
        alpha=alpha, mean_acceptance_length=mal, per_position=per_position,
        num_gpu_blocks=cache["num_gpu_blocks"], block_size=cache["block_size"], num_speculative_tokens=k,
        num_drafts=d.drafts, num_draft_tokens=d.draft_tokens, num_accepted_tokens=d.accepted,
        num_accepted_tokens_per_pos=[d.per_pos.get(p, 0.0) for p in range(k)],
        mean_draft_tokens=mean_draft, draft_acceptance_rate=d.accepted / d.draft_tokens if d.draft_tokens else None,
        per_position_unconditional=[x / d.drafts for x in n[1:]], warnings=warnings,
    )


def fragment(cal: Calibration, use: str = "per_position") -> Dict:
    """The config fragment for the matched simulation (merge it over a run config).

    Sets k and one acceptance input (the others are nulled so the chosen one is
    the one used), the KV block budget and block size when the server reports
    them; with no drafts, ``speculative.method: none``.
    """
    if use not in USES:
        raise ValidateError(f"--acceptance: must be one of {', '.join(USES)}, got {use!r}")
    out: Dict = {}
    if cal.num_speculative_tokens and cal.alpha is not None:
        # one acceptance input; the others null, since two are refused (vidur_specdec/config/unused.py ONE_OF);
        # alpha stays in calibration.json
        spec = {"num_speculative_tokens": int(cal.num_speculative_tokens), "acceptance_histogram": None,
                "acceptance_trace": None, "mean_acceptance_length": None}
        if use == "per_position":
            spec.update(acceptance_per_position=[round(float(x), 6) for x in cal.per_position],
                        acceptance_rate=None)
        else:
            spec.update(acceptance_per_position=None, acceptance_rate=round(float(cal.alpha), 6))
        out["speculative"] = spec
    else:
        out["speculative"] = {"method": "none"}
    sched = {}
    if cal.num_gpu_blocks:
        sched["num_blocks"] = int(cal.num_gpu_blocks)
    if cal.block_size:
        sched["block_size"] = int(cal.block_size)
    if sched:
        out["scheduler"] = sched
    return out


def merge(base: Dict, frag: Dict) -> Dict:
    """Deep-merge ``frag`` over ``base`` (mappings merge, other values replace)."""
    out = dict(base or {})
    for k, v in frag.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = merge(out[k], v)
        else:
            out[k] = v
    return out


def write_calibration(cal: Calibration, out_dir: Union[str, Path], use: str = "per_position") -> Dict:
    """Write ``calibration.json`` and the includable ``calibration.yaml`` fragment; returns the fragment."""
    frag = fragment(cal, use)
    load(frag)  # the fragment alone must be a valid (partial) run config
    out_dir = Path(out_dir)
    write_json(out_dir / "calibration.json", cal.to_dict())
    header = ("# Calibrated from vLLM counters by vidur_specdec.validate; merge over a run config\n"
              "# (python -m vidur_specdec.validate compare --calibration THIS_FILE ...).\n")
    write_text(out_dir / "calibration.yaml", header + yaml.safe_dump(frag, sort_keys=False))
    return frag


def read_calibration(path: Union[str, Path]) -> Calibration:
    """Read ``calibration.json`` (or a folder that holds it)."""
    p = Path(path).expanduser()
    if p.is_dir():
        p = p / "calibration.json"
    if not p.is_file():
        raise ValidateError(f"--calibration: file not found: {p}")
    try:
        return Calibration.from_dict(json.loads(p.read_text()))
    except (json.JSONDecodeError, TypeError) as e:
        raise ValidateError(f"--calibration: cannot read {p}: {str(e)[:120]}") from None
