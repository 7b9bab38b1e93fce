"""Mixture-of-experts targets: known by name with their config.json dimensions, never read as dense."""

import json
from pathlib import Path

import pytest

from vidur_specdec.architectures import moe
from vidur_specdec.architectures.models import KNOWN_MODELS, ModelError, model_from_hf_config, resolve_model
from vidur_specdec.costs import memory

DATA = Path(__file__).parent / "data" / "moe"
# known name -> (config.json in tests/data/moe, published total parameters in billions)
MODELS = {
    "Qwen/Qwen3-30B-A3B": ("Qwen__Qwen3-30B-A3B.json", 30.5),
    "Qwen/Qwen3-235B-A22B": ("Qwen__Qwen3-235B-A22B-Instruct-2507.json", 235.0),
    "mistralai/Mixtral-8x7B-Instruct-v0.1": ("mistralai__Mixtral-8x7B-v0.1.json", 46.7),
    "deepseek-ai/DeepSeek-V3": ("deepseek-ai__DeepSeek-V3.json", 671.0),
    "deepseek-ai/DeepSeek-R1": ("deepseek-ai__DeepSeek-R1.json", 671.0),
    "openai/gpt-oss-20b": ("openai__gpt-oss-20b.json", 20.9),
    "openai/gpt-oss-120b": ("openai__gpt-oss-120b.json", 116.8),
}


def _cfg(name):
    return json.loads((DATA / MODELS[name][0]).read_text())


@pytest.mark.parametrize("name", sorted(MODELS))
def test_known_model_matches_its_config_json(name):
    read = model_from_hf_config(_cfg(name), name)
    known = KNOWN_MODELS[name]
    assert known.is_moe and read.is_moe
    # the 235B file is the -Instruct-2507 release (longer context); dimensions are the same
    diff = {k for k, v in read.to_dict().items() if known.to_dict().get(k) != v} - {"name", "max_model_len"}
    assert not diff


@pytest.mark.parametrize("name", sorted(MODELS))
def test_total_parameters_match_the_published_figure(name):
    total = moe.param_counts(KNOWN_MODELS[name])["total"] / 1e9
    assert total == pytest.approx(MODELS[name][1], rel=0.005)


def test_weights_count_every_expert_at_the_checkpoint_format():
    assert memory.weight_bytes(KNOWN_MODELS["mistralai/Mixtral-8x7B-Instruct-v0.1"]) / 1e9 == pytest.approx(93.4, abs=0.3)
    # DeepSeek-V3's checkpoint is fp8: ~1 byte a weight; gpt-oss experts mxfp4: ~61 GiB for 117 B weights
    assert memory.weight_bytes(KNOWN_MODELS["deepseek-ai/DeepSeek-V3"]) / 1e9 == pytest.approx(673, rel=0.01)
    assert memory.weight_bytes(KNOWN_MODELS["openai/gpt-oss-120b"]) / 2**30 == pytest.approx(60.7, rel=0.01)
    # tensor parallel splits experts: an eighth each, plus replicated routers and latent KV projection
    ds = KNOWN_MODELS["deepseek-ai/DeepSeek-V3"]
    assert memory.weight_bytes(ds, 8) < memory.weight_bytes(ds) / 7


def test_mla_and_sliding_window_kv_bytes():
    ds = KNOWN_MODELS["deepseek-ai/DeepSeek-V3"]
    assert ds.kv_bytes_per_token(8) == 61 * 576 * 2  # one 512 + 64 latent per layer, replicated
    oss = KNOWN_MODELS["openai/gpt-oss-120b"]
    assert oss.kv_bytes_per_token() == 18 * 2 * 8 * 64 * 2  # only the 18 full-attention layers grow


def test_expert_config_relabelled_as_llama_is_refused_naming_the_field():
    cfg = _cfg("mistralai/Mixtral-8x7B-Instruct-v0.1")
    cfg["architectures"] = ["LlamaForCausalLM"]
    cfg["model_type"] = "llama"
    with pytest.raises(ModelError, match="'num_experts_per_tok'|'num_local_experts'") as e:
        model_from_hf_config(cfg, "relabelled")
    assert "\n" not in str(e.value)


def test_expert_field_foreign_to_the_architecture_is_refused():
    cfg = _cfg("Qwen/Qwen3-30B-A3B")
    cfg["n_shared_experts"] = 1
    with pytest.raises(ModelError, match="'n_shared_experts' is not a Qwen3MoeForCausalLM field"):
        model_from_hf_config(cfg, "q")
    cfg = _cfg("openai/gpt-oss-20b")
    cfg["quantization_config"] = {"quant_method": "gptq"}
    with pytest.raises(ModelError, match="quantization_config"):
        model_from_hf_config(cfg, "g")


def test_dense_models_keep_their_dict_and_weights():
    llama = KNOWN_MODELS["meta-llama/Llama-3.1-8B"]
    assert not llama.is_moe and "num_experts" not in llama.to_dict()
    assert memory.weight_bytes(llama) == 2 * (32 * llama.params_per_layer() + llama.embedding_params())


def test_config_json_path_resolves_to_moe(tmp_path):
    p = tmp_path / "config.json"
    p.write_text((DATA / MODELS["openai/gpt-oss-20b"][0]).read_text())
    spec = resolve_model(str(p))
    assert spec.num_experts == 32 and spec.experts_per_token == 4 and spec.quantization == "mxfp4"


def test_fp8_checkpoint_on_a100_is_refused_in_one_line():
    from vidur_specdec.config import ConfigError
    from vidur_specdec.engine import deployment
    from vidur_specdec.engine.resolve import load

    with pytest.raises(ConfigError, match="fp8") as e:
        deployment.check(load({"model": "deepseek-ai/DeepSeek-V3", "device": "a100",
                               "parallel": {"tensor_parallel_size": 8}}))
    assert "\n" not in str(e.value)


def test_each_named_model_runs_cold_from_the_command_line(tmp_path):
    import subprocess
    import sys

    # how long a cold run takes is measured by benchmarks/bench_deploy.py, not here
    out = subprocess.run([sys.executable, "-m", "vidur_specdec", "run", "--config",
                          str(Path(__file__).parents[1] / "configs" / "default.yaml"),
                          "--set", "model=openai/gpt-oss-120b", "--set", "device=h100",
                          "--set", "workload.num_requests=4", "--output-dir", str(tmp_path / "o")],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    head = (tmp_path / "o" / "steps.csv").read_text().splitlines()[0]
    assert head.endswith("moe_ms,experts_touched")
