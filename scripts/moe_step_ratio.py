"""Step time of k guesses over k = 0 at batch 1/16/64: a MoE target vs a dense one (docs/model.md).

Usage: python scripts/moe_step_ratio.py [--write]
Prices one decode step of ``batch`` requests, each with ``k`` guesses at 512 tokens of
context, through the run's own predictor (target forward + LM head + sampling + overhead;
no proposer time; the MoE layers from vLLM's measured fused-MoE table, the default on an
H100), for Qwen3-30B-A3B and Llama-3.1-8B on one H100. Prints the markdown
table; ``--write`` puts it between the ``moe-step-ratio`` markers of docs/model.md
(tests/test_moe_docs_figures.py fails while that block is stale).
"""

import sys
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parent))
import docblock  # noqa: E402  (scripts/docblock.py)

from vidur_specdec.engine.predictor import SpecDecExecutionTimePredictor
from vidur_specdec.engine.request import SpecRequest
from vidur_specdec.engine.resolve import load
from vidur_specdec.engine.simulation import prepare, vidur_config

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "model.md"
BEGIN, END = docblock.markers("moe-step-ratio")
MODELS = ("Qwen/Qwen3-30B-A3B", "meta-llama/Llama-3.1-8B")
DEVICE = "h100"
BATCHES = (1, 16, 64)
KS = (1, 3, 5)


def predictor(model: str, device: str, profiles: str = "shipped"):
    """The run's own step predictor (its replica config: the model's own layer count)."""
    cfg = load({"model": model, "device": device, "speculative": {"method": "none"},
                "workload": {"num_requests": 4}, "profiles": profiles})
    p = prepare(cfg)
    p.predictor.proposer = None
    cluster = vidur_config(p, p.scheduler, SpecRequest).cluster_config
    return SpecDecExecutionTimePredictor(p.predictor, cluster.replica_config, cluster.cache_config)


def step(pred, batch: int, k: int, ctx: int = 512):
    """(step time in ms, Vidur's step-time record) of one decode step of ``batch`` requests with ``k`` guesses."""
    req = SimpleNamespace(is_prefill_complete=True, catchup_tokens=1, num_prefill_tokens=100)
    b = SimpleNamespace(requests=[req] * batch, num_q_tokens=[k + 1] * batch,
                        num_kv_tokens=[ctx + k + 1] * batch, total_num_q_tokens=batch * (k + 1), replica_id=0)
    t = pred.get_execution_time(b, 0)
    return t.total_time * 1e3, t


def table() -> str:
    """The markdown block: the ratio table and the sentence that reads it."""
    rows, at1 = [], {}
    for name in MODELS:
        pred = predictor(name, DEVICE)
        for batch in BATCHES:
            base, _ = step(pred, batch, 0)
            ratios = [step(pred, batch, k)[0] / base for k in KS]
            ex = [step(pred, batch, k)[1].experts_touched for k in (0,) + KS]
            woken = " / ".join(f"{x:.1f}" for x in ex)
            rows.append(f"| {name} | {batch} | " + " | ".join(f"{r:.2f}" for r in ratios)
                        + f" | {woken if any(ex) else '—'} |")
            if batch == 1:
                at1[name] = ratios[-1]
    moe, dense = MODELS
    return "\n".join([
        BEGIN,
        "| target | batch | " + " | ".join(f"k={k}" for k in KS) + " | experts woken k=0/" + "/".join(map(str, KS)) + " |",
        "|---|---|" + "---|" * len(KS) + "---|",
        *rows,
        "",
        f"At batch 1, k = {KS[-1]} costs the MoE target {100 * (at1[moe] - 1):.0f} % more per step and the dense "
        f"one {100 * (at1[dense] - 1):.0f} %.",
        END,
    ])


def main() -> int:
    return docblock.main(DOC, table())


if __name__ == "__main__":
    sys.exit(main())
