"""A plan's files: ``plan.csv`` (every simulated point), ``screen.csv`` (every candidate's verdict),
``summary.json`` (the answer and its sources), ``best.yaml`` (the best point's run config) and ``plan.html``.

Every file is written whole (a temporary file renamed into place) after the search has
finished, so a folder never holds half an answer; the same plan gives byte-identical
files (floats written with the sweep table's format, keys sorted).
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Dict, List

import yaml

from vidur_specdec.sweep.table import FLOAT_FORMAT, atomic_write

PLAN_COLUMNS = ["point", "phase", "deployment", "class", "mode", "device", "shape", "gpus", "speculation", "method",
                "drafter", "acceptance_source", "schedule", "max_num_batched_tokens", "max_num_seqs", "concurrency",
                "num_requests", "warmup_requests", "tok_s_gpu", "tok_s_user", "ttft_ms_at_slo_percentile",
                "tpot_ms_at_slo_percentile", "meets_slo", "refused", "frontier", "frontier_all", "best"]
SCREEN_COLUMNS = ["candidate", "class", "mode", "device", "shape", "gpus", "speculation", "max_num_batched_tokens",
                  "verdict", "reason", "ttft_lower_bound_ms", "tpot_lower_bound_ms", "estimate_tok_s_gpu",
                  "estimate_tok_s_user", "estimate_batch", "estimate_k", "estimate_ttft_ms", "max_num_seqs",
                  "start_concurrency"]


def _cell(v) -> str:
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return FLOAT_FORMAT % v
    return str(v)


def table_text(rows: List[Dict], columns: List[str]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(columns)
    for r in rows:
        w.writerow([_cell(r.get(c)) for c in columns])
    return buf.getvalue()


def plan_columns(rows: List[Dict]) -> List[str]:
    """The fixed columns, then the run's metrics (tune's), then the row id and the point's overrides."""
    from vidur_specdec.tune.points import TUNE_METRICS

    return PLAN_COLUMNS + [c for c in TUNE_METRICS if c not in PLAN_COLUMNS] + ["row_id", "overrides"]


def write_all(out_dir: Path, answer) -> List[Path]:
    """Write every file of a finished plan; returns their paths."""
    from vidur_specdec.plan.page import build_page

    out_dir = Path(out_dir)
    summ = answer.summary
    files = [("plan.csv", table_text(answer.rows, plan_columns(answer.rows))),
             ("screen.csv", table_text(answer.screen_rows, SCREEN_COLUMNS)),
             ("summary.json", json.dumps(summ, indent=1, sort_keys=True) + "\n"),
             ("best.yaml", "# the best deployment's run config at its load (python -m vidur_specdec run --config "
                           "best.yaml reproduces its figures)\n" + yaml.safe_dump(answer.best_config, sort_keys=True)),
             ("plan.html", build_page(answer.rows, summ))]
    paths = []
    for name, body in files:
        atomic_write(out_dir / name, body)
        paths.append(out_dir / name)
    return paths


def _pct(x) -> str:
    return "-" if x is None else f"{100 * x:+.1f} %"


def report_lines(answer) -> List[str]:
    """What the command prints: the counts, the best deployment, its margins and what to run."""
    s = answer.summary
    sc, b = s["screen"], s["best"]
    slo = s["slo"]
    p = slo["percentile"]
    out = [f"screened {sc['candidates']} candidates: {sc['survivor']} simulated under load, {sc['ranked']} ranked "
           f"out, {sc['estimate']} out by the estimate, {sc['bound']} out by a bound, {sc['refused']} refused by the "
           f"simulator; {s['simulated_points']} points simulated",
           f"screen check: {sc['dropped_checked_summary']['simulated']} dropped candidates simulated, "
           f"{sc['dropped_checked_summary']['met_slo']} met the SLOs, {sc['dropped_checked_summary']['beat_best']} "
           "beat the best",
           f"best at TTFT p{p} <= {slo['ttft_ms']:g} ms and TPOT p{p} <= {slo['tpot_ms']:g} ms: {b['deployment']} at "
           f"concurrency {b['concurrency']}: {b['tok_s_gpu']:.1f} tokens/s/GPU, {b['tok_s_user']:.1f} tokens/s/user, "
           f"TTFT p{p} {b['ttft_ms_at_slo_percentile']:.0f} ms, TPOT p{p} {b['tpot_ms_at_slo_percentile']:.1f} ms",
           f"margin over the runner-up ({b['runner_up']['deployment'] if b['runner_up'] else '-'}): "
           f"{_pct(b['margin_over_runner_up'])}; over no speculation"
           f"{' (' + b['no_speculation']['deployment'] + ')' if b['no_speculation'] else ''}: "
           f"{_pct(b['margin_over_no_speculation'])}"]
    for pool in b["pools"]:
        out.append(f"{pool['pool']} x{pool['instances']}: {pool['vllm_serve']}")
    return out
