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
from types import SimpleNamespace

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
# op family -> Vidur ExecutionTime fields (per layer; summed over the layers) or the step's own parts
OPS = (
    ("attention projections", ("attention_layer_pre_proj_execution_time", "attention_layer_post_proj_execution_time")),
    ("attention", ("attention_decode_execution_time",)),
    ("MLP / MoE layer", ("mlp_layer_up_proj_execution_time", "mlp_layer_down_proj_execution_time")),
    ("all-reduce", ("tensor_parallel_communication_time",)),
    ("norms, RoPE, activation, add", ("attention_rope_execution_time", "attn_norm_time", "mlp_norm_time",
                                      "add_time", "mlp_layer_act_execution_time")),
    ("LM head", ("lm_head",)),
    ("sampling, engine overhead", ("sampling", "overhead")),
)


@lru_cache(maxsize=None)
def _predictor(model: str, device: str):
    """The run's own step predictor for ``model`` on ``device`` at TP :data:`TP` (no speculation)."""
    from vidur_specdec.engine.predictor import SpecDecExecutionTimePredictor
    from vidur_specdec.engine.request import SpecRequest
    from vidur_specdec.engine.resolve import load
    from vidur_specdec.engine.simulation import prepare, vidur_config

    cfg = load({"model": model, "device": device, "speculative": {"method": "none"},
                "parallel": {"tensor_parallel_size": TP}, "workload": {"num_requests": 4}})
    p = prepare(cfg)
    cluster = vidur_config(p, p.scheduler, SpecRequest).cluster_config
    return SpecDecExecutionTimePredictor(p.predictor, cluster.replica_config, cluster.cache_config)


@lru_cache(maxsize=None)
def step_parts(model: str, device: str, batch: int):
    """({op family: ms}, the step's total ms) for a decode step of ``batch`` requests."""
    from vidur_specdec.engine.step_plan import plan_batch

    reqs = [SimpleNamespace(is_prefill_complete=True, id=i, planned=(0, 0)) for i in range(batch)]
    plan = plan_batch(SimpleNamespace(requests=reqs, num_q_tokens=[1] * batch,
                                      num_kv_tokens=[CONTEXT + 1] * batch, total_num_q_tokens=batch), 0)
    t = _predictor(model, device).get_execution_time(plan, 0)
    layers = t.target.num_layers
    step = {"lm_head": t.lm_head_ms, "sampling": t.sampling_ms, "overhead": t.overhead_ms}
    parts = {name: sum(step[f] if f in step else getattr(t.target, f) * layers for f in fields)
             for name, fields in OPS}  # Vidur's ExecutionTime fields are per layer
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
