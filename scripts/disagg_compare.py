"""Colocated vs 1P1D vs 2P2D, with and without speculation: the table in docs/model.md, from the recorded sweep.

Reads ``sweeps/results/disaggregation.csv`` (``sweeps/disaggregation.yaml``: Llama-3.1-70B EAGLE-3 on H100
TP 4 instances, DeepSeek-V3 MTP on H200 TP 8 instances, three loads each) and writes the block
``disagg-compare`` of docs/model.md::

    PYTHONPATH=. python scripts/disagg_compare.py [--write]

No simulation here: the sweep is the measurement (``sweeps/results/regenerate.sh`` re-runs it).
tests/test_disagg_compare_docs.py checks the block against the CSV and the CSV against its sweep file.
"""

import csv
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scripts.docblock import REPO, main, markers  # noqa: E402

DOC = REPO / "docs" / "model.md"
CSV = REPO / "sweeps" / "results" / "disaggregation.csv"
NAME = "disagg-compare"
MODELS = {"meta-llama/Llama-3.1-70B-Instruct": "Llama-3.1-70B EAGLE-3 (k 3), H100 TP 4",
          "deepseek-ai/DeepSeek-V3": "DeepSeek-V3 MTP (k 1), H200 TP 8 EP"}
PARTS = ("queue", "prefill", "kv_transfer", "first_decode")


def _f(x: str):
    return float(x) if x not in ("", None) else None


def read(path: Path = CSV):
    """``{(model, deployment, gpus, qps): {"none" | "transfer" | "recompute" | "colocated": row}}``."""
    out = {}
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            d = json.loads(r["disaggregation"])
            tp = int(r["tensor_parallel_size"])
            if d["prefill_instances"]:
                dep = f"{d['prefill_instances']}P{d['decode_instances']}D"
                gpus = (d["prefill_instances"] + d["decode_instances"]) * tp
                setting = "none" if r["method"] == "none" else d["draft_kv"]
            else:
                dep = f"colocated × {r['num_replicas']}"
                gpus = int(r["num_replicas"]) * tp
                setting = "none" if r["method"] == "none" else "transfer"  # nothing moves: one column with the rest
            out.setdefault((r["model"], dep, gpus, float(r["qps"])), {})[setting] = r
    return out


def _ms(x) -> str:
    return "–" if x is None else f"{x:,.1f}"


def row_text(model: str, dep: str, gpus: int, qps: float, s: dict) -> str:
    """One table line: TTFT (p50 without and with speculation, mean parts with it), TPOT, speedups."""
    k0, sp, rc = s["none"], s["transfer"], s.get("recompute")
    if dep.startswith("colocated"):
        parts = "–"
    else:
        parts = " / ".join(f"{_f(sp[f'ttft_{p}_ms_mean']):,.1f}" for p in PARTS)
    recompute = "–"
    if rc is not None:
        recompute = (f"{_f(rc['ttft_ms_mean']) - _f(sp['ttft_ms_mean']):+.1f} ms, "
                     f"{_f(rc['tpot_speedup']):.2f}×")
    return (f"| {MODELS[model].split(' (')[0]} | {dep} | {gpus} | {qps:g} | {_ms(_f(k0['ttft_ms_p50']))} → "
            f"{_ms(_f(sp['ttft_ms_p50']))} | {parts} | {_ms(_f(k0['tpot_ms_p50']))} → {_ms(_f(sp['tpot_ms_p50']))} "
            f"| {_f(sp['tpot_speedup']):.2f}× | {recompute} |")


def _order(key):
    model, dep, gpus, qps = key
    return (list(MODELS).index(model), gpus, not dep.startswith("colocated"), dep, qps)


def sentences(table: dict) -> list:
    """Per model, at its top load: speedup and TTFT p50 with speculation, colocated against disaggregated."""
    out = []
    for model, label in MODELS.items():
        keys = [k for k in table if k[0] == model]
        top = max(k[3] for k in keys)
        bits = []
        for k in sorted((k for k in keys if k[3] == top), key=_order):
            sp = table[k]["transfer"]
            bits.append(f"{k[1]} ({k[2]} GPUs) {_f(sp['tpot_speedup']):.2f}×, TTFT p50 {_f(sp['ttft_ms_p50']):,.0f} ms")
        out.append(f"{label}, {top:g} req/s: TPOT speedup and TTFT p50 with speculation — " + "; ".join(bits) + ".")
    return out


def build(path: Path = CSV) -> str:
    table = read(path)
    begin, end = markers(NAME)
    lines = [begin,
             "| model | deployment | GPUs | req/s | TTFT p50 ms, k = 0 → speculative | TTFT mean parts ms, speculative "
             "(queue / prefill / KV transfer / first decode) | TPOT p50 ms, k = 0 → speculative | TPOT speedup "
             "| draft KV recomputed: TTFT mean, TPOT speedup |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for key in sorted(table, key=_order):
        lines.append(row_text(*key, table[key]))
    lines.append("")
    for s in sentences(table):
        lines += [s, ""]
    lines.append(end)
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main(DOC, build()))
