"""The MoE layer's cost on the roofline and its columns in steps.csv."""

import pytest

from conftest import small
from vidur_specdec.architectures.models import KNOWN_MODELS
from vidur_specdec.costs.moe_layer import moe_layer_ms
from vidur_specdec.hardware.devices import get_device

H100 = get_device("h100").builder_fields()
QWEN = KNOWN_MODELS["Qwen/Qwen3-30B-A3B"]
MIXTRAL = KNOWN_MODELS["mistralai/Mixtral-8x7B-Instruct-v0.1"]


def test_verify_block_costs_more_than_one_token_and_saturates():
    one, d1 = moe_layer_ms(QWEN, H100, 1, [1])
    block, d6 = moe_layer_ms(QWEN, H100, 1, [6])
    assert d1 == pytest.approx(8) and d1 < d6 <= 128
    assert block > 1.5 * one  # memory-bound: the price follows the experts woken
    wide, dw = moe_layer_ms(QWEN, H100, 1, [1] * 256)
    assert dw > 127 and wide > block


# Held out (not fitted): vLLM PR 24700 benchmark_moe.py on H100, tp2 Mixtral bf16, microseconds by tokens
MIXTRAL_TP2_US = {1: 144.0, 4: 351.1, 16: 471.5, 64: 483.1, 256: 536.8, 1024: 833.7}


def test_held_out_fused_moe_times_within_the_reported_error():
    errs = [abs(moe_layer_ms(MIXTRAL, H100, 2, [1] * m)[0] * 1e3 - us) / us for m, us in MIXTRAL_TP2_US.items()]
    assert max(errs) < 0.25  # docs/profiles.md reports 0.5-23 %


def test_moe_run_records_experts_and_moe_time():
    from vidur_specdec import simulate
    from vidur_specdec.engine.resolve import load

    res = simulate(load(small(num_requests=6, qps=2.0, model="Qwen/Qwen3-30B-A3B", device="h100")))
    s = res.steps
    assert (s["experts_touched"] > 0).all() and (s["experts_touched"] <= 128).all()
    assert (s["moe_ms"] > 0).all() and (s["moe_ms"] < s["verify_ms"]).all()
    dense = simulate(load(small(num_requests=3)))
    assert (dense.steps[["moe_ms", "experts_touched"]] == 0).all().all()
