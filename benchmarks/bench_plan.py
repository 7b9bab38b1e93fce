"""Wall time of ``plan`` on the two documented questions, each from a cold cache, as a user runs it.

DeepSeek-V3 on 16 H200 and Llama-3.1-70B-Instruct on 8 H100, ISL 4000, OSL 500, TTFT <= 1 s at p90,
>= 20 tokens/s per user (docs/plan.md)::

    python -m vidur_specdec plan --model deepseek-ai/DeepSeek-V3 --devices h200 --gpus 16 \\
        --isl 4000 --osl 500 --slo-ttft-ms 1000 --min-tokens-per-user 20 --output-dir TMP --jobs 2

each in a fresh output folder with an empty predictor cache (``XDG_CACHE_HOME`` a new folder). Prints,
per question, the wall and user CPU seconds, the candidates screened, the points simulated and the best
deployment; the aim is 60 s wall on two cores.

    python benchmarks/bench_plan.py [--jobs 2]
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SLOS = ["--isl", "4000", "--osl", "500", "--slo-ttft-ms", "1000", "--min-tokens-per-user", "20"]
QUESTIONS = {
    "DeepSeek-V3, 16 H200": ["--model", "deepseek-ai/DeepSeek-V3", "--devices", "h200", "--gpus", "16"],
    "Llama-3.1-70B, 8 H100": ["--model", "meta-llama/Llama-3.1-70B-Instruct", "--devices", "h100", "--gpus", "8"],
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    for name, who in QUESTIONS.items():
        with tempfile.TemporaryDirectory(prefix="bench-plan-") as d:
            env = dict(os.environ, XDG_CACHE_HOME=str(Path(d) / "cache"), PYTHONPATH=str(REPO))
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.perf_counter()
            r = subprocess.run([sys.executable, "-m", "vidur_specdec", "plan", *who, *SLOS, "--output-dir",
                                str(Path(d) / "out"), "--jobs", str(args.jobs)], capture_output=True, text=True,
                               env=env, cwd=REPO)
            wall = time.perf_counter() - t0
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            if r.returncode != 0:
                print(f"{name}: plan failed: {r.stderr.strip().splitlines()[-1:]}")
                return 1
            s = json.loads((Path(d) / "out" / "summary.json").read_text())
            user = after.ru_utime - before.ru_utime
            print(f"{name}: {wall:.1f} s wall, {user:.1f} s user (cold cache, --jobs {args.jobs}); "
                  f"{s['screen']['candidates']} candidates screened; "
                  f"{s['simulated_points']} points simulated; best: {s['best']['deployment']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
