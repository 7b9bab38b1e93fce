"""Step time of k guesses over k = 0 at batch 1/16/64: a MoE target vs a dense one (docs/model.md).

Usage: python scripts/moe_step_ratio.py [moe model] [dense model] [device]
Prices one decode step of ``batch`` requests, each with ``k`` guesses at 512 tokens of
context, through the run's own predictor (target forward + LM head + sampling + overhead;
no proposer time), speculation off so only the target is priced.
"""

import sys
from types import SimpleNamespace

from vidur.config import CacheConfig, ReplicaConfig

from vidur_specdec.engine.predictor import SpecDecExecutionTimePredictor
from vidur_specdec.engine.resolve import load
from vidur_specdec.engine.simulation import prepare


def predictor(model: str, device: str):
    cfg = load({"model": model, "device": device, "speculative": {"method": "none"},
                "workload": {"num_requests": 4}})
    p = prepare(cfg)
    p.predictor.proposer = None
    rc = ReplicaConfig(model_name="meta-llama/Llama-2-7b-hf", tensor_parallel_size=1, num_pipeline_stages=1,
                       device="a100", network_device="a100_pairwise_nvlink")
    return SpecDecExecutionTimePredictor(p.predictor, rc, CacheConfig(block_size=16, num_blocks=1000))


def step_ms(pred, batch: int, k: int, ctx: int = 512) -> float:
    req = SimpleNamespace(is_prefill_complete=True, catchup_tokens=1, num_prefill_tokens=100)
    b = SimpleNamespace(requests=[req] * batch, num_q_tokens=[k + 1] * batch,
                        num_kv_tokens=[ctx + k + 1] * batch, total_num_q_tokens=batch * (k + 1), replica_id=0)
    t = pred.get_execution_time(b, 0)
    return t.total_time * 1e3, t


def main() -> None:
    moe, dense, device = (sys.argv[1:] + ["Qwen/Qwen3-30B-A3B", "meta-llama/Llama-3.1-8B", "h100"][len(sys.argv) - 1:])[:3]
    print(f"step time at k guesses / at k=0, one decode step per request, 512 tokens of context, {device}")
    print(f"{'model':40s} {'batch':>5s} " + " ".join(f"{'k=' + str(k):>6s}" for k in (1, 3, 5)) + "   experts k=0..5")
    for name in (moe, dense):
        pred = predictor(name, device)
        for batch in (1, 16, 64):
            base, _ = step_ms(pred, batch, 0)
            ratios = [step_ms(pred, batch, k)[0] / base for k in (1, 3, 5)]
            ex = [round(step_ms(pred, batch, k)[1].experts_touched, 1) for k in (0, 1, 3, 5)]
            print(f"{name:40s} {batch:5d} " + " ".join(f"{r:6.2f}" for r in ratios) + f"   {ex}")


if __name__ == "__main__":
    main()
