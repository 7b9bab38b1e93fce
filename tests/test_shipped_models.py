"""Every model config aiconfigurator-core ships runs by name or is refused in one line naming what is missing."""

import importlib.util
import json
from pathlib import Path

import pytest

from conftest import small
from vidur_specdec.architectures.errors import ModelError
from vidur_specdec.architectures.hybrid import aic_config_path, load_aic_config
from vidur_specdec.architectures.models import model_from_hf_config, resolve_model
from vidur_specdec.architectures.unmodeled import UNMODELED

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def script():
    spec = importlib.util.spec_from_file_location("shipped_models", REPO / "scripts" / "shipped_models.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def block(script):
    return script.table()


def cells(row):
    return [c.strip() for c in row.strip().strip("|").split("|")]


def test_docs_table_is_current(script, block):
    doc = (REPO / "docs" / "model.md").read_text()
    assert doc[doc.index(script.BEGIN):doc.index(script.END) + len(script.END)] == block, \
        "docs/model.md's shipped-models table is stale: python scripts/shipped_models.py --write"


def test_every_shipped_config_has_one_row_that_runs_or_names_why_not(script, block):
    names = script.names()
    folder = aic_config_path(names[0]).parent
    assert len(names) == len([p for p in folder.glob("*_config.json") if "_hf_quant_" not in p.name]) > 80
    rows = {cells(r)[0]: r for r in block.splitlines() if r.startswith("| ") and "/" in cells(r)[0]}
    assert sorted(rows) == names
    for name, r in rows.items():
        status = cells(r)[4]
        assert status.startswith(("runs", "refused: ")), r
    # the 2026 families the task names: each runs or says which feature is missing
    for name, want in (("deepseek-ai/DeepSeek-V4-Flash", "compressed sparse attention"),
                       ("deepseek-ai/DeepSeek-V4-Pro", "compressed sparse attention"),
                       ("zai-org/GLM-5.2", "IndexCache"), ("zai-org/GLM-5.3", "IndexCache"),
                       ("moonshotai/Kimi-K3", "Kimi Delta Attention"), ("MiniMaxAI/MiniMax-M3", "sparse attention"),
                       ("zai-org/GLM-5.1", "runs"), ("moonshotai/Kimi-K2.5", "runs"), ("MiniMaxAI/MiniMax-M2.7", "runs"),
                       ("Qwen/Qwen3.5-27B", "runs (with `method: mtp`)"), ("Qwen/Qwen3.5-35B-A3B", "runs"),
                       ("nvidia/DeepSeek-V3.1-NVFP4", "runs (with `method: mtp`)")):
        assert want in cells(rows[name])[4], rows[name]


def test_a_refused_architecture_is_one_line_naming_the_feature():
    for arch in UNMODELED:
        with pytest.raises(ModelError) as e:
            model_from_hf_config({"architectures": [arch], "hidden_size": 8}, "x")
        assert f"architecture {arch} is not modeled: " in str(e.value) and "\n" not in str(e.value)


def test_mtp_runs_wherever_a_checkpoint_declares_mtp_layers(script, block):
    for r in block.splitlines()[5:-1]:
        c = cells(r)
        if c[3]:  # MTP layers declared
            assert c[4].startswith("runs (with `method: mtp`)"), r


def test_qwen35_27b_with_its_explicit_head_size_runs_with_mtp():
    """hidden 5120 over 24 query heads of 256 (head_dim given): once refused as "not a multiple"."""
    from vidur_specdec import simulate
    from vidur_specdec.engine.resolve import load

    m = resolve_model("Qwen/Qwen3.5-27B")
    assert (m.hidden_size, m.num_heads, m.head_dim, m.mtp_layers, m.vidur_q_heads) == (5120, 24, 256, 1, 8)
    res = simulate(load(small(num_requests=3, qps=4.0, method="mtp", k=1, alpha=0.8, model="Qwen/Qwen3.5-27B",
                              device="h200", parallel={"tensor_parallel_size": 4})))
    assert len(res.requests) == 3 and res.summary["method"] == "mtp"
    cfg = json.loads(json.dumps(load_aic_config("Qwen/Qwen3.5-27B")))
    del cfg["text_config"]["head_dim"]
    with pytest.raises(ModelError, match="not a multiple of num_heads 24, and no head_dim is given"):
        model_from_hf_config(cfg, "x")


def test_wrapped_language_models_read_their_text_config():
    k25, k2 = resolve_model("moonshotai/Kimi-K2.5"), resolve_model("moonshotai/Kimi-K2-Instruct")
    shape = ("num_layers", "hidden_size", "num_heads", "num_experts", "experts_per_token", "expert_ffn_size",
             "kv_lora_rank", "dense_layers", "shared_ffn_size")
    assert [getattr(k25, f) for f in shape] == [getattr(k2, f) for f in shape]
    assert (k25.quantization, k2.quantization) == ("compressed-tensors", "fp8")  # int4 experts, the rest bf16
    vl, text = resolve_model("Qwen/Qwen3-VL-30B-A3B-Instruct"), resolve_model("Qwen/Qwen3-30B-A3B")
    assert [getattr(vl, f) for f in shape[:6]] == [getattr(text, f) for f in shape[:6]]


def test_glm_mlp_layer_types_must_agree_with_first_k_dense_replace():
    cfg = dict(load_aic_config("nvidia/GLM-5.1-NVFP4"))
    assert resolve_model("nvidia/GLM-5.1-NVFP4").dense_layers == 3
    cfg["mlp_layer_types"] = ["dense"] * 4 + ["sparse"] * 74
    with pytest.raises(ModelError, match="mlp_layer_types' disagrees with first_k_dense_replace"):
        model_from_hf_config(cfg, "x")
