"""n-gram speedup by load and proposal rate, on both of vLLM's model runners.

Median TPOT speedup over no speculation for Llama-3.1-8B-Instruct on one H100
(shipped profile), closed loop at 1, 8, 32 and 64 requests in flight, prompts
512 and outputs 256 tokens, k = 4, alpha 0.7, default scheduler, 3 × the
concurrency requests (at least 8), seed 0; runner v1 at proposal_rate 0.2, 0.5
and 1, runner v2 at 0.2 and 0.5 (at rate 1 the runners charge the same).

    PYTHONPATH=. python scripts/ngram_rate.py [--record] [--write]

``--record`` runs them (24 runs) and records each run's TPOT in ``sweeps/results/figures/ngram_rate.csv``
(scripts/recorded_runs.py); the table is always written from that file, printed, and with ``--write`` put
between the ``ngram-rate`` markers of docs/model.md. tests/test_recorded_doc_figures.py re-renders the block
from the CSV, checks the CSV against the current configs and code, and re-runs one run.
"""

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

sys.path.insert(0, str(Path(__file__).resolve().parent))
import docblock  # noqa: E402  (scripts/docblock.py)

from vidur_specdec import simulate  # noqa: E402

from scripts import recorded_runs  # noqa: E402

DOC = REPO / "docs" / "model.md"
NAME = "ngram-rate"
CSV_NAME = "ngram_rate"
BEGIN, END = docblock.markers(NAME)
LOADS = (1, 8, 32, 64)

COLS = [("v1", 0.2), ("v1", 0.5), ("v1", 1.0), ("v2", 0.2), ("v2", 0.5)]
COLUMNS = ("tpot_ms_p50",)


def config(c: int, extra: dict) -> dict:
    """The run at ``c`` requests in flight with ``extra`` (its speculative and engine sections)."""
    return {"seed": 0, "model": "meta-llama/Llama-3.1-8B-Instruct", "device": "h100",
            "workload": {"num_requests": max(8, 3 * c), "arrival": "closed", "concurrency": c,
                         "prompt_tokens": {"dist": "fixed", "value": 512},
                         "output_tokens": {"dist": "fixed", "value": 256}}, **extra}


def label(c: int, runner: str = None, rate: float = None) -> str:
    return f"c{c} none" if runner is None else f"c{c} ngram {runner} rate {rate:g}"


def runs() -> list:
    """Every run: (label, config, overrides), in the CSV's order."""
    out = []
    for c in LOADS:
        out.append((label(c), config(c, {"speculative": {"method": "none"}}), []))
        for runner, rate in COLS:
            out.append((label(c, runner, rate), config(c, {
                "speculative": {"method": "ngram", "num_speculative_tokens": 4, "acceptance_rate": 0.7,
                                "proposal_rate": rate}, "engine": {"model_runner": runner}}), []))
    return out


def measure(cfg, over) -> dict:
    """One run's recorded numbers: TPOT p50 (ms)."""
    return {"tpot_ms_p50": simulate(cfg, over).summary["tpot_ms"]["p50"]}


def row(c: int, res: dict) -> str:
    """The table row at ``c`` requests in flight: TPOT speedup over no speculation in each column."""
    base = res[label(c)]["tpot_ms_p50"]
    return f"| {c} | " + " | ".join(f"{base / res[label(c, r, p)]['tpot_ms_p50']:.2f}×" for r, p in COLS) + " |"


def text(res=None) -> str:
    """The block, from the recorded runs (``res``: :func:`recorded_runs.read`'s)."""
    res = res or recorded_runs.read(CSV_NAME)
    return "\n".join([BEGIN, "| requests in flight | " + " | ".join(f"{r}, rate {p:g}" for r, p in COLS) + " |",
                      "|---:|" + "---:|" * len(COLS), *(row(c, res) for c in LOADS), END])


def main() -> int:
    return recorded_runs.script_main(CSV_NAME, runs, measure, COLUMNS, DOC, text)


if __name__ == "__main__":
    sys.exit(main())
