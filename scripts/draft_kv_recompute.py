"""Draft KV transferred vs recomputed on the decode pool: the table and sentence in docs/model.md.

Runs the two example disaggregated configs with a few long fixed prompts at a
light load, once with ``disaggregation.draft_kv: transfer`` and once with
``recompute`` (6 runs), and writes the block ``draft-kv`` of docs/model.md::

    PYTHONPATH=. python scripts/draft_kv_recompute.py [--record] [--write]

``--record`` runs them and records each run's means in ``sweeps/results/figures/draft_kv_recompute.csv``
(scripts/recorded_runs.py); the block is always written from that file. tests/test_recorded_doc_figures.py
re-renders the block from the CSV, checks the CSV against the current configs and code, and re-runs one run.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scripts import recorded_runs  # noqa: E402
from scripts.docblock import REPO, markers  # noqa: E402

DOC = REPO / "docs" / "model.md"
NAME = "draft-kv"
ROWS = [  # (label, config, prompt tokens)
    ("DeepSeek-V3 MTP, 2P2D × 8 H200, InfiniBand", "configs/disagg-deepseek-v3-mtp-2p2d.yaml", 2000),
    ("", "configs/disagg-deepseek-v3-mtp-2p2d.yaml", 16000),
    ("Llama-3.1-70B EAGLE-3, 1P1D × 4 H100, NVLink", "configs/disagg-llama70b-eagle3-1p1d.yaml", 16000),
]
MODES = ("transfer", "recompute")
CSV_NAME = "draft_kv_recompute"
COLUMNS = ("ttft_ms", "ttft_first_decode_ms", "kv_transfer_ms", "kv_transfer_bytes")  # means over the requests


def overrides(prompt: int, mode: str):
    return ["workload.num_requests=8", "workload.qps=0.05", "workload.prompt_tokens.dist=fixed",
            f"workload.prompt_tokens.value={prompt}", "workload.output_tokens.dist=fixed",
            "workload.output_tokens.value=64", f"disaggregation.draft_kv={mode}"]


def run_label(config: str, prompt: int, mode: str) -> str:
    return f"{Path(config).stem} p{prompt} {mode}"


def runs() -> list:
    """Every run: (label, config, overrides), in the CSV's order."""
    return [(run_label(config, prompt, mode), str(REPO / config), overrides(prompt, mode))
            for _, config, prompt in ROWS for mode in MODES]


def measure(config: str, over: list) -> dict:
    """One run's recorded numbers: the means over its requests of :data:`COLUMNS`."""
    from vidur_specdec import simulate

    q = simulate(config, over).requests
    return {c: float(q[c].mean()) for c in COLUMNS}


def rows_text(label: str, prompt: int, m: dict) -> list:
    lines = []
    for i, mode in enumerate(MODES):
        r = m[mode]
        lines.append(f"| {label if i == 0 else ''} | {prompt:,} | {'transferred' if mode == 'transfer' else 'recomputed'} "
                     f"| {r['ttft_ms']:,.1f} | {r['ttft_first_decode_ms']:.1f} | {r['kv_transfer_ms']:.2f} "
                     f"| {r['kv_transfer_bytes'] / 1e9:.2f} |")
    return lines


def build(res=None) -> str:
    """The block, from the recorded runs (``res``: :func:`recorded_runs.read`'s)."""
    res = res or recorded_runs.read(CSV_NAME)
    begin, end = markers(NAME)
    lines = [begin, "| deployment | prompt | draft KV | TTFT ms | first decode ms | KV transfer ms | KV GB moved |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    results = []
    for label, config, prompt in ROWS:
        m = {mode: res[run_label(config, prompt, mode)] for mode in MODES}
        results.append((label or results[-1][0], prompt, m))
        lines += rows_text(label, prompt, m)
    lines.append("")
    for label, prompt, m in results:
        if prompt != max(p for _, _, p in ROWS):
            continue
        t, r = m["transfer"], m["recompute"]
        lines.append(f"{label.split(',')[0]}, {prompt:,}-token prompt: recomputing the draft KV adds "
                     f"{r['ttft_ms'] - t['ttft_ms']:.1f} ms to TTFT ({(r['ttft_ms'] / t['ttft_ms'] - 1) * 100:+.1f} %) "
                     f"and multiplies the first decode part by {r['ttft_first_decode_ms'] / t['ttft_first_decode_ms']:.1f}; "
                     f"moving that KV costs {t['kv_transfer_ms'] - r['kv_transfer_ms']:.2f} ms of transfer.")
        lines.append("")
    lines.append(end)
    return "\n".join(lines)


text = build

if __name__ == "__main__":
    sys.exit(recorded_runs.script_main(CSV_NAME, runs, measure, COLUMNS, DOC, build))
