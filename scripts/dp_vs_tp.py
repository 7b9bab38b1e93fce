"""DeepSeek-V3 with MTP on 16 H200: data-parallel attention + expert parallel (DP 16, EP 16) against 2 x TP 8.

Runs configs/deepseek-v3-mtp-dp16-ep16-h200.yaml and the same 16 GPUs as two TP 8
replicas (configs/deepseek-v3-mtp-h200.yaml's deployment, ``parallel.num_replicas=2``,
least outstanding requests) at MTP k = 0 (plain decoding), 1, 2, 3 and closed-loop
concurrency 64, 256, 1024 (``vllm bench serve --max-concurrency``), with
``max(500, 2 x concurrency)`` requests each; then the all-to-all's share of the step
time and EPLB on against off on the DP deployment. Prints the doc block; ``--write``
puts it in docs/model.md (block ``dp-vs-tp``). ``--quick`` runs concurrency 64 only.

Figures: TPOT p50 (ms), output tokens/s per GPU, and speculation's speedup (TPOT of
k = 0 over TPOT at k, the same deployment and load).
"""

import sys

from docblock import REPO, main

from vidur_specdec import simulate

DP = str(REPO / "configs" / "deepseek-v3-mtp-dp16-ep16-h200.yaml")
TP = ["parallel.tensor_parallel_size=8", "parallel.data_parallel_size=1", "parallel.enable_expert_parallel=false",
      "parallel.num_replicas=2", "parallel.global_scheduler=lor"]
KS = (0, 1, 2, 3)


def _run(extra, k, conc):
    n = max(500, 2 * conc)
    spec = ["speculative.method=none"] if k == 0 else ["speculative.method=mtp",
                                                        f"speculative.num_speculative_tokens={k}"]
    r = simulate(DP, overrides=extra + spec + [f"workload.concurrency={conc}", f"workload.num_requests={n}"])
    s = r.summary
    return {"tpot": s["tpot_ms"]["p50"], "per_gpu": s["throughput_tok_s"] / s["num_gpus"],
            "a2a": s.get("a2a_share"), "wait": s.get("dp_wait_share")}


def table(concurrencies):
    lines = ["| deployment | concurrency | k | TPOT p50 (ms) | tok/s per GPU | speedup | all-to-all share |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for name, extra in (("DP 16 + EP 16", []), ("2 x TP 8", TP)):
        for conc in concurrencies:
            base = None
            for k in KS:
                m = _run(extra, k, conc)
                base = base or m["tpot"]
                a2a = f"{m['a2a']:.2f}" if m["a2a"] is not None else "-"
                lines.append(f"| {name} | {conc} | {k} | {m['tpot']:.1f} | {m['per_gpu']:.0f} | "
                             f"{base / m['tpot']:.2f} | {a2a} |")
    return lines


def eplb_lines(conc):
    lines = ["", f"EPLB on the DP 16 + EP 16 deployment, MTP k = 1, concurrency {conc} (routing model's "
             "uniform popularity):", "",
             "| EPLB | redundant experts | TPOT p50 (ms) | tok/s per GPU |", "|---|---:|---:|---:|"]
    for on, r in ((False, 0), (True, 16), (True, 32)):
        extra = [f"parallel.enable_eplb={str(on).lower()}"] + ([f"parallel.num_redundant_experts={r}"] if on else [])
        m = _run(extra, 1, conc)
        lines.append(f"| {'on' if on else 'off'} | {r} | {m['tpot']:.1f} | {m['per_gpu']:.0f} |")
    return lines


if __name__ == "__main__":
    concs = (64,) if "--quick" in sys.argv else (64, 256, 1024)
    body = table(concs) + eplb_lines(256 if len(concs) > 1 else 64)
    text = "\n".join(["<!-- dp-vs-tp:begin -->",
                      "Written by `python scripts/dp_vs_tp.py --write` (DeepSeek-V3, MTP acceptance 0.85, "
                      "prompts lognormal median 512, outputs median 128; closed loop).", "", *body,
                      "<!-- dp-vs-tp:end -->"])
    sys.exit(main(REPO / "docs" / "model.md", text))
