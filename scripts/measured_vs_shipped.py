"""Run a sweep on the shipped analytical profile and on a measured one; print the per-row TPOT difference.

Default: the 39-row reference sweep (sweeps/specdec_39.yaml) on the shipped
A100 profile and on Vidur's measured Llama-2-7B A100 profile in
../shared/vidur-profiles (its attention file is a sample; the predictor
interpolates inside it). Each sweep runs into its own folder (resumable;
reruns reuse finished rows) and the script prints, per row, TPOT p50 on both
and the difference in % (measured − shipped) / measured, plus the speedups.

    python scripts/measured_vs_shipped.py [--sweep sweeps/specdec_39.yaml]
        [--measured ../shared/vidur-profiles] [--out runs/measured_vs_shipped] [--jobs N]
"""

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from vidur_specdec.config import ConfigError
from vidur_specdec.sweep import load_sweep, run_sweep

REPO = Path(__file__).resolve().parents[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sweep", default=str(REPO / "sweeps/specdec_39.yaml"))
    ap.add_argument("--measured", default=str(REPO.parent / "shared" / "vidur-profiles"))
    ap.add_argument("--out", default="runs/measured_vs_shipped")
    ap.add_argument("--jobs", type=int, default=None)
    args = ap.parse_args()
    out = Path(args.out)
    try:
        frames = {}
        for label, profiles in (("shipped", "shipped"), ("measured", str(Path(args.measured).resolve()))):
            sweep = load_sweep(args.sweep, overrides=[f"profiles={profiles}"])
            run = run_sweep(sweep, out / label, jobs=args.jobs, progress=False)
            frames[label] = pd.read_csv(run.csv_path)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    s, m = frames["shipped"], frames["measured"]
    keys = [c for c in ("qps", "method", "k", "acceptance_rate", "verify_attention") if c in s.columns]
    diff = (s["tpot_ms_p50"] - m["tpot_ms_p50"]) / m["tpot_ms_p50"] * 100
    table = s[keys].copy()
    table["tpot_p50_shipped_ms"] = s["tpot_ms_p50"].round(2)
    table["tpot_p50_measured_ms"] = m["tpot_ms_p50"].round(2)
    table["diff_%"] = diff.round(1)
    table["speedup_shipped"] = s["tpot_speedup"].round(2)
    table["speedup_measured"] = m["tpot_speedup"].round(2)
    with pd.option_context("display.width", 200, "display.max_rows", 200):
        print(table.to_string(index=False))
    print(f"\nTPOT p50, shipped vs measured: median |diff| {np.median(np.abs(diff)):.1f} %, "
          f"max |diff| {np.max(np.abs(diff)):.1f} % over {len(diff)} rows; "
          f"speedup median |diff| {np.median(np.abs(s['tpot_speedup'] - m['tpot_speedup'])):.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
