"""Deployments: devices, Llama-3.x models and model files, tensor parallelism, memory per GPU, profiles on demand."""

import gc
import json
import shutil

import numpy as np
import pytest

from conftest import REPO, small, run_command
from vidur_specdec.costs import memory
from vidur_specdec.config import ConfigError
from vidur_specdec.engine.resolve import from_dict, load
from vidur_specdec.hardware.devices import BUILTIN
from vidur_specdec.architectures.models import KNOWN_MODELS, ModelError, resolve_model

L31_8B = "meta-llama/Llama-3.1-8B-Instruct"
L31_70B = "meta-llama/Llama-3.1-70B-Instruct"
L32_1B = "meta-llama/Llama-3.2-1B-Instruct"


def cfg_with(tmp_path, own_cache=False, **extra):
    """A small run config; with ``own_cache`` its built profiles go to a per-test cache (for tests that look
    into it), else to the session's shared cache (built profiles are keyed by their inputs, so sharing is pure)."""
    c = small(num_requests=12, **extra)
    if own_cache:
        c.setdefault("predictor", {})["cache_dir"] = str(tmp_path / "cache")
    return c


# --------------------------------------------------------------------------- models


def test_llama3_dimensions_and_tied_embeddings():
    m = KNOWN_MODELS[L31_70B]
    assert (m.num_layers, m.hidden_size, m.num_heads, m.num_kv_heads, m.ffn_size, m.vocab_size,
            m.max_model_len) == (80, 8192, 64, 8, 28672, 128256, 131072)
    assert KNOWN_MODELS["meta-llama/Llama-3.3-70B-Instruct"] == KNOWN_MODELS[L31_70B].__class__(
        **{**m.to_dict(), "name": "meta-llama/Llama-3.3-70B-Instruct"})
    one = KNOWN_MODELS["meta-llama/Llama-3.2-1B"]
    assert one.tie_word_embeddings and one.head_dim == 64
    assert KNOWN_MODELS["meta-llama/Llama-3.2-3B"].head_dim == 128
    # a tied LM head is stored once: Llama-3.2-1B is 1.24 B parameters (HF model card), not 1.50 B
    total = one.num_layers * one.params_per_layer() + one.embedding_params()
    assert 1.22e9 < total < 1.25e9
    untied = KNOWN_MODELS["meta-llama/Llama-3.1-8B"]
    assert 7.9e9 < untied.num_layers * untied.params_per_layer() + untied.embedding_params() < 8.1e9


def test_model_from_hf_config_json_and_yaml(tmp_path):
    hf = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "num_hidden_layers": 4,
          "hidden_size": 512, "num_attention_heads": 8, "num_key_value_heads": 2, "intermediate_size": 1024,
          "vocab_size": 1000, "max_position_embeddings": 2048, "tie_word_embeddings": True, "head_dim": 64}
    (tmp_path / "tiny").mkdir()
    (tmp_path / "tiny/config.json").write_text(json.dumps(hf))
    m = resolve_model(str(tmp_path / "tiny/config.json"))
    assert (m.name, m.num_layers, m.num_kv_heads, m.tie_word_embeddings, m.head_dim) == ("tiny", 4, 2, True, 64)
    (tmp_path / "m.yaml").write_text("name: mine\nnum_layers: 2\nhidden_size: 256\nnum_heads: 4\n"
                                     "num_kv_heads: 4\nffn_size: 512\nvocab_size: 100\n")
    assert resolve_model(str(tmp_path / "m.yaml")).max_model_len == 4096
    # a config file names them relative to its own folder
    (tmp_path / "run.yaml").write_text("model: tiny/config.json\nspeculative: {method: none, draft_model: m.yaml}\n")
    cfg = load(tmp_path / "run.yaml", ["workload.prompt_tokens.max=512", "workload.output_tokens.max=256"])
    assert cfg.model == str((tmp_path / "tiny/config.json").resolve())


@pytest.mark.parametrize("hf,needle", [
    ({"architectures": ["MistralForCausalLM"], "model_type": "mistral"}, "only Llama-architecture"),
    ({"architectures": ["LlamaForCausalLM"], "hidden_size": 512}, "no 'num_hidden_layers'"),
])
def test_bad_model_files_are_one_line(tmp_path, hf, needle):
    p = tmp_path / "config.json"
    p.write_text(json.dumps(hf))
    with pytest.raises(ConfigError) as e:
        from_dict({"model": str(p)})
    assert str(e.value).startswith("model: ") and needle in str(e.value) and "\n" not in str(e.value)


def test_unknown_model_lists_the_known_ones():
    with pytest.raises(ConfigError) as e:
        from_dict({"speculative": {"method": "draft_model", "draft_model": "meta-llama/Llama-4"}})
    msg = str(e.value)
    assert msg.startswith("speculative.draft_model: unknown model") and L32_1B in msg
    with pytest.raises(ModelError):
        resolve_model("nope")


# --------------------------------------------------------------------------- devices and memory


def test_device_yaml_missing_figure_names_it(tmp_path):
    p = tmp_path / "gpu.yaml"
    p.write_text("memory_bytes: 48e9\nhbm_bandwidth: 864e9\nbf16_flops: 362e12\n")
    with pytest.raises(ConfigError) as e:
        from_dict({"device": str(p)})
    assert str(e.value).startswith("device: ") and "'nvlink_bandwidth'" in str(e.value)
    with pytest.raises(ConfigError, match="^device: unknown device 'tpu'; must be one of a100, h100, h200, b200, b300, gb200, gb300, l40s, "
                       "rtx_pro_6000"):
        from_dict({"device": "tpu"})


def test_memory_per_gpu_from_the_device():
    assert not hasattr(memory, "DEVICE_MEMORY_GB")
    m7 = KNOWN_MODELS["meta-llama/Llama-2-7b-hf"]
    assert memory.plan(m7, "a100", 16, 0.1).num_blocks == 7609  # A100 stays 80 GiB
    h200 = memory.plan(KNOWN_MODELS[L31_8B], BUILTIN["h200"], 16, 0.1)
    assert h200.usable_bytes == int(143771 * 2**20 * 0.9)
    m70 = KNOWN_MODELS[L31_70B]
    tp4, tp8 = memory.plan(m70, "h100", 16, 0.1, tp=4), memory.plan(m70, "h100", 16, 0.1, tp=8)
    assert tp4.target_weight_bytes == pytest.approx(2 * 70.55e9 / 4, rel=0.01)  # 70.6 B parameters
    assert tp8.target_weight_bytes < tp4.target_weight_bytes and tp8.num_blocks > tp4.num_blocks
    # a drafter at TP1 sits whole on the first GPU; at the target's TP it is split
    d = KNOWN_MODELS[L32_1B]
    whole = memory.plan(m70, "h100", 16, 0.1, draft=d, tp=4, draft_tp=1)
    split = memory.plan(m70, "h100", 16, 0.1, draft=d, tp=4)
    assert whole.draft_weight_bytes == 4 * split.draft_weight_bytes and whole.num_blocks < split.num_blocks


def test_model_that_does_not_fit_names_the_smallest_tp(tmp_path):
    from vidur_specdec.engine.simulation import prepare

    cfg = load(cfg_with(tmp_path, own_cache=True, model="meta-llama/Llama-2-70b-hf"))
    with pytest.raises(ConfigError) as e:
        prepare(cfg)
    assert str(e.value).startswith("parallel.tensor_parallel_size: ")
    assert str(e.value).endswith("needs parallel.tensor_parallel_size >= 2")
    assert not (tmp_path / "cache").exists()  # refused before any profile was built


def test_cli_refusal_is_one_line():
    r = run_command("--config", "configs/default.yaml",
                        "--set", "model=meta-llama/Llama-2-70b-hf", "--output-dir", "/nonexistent/x", module="vidur_specdec.main")
    assert r.returncode == 2 and r.stderr.count("\n") == 1
    assert "parallel.tensor_parallel_size" in r.stderr and ">= 2" in r.stderr


# --------------------------------------------------------------------------- tensor parallel settings


@pytest.mark.parametrize("data,key,needle", [
    ({"parallel": {"tensor_parallel_size": 3}}, "parallel.tensor_parallel_size", "one of 1, 2, 4, 8"),
    ({"parallel": {"tensor_parallel_size": 8}, "speculative": {"method": "draft_model"}},
     "parallel.tensor_parallel_size", "JackFram/llama-160m's 12 query heads"),
    ({"parallel": {"tensor_parallel_size": 4},
      "speculative": {"method": "draft_model", "draft_tensor_parallel_size": 2}},
     "speculative.draft_tensor_parallel_size", "must be 1 or the target's"),
    ({"parallel": {"tensor_parallel_size": 4}, "speculative": {"draft_tensor_parallel_size": 3}},
     "speculative.draft_tensor_parallel_size", "one of 1, 2, 4, 8"),
])
def test_bad_tensor_parallel_sizes(data, key, needle):
    with pytest.raises(ConfigError) as e:
        from_dict(data)
    assert str(e.value).startswith(key + ":") and needle in str(e.value), str(e.value)


def test_tp_that_does_not_split_the_heads_lists_the_allowed_sizes(tmp_path):
    p = tmp_path / "m.yaml"
    p.write_text("name: odd\nnum_layers: 2\nhidden_size: 1280\nnum_heads: 20\nnum_kv_heads: 4\n"
                 "ffn_size: 2560\nvocab_size: 100\n")
    with pytest.raises(ConfigError) as e:
        from_dict({"model": str(p), "parallel": {"tensor_parallel_size": 8}})
    assert str(e.value).startswith("parallel.tensor_parallel_size: 8 does not split odd's 20 query heads")
    assert str(e.value).endswith("allowed: 1, 2, 4")
    # Llama-3.2-3B has 24 query heads and 8 KV heads: every size up to 8 splits it (as in vLLM)
    assert from_dict({"model": "meta-llama/Llama-3.2-3B", "parallel": {"tensor_parallel_size": 8}})


def test_measured_profile_without_rows_for_the_tp(tmp_path):
    from vidur_specdec.engine.simulation import prepare

    root = tmp_path / "measured"
    shutil.copytree(REPO / "profiles/a100/meta-llama/Llama-2-7b-hf", root / "a100/meta-llama/Llama-2-7b-hf")
    cfg = load(cfg_with(tmp_path, profiles=str(root), parallel={"tensor_parallel_size": 2}))
    with pytest.raises(ConfigError) as e:
        prepare(cfg)
    msg = str(e.value)
    assert msg.startswith("parallel.tensor_parallel_size: ") and "mlp.csv" in msg and "(it has 1)" in msg


# --------------------------------------------------------------------------- profiles on demand


def test_built_profile_is_cached_and_named(tmp_path):
    from vidur_specdec.engine.simulation import prepare, run_prepared

    c = cfg_with(tmp_path, own_cache=True, model=L31_8B, device="h200", profiles="built")
    p = prepare(load(c))
    assert p.profile_source == {"target": "built", "draft": None}
    assert p.pricer.model.name == L31_8B and p.pricer.device.name == "h200"
    assert p.pricer.tp == 1
    built = sorted((tmp_path / "cache/profiles").glob("*/*.csv"))
    assert [f.name for f in built] == ["attention.csv", "mlp.csv"]
    mtimes = [f.stat().st_mtime_ns for f in built]
    res = run_prepared(prepare(load(c)))  # warm: the same files, not rebuilt
    assert [f.stat().st_mtime_ns for f in built] == mtimes
    assert res.summary["profile_source"]["target"] == "built"
    assert res.summary["profiles"]["target_mlp"].startswith("built:h200/meta-llama/Llama-3.1-8B-Instruct/tp1/ctx4096/")
    # another TP is another profile
    prepare(load({**c, "parallel": {"tensor_parallel_size": 2}}))
    assert len(list((tmp_path / "cache/profiles").iterdir())) == 2


def test_llama3_target_with_llama3_drafter_runs(tmp_path):
    from vidur_specdec.engine.simulation import simulate

    c = cfg_with(tmp_path, model=L31_70B, device="h100", parallel={"tensor_parallel_size": 4},
                 speculative={"method": "draft_model", "draft_model": L32_1B})
    res = simulate(c)
    assert res.summary["profile_source"] == {"target": "tables", "draft": "tables"}  # H100: measured tables
    assert res.summary["kernel_sources"]["all_reduce"].startswith("measured: h100_sxm")
    assert res.summary["tensor_parallel_size"] == 4
    assert len(res.requests) == 12 and (res.steps["draft_ms"] > 0).any()
    one = simulate(c, ["speculative.draft_tensor_parallel_size=1"])
    assert one.summary["kv_blocks_target"] < res.summary["kv_blocks_target"]


def test_larger_tp_is_never_slower_per_layer():
    from vidur_specdec.costs.operator_model import OperatorTimeModel
    from vidur_specdec.costs.profiles import build_profile

    spec = KNOWN_MODELS[L31_70B].__class__(**{**KNOWN_MODELS[L31_70B].to_dict(), "max_model_len": 2048})
    models = {}
    for tp in (1, 2, 4, 8):
        mlp, att = build_profile(spec, "h100", tp, max_tokens=1024, max_chunk=512)
        models[tp] = OperatorTimeModel.fit_frames(mlp, att, tp)
    tokens = [1, 2, 7, 16, 64, 100, 512, 1024]
    for small_tp, big_tp in ((1, 2), (2, 4), (4, 8)):
        a, b = models[small_tp], models[big_tp]
        assert all(b.linear_sum_ms(n) <= a.linear_sum_ms(n) for n in tokens)
        for bs in (1, 4, 16, 64, 128):
            for kv in (64, 500, 2000):
                assert b.decode_attention_ms(bs, kv) <= a.decode_attention_ms(bs, kv) + 1e-12
        for kv in (0, 300, 1500):
            for chunk in (32, 200, 512):
                assert b.prefill_attention_ms(kv, chunk) <= a.prefill_attention_ms(kv, chunk) + 1e-12
    assert models[8].linear_sum_ms(512) < 0.5 * models[1].linear_sum_ms(512)


def test_context_cover_of_built_profiles():
    from vidur_specdec.costs.profiles.on_demand import MAX_CONTEXT, built_chunk, built_context

    m = KNOWN_MODELS[L31_8B]
    assert built_context(m, 3000) == 4096 and built_context(m, 5000) == 8192
    assert built_context(m, 120_000) == MAX_CONTEXT
    assert built_context(KNOWN_MODELS["JackFram/llama-160m"], 3000) == 2048
    assert built_chunk(512, 4096) == 512 and built_chunk(600, 4096) == 1024 and built_chunk(64, 4096) == 512


# --------------------------------------------------------------------------- Vidur registration


def test_vidur_model_registration_survives_gc(tmp_path):
    from vidur.config.model_config import BaseModelConfig

    from vidur_specdec.engine.reference.run import scheduler_config, vidur_config, vidur_model_name
    from vidur_specdec.engine.simulation import prepare

    spec = KNOWN_MODELS["meta-llama/Llama-2-13b-hf"]
    name = vidur_model_name(spec)
    gc.collect()
    assert BaseModelConfig.create_from_name(name).num_layers == 40
    l3 = KNOWN_MODELS[L31_70B]
    name = vidur_model_name(l3)
    gc.collect()
    assert BaseModelConfig.create_from_name(name).num_layers == 80
    # a file reusing a known name with other dimensions gets its own Vidur model
    other = l3.__class__(**{**l3.to_dict(), "num_layers": 2})
    other_name = vidur_model_name(other)
    gc.collect()
    assert other_name != name and BaseModelConfig.create_from_name(other_name).num_layers == 2
    p = prepare(load(cfg_with(tmp_path, model=L31_70B, device="h200", parallel={"tensor_parallel_size": 2})))
    gc.collect()
    rc = vidur_config(p, scheduler_config(p), object).cluster_config.replica_config
    assert (rc.tensor_parallel_size, rc.device, rc.model_config.num_layers) == (2, "h100", 80)


def test_bigger_tp_on_the_same_device_is_never_slower_end_to_end(tmp_path):
    from vidur_specdec.engine.simulation import simulate

    c = cfg_with(tmp_path, model=L31_8B, device="h100", speculative={"method": "none"})
    steps = {tp: simulate(c, [f"parallel.tensor_parallel_size={tp}"]).steps for tp in (1, 4)}
    # same workload, same steps before any timing feedback: the first step is a prefill of request 0
    assert steps[4]["duration_ms"].iloc[0] < steps[1]["duration_ms"].iloc[0]
    assert np.isfinite(steps[4]["duration_ms"]).all()


@pytest.mark.parametrize("key, text, lines", [
    ("device", "memory_bytes: 8.0e10\nmemory_bytes: 9.0e10\nhbm_bandwidth: 2.0e12\nbf16_flops: 3.0e14\n"
               "nvlink_bandwidth: 6.0e11\n", "line 2; first at line 1"),
    ("model", "name: m\nnum_layers: 2\nnum_layers: 4\nhidden_size: 512\nnum_heads: 8\nnum_kv_heads: 8\n"
              "ffn_size: 1024\nvocab_size: 1000\n", "line 3; first at line 2"),
])
def test_device_and_model_files_refuse_duplicate_keys_like_a_config(tmp_path, key, text, lines):
    f = tmp_path / "f.yaml"
    f.write_text(text)
    with pytest.raises(ConfigError, match=rf"duplicate key in .*f\.yaml \({lines}\)"):
        load({key: str(f)})
