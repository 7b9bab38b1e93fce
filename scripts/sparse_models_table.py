"""Sparse-attention and MLA models: weights, memory per request at 8k, step time and its k ratios (docs/model.md).

Usage: python scripts/sparse_models_table.py [--write]
For DeepSeek-V3.2, GLM-5 (DeepSeek sparse attention), Kimi-K2 (MLA) and MiniMax-M2.5 (GQA MoE), each on the
deployment of its example config in configs/: weights per GPU (the run's memory plan), memory per request at
8,192 tokens (target KV + MTP-module KV, per GPU), and one decode step of ``batch`` requests at 8,192 tokens of
context through the run's own predictor (target forward + LM head + sampling + overhead; no proposer time), at
k = 0 against a dense model on the same GPUs, and at k = 1, 3, 5 over k = 0. Sparse-attention models are priced
with ``verify_attention: per_token`` (each verify token runs its own indexer top-k), the others with the
default; then DeepSeek-V3 against DeepSeek-V3.2 by context. Prints the markdown block; ``--write`` puts it between the ``sparse-mla-models`` markers of
docs/model.md (tests/test_sparse_attention_models.py fails while that block is stale).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import docblock  # noqa: E402  (scripts/docblock.py)

from vidur_specdec.architectures import moe
from vidur_specdec.architectures.models import KNOWN_MODELS
from vidur_specdec.costs import memory
from vidur_specdec.pricing.plan import decode_plan
from vidur_specdec.engine.resolve import load
from vidur_specdec.engine.simulation import prepare

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "model.md"
BEGIN, END = docblock.markers("sparse-mla-models")
# model, device, tensor parallel, dense model of about its active size on the same GPUs
MODELS = (("deepseek-ai/DeepSeek-V3.2", "h200", 8, "meta-llama/Llama-3.1-70B"),
          ("zai-org/GLM-5", "b300", 8, "meta-llama/Llama-3.1-70B"),
          ("moonshotai/Kimi-K2-Instruct", "h200", 8, "meta-llama/Llama-3.1-70B"),
          ("MiniMaxAI/MiniMax-M2.5", "h200", 4, "meta-llama/Llama-3.1-8B"))
CTX = 8192
BATCHES = (1, 16, 64)
KS = (1, 3, 5)
PAIR = ("deepseek-ai/DeepSeek-V3.2", "h200", 8)  # against DeepSeek-V3, the same model with dense MLA
CONTEXTS = (1024, 8192, 32768)


def predictor(model: str, device: str, tp: int, verify: str):
    cfg = load({"model": model, "device": device, "parallel": {"tensor_parallel_size": tp}, "profiles": "shipped",
                "speculative": {"method": "ngram", "num_speculative_tokens": 5, "verify_attention": verify},
                "workload": {"num_requests": 4}})
    p = prepare(cfg)
    pricer = p.pricer
    pricer.proposer = None  # the target's step alone
    return pricer


def step_ms(pred, batch: int, k: int, ctx: int = CTX) -> float:
    """One decode step (ms) of ``batch`` requests with ``k`` guesses each at ``ctx`` cached tokens."""
    b = decode_plan(batch, k, ctx)
    return pred.price(b).total_time * 1e3


def per_request_bytes(spec, tp: int) -> int:
    """KV bytes of one request at CTX tokens on one GPU: the target's, plus its MTP modules' when it has them."""
    per_token = spec.kv_bytes_per_token(tp)
    if spec.mtp_layers:
        from dataclasses import replace
        per_token += spec.mtp_layers * replace(spec, num_layers=1, sliding_layers=0).kv_bytes_per_token(tp)
    return CTX * per_token


def module_line() -> str:
    """The measured attention modules behind the comparison: DSA (DeepSeek-V3.2) and dense MLA (DeepSeek-V3)."""
    from vidur_specdec.costs.kernels import table_data as TD

    def at(op, table, model, batch, step):
        df = TD.load("h200_sxm", op, "vllm", "0.24.0", table)
        df = df[(df.model == model) & (df.num_heads == 16) & (df.gemm_type == "fp8_block")
                & (df.kv_cache_dtype == "bfloat16") & (df.batch_size == batch) & (df.step == step)]
        return float(df.sort_values("kernel_source").latency.iloc[0])

    cells = []
    for batch in (1, 64):
        for step in (4, 8192, 32768):
            dsa = at("sparse_attention", "dsa_generation_module_perf", PAIR[0], batch, step)
            mla = at("mla", "mla_generation_module_perf", "deepseek-ai/DeepSeek-V3", batch, step)
            cells.append(f"batch {batch}, {step:,} tokens: {dsa:.3f} / {mla:.3f}")
    return ("Measured attention modules per layer on H200 (vLLM 0.24.0, 16 heads per GPU, ms), DSA "
            "(`dsa_generation_module`, DeepSeek-V3.2) / dense MLA (`mla_generation_module`, DeepSeek-V3): "
            + "; ".join(cells) + ".")


def table() -> str:
    size_rows, step_rows = [], []
    for name, device, tp, dense in MODELS:
        spec = KNOWN_MODELS[name]
        verify = "per_token" if spec.is_sparse_attention else "shared_kv"
        counts = moe.param_counts(spec)
        w = memory.weight_bytes(spec, tp)
        size_rows.append(f"| {name} | {device} × {tp} | {counts['total'] / 1e9:.1f} B / {counts['active'] / 1e9:.1f} B "
                         f"| {w / 2**30:.1f} | {spec.kv_bytes_per_token(tp):,} | "
                         f"{per_request_bytes(spec, tp) / 2**20:.0f} |")
        pred, dpred = predictor(name, device, tp, verify), predictor(dense, device, tp, "shared_kv")
        for batch in BATCHES:
            base, dbase = step_ms(pred, batch, 0), step_ms(dpred, batch, 0)
            ratios = " | ".join(f"{step_ms(pred, batch, k) / base:.2f}" for k in KS)
            step_rows.append(f"| {name} | {batch} | {base:.2f} | {dbase:.2f} ({dense.split('/')[1]}) | {ratios} |")
    v3, v32 = predictor("deepseek-ai/DeepSeek-V3", "h200", 8, "shared_kv"), predictor(*PAIR, "per_token")
    ctx_rows = [f"| {batch} | " + " | ".join(f"{step_ms(v3, batch, 0, c):.2f} / {step_ms(v32, batch, 0, c):.2f}"
                                              for c in CONTEXTS) + " |" for batch in BATCHES]
    return "\n".join([
        BEGIN,
        "| model | GPUs | weights total / active | weights per GPU (GiB) | KV bytes per token per GPU "
        "| memory per request at 8k, per GPU (MiB) |",
        "|---|---|---|---|---|---|",
        *size_rows,
        "",
        f"| model | batch | step ms, k=0 | dense step ms, k=0 | " + " | ".join(f"k={k} / k=0" for k in KS) + " |",
        "|---|---|---|---|" + "---|" * len(KS),
        *step_rows,
        "",
        "DeepSeek-V3 (dense MLA) / DeepSeek-V3.2 (sparse attention), step ms at k = 0 on 8 H200, by context:",
        "",
        "| batch | " + " | ".join(f"{c:,} tokens" for c in CONTEXTS) + " |",
        "|---|" + "---|" * len(CONTEXTS),
        *ctx_rows,
        "",
        module_line(),
        END,
    ])


def main() -> int:
    return docblock.main(DOC, table())


if __name__ == "__main__":
    sys.exit(main())
