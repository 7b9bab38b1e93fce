"""DeepSeek-V3 with MTP on 16 H200: data-parallel attention + expert parallel (DP 16, EP 16) against 2 x TP 8.

Runs configs/deepseek-v3-mtp-dp16-ep16-h200.yaml and the same 16 GPUs as two TP 8
replicas (configs/deepseek-v3-mtp-h200.yaml's deployment, ``parallel.num_replicas=2``,
least outstanding requests) at MTP k = 0 (plain decoding), 1, 2, 3 and closed-loop
concurrency 64, 256, 1024 (``vllm bench serve --max-concurrency``), with
``max(500, 2 x concurrency)`` requests each; then EPLB on against off on the DP
deployment (26 runs, about 10 minutes on one core)::

    PYTHONPATH=. python scripts/dp_vs_tp.py [--record] [--write]

``--record`` runs them and records each run's numbers in
``sweeps/results/figures/dp_vs_tp.csv`` (scripts/recorded_runs.py); the block
``dp-vs-tp`` of docs/model.md is always written from that file (printed; ``--write``
puts it in place). tests/test_recorded_doc_figures.py re-renders the block from the
CSV, checks the CSV against the current configs and code, and re-runs one run.

Figures: TPOT p50 (ms), output tokens/s per GPU, speculation's speedup (TPOT of
k = 0 over TPOT at k, the same deployment and load) and the all-to-all's share of the step.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scripts import recorded_runs  # noqa: E402
from scripts.docblock import REPO, markers  # noqa: E402

NAME = "dp-vs-tp"
CSV_NAME = "dp_vs_tp"
DOC = REPO / "docs" / "model.md"
DP = str(REPO / "configs" / "deepseek-v3-mtp-dp16-ep16-h200.yaml")
TP = ["parallel.tensor_parallel_size=8", "parallel.data_parallel_size=1", "parallel.enable_expert_parallel=false",
      "parallel.num_replicas=2", "parallel.global_scheduler=lor"]
DEPLOYMENTS = (("DP 16 + EP 16", "dp16-ep16", []), ("2 x TP 8", "2xtp8", TP))
KS = (0, 1, 2, 3)
CONCURRENCIES = (64, 256, 1024)
EPLB_CONC = 256
EPLB = (0, 16, 32)  # redundant experts; 0: EPLB off (the table's k = 1 run at EPLB_CONC)
COLUMNS = ("tpot_ms_p50", "throughput_tok_s", "num_gpus", "a2a_share", "dp_wait_share")


def overrides(extra, k, conc):
    spec = ["speculative.method=none"] if k == 0 else ["speculative.method=mtp",
                                                        f"speculative.num_speculative_tokens={k}"]
    return extra + spec + [f"workload.concurrency={conc}", f"workload.num_requests={max(500, 2 * conc)}"]


def label(short, conc, k, redundant=0):
    return f"{short} c{conc} k{k}" + (f" eplb{redundant}" if redundant else "")


def runs():
    """Every run: (label, config, overrides), in the CSV's order."""
    out = [(label(short, conc, k), DP, overrides(extra, k, conc))
           for _, short, extra in DEPLOYMENTS for conc in CONCURRENCIES for k in KS]
    for r in EPLB[1:]:
        extra = ["parallel.enable_eplb=true", f"parallel.num_redundant_experts={r}"]
        out.append((label("dp16-ep16", EPLB_CONC, 1, r), DP, overrides(extra, 1, EPLB_CONC)))
    return out


def measure(config, over):
    """One run's recorded numbers."""
    from vidur_specdec import simulate

    s = simulate(config, overrides=over).summary
    return {"tpot_ms_p50": s["tpot_ms"]["p50"], "throughput_tok_s": s["throughput_tok_s"],
            "num_gpus": float(s["num_gpus"]), "a2a_share": s.get("a2a_share"), "dp_wait_share": s.get("dp_wait_share")}


def text(res=None) -> str:
    """The block, from the recorded runs (``res``: :func:`recorded_runs.read`'s)."""
    res = res or recorded_runs.read(CSV_NAME)
    per_gpu = lambda m: m["throughput_tok_s"] / m["num_gpus"]  # noqa: E731
    begin, end = markers(NAME)
    lines = [begin, "Written by `python scripts/dp_vs_tp.py --record --write` from sweeps/results/figures/dp_vs_tp.csv (DeepSeek-V3, MTP acceptance 0.85, "
             "prompts lognormal median 512, outputs median 128; closed loop).", "",
             "| deployment | concurrency | k | TPOT p50 (ms) | tok/s per GPU | speedup | all-to-all share |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for name, short, _ in DEPLOYMENTS:
        for conc in CONCURRENCIES:
            base = res[label(short, conc, 0)]["tpot_ms_p50"]
            for k in KS:
                m = res[label(short, conc, k)]
                a2a = f"{m['a2a_share']:.2f}" if m["a2a_share"] is not None else "-"
                lines.append(f"| {name} | {conc} | {k} | {m['tpot_ms_p50']:.1f} | {per_gpu(m):.0f} | "
                             f"{base / m['tpot_ms_p50']:.2f} | {a2a} |")
    lines += ["", f"EPLB on the DP 16 + EP 16 deployment, MTP k = 1, concurrency {EPLB_CONC} (routing model's "
              "uniform popularity):", "",
              "| EPLB | redundant experts | TPOT p50 (ms) | tok/s per GPU |", "|---|---:|---:|---:|"]
    for r in EPLB:
        m = res[label("dp16-ep16", EPLB_CONC, 1, r)]
        lines.append(f"| {'on' if r else 'off'} | {r} | {m['tpot_ms_p50']:.1f} | {per_gpu(m):.0f} |")
    lines += ["", *reading(res), end]
    return "\n".join(lines)


def reading(res) -> list:
    """The paragraph that reads the table, its figures from the recorded runs."""
    lo, hi = CONCURRENCIES[0], CONCURRENCIES[-1]
    speedup = lambda short, conc, k: res[label(short, conc, 0)]["tpot_ms_p50"] / res[label(short, conc, k)]["tpot_ms_p50"]  # noqa: E731
    span = lambda xs, fmt: f"{min(xs):{fmt}}-{max(xs):{fmt}}" if f"{min(xs):{fmt}}" != f"{max(xs):{fmt}}" else f"{min(xs):{fmt}}"  # noqa: E731
    dp1 = [speedup("dp16-ep16", c, 1) for c in CONCURRENCIES]
    dp3 = [speedup("dp16-ep16", c, KS[-1]) for c in CONCURRENCIES]
    a2a = [100 * res[label("dp16-ep16", c, k)]["a2a_share"] for c in CONCURRENCIES for k in KS]
    gpu0 = {short: [res[label(short, c, 0)]["throughput_tok_s"] / res[label(short, c, 0)]["num_gpus"]
                    for c in CONCURRENCIES] for _, short, _ in DEPLOYMENTS}
    text = (f"Read: MTP's speedup falls with load on 2 × TP 8 ({speedup('2xtp8', lo, 1):.2f} at k = 1 and {lo} in "
            f"flight, {speedup('2xtp8', hi, 1):.2f} at {hi:,}, where each replica's {hi // 2}-request steps are "
            "compute-bound and a verify token costs nearly what a request does) but holds on DP 16 + EP 16 "
            f"({span(dp1, '.2f')} at k = 1, {span(dp3, '.2f')} at k = {KS[-1]}): there each rank runs at most "
            f"{hi // 16} requests, a rank's attention and dense layers stay memory-bound, and the all-to-all — "
            f"{span(a2a, '.0f')} % of every step here, and growing with the tokens a rank sends, so verify tokens pay "
            "for it — scales less than linearly with tokens at these sizes (DeepEP low latency, 64 → 256 tokens per "
            "rank: 2.6× the time for 4× the tokens). At low load the rank sync costs speculation instead: a rank "
            "with a prefill chunk or more verify tokens sets every rank's step. The DP deployment is slower per GPU "
            f"throughout here ({span(gpu0['dp16-ep16'], '.0f')} against {span(gpu0['2xtp8'], '.0f')} tok/s per GPU "
            "at k = 0), mostly by the all-to-all, which every step here waits for in full (dual-batch overlap "
            "off: next point).")
    return [text]


if __name__ == "__main__":
    sys.exit(recorded_runs.script_main(CSV_NAME, runs, measure, COLUMNS, DOC, text))
