"""Simulated vs published EAGLE / EAGLE-3 speedups at batch 1, with the published acceptance as input.

Each row names its source, the published setting (target, GPU, draft shape) and the
published mean acceptance length τ (tokens per target forward, bonus token
included — vLLM's "mean acceptance length"); the simulator gets τ through
``speculative.mean_acceptance_length`` and predicts the speedup = baseline TPOT p50 /
speculative TPOT p50 on the same workload at batch 1 (MT-bench-like: 128-token
prompts, 256-token answers, 20 requests one after another). It prints source,
simulated, published and error; rows whose model or device this checkout does
not have are skipped with a message.

    python scripts/check_eagle_published.py

Read the errors with the hardware column: the EAGLE paper's 7B runs used an
RTX 3090 with a HuggingFace implementation, not an A100 with a serving engine.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Optional

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from vidur_specdec import simulate  # noqa: E402
from vidur_specdec.config import ConfigError  # noqa: E402
from vidur_specdec.architectures.models import KNOWN_MODELS  # noqa: E402


@dataclass
class Row:
    source: str
    setting: str
    model: str
    device: str
    method: str
    head: str
    mean_acceptance_length: Optional[float]
    published_speedup: float
    published_range: Optional[tuple] = None
    k: int = 5
    tree: Optional[str] = None
    extra: List[str] = field(default_factory=list)


# EAGLE-1's default draft tree (SafeAILab/EAGLE, model/choices.py, mc_sim_7b_63), vLLM's format
EAGLE_TREE = ("[(0,), (1,), (2,), (3,), (0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (2, 0), (2, 1), (3, 0), "
              "(0, 0, 0), (0, 0, 1), (0, 0, 2), (0, 1, 0), (0, 1, 1), (0, 2, 0), (0, 2, 1), (1, 0, 0), "
              "(0, 0, 0, 0), (0, 0, 0, 1), (0, 0, 0, 2), (0, 0, 0, 0, 0), (0, 0, 0, 0, 1)]")

ROWS = [
    Row("EAGLE, Li et al., ICML 2024 (arXiv 2401.15077v3), Table 5 and Sec. 4.3.1: chain drafts",
        "LLaMA2-Chat 7B, MT-bench, T=0, batch 1, chain (no tree); RTX 3090, HF implementation; "
        "published speedup 'approximately 2.3x-2.7x' across models (midpoint used); chain length assumed 5",
        "meta-llama/Llama-2-7b-hf", "a100", "eagle", "yuhuili/EAGLE-llama2-chat-7B", 3.00, 2.5, (2.3, 2.7), k=5),
    Row("EAGLE, Li et al., ICML 2024 (arXiv 2401.15077v3), Fig. 1 / Table 6: tree drafts",
        "LLaMA2-Chat 7B, MT-bench, T=0, batch 1, EAGLE's default tree mc_sim_7b_63 (25 nodes, depth 5; "
        "SafeAILab/EAGLE model/choices.py); RTX 3090, HF implementation",
        "meta-llama/Llama-2-7b-hf", "a100", "eagle", "yuhuili/EAGLE-llama2-chat-7B", 3.62, 2.78, k=25,
        tree=EAGLE_TREE),
    Row("SGLang docs, 'Speculative Decoding', Performance Highlights (docs.sglang.io)",
        "Llama-3.1-8B-Instruct, MT-bench, 1x H100: EAGLE-3 373.25 vs 158.34 tok/s baseline",
        "meta-llama/Llama-3.1-8B-Instruct", "h100", "eagle3", "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B",
        None, 373.25 / 158.34),
    Row("SGLang docs, 'Speculative Decoding', Performance Highlights (docs.sglang.io)",
        "Llama-3.1-8B-Instruct, MT-bench, 1x H100: EAGLE-2 244.10 vs 158.34 tok/s baseline",
        "meta-llama/Llama-3.1-8B-Instruct", "h100", "eagle", "yuhuili/EAGLE-LLaMA3.1-Instruct-8B",
        None, 244.10 / 158.34),
]

WORKLOAD = ["workload.num_requests=20", "workload.arrival=static", "workload.prompt_tokens.dist=fixed",
            "workload.prompt_tokens.value=128", "workload.output_tokens.dist=fixed",
            "workload.output_tokens.value=256", "scheduler.batch_size_cap=1", "seed=0"]


def simulated_speedup(row: Row) -> float:
    base = WORKLOAD + [f"model={row.model}", f"device={row.device}"]
    plain = simulate(None, base + ["speculative.method=none"]).summary["tpot_ms"]["p50"]
    spec = base + [f"speculative.method={row.method}", f"speculative.model={row.head}",
                   f"speculative.num_speculative_tokens={row.k}",
                   f"speculative.mean_acceptance_length={row.mean_acceptance_length}"] + row.extra
    if row.tree:
        spec.append(f"speculative.speculative_token_tree='{row.tree}'")
    return plain / simulate(None, spec).summary["tpot_ms"]["p50"]


def main() -> int:
    print("source | setting | simulated | published | error")
    for row in ROWS:
        if row.model not in KNOWN_MODELS:
            print(f"SKIP {row.source} | {row.setting} | needs {row.model} on {row.device}, which this checkout does not know")
            continue
        if row.mean_acceptance_length is None:
            print(f"SKIP {row.source} | {row.setting} | the source gives no acceptance length for this run")
            continue
        try:
            sim = simulated_speedup(row)
        except ConfigError as e:
            print(f"SKIP {row.source} | {e}")
            continue
        err = (sim - row.published_speedup) / row.published_speedup * 100
        rng = f" (published range {row.published_range[0]}-{row.published_range[1]}x)" if row.published_range else ""
        print(f"{row.source} | {row.setting} | {sim:.2f}x | {row.published_speedup:.2f}x{rng} | {err:+.0f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
