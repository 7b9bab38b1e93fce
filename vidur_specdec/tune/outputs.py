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

INT_COLUMNS = {"num_steps", "restarts", "k_flips"}
CSV_COLUMNS = (["point", "phase", "load_unit", "load", "setting", "k", "schedule", "row_id"] + TUNE_METRICS
               + ["tpot_speedup", "baseline_point", "meets_slo", "config"])


def _cell(v, metric: str = "") -> str:
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
    """A drop-in vLLM ``speculative_config`` for the tuned schedule (method, model, k, schedule)."""
    from vidur_specdec.speculation.proposers import weights_name

    s = base.speculative
    return {
        "method": s.method,
        "model": weights_name(base),  # the drafter's or head's weights; vLLM's ngram has none
        "num_speculative_tokens": sched.k,
        "num_speculative_tokens_per_batch_size": [list(r) for r in sched.schedule],
    }


def baseline_of(ev: Evaluator, p: Point) -> Optional[Point]:
    for q in ev.points:
        if q.load == p.load and q.setting == Setting(0) and q.metrics is not None:
            return q
    return None


def csv_text(ev: Evaluator, meets) -> str:
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
        cells += [_cell(p.metrics.get(c), c) for c in TUNE_METRICS]
        sp = 1.0 if b is p else (speedup(b.metrics, p.metrics) if b is not None else None)
        cells += [_cell(sp), "" if b is None else str(b.index), "true" if meets(p.metrics) else "false",
                  json.dumps({k: v for k, v in p.overrides.items()}, sort_keys=True, separators=(",", ":"))]
        w.writerow(cells)
    return buf.getvalue()


def summary(ev: Evaluator, res: TuneResult, options: Dict) -> Dict:
    ax = ev.axis
    sched = res.schedule_setting
    reproduce = {}
    for c in res.checks:
        ov = dict(ax.overrides(c["load"]))
        ov.update(setting_overrides(ev.base, sched))
        reproduce[ax.fmt(c["load"])] = [f"{k}={fmt_value(v)}" for k, v in ov.items()]
    return {
        "load_unit": ax.name,
        "crossover": {str(k): _r(v) for k, v in sorted(res.crossover.items())},
        "crossover_bracket": {str(k): v for k, v in sorted(res.crossover_bracket.items())},
        "crossover_note": {str(k): v for k, v in sorted(res.crossover_note.items())},
        "best_k": {ax.fmt(x): k for x, k in res.best_k.items()},
        "capacity": {k: _r(v) for k, v in res.capacity.items()},
        "capacity_bracket": res.capacity_bracket,
        "schedule": [list(r) for r in res.schedule],
        "speculative_config": vllm_speculative_config(ev.base, sched),
        "checks": [{k: (_r(v) if isinstance(v, float) else v) for k, v in c.items()} for c in res.checks],
        "schedule_choice": {"context_tokens": res.schedule_table.get("context_tokens"),
                            "tokens_advanced_per_step": [_r(x) for x in res.schedule_table.get("tokens_advanced", [])],
                            "smoothing_window": res.schedule_table.get("window")},
        "reproduce_schedule_at_check_loads": reproduce,
        "grid": [ax.fmt(x) for x in res.grid],
        "options": options,
        "simulated_points": sum(1 for p in ev.points if p.metrics is not None),
        "tune_hash": ev.tune_hash,
    }


def write_all(out_dir: Path, ev: Evaluator, res: TuneResult, options: Dict, meets) -> List[Path]:
    """Write the CSV, the summary, vLLM's speculative_config and the page; returns their paths."""
    from vidur_specdec.tune.page import build_page

    out_dir = Path(out_dir)
    text = csv_text(ev, meets)
    summ = summary(ev, res, options)
    paths = []
    for name, body in (("tune.csv", text),
                       ("summary.json", json.dumps(summ, indent=1, sort_keys=True) + "\n"),
                       ("speculative_config.json",
                        json.dumps(summ["speculative_config"], separators=(", ", ": ")) + "\n")):
        atomic_write(out_dir / name, body)
        paths.append(out_dir / name)
    atomic_write(out_dir / "tune.html", build_page(out_dir / "tune.csv"))
    paths.append(out_dir / "tune.html")
    return paths
