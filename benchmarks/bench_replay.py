"""Benchmark: can the replay client hold hundreds of streams in flight and keep to its schedule?

Starts the fake vLLM server in a subprocess (loopback, its own process so it
does not share the client's core), replays a Poisson trace sized so that
several hundred requests stream at once, and prints the client's send
lateness (actual send time − scheduled send time) at p50 / p99 / max and the
most requests it held in flight. The client is one asyncio loop in one
thread, pinned to CPU 0 (the server to CPU 1) unless ``--no-pin``.

    python benchmarks/bench_replay.py                     # 1200 requests at 100/s, 150 tokens each
    python benchmarks/bench_replay.py --requests 3000 --qps 200 --no-pin

Target: >= 256 in flight with p99 lateness <= 5 ms.

To tell the client's own cost from a busy machine, it also prints the CPU
time of the client's event-loop iterations (a burst of chunks, one per
stream, is handled in one iteration: its CPU time is what a send scheduled
during it waits for), the involuntary context switches of the client, and
the CPU pressure the kernel reports (``/proc/pressure/cpu``, share of time
some runnable task waited for a CPU).
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def _pressure() -> str:
    try:
        line = Path("/proc/pressure/cpu").read_text().splitlines()[0]
        return dict(kv.split("=") for kv in line.split()[1:]).get("avg10", "?") + " %"
    except (OSError, ValueError, IndexError):
        return "n/a"


def _probe_loop():
    """Record the CPU time of every event-loop iteration (monkeypatch; benchmark only)."""
    import asyncio.base_events as be

    cpu = []
    orig = be.BaseEventLoop._run_once

    def run_once(self):
        c = time.thread_time()
        orig(self)
        cpu.append(time.thread_time() - c)

    be.BaseEventLoop._run_once = run_once
    return cpu


def _probe_gc():
    """Record garbage-collection pauses (generation, ms)."""
    import gc

    pauses = []
    state = {}

    def cb(phase, info):
        if phase == "start":
            state["t"] = time.perf_counter()
        elif "t" in state:
            pauses.append((info["generation"], (time.perf_counter() - state.pop("t")) * 1e3))

    gc.callbacks.append(cb)
    return pauses


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=1200)
    ap.add_argument("--qps", type=float, default=100.0)
    ap.add_argument("--prompt-tokens", type=int, default=64)
    ap.add_argument("--output-tokens", type=int, default=150)
    ap.add_argument("--base-ms", type=float, default=40.0, help="fake engine: fixed time per step")
    ap.add_argument("--per-req-ms", type=float, default=0.02, help="fake engine: time per request per step")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-pin", dest="pin", action="store_false",
                    help="do not pin the client to CPU 0 and the server to CPU 1")
    args = ap.parse_args()

    from vidur_specdec.engine.resolve import load
    from vidur_specdec.validate.replay import replay
    from vidur_specdec.validate.workload import generate_trace, load_trace, write_trace

    cfg = load({"seed": args.seed, "workload": {
        "num_requests": args.requests, "qps": args.qps,
        "prompt_tokens": {"dist": "fixed", "value": args.prompt_tokens},
        "output_tokens": {"dist": "fixed", "value": args.output_tokens}}})
    with tempfile.TemporaryDirectory() as tmp:
        trace_path = Path(tmp) / "trace.csv"
        write_trace(generate_trace(cfg, "poisson"), trace_path)
        trace = load_trace(trace_path)
        port_file = Path(tmp) / "port"
        cmd = [sys.executable, "-m", "vidur_specdec.validate", "fake-server", "--port", "0", "--port-file",
               str(port_file), "--k", "4", "--alpha", "0.7", "--base-ms", str(args.base_ms),
               "--per-req-ms", str(args.per_req_ms), "--per-token-ms", "0", "--max-num-seqs", "100000",
               "--max-num-batched-tokens", "10000000", "--num-gpu-blocks", "100000000"]
        env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        server = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, env=env)
        try:
            if args.pin and hasattr(os, "sched_setaffinity") and os.cpu_count() >= 2:
                os.sched_setaffinity(server.pid, {1})
                os.sched_setaffinity(0, {0})
            deadline = time.time() + 60
            while not port_file.exists() or not port_file.read_text().strip():
                if server.poll() is not None or time.time() > deadline:
                    print("fake server did not start", file=sys.stderr)
                    return 1
                time.sleep(0.05)
            url = f"http://127.0.0.1:{port_file.read_text().strip()}"
            pressure = _pressure()
            iters = _probe_loop()
            pauses = _probe_gc()
            ru0 = resource.getrusage(resource.RUSAGE_SELF)
            t = time.perf_counter()
            cpu0 = time.process_time()
            res = replay(url, trace, "fake-model", timeout_s=600)
            wall = time.perf_counter() - t
            cpu = time.process_time() - cpu0
            ru1 = resource.getrusage(resource.RUSAGE_SELF)
        finally:
            server.terminate()
            server.wait(10)
    s = res.stats
    f = res.frame
    print(f"{len(f)} requests ({args.qps:g}/s Poisson, {args.output_tokens} output tokens each), "
          f"statuses {s['status_counts']}, replay {wall:.1f} s")
    print(f"max in flight: {s['max_in_flight']}")
    print(f"send lateness: p50 {s['lateness_ms_p50']:.3f} ms, p99 {s['lateness_ms_p99']:.3f} ms, "
          f"max {s['lateness_ms_max']:.3f} ms")
    chunks = int(f["chunks"].sum())
    print(f"chunks received: {chunks} ({chunks / wall:.0f}/s); client CPU {cpu:.1f} s "
          f"({cpu / wall * 100:.0f} % of one core, everything included)")
    import numpy as np

    it = np.array(iters) * 1e3
    top = np.argsort(-it)[:3]
    print(f"client loop: {len(it)} iterations, CPU per iteration p50 {np.percentile(it, 50):.3f} ms, "
          f"p99 {np.percentile(it, 99):.2f} ms; largest {', '.join(f'{it[i]:.1f} ms (#{i})' for i in top)}; "
          f"{ru1.ru_nivcsw - ru0.ru_nivcsw} involuntary context switches")
    if pauses:
        worst = max(pauses, key=lambda p: p[1])
        print(f"garbage collections: {len(pauses)}, longest {worst[1]:.1f} ms (generation {worst[0]})")
    print(f"machine CPU pressure (avg10) before: {pressure}, after: {_pressure()}")
    ok = s["max_in_flight"] >= 256 and s["lateness_ms_p99"] <= 5.0
    print("target (>= 256 in flight, p99 <= 5 ms):", "met" if ok else "NOT met")
    return 0


if __name__ == "__main__":
    sys.exit(main())
