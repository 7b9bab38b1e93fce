"""The answer from the simulated points: each point's row, the Pareto frontiers, the best deployment and its
``vllm serve`` lines (docs/plan.md, "Outputs").

A point's figures: output tokens/s per GPU (the run's output throughput over the
deployment's GPUs, every replica or pool counted), tokens/s per user (1000 / its
median TPOT) and TTFT and TPOT at the SLOs' percentile. A frontier holds the points
no other point beats on both tokens/s per GPU and tokens/s per user, among those whose
TTFT meets its SLO (the TPOT SLO is a line on the per-user axis); there is one per
class (colocated / disaggregated, with / without speculation) and one over all. The
best deployment is the point with the most tokens/s per GPU among those meeting both
SLOs (ties: more tokens/s per user, then the earlier point); its runner-up is the best
point of another deployment (another shape or speculation), and its margin over no
speculation is against the best point without speculation.
"""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any, Dict, List, Optional

from vidur_specdec.plan.search import Track, meets

SPEC_CONFIG_FLAG = " --speculative-config "


def point_row(t: Track, p, slo: Dict) -> Dict[str, Any]:
    """One plan.csv row (metrics from tune's worker, plus the plan's figures)."""
    from vidur_specdec.tune.points import TUNE_METRICS

    c = t.screened.cand
    sh = c.shape
    cfg = p.config
    m = p.metrics or {}
    pc = slo["percentile"]
    tpot50 = m.get("tpot_ms_p50")
    row = {"point": p.index, "phase": p.phase, "deployment": t.key, "class": c.cls, "mode": sh.mode,
           "device": sh.device, "shape": sh.label, "gpus": sh.gpus, "speculation": c.spec.name,
           "method": c.spec.method, "drafter": c.spec.drafter or "", "acceptance_source": c.spec.source,
           "schedule": json.dumps([list(r) for r in t.screened.schedule]) if t.screened.schedule else "",
           "max_num_batched_tokens": (cfg.disaggregation.prefill.max_num_batched_tokens
                                      or cfg.scheduler.max_num_batched_tokens),
           "max_num_seqs": t.screened.max_num_seqs, "concurrency": p.concurrency,
           "num_requests": cfg.workload.num_requests, "warmup_requests": cfg.workload.warmup_requests}
    row.update({k: m.get(k) for k in TUNE_METRICS})
    row.update({"tok_s_gpu": round(m["throughput_tok_s"] / sh.gpus, 6) if m.get("throughput_tok_s") else None,
                "tok_s_user": round(1e3 / tpot50, 6) if tpot50 else None,
                "ttft_ms_at_slo_percentile": m.get(f"ttft_ms_p{pc}"),
                "tpot_ms_at_slo_percentile": m.get(f"tpot_ms_p{pc}"),
                "meets_slo": meets(m, slo), "refused": p.refused or "", "row_id": p.row_id,
                "overrides": json.dumps({**t.overrides, **p.overrides}, sort_keys=True, separators=(",", ":"))})
    return row


def pareto(rows: List[Dict]) -> List[int]:
    """Points (by ``point``) no other row beats on both tok_s_gpu and tok_s_user, sorted by tok_s_user."""
    pts = [r for r in rows if r["tok_s_gpu"] is not None and r["tok_s_user"] is not None]
    pts.sort(key=lambda r: (-r["tok_s_user"], -r["tok_s_gpu"], r["point"]))
    out, best = [], -1.0
    for r in pts:
        if r["tok_s_gpu"] > best:
            out.append(r["point"])
            best = r["tok_s_gpu"]
    return out


def frontiers(rows: List[Dict], slo: Dict) -> Dict[str, List[int]]:
    """``{class: [point, ...], "all": [...]}`` over the rows whose TTFT meets its SLO."""
    ok = [r for r in rows if r["ttft_ms_at_slo_percentile"] is not None
          and r["ttft_ms_at_slo_percentile"] <= slo["ttft_ms"]]
    out = {"all": pareto(ok)}
    for cls in sorted({r["class"] for r in rows}):
        out[cls] = pareto([r for r in ok if r["class"] == cls])
    return out


def _rank_key(r: Dict):
    return (-r["tok_s_gpu"], -(r["tok_s_user"] or 0.0), r["point"])


def best_of(rows: List[Dict], where=lambda r: True) -> Optional[Dict]:
    cands = [r for r in rows if r["meets_slo"] and r["tok_s_gpu"] is not None and where(r)]
    return min(cands, key=_rank_key) if cands else None


def margin(a: Optional[Dict], b: Optional[Dict]) -> Optional[float]:
    """How much more tokens/s per GPU ``a`` gives than ``b`` (a fraction of b's)."""
    if a is None or b is None or not b["tok_s_gpu"]:
        return None
    return round(a["tok_s_gpu"] / b["tok_s_gpu"] - 1.0, 6)


def spec_config(t: Track) -> Optional[Dict[str, Any]]:
    """vLLM's ``--speculative-config`` of a track (tune's writer), None without speculation."""
    if not t.screened.cand.spec.enabled:
        return None
    from vidur_specdec.tune.vllm_config import speculative_config

    sched = [tuple(r) for r in t.screened.schedule]
    return speculative_config(t.cfg, SimpleNamespace(k=max(1, max(k for _, _, k in sched)), schedule=sched))


def serve_lines(t: Track) -> List[Dict[str, Any]]:
    """Each pool's ``vllm serve`` line (tune's engine arguments and writer): colocated, one line run on every
    replica; prefill and decode pools, one per pool with the NIXL KV connector."""
    from vidur_specdec.tune.pools import summary_entry
    from vidur_specdec.tune.vllm_config import engine_args, serve_command

    sc = spec_config(t)
    cfg = t.cfg
    sh = t.screened.cand.shape

    def line(text: str) -> str:
        if sc is None:  # tune's writer always adds a speculative_config; without speculation there is none
            tail = SPEC_CONFIG_FLAG + "'{}'"
            i = text.find(tail)
            text = text[:i] + text[i + len(tail):] if i >= 0 else text
        return text

    if sh.mode == "disaggregated":
        entry = summary_entry(cfg, sc if sc is not None else {})
        return [{"pool": role, "instances": entry[role]["instances"], "gpus_per_instance":
                 getattr(sh, role).tp * getattr(sh, role).dp, "engine_args": entry[role]["engine_args"],
                 "vllm_serve": line(entry[role]["vllm_serve"])} for role in ("prefill", "decode")]
    return [{"pool": "colocated", "instances": sh.replicas, "gpus_per_instance": sh.gpus_per_instance,
             "engine_args": engine_args(cfg), "vllm_serve": line(serve_command(cfg, sc if sc is not None else {}))}]


def describe(r: Dict, tracks: Dict[str, Track]) -> Dict[str, Any]:
    """A frontier or best point for summary.json: its figures, config and what to run."""
    t = tracks[r["deployment"]]
    keep = ("point", "deployment", "class", "shape", "gpus", "speculation", "concurrency", "tok_s_gpu",
            "tok_s_user", "ttft_ms_at_slo_percentile", "tpot_ms_at_slo_percentile", "ttft_ms_p50", "tpot_ms_p50",
            "throughput_tok_s", "meets_slo", "max_num_batched_tokens", "max_num_seqs")
    out = {k: r[k] for k in keep}
    out["schedule"] = [list(x) for x in t.screened.schedule] if t.screened.schedule else None
    out["speculative_config"] = spec_config(t)
    out["pools"] = serve_lines(t)
    return out
