"""Per-step wall time of a run priced by the measured kernel tables against the analytical roofline.

Both sides run the same config (default: configs/llama3.1-8b-h100.yaml: Llama-3.1-8B on one H100 with
EAGLE-3, k = 3) with warm caches (each side is run once first: the profile is built or read, the
predictor fitted, the tables loaded), then --repeat interleaved runs each. Wall time per step is the
run's wall time over its steps; the ratio tables / built must stay below 1.2 (the tables price once
per distinct step shape: the per-layer ops through the fitted profile, the LM head, all-reduce and
MoE layer through per-shape caches). Usage:

    python benchmarks/bench_kernel_source.py [--repeat 3] [--config FILE] [--set key=value ...]
"""

import argparse
import statistics
import time
from pathlib import Path

from vidur_specdec import simulate

REPO = Path(__file__).resolve().parents[1]


def per_step_s(config, overrides):
    t0 = time.perf_counter()
    res = simulate(config, overrides)
    return (time.perf_counter() - t0) / max(len(res.steps), 1), res


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", default=str(REPO / "configs/llama3.1-8b-h100.yaml"))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--set", dest="overrides", action="append", default=[])
    args = ap.parse_args()
    sides = {"tables": args.overrides + ["profiles=shipped"], "built": args.overrides + ["profiles=built"]}
    for name, ov in sides.items():  # warm
        _, res = per_step_s(args.config, ov)
        print(f"{name:7s} kernel_sources.gemm = {res.summary['kernel_sources']['gemm']}; {len(res.steps)} steps")
    times = {name: [] for name in sides}
    for _ in range(args.repeat):
        for name, ov in sides.items():
            times[name].append(per_step_s(args.config, ov)[0])
    med = {name: statistics.median(t) for name, t in times.items()}
    for name, t in med.items():
        print(f"{name:7s} {t * 1e6:8.1f} us per step (median of {args.repeat})")
    print(f"ratio tables / built: {med['tables'] / med['built']:.3f}")


if __name__ == "__main__":
    main()
