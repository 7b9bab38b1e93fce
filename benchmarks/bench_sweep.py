"""Wall time of the reference 39-row sweep (sweeps/specdec_39.yaml) and the cost of each row.

Warms the predictor cache first (one fit, written to the disk cache that the
workers read), then runs the sweep command exactly as a user would, in a fresh
interpreter, into a temporary folder:

    python -m vidur_specdec.main --config sweeps/specdec_39.yaml --output-dir TMP --jobs N

and reports

* the command's wall time (interpreter start, imports, checks, rows, CSV);
* the time from the first row submitted to the CSV written (what the CLI prints);
* per-row simulation cost from the journal (mean, min, max, sum = CPU-seconds of rows),
  and by load;
* whether the CSV is byte-identical to the recorded sweeps/results/specdec_39.csv.

    python benchmarks/bench_sweep.py [--jobs 2] [--sweep sweeps/specdec_39.yaml] [--repeat 1]

The aim: the whole sweep under 60 s on a 2-core machine.
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sweep", default=str(REPO / "sweeps" / "specdec_39.yaml"))
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()

    sys.path.insert(0, str(REPO))
    from vidur_specdec.engine.simulation import prepare
    from vidur_specdec.sweep import load_sweep

    sweep = load_sweep(args.sweep)
    t0 = time.perf_counter()
    for r in sweep.rows:  # fits once per profile (disk cache), then in-process hits
        prepare(r.config)
    print(f"warm-up (predictor cache, {len(sweep.rows)} rows prepared): {time.perf_counter() - t0:.1f} s")
    print(f"machine: {os.cpu_count()} cores; load average {os.getloadavg()[0]:.2f} before the run")

    recorded = REPO / "sweeps" / "results" / sweep.csv_name
    for rep in range(args.repeat):
        with tempfile.TemporaryDirectory() as tmp:
            cmd = [sys.executable, "-m", "vidur_specdec.main", "--config", args.sweep, "--output-dir", tmp,
                   "--jobs", str(args.jobs)]
            t0 = time.perf_counter()
            proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
            wall = time.perf_counter() - t0
            if proc.returncode != 0:
                print(proc.stderr, file=sys.stderr)
                return proc.returncode
            m = re.search(r"run in ([0-9.]+) s", proc.stdout)
            lines = (Path(tmp) / sweep.journal_name).read_text().splitlines()[1:]
            rows = sorted((json.loads(x) for x in lines), key=lambda o: o["row"])
            walls = [o["wall_s"] for o in rows]
            by_load = {}
            for o in rows:
                by_load.setdefault(sweep.rows[o["row"]].config.workload.qps, []).append(o["wall_s"])
            same = recorded.is_file() and (Path(tmp) / sweep.csv_name).read_bytes() == recorded.read_bytes()
            print(f"\nrun {rep + 1}: {' '.join(cmd[1:3])} --config {Path(args.sweep).name} --jobs {args.jobs}")
            print(f"  whole command (fresh interpreter, imports included): {wall:.1f} s for {len(rows)} rows")
            if m:
                print(f"  rows submitted -> CSV written: {float(m.group(1)):.1f} s")
            print(f"  per row: mean {statistics.mean(walls):.2f} s, median {statistics.median(walls):.2f} s, "
                  f"min {min(walls):.2f} s, max {max(walls):.2f} s; sum {sum(walls):.1f} s of worker time")
            for q, ws in sorted(by_load.items()):
                print(f"  load {q:g} req/s: {len(ws)} rows, mean {statistics.mean(ws):.2f} s, sum {sum(ws):.1f} s")
            print(f"  CSV identical to {recorded.relative_to(REPO)}: {same}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
