"""The whole step against published measurements the simulator was never tuned to.

Each row is a published static-batch benchmark: B requests sent together,
each with a fixed prompt and a fixed output length, no speculation. The
published figure is the mean time per output token of the batch,
``B / output throughput`` (ms) — the whole step (layers, LM head, sampling,
engine overhead) averaged over the run, the prefill included. The simulator
runs the same setting (``workload.arrival: static``) and reports
``makespan / output tokens``. Printed: published, simulated with the
defaults ("after"), simulated with the layers only ("before": ``engine.*`` 0
and ``engine.lm_head: false``, the accounting before the step costs were
added), and the error of each.

Rows whose model, device or tensor-parallel size this checkout cannot run
(unknown model, no profile, a tensor-parallel size it cannot split) are
skipped with the reason. Sources: docs/model.md, "Checked against published
measurements".

``--all-reduce`` sets ``engine.all_reduce`` for both columns (default: the
config default, ``vllm_custom``; ``nccl`` prices every tensor-parallel
all-reduce as NCCL, the model before vLLM's custom all-reduce was added).

    python scripts/check_published.py [--profiles shipped|DIR] [--only SUBSTRING] [--all-reduce NAME]
"""

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from vidur_specdec.config import DEFAULT_ALL_REDUCE  # noqa: E402
from vidur_specdec.hardware.collectives import ALL_REDUCE_MODELS  # noqa: E402
from vidur_specdec.config import ConfigError  # noqa: E402
from vidur_specdec.engine.resolve import load
from vidur_specdec.engine.simulation import prepare, run_prepared  # noqa: E402

LMDEPLOY = ("InternLM/lmdeploy docs/en/benchmark/a100_fp16.md (lmdeploy v0.1.0a1 TurboMind, fp16, "
            "A100-80G SXM), static inference benchmark: B / throughput(out tok/s)")
VLLM_PERF = ("vLLM performance benchmark, https://buildkite.com/vllm/performance-benchmark/builds/9515, "
             "latency tests (vllm bench latency: batch 8, input 32, output 128, default bf16): "
             "mean end-to-end latency / 128")


@dataclass
class Row:
    label: str
    model: str
    device: str
    tp: int
    batch: int
    prompt: int
    output: int
    published_ms: float  # published mean time per output token of the batch (ms), prefill included
    source: str


def lmdeploy(label, model, tp, batch, prompt, output, throughput_tok_s) -> Row:
    """A row of lmdeploy's static table: B / output throughput (tokens/s of the whole batch)."""
    return Row(label, model, "a100", tp, batch, prompt, output, batch / throughput_tok_s * 1e3, LMDEPLOY)


L2_7B, L2_70B = "meta-llama/Llama-2-7b-hf", "meta-llama/Llama-2-70b-hf"
ROWS = [
    lmdeploy("7B bs1 1/128", L2_7B, 1, 1, 1, 128, 100.02),
    lmdeploy("7B bs1 128/128", L2_7B, 1, 1, 128, 128, 102.21),
    lmdeploy("7B bs1 2048/128", L2_7B, 1, 1, 2048, 128, 86.1),
    lmdeploy("7B bs16 1/128", L2_7B, 1, 16, 1, 128, 1504.72),
    lmdeploy("7B bs16 128/128", L2_7B, 1, 16, 128, 128, 1272.47),
    lmdeploy("7B bs32 1/128", L2_7B, 1, 32, 1, 128, 2136.73),
    lmdeploy("7B bs64 1/128", L2_7B, 1, 64, 1, 128, 4154.81),
    lmdeploy("7B bs64 128/128", L2_7B, 1, 64, 128, 128, 3024.07),
    # the rows below run once tensor parallelism, Llama-3.x and H200 land (w-deploy)
    lmdeploy("70B TP4 bs1 1/128", L2_70B, 4, 1, 1, 128, 33.94),
    lmdeploy("70B TP4 bs16 1/128", L2_70B, 4, 16, 1, 128, 468.52),
    lmdeploy("70B TP4 bs64 1/128", L2_70B, 4, 64, 1, 128, 1425.79),
    Row("L3.1-8B H200 bs8", "meta-llama/Llama-3.1-8B-Instruct", "h200", 1, 8, 32, 128, 833.421 / 128, VLLM_PERF),
    # the benchmark names "llama-3 70B": the same dimensions as Llama-3.1-70B (context length aside)
    Row("L3-70B TP4 H200 bs8", "meta-llama/Llama-3.1-70B-Instruct", "h200", 4, 8, 32, 128, 2077.53 / 128,
        VLLM_PERF),
]

LAYERS_ONLY = {"step_overhead_ms": 0.0, "overhead_ms_per_request": 0.0, "sampling_ms": 0.0,
               "sampling_logit_passes": 0.0, "lm_head": False}


def config(row: Row, profiles: str, engine=None) -> dict:
    cfg = {
        "seed": 0, "model": row.model, "device": row.device, "profiles": profiles,
        "workload": {"num_requests": row.batch, "arrival": "static",
                     "prompt_tokens": {"dist": "fixed", "value": row.prompt},
                     "output_tokens": {"dist": "fixed", "value": row.output}},
        "scheduler": {"chunk_size": min(max(512, row.batch * row.prompt), 8192), "batch_size_cap": max(row.batch, 1)},
        "speculative": {"method": "none"},
        "engine": engine or {},
    }
    if row.tp > 1:
        cfg["parallel"] = {"tensor_parallel_size": row.tp}
    return cfg


def ms_per_token(row: Row, profiles: str, engine=None) -> float:
    p = prepare(load(config(row, profiles, engine)))
    tp = p.pricer.tp
    if tp != row.tp:
        raise ConfigError(f"parallel.tensor_parallel_size: this checkout simulates TP {tp}, the row needs TP {row.tp}")
    s = run_prepared(p).summary
    return s["makespan_s"] / row.output * 1e3


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profiles", default="shipped", help="profile root (default: the shipped profiles)")
    ap.add_argument("--only", default=None, help="run only rows whose label contains this")
    ap.add_argument("--all-reduce", default=DEFAULT_ALL_REDUCE, choices=sorted(ALL_REDUCE_MODELS),
                    help=f"engine.all_reduce for every run (default: {DEFAULT_ALL_REDUCE})")
    a = ap.parse_args(argv)
    ar = {"all_reduce": a.all_reduce}
    print(f"{'setting':20} {'published':>9} {'after':>8} {'err':>7} {'before':>8} {'err':>7}   (ms per output token)")
    errs = []
    for row in ROWS:
        if a.only and a.only not in row.label:
            continue
        try:
            after = ms_per_token(row, a.profiles, ar)
            before = ms_per_token(row, a.profiles, {**LAYERS_ONLY, **ar})
        except ConfigError as e:
            print(f"{row.label:20} skipped: {e}")
            continue
        pub = row.published_ms
        errs.append(after / pub - 1)
        print(f"{row.label:20} {pub:9.2f} {after:8.2f} {after / pub - 1:+7.1%} {before:8.2f} {before / pub - 1:+7.1%}")
    if errs:
        mean_abs = sum(abs(e) for e in errs) / len(errs)
        print(f"\n{len(errs)} rows; mean |error| after: {mean_abs:.1%} (engine.all_reduce: {a.all_reduce})")
    print("sources:", *sorted({r.source for r in ROWS}), sep="\n  ")
    return 0


if __name__ == "__main__":
    sys.exit(main())
