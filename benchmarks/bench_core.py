"""Speed of one speculative run against Vidur's plain Sarathi on the same workload.

Both sides use the same 300-request workload (configs/default.yaml), the same
fitted predictor (warm in-process cache) and Vidur's event loop:

* ours   — ``simulate(default.yaml)``: SpecSarathi scheduler, n-gram k=4, α=0.7,
           the project's requests/steps tables and summary;
* vidur  — ``run_vidur_sarathi(default.yaml)``: Vidur's own SarathiReplicaScheduler,
           Request and MetricsStore (plots off), plain decoding.

Prints wall time per run (median of --repeat interleaved runs) and the ratio
ours / vidur (< 1: the speculative run is faster). Usage:

    python benchmarks/bench_core.py [--repeat 5] [--config configs/default.yaml]
"""

import argparse
import statistics
import time
from pathlib import Path

from vidur_specdec import run_vidur_sarathi, simulate

REPO = Path(__file__).resolve().parents[1]


def timed(fn):
    t0 = time.perf_counter()
    result = fn()
    return time.perf_counter() - t0, result


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", default=str(REPO / "configs/default.yaml"))
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--set", dest="overrides", action="append", default=[])
    args = ap.parse_args()

    simulate(args.config, args.overrides)  # warm: fit the predictor once, import everything
    run_vidur_sarathi(args.config, args.overrides)
    ours, vidur = [], []
    for _ in range(args.repeat):  # interleaved, so a drift in machine load hits both sides alike
        t, res = timed(lambda: simulate(args.config, args.overrides))
        ours.append(t)
        vidur.append(timed(lambda: run_vidur_sarathi(args.config, args.overrides))[0])
    s = res.summary
    print(f"workload: {s['num_requests']} requests, {s['output_tokens']} output tokens; "
          f"ours: {s['method']} k={s['num_speculative_tokens']}, {s['num_steps']} steps")
    print(f"ours  (speculative): median {statistics.median(ours):.3f} s  runs {[round(x, 3) for x in ours]}")
    print(f"vidur (plain Sarathi): median {statistics.median(vidur):.3f} s  runs {[round(x, 3) for x in vidur]}")
    print(f"ratio ours / vidur: {statistics.median(ours) / statistics.median(vidur):.2f}")


if __name__ == "__main__":
    main()
