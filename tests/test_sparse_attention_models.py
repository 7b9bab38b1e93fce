"""Sparse-attention and MLA models (DeepSeek-V3.2, GLM-5, Kimi-K2, MiniMax-M2.5): their config.json files,
memory, the DeepSeek sparse attention cost and the docs table."""

import importlib.util
import json
from dataclasses import replace
from importlib import resources

import numpy as np
import pytest

from conftest import REPO
from vidur_specdec.architectures import moe
from vidur_specdec.architectures.models import KNOWN_MODELS, ModelError, model_from_dict, model_from_hf_config
from vidur_specdec.costs import sparse_attention as SA
from vidur_specdec.costs.kernels.roofline import RooflineKernels
from vidur_specdec.costs.kernels.tables import TableKernels
from vidur_specdec.hardware.devices import get_device

# known name -> the config.json aiconfigurator-core 0.12.0 ships for it
FILES = {"deepseek-ai/DeepSeek-V3.2": "deepseek-ai--DeepSeek-V3.2", "zai-org/GLM-5": "zai-org--GLM-5",
         "zai-org/GLM-5-FP8": "zai-org--GLM-5-FP8", "moonshotai/Kimi-K2-Instruct": "moonshotai--Kimi-K2-Instruct",
         "MiniMaxAI/MiniMax-M2.5": "MiniMaxAI--MiniMax-M2.5"}
V32 = KNOWN_MODELS["deepseek-ai/DeepSeek-V3.2"]


def _cfg(name):
    path = resources.files("aiconfigurator_core") / "model_configs" / f"{FILES[name]}_config.json"
    return json.loads(path.read_text())


@pytest.mark.parametrize("name", sorted(FILES))
def test_known_model_matches_its_config_json(name):
    assert model_from_hf_config(_cfg(name), name) == KNOWN_MODELS[name]


@pytest.mark.parametrize("name,billions", [("zai-org/GLM-5", 744.0), ("MiniMaxAI/MiniMax-M2.5", 229.0)])
def test_total_parameters_match_the_model_cards(name, billions):
    assert moe.param_counts(KNOWN_MODELS[name])["total"] / 1e9 == pytest.approx(billions, rel=0.005)


def test_indexer_weights_and_keys():
    v3 = KNOWN_MODELS["deepseek-ai/DeepSeek-V3"]
    # DeepSeek-V3.2 is DeepSeek-V3 plus 61 indexers: wq_b 1536 x 64*128, wk + weights_proj 7168 x (128 + 64)
    extra = moe.param_counts(V32)["total"] - moe.param_counts(v3)["total"]
    assert extra == 61 * (1536 * 64 * 128 + 7168 * (128 + 64))
    assert V32.index_key_bytes == 132 and v3.index_key_bytes == 0  # vLLM: 128 fp8 bytes + one fp32 scale
    assert V32.kv_bytes_per_token(8) == 61 * (576 * 2 + 132)
    assert KNOWN_MODELS["zai-org/GLM-5"].kv_bytes_per_token(8) == 78 * (576 * 2 + 132)
    assert replace(V32, kv_cache_dtype="fp8").kv_bytes_per_token(8) == 61 * (656 + 132)  # vLLM's fp8_ds_mla
    assert KNOWN_MODELS["MiniMaxAI/MiniMax-M2.5"].kv_bytes_per_token(4) == 62 * 2 * 2 * 128 * 2


@pytest.mark.parametrize("name,key,value,field", [
    ("zai-org/GLM-5", "qk_head_dim", 192, "'qk_head_dim'"),
    ("zai-org/GLM-5", "index_head_dim", 96, "'index_head_dim'"),
    ("MiniMaxAI/MiniMax-M2.5", "shared_intermediate_size", 1536, "'shared_intermediate_size'"),
    ("MiniMaxAI/MiniMax-M2.5", "attn_type_list", [0, 1], "'attn_type_list'"),
])
def test_a_field_that_cannot_be_priced_is_refused_in_one_line(name, key, value, field):
    with pytest.raises(ModelError, match=field) as e:
        model_from_hf_config({**_cfg(name), key: value}, name)
    assert "\n" not in str(e.value)


def test_sparse_fields_need_mla():
    d = {**KNOWN_MODELS["MiniMaxAI/MiniMax-M2.5"].to_dict(), "index_topk": 2048}
    with pytest.raises(ModelError, match="sparse attention needs"):
        model_from_dict(d)


def test_glm5_in_bf16_on_eight_h200_names_the_smallest_fit():
    from vidur_specdec.config import ConfigError
    from vidur_specdec.engine import deployment, memory_fit
    from vidur_specdec.engine.resolve import load

    def plan(model):
        cfg = load({"model": model, "device": "h200", "parallel": {"tensor_parallel_size": 8}})
        return memory_fit.plan_memory(cfg, deployment.resolve(cfg), 8192, 0)

    with pytest.raises(ConfigError, match="does not fit on h200 .* fits with device=b300") as e:
        plan("zai-org/GLM-5")
    assert "\n" not in str(e.value)
    from vidur_specdec.costs import memory

    # the fp8 checkpoint's eighth (93 GB) leaves room on a 141 GB H200
    assert memory.weight_bytes(KNOWN_MODELS["zai-org/GLM-5-FP8"], 8) < 0.75 * get_device("h200").memory_bytes


def _decode(kernels, spec, tp, bs, kv):
    return float(kernels.attention_op_times(spec, tp, [bs], [kv], [0])["attn_decode"][0])


def test_sparse_attention_attends_top_k_tokens_only():
    roof = RooflineKernels(get_device("h200"))
    dense = replace(V32, index_n_heads=0, index_head_dim=0, index_topk=0)
    # beyond index_topk the MLA read stops growing: only the indexer's 132-byte keys grow with the context
    long, longer = _decode(roof, V32, 8, 64, 32768), _decode(roof, V32, 8, 64, 65536)
    assert longer > long
    assert longer - long < _decode(roof, dense, 8, 64, 65536) - _decode(roof, dense, 8, 64, 32768)
    assert _decode(roof, V32, 8, 64, 65536) < _decode(roof, dense, 8, 64, 65536)
    # below index_topk it pays the dense MLA plus the indexer
    assert _decode(roof, V32, 8, 16, 1024) > _decode(roof, dense, 8, 16, 1024)
    # prefill: never cheaper with a longer chunk or more cached tokens
    pf = lambda kv, c: float(roof.attention_op_times(V32, 8, [1], [kv], [c])["attn_prefill"][0])  # noqa: E731
    assert pf(0, 512) < pf(0, 4096) < pf(8192, 4096) < pf(32768, 4096)


def test_decode_attention_is_the_measured_module_less_what_the_run_charges():
    tables = TableKernels(get_device("h200"))
    assert "dsa_generation_module_perf" in tables.sources(8, [V32])["attention_decode"]
    assert "dsa_generation_module_perf" not in tables.sources(8, [KNOWN_MODELS["deepseek-ai/DeepSeek-V3"]])[
        "attention_decode"]
    label, (xs, ys, z) = SA._table(tables, V32, 8)
    ops = tables.attention_op_times(V32, 8, [16], [8192], [0])
    linear = tables.mlp_op_times(V32, 8, np.array([16.0]))
    charged = sum(float(linear[op][0]) for op in ("attn_pre_proj", "attn_post_proj", "attn_rope"))
    charged += float(ops["attn_input_reshape"][0] + ops["attn_output_reshape"][0])
    # the layer's attention (what the run charges + attn_decode) is the measured module at (16, 8192)
    assert charged + ops["attn_decode"][0] == pytest.approx(z[list(xs).index(16), list(ys).index(8192)])
    # a model no table lists by name reads the rows of the known model of its attention shape (an NVFP4 or
    # renamed DeepSeek-V3.2), saying so; another shape is priced on the roofline
    assert SA.source(tables, replace(V32, name="my/dsa-model"), 8).endswith(
        "rows of deepseek-ai/DeepSeek-V3.2, the same attention shape)")
    assert SA.source(tables, replace(V32, name="my/dsa-model", index_topk=1024), 8) == "built"


@pytest.fixture(scope="module")
def script():
    spec = importlib.util.spec_from_file_location("sparse_models_table", REPO / "scripts" / "sparse_models_table.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_per_token_verify_prices_k_plus_one_top_k_reads(script):
    per_token, shared = (script.predictor(*script.PAIR, v) for v in ("per_token", "shared_kv"))
    extra = lambda pred: script.step_ms(pred, 16, 5) - script.step_ms(pred, 16, 0)  # noqa: E731
    # six rows of indexer top-k and sparse-MLA gathers per request against one: per_token costs more
    assert extra(per_token) > extra(shared) > 0


def test_docs_table_is_current(script):
    doc = (REPO / "docs" / "model.md").read_text()
    block = doc[doc.index(script.BEGIN):doc.index(script.END) + len(script.END)]
    assert block == script.table(), "docs/model.md's sparse-attention table is stale: python scripts/sparse_models_table.py --write"
