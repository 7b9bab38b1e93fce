"""Draft time per step of a block drafter (DFlash) against EAGLE-3 as k grows: the table in docs/model.md.

Prices one decode step of Llama-3.1-8B-Instruct on one H100 (``configs/llama3.1-8b-h100.yaml``:
vLLM's measured kernel tables) at batch 1 and 32, every request at context 1000 and a
catch-up run of k + 1 tokens, with the published DFlash drafter
(z-lab/LLaMA3.1-8B-Instruct-DFlash-UltraChat) and the EAGLE-3 head
(yuhuili/EAGLE3-LLaMA3.1-Instruct-8B), then runs the config end to end (100 requests)
with no speculation, EAGLE-3 and DFlash at the config's acceptance rate, and writes
the block ``block-draft`` of docs/model.md::

    PYTHONPATH=. python scripts/block_draft_cost.py [--write]

``tests/test_block_drafters.py`` re-prices the whole draft-time table and re-runs the end-to-end run
without speculation, and compares them with the block.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scripts.docblock import REPO, main, markers  # noqa: E402

DOC = REPO / "docs" / "model.md"
NAME = "block-draft"
CONFIG = "configs/llama3.1-8b-h100.yaml"
HEADS = {"eagle3": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", "dflash": "z-lab/LLaMA3.1-8B-Instruct-DFlash-UltraChat"}
KS = (1, 3, 5, 8)
BATCHES = (1, 32)
CONTEXT = 1000  # tokens each request holds before the step
E2E = [("none", 0), ("eagle3", 3), ("dflash", 3), ("dflash", 8)]  # (method, k) of the end-to-end runs
E2E_REQUESTS = 100


def sets(method: str, k: int) -> list:
    """The overrides of ``CONFIG`` for ``method`` at ``k`` guesses (``none``: speculation off)."""
    if method == "none":
        return ["speculative.method=none", "speculative.model=null", "speculative.acceptance_rate=null"]
    return [f"speculative.method={method}", f"speculative.model={HEADS[method]}",
            f"speculative.num_speculative_tokens={k}"]


def draft_ms(method: str, k: int, batch: int) -> float:
    """The drafter's time (ms) of one decode step of ``batch`` requests each guessing ``k``."""
    from vidur_specdec.pricing.plan import StepComposition
    from vidur_specdec.engine.resolve import load
    from vidur_specdec.engine.simulation import prepare

    p = prepare(load(str(REPO / CONFIG), sets(method, k) + ["workload.num_requests=20"])).pricer.proposer
    return p.step_time_ms(StepComposition(batch * (k + 1), [k + 1] * batch, [CONTEXT] * batch, [],
                                          [k + 1] * batch))


def e2e(only=None) -> list:
    """(method, k, mean TPOT ms) of each end-to-end run (``only``: of those whose index is in it)."""
    from vidur_specdec import simulate

    out = []
    for i, (method, k) in enumerate(E2E):
        if only is None or i in only:
            q = simulate(str(REPO / CONFIG), sets(method, k) + [f"workload.num_requests={E2E_REQUESTS}"]).requests
            out.append((method, k, float(q["tpot_ms"].mean())))
    return out


def price_lines() -> list:
    """The draft-time table: one line per (drafter, batch), ms at each k and the k = 8 / k = 1 ratio."""
    head = "| drafter | batch | " + " | ".join(f"k = {k}" for k in KS) + " | k = 8 / k = 1 |"
    lines = [head, "|" + "---|" * (len(KS) + 3)]
    for method in ("dflash", "eagle3"):
        for b in BATCHES:
            t = [draft_ms(method, k, b) for k in KS]
            lines.append(f"| {method} | {b} | " + " | ".join(f"{x:.3f}" for x in t) + f" | {t[-1] / t[0]:.2f} |")
    return lines


def e2e_line(method: str, k: int, tpot: float, base: float) -> str:
    """One end-to-end line: mean TPOT and the speedup over the run without speculation (``base``, ms)."""
    return f"| {method} | {k} | {tpot:.2f} | {base / tpot:.2f}× |"


def text() -> str:
    begin, end = markers(NAME)
    lines = [begin, "", *price_lines()]
    lines += ["", "Draft ms per decode step (every request at context 1000, catch-up k + 1), Llama-3.1-8B-Instruct, "
              "one H100, vLLM's measured kernel tables.", "",
              f"End to end, `{CONFIG}` ({E2E_REQUESTS} requests, the config's acceptance rate for both drafters, "
              "an input, not a published figure for either):", "", "| run | k | mean TPOT (ms) | speedup |",
              "|---|---|---|---|"]
    runs = e2e()
    base = runs[0][2]
    lines += [e2e_line(method, k, tpot, base) for method, k, tpot in runs]
    lines += ["", end]
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main(DOC, text()))
