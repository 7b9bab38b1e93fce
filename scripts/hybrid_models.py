"""Hybrid linear-attention targets (Qwen3.5), Llama 4 Scout (chunked attention) and Gemma 4 (sliding-window and
global layers): weights, memory per request and step times (docs/model.md).

Usage: python scripts/hybrid_models.py [--write]
For each model (by its Hugging Face name, read from the config.json aiconfigurator-core ships) at its
example tensor-parallel size on H200: total and active weights against the figures in its name,
memory per request at 8k context (KV of the full-attention layers, the sliding-window layers' KV (at most
their window) + the fixed linear-attention state, without and with k = 3 speculative state slots), the decode step time at batch 1/16/64 (512 tokens of
context; target forward + LM head + sampling + overhead, no proposer) against a dense model of the same
active weights per token (the same hidden size, layers and vocabulary, all layers full attention, one
dense gated MLP sized to match), and the step-time ratio of k = 1, 3, 5 guesses over k = 0.
``--write`` puts the block between the ``hybrid-models`` markers of docs/model.md.
"""

import json
import math
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import docblock  # noqa: E402  (scripts/docblock.py)
from moe_step_ratio import step  # noqa: E402


from vidur_specdec.architectures import layer_plan, moe  # noqa: E402
from vidur_specdec.architectures.models import resolve_model  # noqa: E402
from vidur_specdec.engine.resolve import load  # noqa: E402
from vidur_specdec.engine.simulation import prepare  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "model.md"
BEGIN, END = docblock.markers("hybrid-models")
# (model, tensor_parallel_size, published total / active weights in billions: the figures in its name,
# as the model cards state them: "397B in total and 17B activated", "122B ... 10B activated"; Llama 4
# Scout's card: "17B activated, 109B total"; Gemma 4 26B A4B's card: "25.2B total parameters", "3.8B active")
MODELS = (("Qwen/Qwen3.5-397B-A17B", 8, 397, 17), ("Qwen/Qwen3.5-122B-A10B", 4, 122, 10),
          ("meta-llama/Llama-4-Scout-17B-16E-Instruct", 4, 109, 17), ("google/gemma-4-26B-A4B", 1, 25.2, 3.8))
DEVICE = "h200"
BATCHES = (1, 16, 64)
KS = (1, 3, 5)
CONTEXT = 8192
GIB = 1024**3


def dense_twin(spec) -> dict:
    """A dense Llama-architecture model with ``spec``'s hidden size, layers, vocabulary and active weights."""
    active = moe.param_counts(spec)["active"] - spec.embedding_params()
    heads, hd = spec.hidden_size // 128, 128
    kv = math.gcd(heads, 8)  # 8 KV heads where the query heads allow (Gemma 4 26B: 22 query heads, 2)
    attn = spec.hidden_size * hd * (heads + 2 * kv) + heads * hd * spec.hidden_size
    ffn = (active // spec.num_layers - attn) // (3 * spec.hidden_size)
    ffn -= ffn % 256
    return {"name": f"dense twin of {spec.name}", "num_layers": spec.num_layers, "hidden_size": spec.hidden_size,
            "num_heads": heads, "num_kv_heads": kv, "ffn_size": ffn, "vocab_size": spec.vocab_size,
            "max_model_len": 32768}


def predictor(model, tp: int):
    if isinstance(model, dict):  # a ModelSpec YAML (JSON is YAML) in a scratch folder
        path = Path(tempfile.mkdtemp()) / "dense_twin.yaml"
        path.write_text(json.dumps(model))
        model = str(path)
    cfg = load({"model": model, "device": DEVICE, "speculative": {"method": "none"},
                "parallel": {"tensor_parallel_size": tp}, "workload": {"num_requests": 4}, "profiles": "shipped"})
    p = prepare(cfg)
    pricer = p.pricer
    pricer.proposer = None  # the target's step alone
    return pricer


def weights_row(name: str, tp: int, total_b: float, active_b: float) -> str:
    """The weights and memory-per-request row of one model (no predictor: cheap)."""
    spec = resolve_model(name)
    c = moe.param_counts(spec)
    kv = spec.kv_bytes_per_token(1) * CONTEXT
    # sliding-window layers hold at most their window (their KV is not charged as growing)
    win = layer_plan.window_bytes_per_request(spec, 1, spec.kv_dtype_bytes) if spec.sliding_layers else 0
    st0, st3 = spec.state_bytes_per_request(1), spec.state_bytes_per_request(1, 3)
    return (f"| {name} | {c['total'] / 1e9:.1f} ({100 * (c['total'] / 1e9 / total_b - 1):+.1f} %) | "
            f"{c['active'] / 1e9:.2f} ({100 * (c['active'] / 1e9 / active_b - 1):+.1f} %) | "
            f"{moe.weight_bytes(spec, tp) / GIB:.1f} | {kv / 2**20:.0f} | {win / 2**20:.0f} | {st0 / 2**20:.0f} | "
            f"{st3 / 2**20:.0f} | {(kv + win + st0) / 2**20:.0f} |")


def step_rows(name: str, tp: int) -> list:
    """The step-time rows of one model and its dense twin at every batch size."""
    rows = []
    twin = dense_twin(resolve_model(name))
    for label, model in ((name, name), (twin["name"] + f" (ffn {twin['ffn_size']})", twin)):
        pred = predictor(model, tp)
        for batch in BATCHES:
            base, _ = step(pred, batch, 0)
            ratios = [step(pred, batch, k)[0] / base for k in KS]
            rows.append(f"| {label} | {tp} | {batch} | {base:.2f} | " + " | ".join(f"{r:.2f}" for r in ratios) + " |")
    return rows


def table() -> str:
    weights = [weights_row(*m) for m in MODELS]
    steps = [row for name, tp, _, _ in MODELS for row in step_rows(name, tp)]
    return "\n".join([
        BEGIN,
        "| model | total weights, B (vs name) | active, B (vs name) | GiB per GPU at its TP | "
        f"KV at {CONTEXT // 1024}k, MiB | sliding-window KV, MiB | linear state k=0, MiB | state k=3, MiB | "
        "per request k=0, MiB |",
        "|---|---|---|---|---|---|---|---|---|",
        *weights,
        "",
        "Memory per request is per replica at TP 1 (divide by TP for one GPU, the KV heads permitting).",
        "",
        "| model | TP | batch | step ms k=0 | " + " | ".join(f"k={k} / k=0" for k in KS) + " |",
        "|---|---|---|---|" + "---|" * len(KS),
        *steps,
        END,
    ])


def main() -> int:
    return docblock.main(DOC, table())


if __name__ == "__main__":
    sys.exit(main())
