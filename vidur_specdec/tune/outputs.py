"""What a tune writes: ``speculative_config.json`` (vLLM's), ``summary.json``, ``tune.csv``.

Every file is a pure function of the simulated points and the options (no
timestamps, no wall times), written atomically, so the same command gives the
same bytes with any ``--jobs``.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any, Dict, List, Optional

from vidur_specdec.config import RunConfig
from vidur_specdec.sweep.definition import fmt_value
from vidur_specdec.sweep.table import FLOAT_FORMAT, atomic_write
from vidur_specdec.tune.points import TUNE_METRICS, Evaluator, Point, Setting, setting_overrides
from vidur_specdec.tune.search import TuneResult, speedup
from vidur_specdec.tune.vllm_config import speculative_config
from vidur_specdec.tune.loads import overload_reason, workload_overrides
from vidur_specdec.tune.acceptance_carry import point_acceptance
from vidur_specdec.speculation.proposers.pairing import describe_proposer
from vidur_specdec.speculation.acceptance_source import describe as describe_acceptance
from vidur_specdec.tune.vllm_config import deployment, engine_args, serve_command
from vidur_specdec.tune.loads import TTFT_GROWTH_FACTOR, point_overloaded
from vidur_specdec.tune.page import build_page
from vidur_specdec.provenance import line as provenance_line
from vidur_specdec.tune.pools import disaggregated, max_batch, summary_entry

INT_COLUMNS = {"num_steps", "restarts", "k_flips", "overloaded", "measured_requests", "batch_size_max"}
CSV_COLUMNS = (["point", "phase", "load_unit", "load", "setting", "k", "schedule", "row_id",
                "alpha_used", "acceptance_length_used", "num_requests", "warmup_requests"] + TUNE_METRICS
               + ["overload_reason", "tpot_speedup", "ttft_speedup", "throughput_speedup", "baseline_point",
                  "meets_slo", "config"])


def csv_cell(v, metric: str = "") -> str:
    if v is None:
        return ""
    if metric in INT_COLUMNS:
        return str(int(v))
    if isinstance(v, float):
        return FLOAT_FORMAT % v
    return str(v)


def _r(x: Optional[float], nd: int = 6) -> Optional[float]:
    return None if x is None else round(float(x), nd)


def vllm_speculative_config(base: RunConfig, sched: Setting) -> Dict[str, Any]:
    """A drop-in vLLM 0.33 ``speculative_config`` for the tuned schedule (:mod:`.vllm_config`)."""
    return speculative_config(base, sched)


def _ratio(b: Optional[Dict], m: Dict, col: str, higher: bool) -> Optional[float]:
    if b is None or b.get(col) in (None, 0) or m.get(col) in (None, 0):
        return None
    return m[col] / b[col] if higher else b[col] / m[col]


def baseline_of(ev: Evaluator, p: Point) -> Optional[Point]:
    for q in ev.points:
        if q.load == p.load and q.setting == Setting(0) and q.metrics is not None:
            return q
    return None


def csv_text(ev: Evaluator, meets, ttft_reference_ms: Optional[float] = None) -> str:
    """tune.csv; ``overloaded`` is the whole rule (queue or TTFT growth against ``ttft_reference_ms``)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_COLUMNS)
    for p in ev.points:
        if p.metrics is None:
            continue
        b = baseline_of(ev, p)
        cells = [str(p.index), p.phase, ev.axis.name, ev.axis.fmt(p.load), p.setting.label, str(p.setting.k),
                 json.dumps([list(r) for r in p.setting.schedule], separators=(",", ":"))
                 if p.setting.schedule is not None else "", p.row_id]

        alpha, length = point_acceptance(p.config.speculative)
        wl = p.config.workload
        cells += [csv_cell(alpha), csv_cell(length), str(wl.num_requests - wl.warmup_requests), str(wl.warmup_requests)]
        why = overload_reason(p.metrics, ttft_reference_ms)
        cells += [csv_cell(int(bool(why)) if c == "overloaded" else p.metrics.get(c), c) for c in TUNE_METRICS]
        cells.append(why)
        sp = 1.0 if b is p else (speedup(b.metrics, p.metrics) if b is not None else None)
        bm = b.metrics if b is not None else None
        cells += [csv_cell(sp), csv_cell(_ratio(bm, p.metrics, "ttft_ms_p50", False)),
                  csv_cell(_ratio(bm, p.metrics, "throughput_tok_s", True)),
                  "" if b is None else str(b.index), "true" if meets(p.metrics) else "false",
                  json.dumps({k: v for k, v in p.overrides.items()}, sort_keys=True, separators=(",", ":"))]
        w.writerow(cells)
    return buf.getvalue()


def schedule_evidence(res: TuneResult, cap: int) -> Dict:
    """Where the schedule's evidence ends: the largest batch size a non-overloaded simulated point reached; the
    schedule's ranges stop there, and larger batches (up to ``cap``, one instance's max_num_seqs) take the last
    range's k by vLLM's rule, with no simulated step behind it."""
    end = max(hi for _, hi, _ in res.schedule) if res.schedule else None
    out = {"largest_batch_simulated": res.evidence_top, "schedule_ends_at": end, "max_num_seqs": cap,
           "merged_ranges": (res.schedule_table or {}).get("merged") or []}
    if end is not None and end < cap:
        out["beyond"] = (f"batch sizes {end + 1}-{cap} take the last range's k ({res.schedule[-1][2]}, vLLM's rule "
                         f"past the last range); no simulated point reached them")
    return out


def summary(ev: Evaluator, res: TuneResult, options: Dict, notes: Optional[List[str]] = None,
            prov: Optional[Dict] = None) -> Dict:
    ax = ev.axis
    ref = res.ttft_reference.get("ttft_ms_p50")
    sched = res.schedule_setting
    reproduce = {}
    for c in res.checks:
        ov = workload_overrides(ev.base, ax, c["load"], ev.burst)
        ov.update(setting_overrides(ev.base, sched))
        reproduce[ax.fmt(c["load"])] = [f"{k}={fmt_value(v)}" for k, v in ov.items()]
    spec_cfg = vllm_speculative_config(ev.base, sched)
    cap_b = max_batch(ev.base)  # one decode instance's with prefill and decode pools
    end = max(hi for _, hi, _ in res.schedule) if res.schedule else None
    extrapolated = [int(end) + 1, cap_b] if end is not None and end < cap_b else None  # past the last range
    from vidur_specdec.tune.capacity import explain

    acc = describe_acceptance(ev.base)  # published rows, the across-k model or the default; {} if given
    prov = prov or {}
    return {
        **({"acceptance": acc} if acc else {}),
        # where the numbers come from (vidur_specdec.provenance): the kernels of the k_max point, the versions
        "kernel_sources": prov.get("kernel_sources"),
        "profile_source": prov.get("profile_source"),
        "versions": prov.get("versions"),
        "provenance": provenance_line(prov, ev.base.speculative) if prov else None,
        "capacity_explained": explain(ev, res, sched),
        "deployment": deployment(ev.base),
        **({"disaggregation": summary_entry(ev.base, spec_cfg)} if disaggregated(ev.base) else {}),
        "proposer": describe_proposer(ev.base),
        "vllm_version": deployment(ev.base)["vllm_version"],
        "engine_args": engine_args(ev.base),
        "vllm_serve": serve_command(ev.base, spec_cfg),
        "warnings": list(notes or []),
        "overloaded_loads": sorted({ax.fmt(p.load) for p in ev.points
                                    if point_overloaded(p.metrics, ref)}, key=float),
        "overloaded_points": {ax.fmt(x): sorted({p.setting.label for p in ev.points
                                                 if p.load == x and point_overloaded(p.metrics, ref)})
                              for x in sorted({p.load for p in ev.points if point_overloaded(p.metrics, ref)})},
        "ttft_reference": {"load": ax.fmt(res.ttft_reference["load"]) if res.ttft_reference else None,
                           "ttft_ms_p50": _r(ref), "growth_factor": TTFT_GROWTH_FACTOR},
        "schedule_extrapolated_batch_sizes": extrapolated,
        "schedule_evidence": schedule_evidence(res, cap_b),
        "slo": ev.slo,
        "load_unit": ax.name,
        "crossover": {str(k): _r(v) for k, v in sorted(res.crossover.items())},
        "crossover_bracket": {str(k): v for k, v in sorted(res.crossover_bracket.items())},
        "crossover_note": {str(k): v for k, v in sorted(res.crossover_note.items())},
        "best_k": {ax.fmt(x): k for x, k in res.best_k.items()},
        "capacity": {k: _r(v) for k, v in res.capacity.items()},
        "capacity_bracket": res.capacity_bracket,
        "schedule": [list(r) for r in res.schedule],
        "speculative_config": spec_cfg,
        "checks": [{k: (_r(v) if isinstance(v, float) else v) for k, v in c.items()} for c in res.checks],
        "schedule_choice": {"context_tokens": res.schedule_table.get("context_tokens"),
                            "tokens_advanced_per_step": [_r(x) for x in res.schedule_table.get("tokens_advanced", [])],
                            "smoothing_window": res.schedule_table.get("window"),
                            "min_range_width": res.schedule_table.get("min_range_width"),
                            "ranges": res.schedule_table.get("ranges")},
        "reproduce_schedule_at_check_loads": reproduce,
        "grid": [ax.fmt(x) for x in res.grid],
        "options": options,
        "simulated_points": sum(1 for p in ev.points if p.metrics is not None),
        "tune_hash": ev.tune_hash,
        **({"drafters": res.drafters} if res.drafters is not None else {}),
    }


def write_all(out_dir: Path, ev: Evaluator, res: TuneResult, options: Dict, meets,
              notes: Optional[List[str]] = None, prov: Optional[Dict] = None) -> List[Path]:
    """Write the CSV, the summary, vLLM's speculative_config and the page; returns their paths."""
    out_dir = Path(out_dir)
    text = csv_text(ev, meets, res.ttft_reference.get("ttft_ms_p50"))
    summ = summary(ev, res, options, notes, prov)
    paths = []
    for name, body in (("tune.csv", text),
                       ("summary.json", json.dumps(summ, indent=1, sort_keys=True) + "\n"),
                       ("speculative_config.json",
                        json.dumps(summ["speculative_config"], separators=(", ", ": ")) + "\n"),
                       ("engine_args.json",
                        json.dumps({"vllm_version": summ["vllm_version"], **summ["engine_args"],
                                    "vllm_serve": summ["vllm_serve"]}, indent=1) + "\n")):
        atomic_write(out_dir / name, body)
        paths.append(out_dir / name)
    atomic_write(out_dir / "tune.html", build_page(out_dir / "tune.csv", summ))
    paths.append(out_dir / "tune.html")
    return paths
