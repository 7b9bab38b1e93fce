"""n-gram speedup by load and proposal rate, on both of vLLM's model runners.

Median TPOT speedup over no speculation for Llama-3.1-8B-Instruct on one H100
(shipped profile), closed loop at 1, 8, 32 and 64 requests in flight, prompts
512 and outputs 256 tokens, k = 4, alpha 0.7, default scheduler, 3 × the
concurrency requests (at least 8), seed 0; runner v1 at proposal_rate 0.2, 0.5
and 1, runner v2 at 0.2 and 0.5 (at rate 1 the runners charge the same).

    python scripts/ngram_rate.py [--write]

``--write`` puts the table between the ``ngram-rate`` markers of docs/model.md
(tests/test_ngram_rate.py re-runs the one-request row and fails while the block is stale).
"""

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

sys.path.insert(0, str(Path(__file__).resolve().parent))
import docblock  # noqa: E402  (scripts/docblock.py)

from vidur_specdec import simulate  # noqa: E402

DOC = REPO / "docs" / "model.md"
BEGIN, END = docblock.markers("ngram-rate")
LOADS = (1, 8, 32, 64)

COLS = [("v1", 0.2), ("v1", 0.5), ("v1", 1.0), ("v2", 0.2), ("v2", 0.5)]


def tpot(c, extra):
    cfg = {"seed": 0, "model": "meta-llama/Llama-3.1-8B-Instruct", "device": "h100",
           "workload": {"num_requests": max(8, 3 * c), "arrival": "closed", "concurrency": c,
                        "prompt_tokens": {"dist": "fixed", "value": 512},
                        "output_tokens": {"dist": "fixed", "value": 256}}, **extra}
    return simulate(cfg).summary["tpot_ms"]["p50"]


def row(c: int) -> str:
    """The table row at ``c`` requests in flight."""
    base = tpot(c, {"speculative": {"method": "none"}})
    cells = []
    for runner, rate in COLS:
        t = tpot(c, {"speculative": {"method": "ngram", "num_speculative_tokens": 4, "acceptance_rate": 0.7,
                                     "proposal_rate": rate}, "engine": {"model_runner": runner}})
        cells.append(f"{base / t:.2f}×")
    return f"| {c} | " + " | ".join(cells) + " |"


def table() -> str:
    return "\n".join([BEGIN, "| requests in flight | " + " | ".join(f"{r}, rate {p:g}" for r, p in COLS) + " |",
                      "|---:|" + "---:|" * len(COLS), *(row(c) for c in LOADS), END])


def main() -> int:
    return docblock.main(DOC, table())


if __name__ == "__main__":
    sys.exit(main())
