"""Cold and warm run times of today's deployments, as whole ``python -m vidur_specdec.main`` processes.

For each deployment (Llama-3.1-8B on H100 and on H200 at TP1, Llama-3.1-70B
on H100 at TP4 and on A100 at TP8, each one ``--set`` away from
``configs/default.yaml``) it runs the CLI twice against a fresh
``predictor.cache_dir``: cold (the profile is built, written and fitted) and
warm (the built profile and the fitted model come from the cache). Wall time
includes interpreter start, imports, the build, the fit, the simulation and
writing the outputs. ``--requests`` shrinks the workload (default: the
config's 300 requests).

    python benchmarks/bench_deploy.py [--requests N] [--repeat R]
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

DEPLOYMENTS = [
    ("Llama-3.1-8B-Instruct H100 TP1", ["device=h100", "model=meta-llama/Llama-3.1-8B-Instruct"]),
    ("Llama-3.1-8B-Instruct H200 TP1", ["device=h200", "model=meta-llama/Llama-3.1-8B-Instruct"]),
    ("Llama-3.1-70B-Instruct H100 TP4", ["device=h100", "model=meta-llama/Llama-3.1-70B-Instruct",
                                         "parallel.tensor_parallel_size=4"]),
    ("Llama-3.1-70B-Instruct A100 TP8", ["device=a100", "model=meta-llama/Llama-3.1-70B-Instruct",
                                         "parallel.tensor_parallel_size=8"]),
    ("gpt-oss-120b H100 TP1 (MoE, MXFP4)", ["device=h100", "model=openai/gpt-oss-120b"]),
    ("Qwen3-30B-A3B H100 TP1 (MoE)", ["device=h100", "model=Qwen/Qwen3-30B-A3B"]),
]


def run_once(sets, cache, out, requests):
    cmd = [sys.executable, "-m", "vidur_specdec.main", "--config", str(REPO / "configs/default.yaml"),
           "--output-dir", str(out), "--overwrite", "--set", f"predictor.cache_dir={cache}"]
    for s in sets + ([f"workload.num_requests={requests}"] if requests else []):
        cmd += ["--set", s]
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode:
        raise SystemExit(f"failed: {' '.join(cmd)}\n{proc.stderr}")
    return wall


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=None, help="workload.num_requests (default: the config's)")
    ap.add_argument("--repeat", type=int, default=1, help="cold/warm pairs per deployment; the minimum is shown")
    args = ap.parse_args()
    print(f"{'deployment':34s} {'cold s':>7s} {'warm s':>7s}")
    for name, sets in DEPLOYMENTS:
        cold, warm = [], []
        for _ in range(args.repeat):
            with tempfile.TemporaryDirectory() as tmp:
                cache, out = Path(tmp) / "cache", Path(tmp) / "out"
                cold.append(run_once(sets, cache, out, args.requests))
                warm.append(run_once(sets, cache, out, args.requests))
        print(f"{name:34s} {min(cold):7.2f} {min(warm):7.2f}", flush=True)


if __name__ == "__main__":
    main()
