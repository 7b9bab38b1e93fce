"""Wall time of a mixture-of-experts run against a dense run of the same workload.

Both sides simulate the same 300-request workload (configs/default.yaml), the
same proposer and acceptance (n-gram, k from the config), on one H100, with a
warm in-process predictor cache, so the difference is the per-step MoE pricing
(routing and the MoE layer, ``costs/moe_layer.py``):

* moe   — Qwen/Qwen3-30B-A3B (128 experts, top-8);
* dense — meta-llama/Llama-3.1-8B-Instruct.

Prints wall time per run (median of --repeat interleaved runs) and the ratio
moe / dense (the target: at most 1.5). Usage:

    python benchmarks/bench_moe.py [--repeat 3] [--moe-model Qwen/Qwen3-30B-A3B]
"""

import argparse
import statistics
import time
from pathlib import Path

from vidur_specdec import simulate

REPO = Path(__file__).resolve().parents[1]


def timed(fn):
    t0 = time.perf_counter()
    result = fn()
    return time.perf_counter() - t0, result


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", default=str(REPO / "configs/default.yaml"))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--moe-model", default="Qwen/Qwen3-30B-A3B")
    ap.add_argument("--dense-model", default="meta-llama/Llama-3.1-8B-Instruct")
    ap.add_argument("--device", default="h100")
    ap.add_argument("--set", dest="overrides", action="append", default=[])
    args = ap.parse_args()

    common = [f"device={args.device}", "workload.num_requests=300"] + args.overrides
    moe = [f"model={args.moe_model}"] + common
    dense = [f"model={args.dense_model}"] + common
    simulate(args.config, moe)  # warm: build and fit the profiles once, import everything
    simulate(args.config, dense)
    t_moe, t_dense = [], []
    for _ in range(args.repeat):  # interleaved, so a drift in machine load hits both sides alike
        t, res_m = timed(lambda: simulate(args.config, moe))
        t_moe.append(t)
        t, res_d = timed(lambda: simulate(args.config, dense))
        t_dense.append(t)
    for label, res, ts in (("moe", res_m, t_moe), ("dense", res_d, t_dense)):
        s = res.summary
        print(f"{label:5s} {s['model']}: {s['num_requests']} requests, {s['num_steps']} steps, "
              f"median {statistics.median(ts):.3f} s  runs {[round(x, 3) for x in ts]}")
    ratio = statistics.median(t_moe) / statistics.median(t_dense)
    print(f"ratio moe / dense: {ratio:.2f} (target <= 1.5)")
    routing_per_call()


def routing_per_call(calls: int = 200) -> None:
    """Time of the two routing functions priced on every MoE step, at a large mixed step (200 decodes,
    56 verify blocks of k = 4 guesses, i.e. 5 tokens, two prefill chunks), in ms per call against their budgets."""
    from vidur_specdec.costs import routing

    groups = [1] * 200 + [5] * 56 + [512, 1024]
    for name, call, budget_ms in (
            ("expected_distinct (256 experts, top-8)", lambda: routing.expected_distinct(groups, 256, 8), 2.0),
            ("ep_busiest_rank (256 experts, top-8, EP 8)", lambda: routing.ep_busiest_rank(groups, 256, 8, 8), 5.0)):
        call()
        t0 = time.perf_counter()
        for _ in range(calls):
            call()
        ms = (time.perf_counter() - t0) / calls * 1e3
        print(f"{name}: {ms:.3f} ms per call (budget {budget_ms} ms)")


if __name__ == "__main__":
    main()
