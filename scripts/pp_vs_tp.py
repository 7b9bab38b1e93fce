"""Llama-3.1-70B with EAGLE-3 on eight H100s: TP 4 x PP 2 against TP 8, at three loads (docs/model.md).

Usage: PYTHONPATH=. python scripts/pp_vs_tp.py [--record] [--write]
Runs configs/llama3.1-70b-eagle3-tp4pp2-h100.yaml (closed loop, 4 x concurrency requests, at least 200) at
concurrency 8, 32 and 128, as TP 4 x PP 2 and as TP 8 x PP 1 (the same eight GPUs),
with EAGLE-3 (k = 3, mean acceptance length 2.8) and without speculation (12 runs).
``--record`` runs them and records each run's numbers in ``sweeps/results/figures/pp_vs_tp.csv``
(scripts/recorded_runs.py); the markdown table (TPOT p50, output throughput per GPU,
speculation's TPOT speedup on each deployment) is always written from that file, printed, and with
``--write`` put between the ``pp-vs-tp`` markers of docs/model.md. tests/test_recorded_doc_figures.py
re-renders the block from the CSV, checks the CSV against the current configs and code, and re-runs one run.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scripts import docblock, recorded_runs  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "model.md"
CSV_NAME = "pp_vs_tp"
CONFIG = str(REPO / "configs" / "llama3.1-70b-eagle3-tp4pp2-h100.yaml")
NAME = "pp-vs-tp"
BEGIN, END = docblock.markers(NAME)
LOADS = (8, 32, 128)
LAYOUTS = (("TP 4 x PP 2", 4, 2), ("TP 8", 8, 1))
COLUMNS = ("tpot_ms_p50", "throughput_tok_s", "num_gpus", "median_decode_batch")


def label(tp: int, pp: int, conc: int, spec: bool) -> str:
    return f"tp{tp} pp{pp} c{conc} " + ("eagle3" if spec else "none")


def overrides(tp: int, pp: int, conc: int, spec: bool) -> list:
    over = [f"parallel.tensor_parallel_size={tp}", f"parallel.pipeline_parallel_size={pp}",
            f"workload.concurrency={conc}", f"workload.num_requests={max(200, 4 * conc)}"]
    return over + ([] if spec else ["speculative.method=none"])


def runs() -> list:
    """Every run: (label, config, overrides), in the CSV's order."""
    return [(label(tp, pp, conc, spec), CONFIG, overrides(tp, pp, conc, spec))
            for conc in LOADS for _, tp, pp in LAYOUTS for spec in (True, False)]


def measure(config: str, over: list) -> dict:
    """One run's recorded numbers (the median decode batch: requests decoding in a step that decodes)."""
    from vidur_specdec import simulate

    res = simulate(config, over)
    s, steps = res.summary, res.steps
    decoding = steps[steps["decode_reqs"] > 0]
    return {"tpot_ms_p50": s["tpot_ms"]["p50"], "throughput_tok_s": s["throughput_tok_s"],
            "num_gpus": float(s["num_gpus"]), "median_decode_batch": float(decoding["decode_reqs"].median())}


def run(tp: int, pp: int, conc: int, spec: bool, res: dict) -> dict:
    """The recorded run's figures: TPOT p50, throughput per GPU, median decode batch."""
    m = res[label(tp, pp, conc, spec)]
    return {"tpot": m["tpot_ms_p50"], "tput": m["throughput_tok_s"] / m["num_gpus"], "batch": m["median_decode_batch"]}


def text(res=None) -> str:
    """The block, from the recorded runs (``res``: :func:`recorded_runs.read`'s)."""
    res = res or recorded_runs.read(CSV_NAME)
    rows, got = [], {}
    for conc in LOADS:
        for name, tp, pp in LAYOUTS:
            on, off = run(tp, pp, conc, True, res), run(tp, pp, conc, False, res)
            got[conc, pp] = (on, off)
            rows.append(f"| {conc} | {name} | {on['tpot']:.2f} | {off['tpot']:.2f} | {on['tput']:.0f} | "
                        f"{off['tput']:.0f} | {off['tpot'] / on['tpot']:.2f} |")
    lo, hi = LOADS[0], LOADS[-1]

    def ratio(conc, i, key):  # TP 8 over TP 4 x PP 2 (i = 0: EAGLE-3, 1: no speculation)
        return got[conc, 1][i][key] / got[conc, 2][i][key]

    def speedup(conc, pp):
        on, off = got[conc, pp]
        return off["tpot"] / on["tpot"]
    return "\n".join([
        BEGIN,
        "| concurrency | GPUs (8 H100) | TPOT p50 EAGLE-3 (ms) | TPOT p50 no spec (ms) | tok/s/GPU EAGLE-3 | "
        "tok/s/GPU no spec | EAGLE-3 TPOT speedup |",
        "|---|---|---|---|---|---|---|",
        *rows,
        "",
        f"With EAGLE-3, TP 8 gives {ratio(lo, 0, 'tput'):.2f}x the throughput per GPU of TP 4 x PP 2 at "
        f"concurrency {lo} and {ratio(hi, 0, 'tput'):.2f}x at {hi}: PP halves the layers per GPU, but each step "
        f"of a request still passes through all 80 layers, at four GPUs per layer instead of eight, plus the "
        f"send and the wait for the last stage (LM head and drafter). Speculation's TPOT speedup falls with load on both, from {speedup(lo, 2):.2f} (PP) and "
        f"{speedup(lo, 1):.2f} (TP 8) at {lo} to {speedup(hi, 2):.2f} and {speedup(hi, 1):.2f} at {hi}; at {hi} "
        f"a PP micro-batch verifies a median {got[hi, 2][0]['batch']:.0f} requests against "
        f"{got[hi, 1][0]['batch']:.0f} in a TP 8 step (two micro-batches share the running requests).",
        END,
    ])


def main() -> int:
    return recorded_runs.script_main(CSV_NAME, runs, measure, COLUMNS, DOC, text)


if __name__ == "__main__":
    sys.exit(main())
