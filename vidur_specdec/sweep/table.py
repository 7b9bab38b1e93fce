"""The sweep CSV: fixed columns, formatted cells, speedup against the baseline row, atomic writes."""

from __future__ import annotations

import csv
import io
import os
from pathlib import Path
from typing import Dict, Iterable, Mapping, Optional

from vidur_specdec.config import unused
from vidur_specdec.config.files import naming
from vidur_specdec.sweep.definition import Sweep, fmt_value, _get_dotted
from vidur_specdec.sweep.worker import INT_METRICS, METRIC_COLUMNS, POOL_METRIC_COLUMNS

FLOAT_FORMAT = "%.6f"


def _fmt_cell(v, is_metric: bool = False, is_int: bool = False) -> str:
    if v is None:
        return ""
    if is_metric:
        if is_int:
            return str(int(v))
        return FLOAT_FORMAT % v
    return fmt_value(v)


def csv_text(sweep: Sweep, results: Mapping[int, Dict], only: Optional[Iterable[int]] = None) -> str:
    """The sweep's CSV text: header, then one line per row in sweep order.

    ``results`` maps row index -> metrics dict and must hold every row written
    and its baseline; ``only`` limits the lines to those rows (a partial check).
    """
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(sweep.columns)
    wanted = None if only is None else set(only)
    for r in sweep.rows:
        if wanted is not None and r.index not in wanted:
            continue
        m = results[r.index]
        cfg = r.config_dict
        cells = [str(r.index), r.row_id]
        for col, key in sweep.param_columns:
            v = _get_dotted(cfg, key)
            if key.startswith("speculative.") and key not in ("speculative.method",
                                                              "speculative.num_speculative_tokens"):
                if r.is_baseline:
                    v = None
                elif key == "speculative.acceptance_rate" and r.config.speculative.acceptance_input() != \
                        "acceptance_rate":
                    v = None
            if v is not None and unused.refusal(key, r.config) is not None:
                v = None  # a key this row's mode does not read (a draft model under n-gram): no value to show
            cells.append(_fmt_cell(v))
        for c in METRIC_COLUMNS + [c for c in POOL_METRIC_COLUMNS if c in sweep.columns]:
            cells.append(_fmt_cell(m.get(c), True, c in INT_METRICS))
        b = sweep.baseline_of.get(r.index)
        speedup = None
        if b is not None:
            base_tpot, tpot = results[b].get("tpot_ms_p50"), m.get("tpot_ms_p50")
            if b == r.index:
                speedup = 1.0
            elif base_tpot is not None and tpot:
                speedup = base_tpot / tpot
        cells.append(_fmt_cell(speedup, True))
        cells.append(_above_acceptance(speedup, m, b == r.index))
        cells.append("" if b is None else str(b))
        cells.append(sweep.sweep_hash)
        w.writerow(cells)
    return buf.getvalue()


def _above_acceptance(speedup, metrics: Mapping, is_baseline: bool) -> str:
    """``1`` when a row's TPOT speedup exceeds its mean acceptance length, ``0`` when not, empty without a speedup.

    A step advances at most the acceptance length's tokens and costs at least
    a plain step at the same batch, so at equal load the speedup stays below
    the acceptance length; above it means the row ran at a lighter load than
    its baseline (requests finish sooner, fewer share each step: docs/sweep.md,
    "Speedups above the acceptance length").
    """
    al = metrics.get("mean_acceptance_length")
    if speedup is None or is_baseline or al is None:
        return ""
    return "1" if speedup > al + 1e-9 else "0"


def atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        with naming(path, tmp):  # a full disk names the user's file, not the temporary one
            with open(tmp, "w", newline="") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def _csv_sweep_hash(path: Path) -> Optional[str]:
    """The ``sweep_hash`` recorded in an existing CSV; '' when the file is not a sweep CSV."""
    try:
        with open(path, newline="") as f:
            rd = csv.DictReader(f)
            if not rd.fieldnames or "sweep_hash" not in rd.fieldnames:
                return ""
            for rec in rd:
                return rec["sweep_hash"]
    except (OSError, UnicodeDecodeError, csv.Error):
        return ""
    return ""
