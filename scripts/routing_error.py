"""The routing model's reading of the fused-MoE tables, held out against routings it was not read from (docs/profiles.md).

Usage: python scripts/routing_error.py [--write]

The routed experts of a step are read from the tables' ``balanced`` rows at the
experts the step wakes (``costs/moe_layer.routed_table_ms``). Three checks, nothing fitted:

1. **The tables' own power-law rows.** AIConfigurator's collector draws each
   ``power_law_<a>`` row's expert loads from a density ``x^-a`` (its
   ``_generate_power_law_distribution``; replicated in :func:`collector_loads`
   with the same steps: sample, scale to ``T top_k`` rows, round, fix the sum,
   put the busiest expert-parallel rank on the measured GPU). For each row the
   experts it wakes and the rows it carries are averaged over :data:`DRAWS`
   seeded draws and read both ways: the reading that replaced (the row of as
   many *uniformly routed* tokens as wake D experts, :func:`previous_reading`)
   and the current one (the balanced row that wakes D experts).
2. **Random gating (vLLM's ``benchmark_moe.py``)**: published fused-MoE kernel
   times of M tokens with random top-k (the held-out table of
   scripts/moe_layer_error.py), priced with the balanced row at M (what every
   plain decode step read before) and with the current reading.
3. **Decode-only steps** of 1, 4, 16 and 64 requests at 512 tokens of context
   through the run's own predictor (target forward, LM head, sampling,
   overhead), before (routed experts at the balanced row of the step's token
   count) and now.

Prints the markdown block; ``--write`` puts it between the ``routing-error``
markers of docs/profiles.md (tests/test_routing_docs.py fails while it is stale).
"""

import dataclasses
import math
import sys
from functools import lru_cache
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import docblock  # noqa: E402  (scripts/docblock.py)
import moe_layer_error  # noqa: E402  (the published random-gating kernel times)

import numpy as np
import pandas as pd

from vidur_specdec.architectures.models import KNOWN_MODELS
from vidur_specdec.costs import fused_moe_table as F
from vidur_specdec.costs import kernels, routing
from vidur_specdec.costs.kernels import TABLES
from vidur_specdec.costs.kernels.tables import SYSTEMS
from vidur_specdec.costs.moe_layer import routed_table_ms
from vidur_specdec.engine.resolve import load
from vidur_specdec.hardware.devices import get_device
from vidur_specdec.tune.choose import step_pricer

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "profiles.md"
BEGIN, END = docblock.markers("routing-error")
DRAWS = 32  # seeded draws of the collector's power-law routing per row
ALPHAS = (1.01, 1.2)
BANDS = ((1, 64), (96, 1024), (1536, 16384))
# (label, AIConfigurator system, model, format, tp, ep): sampled GPU families, formats, TP and EP kernels
POWER_LAW = [
    ("H100 Qwen3-30B-A3B bf16 TP 1", "h100_sxm", "Qwen/Qwen3-30B-A3B", "", 1, 1),
    ("H100 Qwen3-30B-A3B fp8 block TP 1", "h100_sxm", "Qwen/Qwen3-30B-A3B", "fp8", 1, 1),
    ("H200 DeepSeek-V3 fp8 block TP 8", "h200_sxm", "deepseek-ai/DeepSeek-V3", "fp8", 8, 1),
    ("H200 DeepSeek-V3 fp8 block EP 8", "h200_sxm", "deepseek-ai/DeepSeek-V3", "fp8", 8, 8),
    ("H100 gpt-oss-120b MXFP4 TP 1", "h100_sxm", "openai/gpt-oss-120b", "mxfp4", 1, 1),
    ("B200 Qwen3-30B-A3B bf16 TP 1", "b200_sxm", "Qwen/Qwen3-30B-A3B", "", 1, 1),
]
STEPS = [("Qwen3-30B-A3B bf16, H100, TP 1", "Qwen/Qwen3-30B-A3B", "h100", 1),
         ("DeepSeek-V3 fp8, H200, TP 8", "deepseek-ai/DeepSeek-V3", "h200", 8)]
BATCHES = (1, 4, 16, 64)


def previous_reading(curve, tokens: float, distinct: float, num_experts: int, top_k: int) -> float:
    """The reading this one replaced: the row at ``x``, the uniformly routed tokens that wake ``distinct``
    experts, plus the rise past where uniform tokens wake 99 % of the experts (a plain decode step read t(T))."""
    def unrelated(d):
        return math.inf if d >= num_experts else max(0.0, math.log1p(-d / num_experts)
                                                     / math.log1p(-top_k / num_experts))
    x = min(float(tokens), unrelated(distinct))
    ms = curve.ms(x)
    knee = max(x, unrelated(0.99 * num_experts))
    return ms + (curve.ms(tokens) - curve.ms(knee) if tokens > knee else 0.0)


def collector_loads(rng, tokens: int, num_experts: int, top_k: int, ep: int, alpha: float) -> np.ndarray:
    """Rows per expert of the measured GPU's experts, one draw of the collector's power-law routing."""
    lo, hi = (1.0, tokens * 0.8) if tokens * top_k > num_experts else (0.01, 2.0)
    u = rng.random(num_experts)
    x = ((hi ** (1 - alpha) - lo ** (1 - alpha)) * u + lo ** (1 - alpha)) ** (1 / (1 - alpha))
    target = tokens * top_k
    loads = np.round(x / x.sum() * target).astype(np.int64)
    delta = int(target - loads.sum())
    perm = rng.permutation(num_experts)  # torch.argsort's order among equal loads is unspecified: drawn here
    order = perm[np.argsort(-loads[perm], kind="stable")]
    for i in range(abs(delta)):
        if delta > 0:
            loads[order[i % num_experts]] += 1
        else:
            e = order[-(i % num_experts) - 1]
            loads[e if loads[e] > 0 else int(np.argmax(loads))] -= 1
    per_rank = loads.reshape(ep, num_experts // ep)
    return per_rank[int(np.argmax(per_rank.sum(axis=1)))]  # the busiest rank is swapped onto the measured GPU


def _rows(system: str, curve, spec, tp: int, ep: int, dist: str) -> pd.DataFrame:
    df = F._table(system)
    sel = ((df.kernel_source == curve.kernel.kernel_source) & (df.moe_dtype == curve.moe_dtype)
           & (df.hidden_size == spec.hidden_size) & (df.inter_size == spec.expert_ffn_size)
           & (df.topk == spec.experts_per_token) & (df.num_experts == spec.num_experts)
           & (df.moe_tp_size == (1 if ep > 1 else tp)) & (df.moe_ep_size == ep) & (df.distribution == dist))
    return df[sel].sort_values("num_tokens")


def power_law_errors(system: str, model: str, fmt: str, tp: int, ep: int):
    """{alpha: [(tokens, % error previous, % error now)]} against the table's power_law rows."""
    spec = dataclasses.replace(KNOWN_MODELS[model], quantization=fmt)
    curve = F.curve(system, spec, tp, ep)
    E, k = spec.num_experts, spec.experts_per_token
    out = {}
    for alpha in ALPHAS:
        rng = np.random.default_rng(0)
        got = []
        for t, lat in zip(*(_rows(system, curve, spec, tp, ep, f"power_law_{alpha}")[c].to_numpy()
                            for c in ("num_tokens", "latency"))):
            prev = now = 0.0
            for _ in range(DRAWS):
                loads = collector_loads(rng, int(t), E, k, ep, alpha)
                woken, rows = float(np.count_nonzero(loads)), float(loads.sum())
                # as the EP path reads it: every GPU carrying the measured one's woken experts and rows
                tokens, distinct = (rows * ep / k, min(float(E), woken * ep)) if ep > 1 else (float(t), woken)
                prev += previous_reading(curve, tokens, distinct, E, k) / DRAWS
                now += routed_table_ms(curve, tokens, distinct, E, k) / DRAWS
            got.append((int(t), 100 * (prev - lat) / lat, 100 * (now - lat) / lat))
        out[alpha] = got
    return out


def _band(errs, i: int) -> str:
    cells = []
    for lo, hi in BANDS:
        v = [abs(e[i]) for e in errs if lo <= e[0] <= hi]
        cells.append(f"{np.median(v):.1f}" if v else "—")
    return " / ".join(cells)


@lru_cache(maxsize=1)
def random_gating_errors():
    """[(label, median |%| with the balanced row at M, median |%| now)] on the published random-gating times."""
    out = []
    for label, model, quant, device, tp, published, source in moe_layer_error.PUBLISHED:
        spec = dataclasses.replace(KNOWN_MODELS[model], quantization=quant)
        src = kernels.make(TABLES, get_device(device))
        curve = src._moe_curve(spec, tp, 1)[0]
        if curve is None:
            continue
        before, now = [], []
        for m, us in published.items():
            t = src.fused_moe_ms(spec, tp, [1] * m)[0]
            moved = curve.ms(m) - routed_table_ms(curve, m, routing.expected_distinct([1] * m, spec.num_experts,
                                                                                      spec.experts_per_token),
                                                  spec.num_experts, spec.experts_per_token)
            before.append(abs(100 * ((t + moved) * 1e3 - us) / us))
            now.append(abs(100 * (t * 1e3 - us) / us))
        out.append((f"{label} ({source})", float(np.median(before)), float(np.median(now))))
    return out


@lru_cache(maxsize=1)
def decode_steps():
    """[(label, batch, experts woken, step ms before, step ms now)]: decode-only steps at 512 tokens of context."""
    out = []
    for label, model, device, tp in STEPS:
        _, price = step_pricer(load({"model": model, "device": device, "speculative": {"method": "none"},
                                  "parallel": {"tensor_parallel_size": tp}, "workload": {"num_requests": 4}}))
        spec = KNOWN_MODELS[model]
        E, k = spec.num_experts, spec.experts_per_token
        curve = F.curve(SYSTEMS[device], spec, tp)
        for b in BATCHES:
            now = price(b, 0, 512)
            woken = routing.expected_distinct([1] * b, E, k)
            moved = spec.num_moe_layers * (curve.ms(b) - routed_table_ms(curve, b, woken, E, k))
            out.append((label, b, woken, now + moved, now))
    return out


def table() -> str:
    bands = " / ".join(f"{lo:,}–{hi:,}" for lo, hi in BANDS)
    lines = [BEGIN, f"Power-law rows of the tables (median \\|%\\| error by tokens {bands}; {DRAWS} seeded draws "
                    "of the collector's routing per row):", "",
             "| GPU, deployment | kernel | rows | previous reading | current reading |", "|---|---|---|---|---|"]
    for label, system, model, fmt, tp, ep in POWER_LAW:
        errs = power_law_errors(system, model, fmt, tp, ep)
        kernel = F.curve(system, dataclasses.replace(KNOWN_MODELS[model], quantization=fmt), tp, ep).kernel.name
        for alpha, e in errs.items():
            lines.append(f"| {label} | {kernel} | power_law_{alpha} | {_band(e, 1)} | {_band(e, 2)} |")
    lines += ["", "Random gating (published `benchmark_moe.py`-style kernel times, median \\|%\\| over M):", "",
              "| shape, device (source) | balanced row at M | current reading |", "|---|---|---|"]
    for label, before, now in random_gating_errors():
        lines.append(f"| {label} | {before:.1f} | {now:.1f} |")
    lines += ["", "Decode-only steps (batch requests, 512 tokens of context, whole step through the predictor, ms):", "",
              "| target, GPU | batch | experts woken per layer | before | now | change |", "|---|---|---|---|---|---|"]
    for label, b, woken, before, now in decode_steps():
        lines.append(f"| {label} | {b} | {woken:.1f} | {before:.2f} | {now:.2f} | {100 * (now - before) / before:+.1f} % |")
    return "\n".join(lines + [END])


def main() -> int:
    return docblock.main(DOC, table())


if __name__ == "__main__":
    sys.exit(main())
