"""Wall time of ``tune`` on the default config, and the schedule against the best static k at each checked load.

Warms the predictor cache (a fitted operator model per profile, on disk), then
runs the command exactly as a user would, in a fresh output folder::

    python -m vidur_specdec.main tune --config configs/default.yaml \
        --set speculative.verify_attention=per_token --output-dir TMP --jobs 2

and prints its wall time (the aim: under 90 s on 2 cores), each static k's
crossover with the two simulated loads that straddle speedup 1, the capacities,
and at each checked load the schedule's TPOT p50 against the best static k and
k = 0 (it must be within 3 % of the best static k and never worse than k = 0 by
more than 3 %).

    python benchmarks/bench_tune.py [--jobs 2] [--config configs/default.yaml] [--set KEY=VALUE ...]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", default=str(REPO / "configs" / "default.yaml"))
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--set", dest="overrides", action="append", default=None)
    args = ap.parse_args()
    overrides = args.overrides if args.overrides is not None else ["speculative.verify_attention=per_token"]

    sys.path.insert(0, str(REPO))
    from vidur_specdec.engine.resolve import load
    from vidur_specdec.engine.simulation import prepare
    from vidur_specdec.tune.points import Setting, build_config, setting_overrides

    base = load(args.config, overrides)
    t0 = time.perf_counter()
    for k in (0, base.speculative.num_speculative_tokens):
        prepare(build_config(base, setting_overrides(base, Setting(k))))
    print(f"warm-up (predictor cache): {time.perf_counter() - t0:.1f} s")

    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "vidur_specdec.main", "tune", "--config", args.config, "--output-dir", tmp,
               "--jobs", str(args.jobs)] + [a for o in overrides for a in ("--set", o)]
        env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        t0 = time.perf_counter()
        r = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        if r.returncode != 0:
            print(r.stderr, file=sys.stderr)
            return r.returncode
        s = json.loads((Path(tmp) / "summary.json").read_text())
    print(f"\n{' '.join(cmd[1:4])} {Path(args.config).name} {' '.join('--set ' + o for o in overrides)} "
          f"--jobs {args.jobs}")
    print(f"wall time: {wall:.1f} s ({s['simulated_points']} simulated points)  [aim: < 90 s on 2 cores]")
    for k, x in s["crossover"].items():
        b = s["crossover_bracket"][k]
        print(f"  crossover k={k}: " + (f"{x:g} {s['load_unit']} (speedup >= 1 at {b[0]:g}, < 1 at {b[1]:g})"
                                        if x is not None else f"none ({s['crossover_note'][k]})"))
    print(f"  capacity: {s['capacity']['none']} without speculation, {s['capacity']['speculative']} with the schedule")
    print(f"  schedule: {s['schedule']}")
    ok = True
    for c in s["checks"]:
        good = c["shortfall_vs_best"] <= 0.03 and c["shortfall_vs_k0"] <= 0.03
        ok &= good
        print(f"  at {c['load']:g} {s['load_unit']}: schedule TPOT p50 {c['schedule']:.3f} ms, best static "
              f"k={c['best_static_k']} {c['best_static']:.3f} ms ({100 * c['shortfall_vs_best']:+.1f} %), k=0 "
              f"{c['k0']:.3f} ms ({100 * c['shortfall_vs_k0']:+.1f} %), k flips {c['k_flips']} of "
              f"{c['num_steps']} steps {'ok' if good else 'FAILS the 3 % bound'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
