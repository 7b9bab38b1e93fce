"""What the step costs beyond the layers change: decode step time before/after, and TPOT at the sweep loads.

1. Decode step time of Llama-2-7B on one A100 (shipped profile) at decode
   batch 1, 16 and 128 (all requests decoding, context ~512 tokens, no
   speculation): "before" is the layers only (``engine`` terms all 0,
   ``engine.lm_head: false``: the accounting of the recorded results),
   "after" the defaults (LM head, sampling, engine overhead). Measured in the
   simulator itself: the median ``duration_ms`` of the steps in which all B
   requests decode and nothing prefills.
2. Median TPOT (tpot_ms_p50, as recorded) of the recorded sweep's baseline (``sweeps/specdec_39.yaml``,
   ``method: none``) and one speculative row (n-gram k=4, alpha 0.8,
   shared_kv) at its three loads (2, 6, 12 req/s), before/after, on
   ``--requests`` requests (default 100, not the recorded 300: an estimate
   of how far the recorded results move).

    python benchmarks/bench_step_cost.py [--requests 100]
"""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from vidur_specdec import simulate  # noqa: E402
from vidur_specdec.config import read_yaml  # noqa: E402

BEFORE = {"step_overhead_ms": 0.0, "overhead_ms_per_request": 0.0, "sampling_ms": 0.0,
          "sampling_logit_passes": 0.0, "lm_head": False}
REPO = Path(__file__).resolve().parents[1]


def decode_step(batch: int, engine) -> dict:
    cfg = {
        "seed": 0, "model": "meta-llama/Llama-2-7b-hf", "device": "a100",
        "workload": {"num_requests": batch, "arrival": "static",
                     "prompt_tokens": {"dist": "fixed", "value": 512},
                     "output_tokens": {"dist": "fixed", "value": batch + 32}},
        "scheduler": {"chunk_size": 512, "batch_size_cap": 128},
        "speculative": {"method": "none"},
        "engine": engine or {},
    }
    s = simulate(cfg).steps
    d = s[(s["decode_reqs"] == batch) & (s["prefill_tokens"] == 0)]
    row = d.iloc[len(d) // 2]
    out = {k: float(row[k]) for k in ("duration_ms", "verify_ms", "lm_head_ms", "sampling_ms", "overhead_ms")}
    out["ctx"] = float(row["ctx_tokens"]) / batch
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=100)
    a = ap.parse_args(argv)

    print("Llama-2-7B, A100, TP1, decode at context 512-700, no speculation (ms per step)")
    print(f"{'batch':>5} {'before':>8} {'after':>8} {'change':>7}   {'lm_head':>7} {'sampling':>8} {'overhead':>8}")
    for b in (1, 16, 128):
        lo, hi = decode_step(b, BEFORE), decode_step(b, None)
        print(f"{b:>5} {lo['duration_ms']:8.2f} {hi['duration_ms']:8.2f} "
              f"{hi['duration_ms'] / lo['duration_ms'] - 1:+7.1%}   {hi['lm_head_ms']:7.3f} "
              f"{hi['sampling_ms']:8.3f} {hi['overhead_ms']:8.3f}")

    base = read_yaml(REPO / "sweeps" / "specdec_39.yaml")["base"]
    base["workload"]["num_requests"] = a.requests
    print(f"\nsweeps/specdec_39.yaml at {a.requests} requests: median TPOT (ms, the recorded tpot_ms_p50), before -> after")
    for label, spec in (("none", {"method": "none"}),
                        ("ngram k4 a0.8", {"method": "ngram", "num_speculative_tokens": 4, "acceptance_rate": 0.8,
                                           "verify_attention": "shared_kv"})):
        for qps in (2.0, 6.0, 12.0):
            out = []
            for eng in (BEFORE, None):
                cfg = {**base, "workload": {**base["workload"], "qps": qps},
                       "speculative": {**base["speculative"], **spec}, "engine": eng or {}}
                out.append(simulate(cfg).summary["tpot_ms"]["p50"])
            print(f"  {label:14} qps {qps:4.1f}: {out[0]:7.2f} -> {out[1]:7.2f}  ({out[1] / out[0] - 1:+.1%})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
