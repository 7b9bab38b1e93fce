"""Held-out error of the MoE layer cost against published fused-MoE kernel times (docs/profiles.md).

Usage: python scripts/moe_layer_error.py [--write]
Each published table times one MoE layer on one GPU for M tokens, each a separate
request (``benchmark_moe.py`` style), so the layer is priced for M groups of one
token, twice: on the profile builder's calibrated roofline (``profiles: built``)
and with the routed experts from vLLM's measured fused-MoE tables (the default on
GPUs that have them; "—" where the tables lack the deployment's rows). Nothing here
was fitted. Prints the markdown table; ``--write`` puts it between the
``moe-layer-error`` markers of docs/profiles.md (tests/test_moe_docs_figures.py
fails while that block is stale).
"""

import dataclasses
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import docblock  # noqa: E402  (scripts/docblock.py)

import numpy as np

from vidur_specdec.architectures.models import KNOWN_MODELS
from vidur_specdec.costs import kernels
from vidur_specdec.costs.kernels import BUILT, TABLES
from vidur_specdec.hardware.devices import get_device

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "profiles.md"
BEGIN, END = docblock.markers("moe-layer-error")

# (label, model, quantization, device, tp, {M tokens: published microseconds}, source)
PUBLISHED = [
    ("Mixtral-8x7B tp2 bf16, H100", "mistralai/Mixtral-8x7B-Instruct-v0.1", "", "h100", 2,
     {1: 144.0, 2: 229.3, 4: 351.1, 8: 435.0, 16: 471.5, 32: 487.4, 64: 483.1, 128: 491.4, 256: 536.8,
      512: 662.3, 1024: 833.7, 1536: 1122.9},
     "vllm-project/vllm PR 24700, tuned config"),
    ("Qwen3-30B-A3B tp1 fp8, H100", "Qwen/Qwen3-30B-A3B", "fp8", "h100", 1,
     {1: 44.5, 2: 59.9, 4: 90.5, 8: 129.8, 16: 185.4, 32: 238.4, 64: 262.7, 128: 273.7, 256: 355.5, 512: 391.9,
      1024: 536.3, 2048: 911.6, 4096: 1647.6},
     "vllm-project/vllm PR 24700, main config"),
    ("Qwen3-235B-A22B tp8 fp8, H200", "Qwen/Qwen3-235B-A22B", "fp8", "h200", 8,
     {1: 31.7, 2: 36.6, 4: 49.7, 8: 66.9, 16: 92.4, 24: 117.4, 32: 125.0},
     "sgl-project/sglang PR 11730, untuned"),
]


def errors(model: str, quantization: str, device: str, tp: int, published: dict, measured: bool = False):
    """{M: % error of the priced layer against the published time}; None when ``measured`` has no rows."""
    spec = dataclasses.replace(KNOWN_MODELS[model], quantization=quantization)
    source = kernels.make(TABLES if measured else BUILT, get_device(device))
    if source.warnings(tp, [spec]):  # the tables lack the deployment's rows
        return None
    return {m: 100.0 * (source.fused_moe_ms(spec, tp, [1] * m)[0] * 1e3 - us) / us for m, us in published.items()}


def _cells(err) -> str:
    if err is None:
        return "— | —"
    by_m = ", ".join(f"{m}: {e:+.0f}" for m, e in err.items()).replace("+-", "−").replace("-", "−")
    return f"{by_m} | {float(np.median(np.abs(list(err.values())))):.1f}"


def table() -> str:
    rows = []
    for label, model, quant, device, tp, published, source in PUBLISHED:
        for name, measured in (("built", False), ("measured", True)):
            rows.append(f"| {label} ({source}) | {name} | {_cells(errors(model, quant, device, tp, published, measured))} |")
    return "\n".join([BEGIN, "| shape, device (source) | MoE source | % error by tokens | median \\|%\\| |",
                      "|---|---|---|---|", *rows, END])


def main() -> int:
    return docblock.main(DOC, table())


if __name__ == "__main__":
    sys.exit(main())
