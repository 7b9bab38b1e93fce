"""Every model config aiconfigurator-core ships: runs by name, or the one line that refuses it (docs/model.md).

Usage: python scripts/shipped_models.py [--write]
For each ``model_configs/<org>--<name>_config.json`` of the installed aiconfigurator-core 0.12.0 (its
``_hf_quant_config.json`` read beside it, as vLLM reads it): the model by name, its architecture, the
format its checkpoint stores (vLLM's quantization method and the parts kept in bf16), its MTP layers,
and either the refusal (the first line of the ``ConfigError``) or the smallest deployment that holds it —
the first of H200 at tensor parallel 1, 2, 4, 8, then B200 and B300 at 8 (NVFP4 checkpoints: B200 at
1, 2, 4, 8, then B300 at 8) whose memory plan leaves room for 16k tokens of KV per GPU — with
``speculative.method: mtp`` where it has MTP layers, its weights per GPU, the KV tokens per GPU left
(a hybrid model's blocks, raised to hold its linear-attention state pages, in tokens) and where its
routed experts are priced (the measured fused-MoE kernel, or the roofline). A memory plan and the kernel
source's coverage only: nothing is simulated. ``--write`` puts the block between the ``shipped-models``
markers of docs/model.md (tests/test_shipped_models.py fails while it is stale).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import docblock  # noqa: E402  (scripts/docblock.py)

from vidur_specdec.architectures import quant  # noqa: E402
from vidur_specdec.architectures.hybrid import aic_config_path  # noqa: E402
from vidur_specdec.architectures.models import resolve_model  # noqa: E402
from vidur_specdec.config import ConfigError  # noqa: E402
from vidur_specdec.costs import fused_moe_table as F  # noqa: E402
from vidur_specdec.engine import deployment, memory_fit  # noqa: E402
from vidur_specdec.engine.resolve import load  # noqa: E402
from vidur_specdec.speculation import proposers  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "model.md"
BEGIN, END = docblock.markers("shipped-models")
DEPLOYMENTS = tuple(("h200", tp) for tp in (1, 2, 4, 8)) + (("b200", 8), ("b300", 8))
FP4_DEPLOYMENTS = tuple(("b200", tp) for tp in (1, 2, 4, 8)) + (("b300", 8),)
KV_TOKENS = 16384  # KV a deployment must leave room for on each GPU
GIB = 1024**3


def names():
    """``org/name`` of every model config the installed aiconfigurator-core ships, sorted."""
    folder = aic_config_path("meta-llama/Meta-Llama-3.1-8B").parent
    return sorted(p.name[:-len("_config.json")].replace("--", "/", 1) for p in folder.glob("*_config.json")
                  if not p.name.endswith("_hf_quant_config.json"))


def _fmt(spec) -> str:
    if not spec.quantization:
        return "bf16"
    kept = f" (bf16: {spec.bf16_parts.replace(',', ', ')})" if spec.bf16_parts else ""
    return spec.quantization + kept


def _moe(dep) -> str:
    """Where the routed experts are priced: the measured fused-MoE kernel the tables hold, else the roofline."""
    if not dep.model.is_moe:
        return "dense"
    system = getattr(dep.kernels, "system", None)
    curve = F.try_curve(system, dep.model, dep.tp, dep.ep)[0] if system else None
    return f"measured: {curve.moe_dtype}, {curve.kernel.name}" if curve else "roofline"


def deploy(name: str, spec):
    """(device, tp, weights per GPU in GiB, KV tokens per GPU, MoE source) of the smallest fit, or None."""
    method = "mtp" if spec.mtp_layers else "none"
    for device, tp in (FP4_DEPLOYMENTS if quant.needs_fp4(spec) else DEPLOYMENTS):
        try:
            cfg = load({"model": name, "device": device, "parallel": {"tensor_parallel_size": tp},
                        "speculative": {"method": method, "num_speculative_tokens": 1, "acceptance_rate": 0.8},
                        "workload": {"num_requests": 1}})
            dep = deployment.resolve(cfg)
            head = proposers.head_memory(cfg, dep)
            blocks = memory_fit.gpu_blocks(cfg, dep, head)
        except ConfigError:
            continue
        if blocks is None:
            continue
        mem = memory_fit.plan_at(cfg, dep, dep.tp, dep.draft_tp, head)  # its block size: a hybrid model's is raised
        if blocks * mem.block_size < KV_TOKENS:
            continue
        weights = (mem.target_weight_bytes + mem.draft_weight_bytes) / GIB
        return device, tp, weights, blocks * mem.block_size, _moe(dep)
    return None


def row(name: str) -> str:
    import json

    cfg = json.loads(aic_config_path(name).read_text())
    arch = ", ".join(cfg.get("architectures") or []) or str(cfg.get("model_type"))
    try:
        spec = resolve_model(name)
    except ConfigError as e:
        why = str(e).splitlines()[0].replace(f"model: {name}: ", "")
        return f"| {name} | {arch} | | | refused: {why} |  |  |  |  |"
    got = deploy(name, spec)
    mtp = str(spec.mtp_layers) if spec.mtp_layers else ""
    if got is None:
        return (f"| {name} | {arch} | {_fmt(spec)} | {mtp} | runs; no deployment listed here leaves "
                f"{KV_TOKENS:,} KV tokens per GPU |  |  |  |  |")
    device, tp, weights, tokens, moe_src = got
    status = "runs" + (" (with `method: mtp`)" if spec.mtp_layers else "")
    return (f"| {name} | {arch} | {_fmt(spec)} | {mtp} | {status} | {device} × {tp} | {weights:.1f} | {tokens:,} | "
            f"{moe_src} |")


def table() -> str:
    rows = [row(n) for n in names()]
    runs = sum(1 for r in rows if "| runs" in r)
    return "\n".join([BEGIN, f"{len(rows)} model configs; {runs} run by name, {len(rows) - runs} refused.", "",
                      "| model | architecture | weight format | MTP layers | status | smallest fit (GPU × TP) | "
                      "weights per GPU (GiB) | KV tokens per GPU | routed experts priced by |",
                      "|---|---|---|---|---|---|---|---|---|", *rows, END])


if __name__ == "__main__":
    sys.exit(docblock.main(DOC, table()))
