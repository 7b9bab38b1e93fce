"""Blackwell over Hopper, op by op: a decode step's parts on B200, B300 and GB200 divided by the same on H200
(docs/profiles.md).

Usage: python scripts/blackwell_ratio.py [--write]

A decode-only step of ``batch`` requests at :data:`CONTEXT` tokens of context each (no speculation) is priced
through the run's own predictor (the measured tables where they hold the shape, the roofline where not; the
same path a run takes), for one dense model (Llama-3.1-70B, bf16), one multi-head-latent-attention MoE
(DeepSeek-V3, fp8) and one sparse-attention MoE (DeepSeek-V3.2, fp8), all at tensor parallel 8. Each op family
is summed over the layers; the table gives its ms on H200 and the ratio on each Blackwell GPU. Prints the
markdown block; ``--write`` puts it between the ``blackwell-ratio`` markers of docs/profiles.md
(tests/test_blackwell_ratio_docs.py fails while it is stale).
"""

import sys
from functools import lru_cache
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import docblock  # noqa: E402  (scripts/docblock.py)

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "profiles.md"
BEGIN, END = docblock.markers("blackwell-ratio")
BASE = "h200"
GPUS = ("b200", "b300", "gb200")
MODELS = (("Llama-3.1-70B bf16", "meta-llama/Llama-3.1-70B"), ("DeepSeek-V3 fp8 (MLA)", "deepseek-ai/DeepSeek-V3"),
          ("DeepSeek-V3.2 fp8 (sparse MLA)", "deepseek-ai/DeepSeek-V3.2"))
TP = 8
BATCHES = (1, 16)
CONTEXT = 4096  # tokens of context per request
# op family -> the mean layer's ops (pricing.price.EXECUTION_TIME_FIELDS, per layer; summed over the layers) or
# the step's own parts (the all-reduces: both of every layer)
OPS = (
    ("attention projections", ("attention_pre_proj", "attention_post_proj")),
    ("attention", ("attention_decode",)),
    ("MLP / MoE layer", ("mlp_up_proj", "mlp_down_proj")),
    ("all-reduce", ("comm",)),
    ("norms, RoPE, activation, add", ("attention_rope", "attn_norm", "mlp_norm", "add", "mlp_act")),
    ("LM head", ("lm_head",)),
    ("sampling, engine overhead", ("sampling", "overhead")),
)


@lru_cache(maxsize=None)
def _pricer(model: str, device: str):
    """The run's own step pricer for ``model`` on ``device`` at TP :data:`TP` (no speculation)."""
    from vidur_specdec.engine.resolve import load
    from vidur_specdec.engine.simulation import prepare

    cfg = load({"model": model, "device": device, "speculative": {"method": "none"},
                "parallel": {"tensor_parallel_size": TP}, "workload": {"num_requests": 4}})
    return prepare(cfg).pricer


@lru_cache(maxsize=None)
def step_parts(model: str, device: str, batch: int):
    """({op family: ms}, the step's total ms) for a decode step of ``batch`` requests."""
    from vidur_specdec.pricing.plan import decode_plan
    from vidur_specdec.pricing.price import EXECUTION_TIME_FIELDS

    t = _pricer(model, device).price(decode_plan(batch, 0, CONTEXT))
    per_layer = dict(zip(EXECUTION_TIME_FIELDS, t.layer_ops))
    step = {"lm_head": t.lm_head_ms, "sampling": t.sampling_ms, "overhead": t.overhead_ms, "comm": t.comm_ms}
    parts = {name: sum(step[f] if f in step else per_layer[f] * t.num_layers for f in fields)
             for name, fields in OPS}
    return parts, t.total_time * 1e3


def table() -> str:
    head = (f"| model | op | batch | {BASE.upper()} ms | " + " | ".join(f"{g.upper()} ÷ {BASE.upper()}" for g in GPUS)
            + " |")
    lines = [BEGIN, head, "|---|---|---|---|" + "---|" * len(GPUS)]
    for label, model in MODELS:
        for name, _ in OPS + (("whole step", ()),):
            for b in BATCHES:
                base, base_total = step_parts(model, BASE, b)
                ref = base_total if name == "whole step" else base[name]
                cells = []
                for g in GPUS:
                    parts, total = step_parts(model, g, b)
                    v = total if name == "whole step" else parts[name]
                    cells.append(f"{v / ref:.2f}" if ref > 0 else "—")
                op = f"**{name}**" if name == "whole step" else name
                lines.append(f"| {label} | {op} | {b} | {ref:.3f} | " + " | ".join(cells) + " |")
    return "\n".join(lines + [END])


def main() -> int:
    return docblock.main(DOC, table())


if __name__ == "__main__":
    sys.exit(main())
