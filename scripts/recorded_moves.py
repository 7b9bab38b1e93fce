"""What this round's regeneration moved in every recorded result: a table in docs/sweep.md.

Usage: PYTHONPATH=. python scripts/recorded_moves.py [--write]

For each recorded CSV (the sweeps in ``sweeps/results/`` and the run-by-run figures in
``sweeps/results/figures/``) it compares the recording of commit :data:`BEFORE` (the last before this round:
the engine core, the one step pricer, the routing model for every step, vLLM 0.33's all-reduce order,
the hybrid block pool, dual-batch overlap, the published n-gram rows) with the recording here, row by
row (rows matched by their model/device/load/method/k columns, or the run name), and gives per file: rows
before and now, rows whose TPOT p50 moved (beyond the 6 decimals a CSV keeps), the median and the range of
TPOT p50 now ÷ before over the rows in both, and the speedup column's range of change where there is
one. Reads git (``git show``); ``--write`` puts the block between the ``recorded-moves`` markers of
docs/sweep.md (tests/test_recorded_moves.py fails while it is stale).
"""

from __future__ import annotations

import csv
import io
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import docblock  # noqa: E402  (scripts/docblock.py)

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "sweep.md"
BEGIN, END = docblock.markers("recorded-moves")
BEFORE = "eb177c2"  # the last commit before this round
KEY_COLUMNS = ("run", "model", "device", "profiles", "qps", "concurrency", "method", "k", "acceptance_rate",
               "verify_attention", "tensor_parallel_size", "num_replicas", "draft_kv", "pools")
SPEEDUP = "tpot_speedup"


def recorded() -> list:
    """Every recorded CSV, relative to the checkout, sweeps first."""
    root = REPO / "sweeps" / "results"
    return [p.relative_to(REPO).as_posix() for p in sorted(root.glob("*.csv")) + sorted((root / "figures").glob("*.csv"))]


def _rows(text: str) -> dict:
    rows = list(csv.DictReader(io.StringIO(text)))
    if not rows:
        return {}
    cols = [c for c in KEY_COLUMNS if c in rows[0]]
    out = {}
    for r in rows:
        key = tuple(r[c] for c in cols)
        out[key if key not in out else key + (len(out),)] = r
    return out


def _before(path: str) -> str:
    got = subprocess.run(["git", "show", f"{BEFORE}:{path}"], cwd=REPO, capture_output=True, text=True, timeout=60)
    return got.stdout if got.returncode == 0 else ""


def moves(path: str) -> str:
    """One table row for the recorded CSV at ``path``."""
    old, new = _rows(_before(path)), _rows((REPO / path).read_text())
    both = [k for k in new if k in old]
    col = "tpot_ms_p50"
    if not old:
        return f"| `{path}` | — | {len(new)} | new | | |"
    ratios = [float(new[k][col]) / float(old[k][col]) for k in both
              if old[k].get(col) not in (None, "") and new[k].get(col) not in (None, "") and float(old[k][col]) > 0]
    moved = sum(1 for r in ratios if abs(r - 1) > 1e-6)
    if ratios:
        rng = f"×{statistics.median(ratios):.3f} (×{min(ratios):.3f} – ×{max(ratios):.3f})"
    else:
        rng = "—"
    speed = ""
    ds = [float(new[k][SPEEDUP]) - float(old[k][SPEEDUP]) for k in both
          if old[k].get(SPEEDUP) not in (None, "") and new[k].get(SPEEDUP) not in (None, "")]
    if ds:
        speed = f"{min(ds):+.2f} to {max(ds):+.2f}"
    return f"| `{path}` | {len(old)} | {len(new)} | {moved} of {len(ratios)} | {rng} | {speed} |"


def table() -> str:
    lines = [BEGIN, "", "| recorded result | rows before | rows now | rows whose TPOT p50 moved | TPOT p50 now ÷ before,"
             " median (range) | TPOT speedup, change |", "|---|---|---|---|---|---|"]
    lines += [moves(p) for p in recorded()]
    lines += ["", f"Before: commit {BEFORE}'s recordings; now: this checkout's. Rows are matched by their model, "
              "device, load, method and k (a figure's rows by run name); a row only in one recording counts in "
              "its total alone.", "", END]
    return "\n".join(lines)


def main() -> int:
    return docblock.main(DOC, table())


if __name__ == "__main__":
    sys.exit(main())
