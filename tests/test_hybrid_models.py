"""Hybrid linear-attention targets (Qwen3.5) and the layer plan every model is priced from."""

import copy

import pytest

from vidur_specdec.architectures import layer_plan as LP
from vidur_specdec.architectures import moe
from vidur_specdec.architectures.errors import ModelError
from vidur_specdec.architectures.hybrid import load_aic_config
from vidur_specdec.architectures.models import KNOWN_MODELS, model_from_hf_config, resolve_model
from vidur_specdec.costs import memory

Q397, Q122 = "Qwen/Qwen3.5-397B-A17B", "Qwen/Qwen3.5-122B-A10B"


@pytest.mark.parametrize("name", sorted(KNOWN_MODELS))
def test_layer_plan_gives_every_known_model_its_old_kv_and_no_state(name):
    m = KNOWN_MODELS[name]
    for tp in (1, 8):
        b = m.kv_dtype_bytes
        if m.kv_lora_rank and m.index_topk:  # sparse attention: the latent (fp8_ds_mla at an fp8 cache) + index key
            latent = (m.kv_lora_rank + m.kv_lora_rank // 128 * 4 + 2 * m.qk_rope_head_dim if b == 1
                      else b * (m.kv_lora_rank + m.qk_rope_head_dim))
            old = (latent + m.index_key_bytes) * m.num_layers
        elif m.kv_lora_rank:
            old = b * (m.kv_lora_rank + m.qk_rope_head_dim) * m.num_layers
        else:
            old = 2 * b * m.head_dim * -(-m.num_kv_heads // tp) * (m.num_layers - m.sliding_layers)
        assert m.kv_bytes_per_token(tp) == old
        assert m.state_bytes_per_request(tp, 3) == 0
    assert sum(k.count for k in LP.layer_plan(m)) == m.num_layers
    assert LP.mixer_params(m, 2) == m.num_layers * moe.attention_params(m, 2)


def test_qwen35_is_read_by_its_own_fields_and_matches_its_published_size():
    m = resolve_model(Q397)
    assert (m.num_layers, m.linear_layers, m.num_experts, m.experts_per_token, m.mtp_layers) == (60, 45, 512, 10, 1)
    assert {(k.mixer, k.mlp, k.count) for k in LP.layer_plan(m)} == {("full_attention", "moe", 15),
                                                                      ("linear_attention", "moe", 45)}
    c = moe.param_counts(m)
    assert abs(c["total"] / 397e9 - 1) < 0.02  # the model card: 397B in total
    c = moe.param_counts(resolve_model(Q122))
    assert abs(c["total"] / 122e9 - 1) < 0.02


def test_linear_state_is_vllms_gated_delta_net_shape_with_a_slot_per_speculative_token():
    m = resolve_model(Q397)
    conv_dim = 2 * 16 * 128 + 64 * 128  # 2 Hk dk + Hv dv
    ssm = 64 * 128 * 128 * 4  # Hv x dv x dk, float32 (mamba_ssm_dtype)
    assert m.state_bytes_per_request(1) == 45 * (conv_dim * 3 * 2 + ssm)
    assert m.state_bytes_per_request(8, 3) == 45 * 4 * (conv_dim // 8 * 6 * 2 + ssm // 8)
    assert m.kv_bytes_per_token(1) == 15 * 2 * 2 * 256 * 2  # only the full-attention layers grow
    # the state takes pages of the block pool: 3 groups of 15 gated-delta-net layers, 1 + k pages each
    plain = memory.plan(m, "h200", 16, 0.1, tp=8)
    spec = memory.plan(m, "h200", 16, 0.1, tp=8, num_spec=3)
    assert (plain.state_pages, spec.state_pages) == (3, 12) and "state_pages" in spec.to_dict()
    assert spec.block_size > plain.block_size > 16  # raised until an attention page holds a (wider) state page


@pytest.mark.parametrize("field,value,named", [
    ("layer_types", ["sliding_attention"] * 60, "layer_types"),
    ("mtp_use_dedicated_embeddings", True, "mtp_use_dedicated_embeddings"),
    ("n_shared_experts", 1, "n_shared_experts"),
])
def test_a_field_that_cannot_be_priced_is_one_line_naming_it(field, value, named):
    cfg = copy.deepcopy(load_aic_config(Q397))
    cfg["text_config"][field] = value
    with pytest.raises(ModelError, match=named) as e:
        model_from_hf_config(cfg, Q397)
    assert "\n" not in str(e.value)


def test_verify_block_moves_one_state_per_token_plus_one_on_the_measured_table():
    from vidur_specdec.costs.kernels.tables import TableKernels
    from vidur_specdec.hardware.devices import get_device

    m = resolve_model(Q397)
    k = TableKernels(get_device("h200"))
    assert "gdn_perf" in k.sources(8, [m])["linear_attention"]
    one = k.linear_attention_ms(m, 8, [1] * 32, [])
    four = k.linear_attention_ms(m, 8, [4] * 32, [])
    assert 2.0 < four / one < 2.6  # (1 + 4) / 2 on the recurrent kernel, conv update at 4x the tokens
    assert k.linear_attention_ms(m, 8, [], [2048]) > k.linear_attention_ms(m, 8, [], [512]) > 0
    # the roofline (no table) is the same order of magnitude as the measured decode
    from vidur_specdec.costs.kernels.roofline import RooflineKernels
    r = RooflineKernels(get_device("h200")).linear_attention_ms(m, 8, [1] * 32, [])
    assert 0.3 < r / one < 3


def test_qwen35_runs_by_name_with_its_mtp_module_and_holds_its_state():
    from vidur_specdec.engine.resolve import load
    from vidur_specdec.engine.simulation import simulate

    cfg = load({"model": Q122, "device": "h200", "parallel": {"tensor_parallel_size": 4},
                "workload": {"num_requests": 12, "arrival": "closed", "concurrency": 4,
                             "prompt_tokens": {"dist": "uniform", "min": 128, "max": 384},
                             "output_tokens": {"dist": "uniform", "min": 16, "max": 48}},
                "speculative": {"method": "mtp", "num_speculative_tokens": 2, "acceptance_rate": 0.8}})
    res = simulate(cfg)
    assert len(res.requests) == 12 and (res.steps["draft_ms"] > 0).any()
    # 12 full-attention layers + the MTP layer make the group size 13: 36 linear layers in 3 groups, 1 + k pages each
    assert res.summary["memory"]["state_pages"] == 3 * (1 + 2)
    assert "gdn_perf" in res.summary["kernel_sources"]["linear_attention"]


def test_llama4_scout_reads_chunked_and_global_layers_and_its_experts():
    m = resolve_model("meta-llama/Llama-4-Scout-17B-16E-Instruct")
    assert {(k.mixer, k.count) for k in LP.layer_plan(m)} == {("full_attention", 12), ("chunked_attention", 36)}
    assert (m.num_experts, m.experts_per_token, m.shared_ffn_size, m.attention_chunk_size) == (16, 1, 8192, 8192)
    c = moe.param_counts(m)
    assert abs(c["total"] / 109e9 - 1) < 0.02 and abs(c["active"] / 17e9 - 1) < 0.02  # the model card
    assert m.kv_bytes_per_token(1) == 48 * 2 * 2 * 128 * 8  # chunked KV charged as growing


def test_an_architecture_that_cannot_be_priced_is_one_line_naming_it():
    with pytest.raises(ModelError, match="NemotronHForCausalLM") as e:
        resolve_model("nvidia/Nemotron-H-56B-Base-8K")
    assert "\n" not in str(e.value)
