"""DeepSeek-V3 on 16 H200 (DP 16 + EP 16): throughput per GPU with and without dual-batch overlap.

Runs configs/deepseek-v3-mtp-dp16-ep16-h200.yaml with ``parallel.enable_dbo`` off and
on, at closed-loop concurrency 256, 1024 and 2048 (``vllm bench serve
--max-concurrency``; ``max(500, 2 x concurrency)`` requests each), plain decoding
(k = 0) and MTP k = 1 (12 runs, about two minutes on one core)::

    PYTHONPATH=. python scripts/dbo_throughput.py [--record] [--write]

``--record`` runs them and records each run's numbers in
``sweeps/results/figures/dbo_throughput.csv`` (scripts/recorded_runs.py); the block
``dbo-throughput`` of docs/model.md is always written from that file (printed;
``--write`` puts it in place). tests/test_recorded_doc_figures.py re-renders the
block from the CSV, checks the CSV against the current configs and code, and re-runs
one run.

Figures: output tokens/s per GPU, TPOT p50 (ms), the exposed all-to-all's share of
the summed step time, the share of steps run as two micro-batches, their share of the
run's time and the share of their all-to-all left exposed.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scripts import recorded_runs  # noqa: E402
from scripts.docblock import REPO, markers  # noqa: E402

NAME = "dbo-throughput"
CSV_NAME = "dbo_throughput"
DOC = REPO / "docs" / "model.md"
CONFIG = str(REPO / "configs" / "deepseek-v3-mtp-dp16-ep16-h200.yaml")
CONCURRENCIES = (256, 1024, 2048)
KS = (0, 1)
COLUMNS = ("throughput_tok_s", "num_gpus", "tpot_ms_p50", "a2a_share", "dbo_steps", "split_time_share",
           "split_exposed")


def label(conc: int, k: int, dbo: bool) -> str:
    return f"c{conc} k{k} dbo-{'on' if dbo else 'off'}"


def runs():
    """Every run: (label, config, overrides), in the CSV's order."""
    out = []
    for conc in CONCURRENCIES:
        for k in KS:
            spec = ["speculative.method=none"] if k == 0 else [f"speculative.num_speculative_tokens={k}"]
            for dbo in (False, True):
                over = spec + [f"workload.concurrency={conc}", f"workload.num_requests={max(500, 2 * conc)}"]
                out.append((label(conc, k, dbo), CONFIG, over + (["parallel.enable_dbo=true"] if dbo else [])))
    return out


def measure(config, over):
    """One run's recorded numbers."""
    from vidur_specdec import simulate

    res = simulate(config, overrides=over)
    s, steps = res.summary, res.steps
    split = steps[steps.dbo == 1]
    return {"throughput_tok_s": s["throughput_tok_s"], "num_gpus": float(s["num_gpus"]),
            "tpot_ms_p50": s["tpot_ms"]["p50"], "a2a_share": s["a2a_share"], "dbo_steps": s["dbo_steps"],
            "split_time_share": float(split.duration_ms.sum() / steps.duration_ms.sum()),
            "split_exposed": float(split.a2a_exposed_ms.sum() / split.a2a_ms.sum()) if len(split) else None}


def text(res=None) -> str:
    """The block, from the recorded runs (``res``: :func:`recorded_runs.read`'s)."""
    res = res or recorded_runs.read(CSV_NAME)
    per_gpu = lambda m: m["throughput_tok_s"] / m["num_gpus"]  # noqa: E731
    begin, end = markers(NAME)
    lines = [begin, "Written by `python scripts/dbo_throughput.py --record --write` from "
             "sweeps/results/figures/dbo_throughput.csv (configs/deepseek-v3-mtp-dp16-ep16-h200.yaml: DeepSeek-V3 on "
             "16 H200, DP 16 + EP 16, prompts lognormal median 512, outputs median 128, closed loop; k = 1 is MTP at "
             "acceptance 0.85).", "",
             "| concurrency | k | tok/s per GPU, DBO off | on | gain | TPOT p50 (ms), off | on | exposed all-to-all "
             "share, off | on | steps split |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for conc in CONCURRENCIES:
        for k in KS:
            off, on = res[label(conc, k, False)], res[label(conc, k, True)]
            lines.append(f"| {conc:,} | {k} | {per_gpu(off):.0f} | {per_gpu(on):.0f} | "
                         f"{per_gpu(on) / per_gpu(off) - 1:+.1%} | {off['tpot_ms_p50']:.1f} | {on['tpot_ms_p50']:.1f} | "
                         f"{off['a2a_share']:.2f} | {on['a2a_share']:.2f} | {on['dbo_steps']:.0%} |")
    lines += ["", *reading(res), end]
    return "\n".join(lines)


def reading(res) -> list:
    """The paragraph that reads the table, its figures from the recorded runs."""
    on = {(c, k): res[label(c, k, True)] for c in CONCURRENCIES for k in KS}
    gain = {key: m["throughput_tok_s"] / res[label(*key, False)]["throughput_tok_s"] - 1 for key, m in on.items()}
    span = lambda xs: f"{min(xs):+.1%} to {max(xs):+.1%}"  # noqa: E731
    lo, hi = CONCURRENCIES[0], CONCURRENCIES[-1]
    share = [res[label(c, k, False)]["a2a_share"] for c in CONCURRENCIES for k in KS]
    exposed = [m["split_exposed"] for m in on.values() if m["split_exposed"] is not None]
    return [f"Read: dual-batch overlap gains {span([gain[(c, 0)] for c in CONCURRENCIES])} per GPU without "
            f"speculation ({lo} to {hi:,} in flight) and {span([gain[(c, 1)] for c in CONCURRENCIES])} with MTP "
            f"k = 1, far less than the all-to-all's {min(share):.0%}-{max(share):.0%} of the step without it, "
            "because few steps split: every rank must want it, a step with a prefill chunk on any rank needs 512 "
            "tokens on every rank, and a decode-only step counts as uniform only when every request carries "
            "exactly 1 + k tokens. Closed-loop arrivals put a prefill chunk on some rank in most steps, and under "
            "MTP requests near their last token (charged fewer guesses here, see the errors below) break "
            f"uniformity: at {hi:,} in flight {on[(hi, 0)]['dbo_steps']:.0%} of steps split without speculation "
            f"({on[(hi, 0)]['split_time_share']:.0%} of the run's time), {on[(hi, 1)]['dbo_steps']:.0%} with MTP "
            f"({on[(hi, 1)]['split_time_share']:.0%}: few steps, but long ones). The steps that "
            f"split hide nearly all their all-to-all (at most {max(exposed):.1%} of it left exposed in any run "
            "here); they gain less than that because each micro-batch streams the weights again (a split step of "
            "few tokens is slower than the whole one: the thresholds keep most of those out)."]


if __name__ == "__main__":
    sys.exit(recorded_runs.script_main(CSV_NAME, runs, measure, COLUMNS, DOC, text))
