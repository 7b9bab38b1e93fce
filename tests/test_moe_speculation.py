"""Speculation on mixture-of-experts targets: DeepSeek's MTP module and dense EAGLE-3 heads."""

import pytest

from vidur_specdec.architectures.models import KNOWN_MODELS
from vidur_specdec.config import ConfigError
from vidur_specdec.engine import deployment
from vidur_specdec.pricing.plan import StepComposition
from vidur_specdec.engine.resolve import load
from vidur_specdec.speculation import proposers
from vidur_specdec.speculation.proposers import heads

DS8 = {"model": "deepseek-ai/DeepSeek-V3", "device": "h200", "parallel": {"tensor_parallel_size": 8}}


def _pass(n, q=1):
    from vidur_specdec.speculation.proposers.head_cost import Pass

    return Pass([q] * n, [100] * n, n, [])


def _priced(d):
    from vidur_specdec.engine.resolve import priced

    cfg = load(d)
    dep = deployment.resolve(cfg)
    return priced(cfg, dep, 2048)[1], dep


def _proposer(d):
    cfg = load(d)
    dep = deployment.resolve(cfg)
    return proposers.build(cfg, None, deployment=dep), dep


@pytest.mark.parametrize("target,head", [("openai/gpt-oss-120b", "lmsys/EAGLE3-gpt-oss-120b-bf16"),
                                         ("openai/gpt-oss-20b", "zhuyksir/EAGLE3-gpt-oss-20b-bf16"),
                                         ("Qwen/Qwen3-30B-A3B", "Tengyunw/qwen3_30b_moe_eagle3"),
                                         ("Qwen/Qwen3-235B-A22B", "lmsys/Qwen3-235B-A22B-EAGLE3")])
def test_known_eagle3_head_is_chosen_by_target_and_by_name(target, head):
    t = KNOWN_MODELS[target]
    cfg = load({"model": target, "device": "h200", "speculative": {"method": "eagle3"}})
    assert heads.resolve(cfg, "eagle3", t).name == head
    cfg = load({"model": target, "device": "h200", "speculative": {"method": "eagle3", "model": head}})
    h = heads.resolve(cfg, "eagle3", t)
    assert h.num_layers == 1 and h.output_vocab == 32000 and h.head_dim == t.head_dim


def test_dense_head_mlp_is_priced_at_its_own_width():
    p, dep = _priced({"model": "Qwen/Qwen3-30B-A3B", "device": "h100", "speculative": {"method": "eagle3"}})
    assert p._own_mlp()
    # the head's 12288-wide dense MLP costs more than the target profile's 768-wide expert MLP it replaces
    assert p.mlp_ms(64, dep.device, 1) > 2 * p.target_mlp_ms(64)
    assert p.layer_mlp_ms(_pass(64), dep.device, 1) > 0


def test_mtp_on_deepseek_counts_its_experts_and_mla_kv():
    p, dep = _proposer({**DS8, "speculative": {"method": "mtp", "num_speculative_tokens": 1}})
    assert p.head.moe and p.head.num_layers == KNOWN_MODELS["deepseek-ai/DeepSeek-V3"].mtp_layers == 1
    w, kv = p.memory_bytes(8)
    assert 1.5e9 < w < 1.8e9  # 11.7 GB (256 fp8 experts of 44 M weights each, attention, bf16 eh_proj) over 8 GPUs
    assert kv == 576 * 2  # one MLA latent (512 + 64) per token, bf16


def test_mtp_passes_wake_experts_so_guesses_cost_more_than_on_a_dense_layer():
    p, dep = _priced({**DS8, "speculative": {"method": "mtp", "num_speculative_tokens": 3}})
    one, catch, many = (p.layer_mlp_ms(x, dep.device, 8) + p.target_mlp_ms(x.tokens)
                        for x in (_pass(1), _pass(1, q=4), _pass(64)))
    assert one < catch < many  # a catch-up run of 4 tokens wakes more experts than 1; 64 requests more still


def test_mtp_on_an_moe_target_without_modules_is_refused():
    with pytest.raises(ConfigError, match="ships no MTP modules") as e:
        _proposer({"model": "Qwen/Qwen3-30B-A3B", "device": "h100", "speculative": {"method": "mtp"}})
    assert "\n" not in str(e.value)


def test_mtp_step_time_grows_with_k():
    from vidur_specdec.hardware.collectives import all_reduce_model
    from vidur_specdec.speculation.proposers.base import ProposerContext

    p, dep = _priced({**DS8, "speculative": {"method": "mtp", "num_speculative_tokens": 3}})
    p.bind(ProposerContext(dep.device, 8, all_reduce_model("vllm_custom")))
    t = [p.step_time_ms(StepComposition(k + 1, [k + 1], [500], [], [1])) for k in (1, 2, 3)]
    assert 0 < t[0] < t[1] < t[2]
