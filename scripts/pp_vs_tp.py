"""Llama-3.1-70B with EAGLE-3 on eight H100s: TP 4 x PP 2 against TP 8, at three loads (docs/model.md).

Usage: python scripts/pp_vs_tp.py [--write]
Runs configs/llama3.1-70b-eagle3-tp4pp2-h100.yaml (200 requests, closed loop) at
concurrency 8, 32 and 128, as TP 4 x PP 2 and as TP 8 x PP 1 (the same eight GPUs),
with EAGLE-3 (k = 3, mean acceptance length 2.8) and without speculation. Prints the
markdown table (TPOT p50, output throughput per GPU, speculation's TPOT speedup on
each deployment); ``--write`` puts it between the ``pp-vs-tp`` markers of docs/model.md.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import docblock  # noqa: E402  (scripts/docblock.py)

from vidur_specdec import simulate  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "model.md"
CONFIG = str(REPO / "configs" / "llama3.1-70b-eagle3-tp4pp2-h100.yaml")
BEGIN, END = docblock.markers("pp-vs-tp")
LOADS = (8, 32, 128)
LAYOUTS = (("TP 4 x PP 2", 4, 2), ("TP 8", 8, 1))


def run(tp: int, pp: int, conc: int, spec: bool) -> dict:
    over = [f"parallel.tensor_parallel_size={tp}", f"parallel.pipeline_parallel_size={pp}",
            f"workload.concurrency={conc}"]
    if not spec:
        over.append("speculative.method=none")
    s = simulate(CONFIG, over).summary
    return {"tpot": s["tpot_ms"]["p50"], "tput": s["throughput_tok_s"] / s["num_gpus"]}


def table() -> str:
    rows = []
    for conc in LOADS:
        for name, tp, pp in LAYOUTS:
            on, off = run(tp, pp, conc, True), run(tp, pp, conc, False)
            rows.append(f"| {conc} | {name} | {on['tpot']:.2f} | {off['tpot']:.2f} | {on['tput']:.0f} | "
                        f"{off['tput']:.0f} | {off['tpot'] / on['tpot']:.2f} |")
    return "\n".join([
        BEGIN,
        "| concurrency | GPUs (8 H100) | TPOT p50 EAGLE-3 (ms) | TPOT p50 no spec (ms) | tok/s/GPU EAGLE-3 | "
        "tok/s/GPU no spec | EAGLE-3 TPOT speedup |",
        "|---|---|---|---|---|---|---|",
        *rows,
        END,
    ])


def main() -> int:
    return docblock.main(DOC, table())


if __name__ == "__main__":
    sys.exit(main())
