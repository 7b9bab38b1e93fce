"""Gemma 4: sliding-window and global layers of their own head shape, a dense MLP beside the experts; the
hybrid-models table in docs/model.md is what its script gives now."""

import copy
import importlib.util

import pytest
from conftest import REPO

from vidur_specdec.architectures import layer_plan as LP
from vidur_specdec.architectures import moe
from vidur_specdec.architectures.errors import ModelError
from vidur_specdec.architectures.hybrid import load_aic_config
from vidur_specdec.architectures.models import model_from_hf_config, resolve_model
from vidur_specdec.pricing.global_layers import GlobalLayerMix

G26 = "google/gemma-4-26B-A4B"
MiB = 2**20


def _script():
    spec = importlib.util.spec_from_file_location("hybrid_models", REPO / "scripts" / "hybrid_models.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_gemma4_26b_is_read_by_its_own_fields_and_matches_its_model_card():
    m = resolve_model(G26)
    assert {(k.mixer, k.mlp, k.count) for k in LP.layer_plan(m)} == {("sliding_attention", "moe", 25),
                                                                      ("global_attention", "moe", 5)}
    assert (m.head_dim, m.num_kv_heads, m.global_head_dim, m.global_kv_heads, m.sliding_window) == (256, 8, 512, 2, 1024)
    assert (m.num_experts, m.experts_per_token, m.expert_ffn_size, m.shared_ffn_size) == (128, 8, 704, 2112)
    assert m.tie_word_embeddings and m.dense_layers == 0
    c = moe.param_counts(m)
    # the model card: "25.2B total parameters", "3.8B active"
    assert abs(c["total"] / 25.2e9 - 1) < 0.02 and abs(c["active"] / 3.8e9 - 1) < 0.02
    # per request at 8k: global layers' K and V at their own shape; sliding layers hold the window only
    assert m.kv_bytes_per_token(1) * 8192 == 5 * 8192 * 2 * 2 * 512 * 2 == 160 * MiB
    assert LP.window_bytes_per_request(m, 1, 2) == 25 * 1024 * 2 * 8 * 256 * 2 == 200 * MiB
    assert m.kv_bytes_per_token(2) == m.kv_bytes_per_token(1) // 2  # the two global KV heads split over TP 2


def test_gemma4_31b_dense_shape_matches_its_model_card():
    cfg = copy.deepcopy(load_aic_config("nvidia/Gemma-4-31B-IT-NVFP4"))  # google/gemma-4-31B-it's text shape
    cfg.pop("quantization_config")
    m = model_from_hf_config(cfg, "google/gemma-4-31B-it")
    assert not m.is_moe and LP.mixer_counts(m) == {"sliding_attention": 50, "global_attention": 10}
    assert abs(moe.param_counts(m)["total"] / 30.7e9 - 1) < 0.02  # the model card: 30.7B
    nv = resolve_model("nvidia/Gemma-4-31B-IT-NVFP4")  # its checkpoint keeps self_attn* bf16, the MLP NVFP4
    assert (nv.quantization, nv.bf16_parts, nv.kv_cache_dtype) == ("modelopt_fp4", "attention,o_proj", "fp8")


@pytest.mark.parametrize("field,value", [
    ("hidden_size_per_layer_input", 256), ("num_kv_shared_layers", 10), ("use_double_wide_mlp", True),
    ("attn_logit_softcapping", 50.0), ("layer_types", ["chunked_attention"] * 30), ("enable_moe_block", False),
])
def test_a_gemma4_field_that_cannot_be_priced_is_one_line_naming_it(field, value):
    cfg = copy.deepcopy(load_aic_config(G26))
    cfg["text_config"][field] = value
    with pytest.raises(ModelError, match=field) as e:
        model_from_hf_config(cfg, G26)
    assert "\n" not in str(e.value)


def test_sliding_layers_attend_the_window_and_global_layers_their_own_shape():
    class Gemm:  # time = output columns x tokens: the projections' mean is the layer kinds' mean width
        @staticmethod
        def gemm_ms(t, k, n, dt):
            return t * k * n

    m = resolve_model(G26)
    mix = GlobalLayerMix(m, 1, Gemm)
    attn = lambda q, ctx: float(sum(ctx))  # noqa: E731 (a memory-bound kernel: time grows with the context read)
    # 25 of 30 layers read at most 1024 tokens; 5 read all 8192 at half the KV bytes per token (2x512 vs 8x256)
    assert mix.decode_ms(attn, [1], [8192]) == pytest.approx(25 / 30 * 1024 + 5 / 30 * 0.5 * 8192)
    assert mix.prefill_ms(lambda kv, c: float(kv + c), [(4096, 512)]) == pytest.approx(
        25 / 30 * (1024 + 512) + 5 / 30 * 2 * (4096 + 512))
    qkv, o = mix.proj_ms(1)
    assert qkv == pytest.approx(2816 * (25 / 30 * 256 * 32 + 5 / 30 * 512 * 20))
    assert o == pytest.approx(25 / 30 * 4096 * 2816 + 5 / 30 * 8192 * 2816)


def test_hybrid_models_table_weights_rows_and_gemma4_steps_are_current():
    mod = _script()
    doc = (REPO / "docs" / "model.md").read_text()
    block = doc[doc.index(mod.BEGIN):doc.index(mod.END) + len(mod.END)]
    stale = "docs/model.md's hybrid-models table is stale: run python scripts/hybrid_models.py --write"
    for row in mod.MODELS:  # every model's weights and memory row (no predictor: cheap)
        assert mod.weights_row(*row) + "\n" in block, stale
    name, tp, _, _ = next(r for r in mod.MODELS if r[0] == G26)  # one model's step rows (TP 1, the cheapest)
    for line in mod.step_rows(name, tp):
        assert line + "\n" in block, stale



def test_gemma4_mtp_is_refused_naming_its_assistant_checkpoint():
    from vidur_specdec.config import ConfigError
    from vidur_specdec.engine.resolve import load
    from vidur_specdec.speculation.proposers import heads

    run = load({"model": G26, "device": "h200", "speculative": {"method": "ngram"}})
    cfg = copy.deepcopy(load_aic_config("nvidia/Gemma-4-31B-IT-NVFP4"))
    cfg.pop("quantization_config")
    for target in (resolve_model(G26), model_from_hf_config(cfg, "google/gemma-4-31B-it")):  # MoE and dense
        with pytest.raises(ConfigError, match="assistant checkpoint") as e:
            heads.resolve(run, "mtp", target)
        assert "\n" not in str(e.value)
