"""Builder against measured: the MoE layer's routed experts on the roofline over the same step read from
vLLM's fused-MoE table (docs/profiles.md).

Usage: python scripts/moe_builder_vs_measured.py [--write]
For each deployment, at every token count M of the table (M tokens, each a separate
request), the ratio of the routed experts priced by the ``built`` kernel source to
those priced by the ``tables`` one (router and shared experts, identical in both,
left out), as ranges by token band and the median. Prints the markdown table;
``--write`` puts it between the ``moe-builder-vs-measured`` markers of
docs/profiles.md (tests/test_moe_docs_figures.py fails while that block is stale).
"""

import dataclasses
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import docblock  # noqa: E402  (scripts/docblock.py)

import numpy as np

from vidur_specdec.architectures.models import KNOWN_MODELS
from vidur_specdec.costs import fused_moe_table
from vidur_specdec.costs.moe_layer import moe_layer_ms
from vidur_specdec.hardware.devices import get_device

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "profiles.md"
BEGIN, END = docblock.markers("moe-builder-vs-measured")
DEVICES = {"h100": "h100_sxm", "h200": "h200_sxm"}
# (label, model, checkpoint format, tensor parallel size, expert parallel size)
DEPLOYMENTS = [
    ("Qwen3-30B-A3B bf16 TP 1", "Qwen/Qwen3-30B-A3B", "", 1, 1),
    ("Qwen3-30B-A3B fp8 block TP 1", "Qwen/Qwen3-30B-A3B", "fp8", 1, 1),
    ("DeepSeek-V3 fp8 block TP 8", "deepseek-ai/DeepSeek-V3", "fp8", 8, 1),
    ("DeepSeek-V3 fp8 block EP 8", "deepseek-ai/DeepSeek-V3", "fp8", 8, 8),
    ("gpt-oss-120b MXFP4 TP 1", "openai/gpt-oss-120b", "mxfp4", 1, 1),
]
BANDS = ((1, 64), (128, 1024), (2048, 16384))


class _Zero:
    """Routed experts at 0 ms: what both sources price alike (router, shared experts)."""

    def ms(self, tokens):
        return 0.0


def ratios(device: str, model: str, fmt: str, tp: int, ep: int):
    """(curve, {M: built / measured routed-expert time})."""
    spec = dataclasses.replace(KNOWN_MODELS[model], quantization=fmt)
    dev = get_device(device).builder_fields()
    curve = fused_moe_table.curve(DEVICES[device], spec, tp, ep)
    out = {}
    for m in curve.tokens.astype(int):
        groups = [1] * int(m)
        rest = moe_layer_ms(spec, dev, tp, groups, ep=ep, routed=_Zero())[0]
        built = moe_layer_ms(spec, dev, tp, groups, ep=ep)[0] - rest
        out[int(m)] = built / (moe_layer_ms(spec, dev, tp, groups, ep=ep, routed=curve)[0] - rest)
    return curve, out


def table() -> str:
    rows = []
    for device in DEVICES:
        for label, model, fmt, tp, ep in DEPLOYMENTS:
            curve, r = ratios(device, model, fmt, tp, ep)
            cells = []
            for lo, hi in BANDS:
                v = [x for m, x in r.items() if lo <= m <= hi]
                cells.append(f"{min(v):.2f}–{max(v):.2f}")
            rows.append(f"| {device.upper()} {label} | {curve.kernel.name} | " + " | ".join(cells)
                        + f" | {float(np.median(list(r.values()))):.2f} |")
    head = "| GPU, deployment | kernel | " + " | ".join(f"{lo:,}–{hi:,} tokens" for lo, hi in BANDS) + " | median |"
    return "\n".join([BEGIN, head, "|---|---|" + "---|" * (len(BANDS) + 1), *rows, END])


def main() -> int:
    return docblock.main(DOC, table())


if __name__ == "__main__":
    sys.exit(main())
