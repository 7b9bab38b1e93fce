"""Expert parallelism (vLLM's parallel.enable_expert_parallel) and the memory remedy for MoE targets."""

import pytest

from vidur_specdec.architectures.models import KNOWN_MODELS
from vidur_specdec.config import ConfigError
from vidur_specdec.costs import memory, routing
from vidur_specdec.costs.moe_layer import moe_layer_ms
from vidur_specdec.engine import deployment, memory_fit
from vidur_specdec.engine.resolve import load
from vidur_specdec.hardware.devices import get_device
from vidur_specdec.sweep.definition import identity

DS = "deepseek-ai/DeepSeek-V3"


def _fit(d):
    cfg = load(d)
    dep = deployment.resolve(cfg)
    return dep, memory_fit.plan_memory(cfg, dep, 2048, 0)


def test_expert_parallel_on_a_dense_model_is_one_line():
    with pytest.raises(ConfigError, match=r"^parallel.enable_expert_parallel: .* has no experts") as e:
        load({"model": "meta-llama/Llama-3.1-8B-Instruct", "device": "h100",
              "parallel": {"enable_expert_parallel": True}})
    assert "\n" not in str(e.value)


def test_ep_size_is_the_tp_size_and_off_by_default():
    dep, _ = _fit({"model": DS, "device": "h200", "parallel": {"tensor_parallel_size": 8,
                                                               "enable_expert_parallel": True}})
    assert dep.ep == 8
    dep, _ = _fit({"model": DS, "device": "h200", "parallel": {"tensor_parallel_size": 8}})
    assert dep.ep == 1
    assert "enable_expert_parallel" not in identity(load({"model": DS, "device": "h200",
                                                           "parallel": {"tensor_parallel_size": 8}}))["parallel"]


def test_each_gpu_holds_its_share_of_whole_experts():
    q = KNOWN_MODELS["Qwen/Qwen3-235B-A22B"]
    tp_split, ep_split = memory.weight_bytes(q, 8), memory.weight_bytes(q, 8, ep=8)
    assert ep_split == pytest.approx(tp_split, rel=0.01)  # same expert bytes, whole experts instead of slices
    assert memory.weight_bytes(q, 4, ep=4) > 1.9 * ep_split


def test_deepseek_v3_fits_on_8_h200_and_one_h100_is_refused_with_the_remedy():
    for ep in (False, True):
        _, mem = _fit({"model": DS, "device": "h200", "parallel": {"tensor_parallel_size": 8,
                                                                   "enable_expert_parallel": ep}})
        assert mem.num_blocks > 1000
    with pytest.raises(ConfigError) as e:
        _fit({"model": DS, "device": "h100"})
    msg = str(e.value)
    # the smallest built-in GPU larger than the H100 on which it fits: 8 RTX PRO 6000 (96 GB each)
    assert "\n" not in msg and "device=rtx_pro_6000" in msg and "parallel.tensor_parallel_size=8" in msg


def test_gpt_oss_120b_fits_on_one_h100_and_one_h200():
    for dev in ("h100", "h200"):
        _, mem = _fit({"model": "openai/gpt-oss-120b", "device": dev})
        assert mem.target_weight_bytes < 62 * 2**30 and mem.num_blocks > 1000


def test_smallest_tp_is_named_for_a_model_too_big_for_one_gpu():
    with pytest.raises(ConfigError, match=r"needs parallel.tensor_parallel_size >= 2$"):
        _fit({"model": "mistralai/Mixtral-8x7B-Instruct-v0.1", "device": "h100"})


def test_busiest_rank_is_bounded_and_fills_at_large_batch():
    E, k, ep = 256, 8, 8
    w1, r1 = routing.ep_busiest_rank([1], E, k, ep)
    assert k / ep < w1 <= E / ep and r1 <= k  # one token's 8 experts land unevenly on 8 GPUs
    w, r = routing.ep_busiest_rank([1] * 512, E, k, ep)
    assert w == pytest.approx(E / ep, rel=0.01) and r >= 512 * k / ep
    assert routing.ep_busiest_rank([1], E, k, 1)[0] == pytest.approx(k)


def test_expert_parallel_costs_more_at_batch_1_and_no_more_at_large_batch():
    ds, dev = KNOWN_MODELS[DS], get_device("h200").builder_fields()
    assert moe_layer_ms(ds, dev, 8, [1], ep=8)[0] > moe_layer_ms(ds, dev, 8, [1])[0]
    assert moe_layer_ms(ds, dev, 8, [2048], ep=8)[0] <= moe_layer_ms(ds, dev, 8, [2048])[0]
    # the distinct count (steps.csv experts_touched) is the whole model's either way
    assert moe_layer_ms(ds, dev, 8, [1] * 4, ep=8)[1] == moe_layer_ms(ds, dev, 8, [1] * 4)[1]


def test_tune_engine_args_name_the_format_and_expert_parallel_only_when_set():
    from vidur_specdec.tune.vllm_config import engine_args, serve_command

    plain = load({"model": DS, "device": "h200", "parallel": {"tensor_parallel_size": 8}})
    assert not {"quantization", "kv_cache_dtype", "enable_expert_parallel"} & set(engine_args(plain))
    cfg = load({"model": DS, "device": "h200", "kv_cache_dtype": "fp8",
                "parallel": {"tensor_parallel_size": 8, "enable_expert_parallel": True}})
    cmd = serve_command(cfg, {"method": "mtp"})
    assert "--kv-cache-dtype fp8" in cmd and "--enable-expert-parallel --" in cmd
