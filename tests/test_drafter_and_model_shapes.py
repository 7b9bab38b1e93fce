"""Drafter and model shapes checked as vLLM 0.33 builds them: a head with no layer, heads that do not group or
divide the width, a block drafter reading more target layers than the target has, sliding or chunked layers
without their window, MLA with a zero head part, Llama 4 with no MoE layer. Each is one line naming the field."""

import copy

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import REPO
from vidur_specdec.architectures.errors import ModelError
from vidur_specdec.architectures.models import model_from_dict, model_from_hf_config
from vidur_specdec.config import ConfigError
from vidur_specdec.engine.resolve import load
from vidur_specdec.speculation.proposers import heads

CONFIG = str(REPO / "configs/llama3.1-8b-h100.yaml")  # Llama-3.1-8B-Instruct (32 layers) on one H100


def _cfg(method, path, tp=1):
    return load(CONFIG, [f"speculative.method={method}", f"speculative.model={path}",
                         f"parallel.tensor_parallel_size={tp}", "speculative.num_speculative_tokens=3"])


def _target():
    from vidur_specdec.architectures.models import resolve_model

    return resolve_model("meta-llama/Llama-3.1-8B-Instruct")


HEAD = {"method": "dflash", "hidden_size": 4096, "num_heads": 32, "num_kv_heads": 8, "ffn_size": 14336,
        "num_layers": 5, "vocab_size": 128256, "aux_layers": 5, "block_size": 10}


@settings(max_examples=60)
@given(method=st.sampled_from(["dflash", "dspark", "eagle", "eagle3"]),
       num_layers=st.integers(0, 6), num_heads=st.sampled_from([0, 1, 3, 8, 24, 32, 33]),
       num_kv_heads=st.sampled_from([0, 1, 3, 4, 8, 16]), aux=st.sampled_from([1, 5, 32, 33, 500]),
       block=st.integers(0, 12), head_dim=st.sampled_from([0, 64, 128]), tp=st.sampled_from([1, 2, 4, 8]),
       draft_vocab=st.sampled_from([None, 1, 32000, 128256, 200000]))
def test_a_head_is_accepted_only_with_a_shape_vllm_builds(tmp_path_factory, method, num_layers, num_heads,
                                                          num_kv_heads, aux, block, head_dim, tp, draft_vocab):
    d = dict(HEAD, method=method, num_layers=num_layers, num_heads=num_heads, num_kv_heads=num_kv_heads,
             aux_layers=aux, block_size=block, head_dim_override=head_dim, draft_vocab_size=draft_vocab)
    if method == "dspark":
        d["markov_rank"] = 256
    if method not in ("dflash", "dspark"):
        for k in ("aux_layers", "block_size"):
            d.pop(k)
    path = tmp_path_factory.mktemp("h") / "head.yaml"
    path.write_text(yaml.safe_dump(d))
    try:
        cfg = _cfg(method, str(path), tp)
        head = heads.resolve(cfg, method, _target())
    except ConfigError as e:
        assert "\n" not in str(e) and str(e).split(":")[0] in ("speculative.model", "parallel.tensor_parallel_size")
        return
    assert head.num_layers >= 1 and head.num_heads >= 1 and head.num_heads % head.num_kv_heads == 0
    assert head.head_dim_override or head.hidden_size % head.num_heads == 0
    if head.is_block:
        assert head.aux_layers <= 32 and head.block_size >= 2 and head.num_heads % tp == 0
        assert (head.num_kv_heads % tp == 0) if head.num_kv_heads >= tp else (tp % head.num_kv_heads == 0)
    if head.draft_vocab_size is not None:
        assert head.draft_vocab_size <= head.vocab_size


@pytest.mark.parametrize("method,fields,named", [
    ("dflash", {"aux_layers": 500}, "aux_layers"),
    ("dflash", {"num_layers": 0}, "num_layers"),
    ("dflash", {"num_heads": 24, "num_kv_heads": 8}, "num_heads 24"),
    ("dflash", {"num_heads": 30, "num_kv_heads": 6}, "hidden_size 4096"),
    ("eagle", {"num_layers": 0}, "num_layers"),
])
def test_the_listed_head_shapes_are_refused_before_a_run(tmp_path, method, fields, named):
    from vidur_specdec.engine.simulation import prepare

    d = dict(HEAD, method=method, **fields)
    if method == "eagle":
        for k in ("aux_layers", "block_size"):
            d.pop(k)
    path = tmp_path / "h.yaml"
    path.write_text(yaml.safe_dump(d))
    with pytest.raises(ConfigError, match=named) as e:
        prepare(_cfg(method, str(path)))
    assert "\n" not in str(e.value)


SPEC = {"name": "m", "num_layers": 8, "hidden_size": 1024, "num_heads": 16, "num_kv_heads": 4, "ffn_size": 4096,
        "vocab_size": 32000}


@settings(max_examples=80)
@given(num_heads=st.sampled_from([1, 3, 16, 24]), num_kv_heads=st.sampled_from([1, 2, 4, 5]),
       head_dim=st.sampled_from([0, 64, 256]), sliding=st.integers(0, 8), window=st.sampled_from([0, 128]),
       chunked=st.integers(0, 8), chunk=st.sampled_from([0, 8192]), mla=st.booleans(),
       rope=st.sampled_from([0, 64]), v=st.sampled_from([0, 128]), mla_head=st.sampled_from([0, 64, 192]))
def test_a_model_is_accepted_only_with_a_shape_vllm_builds(num_heads, num_kv_heads, head_dim, sliding, window,
                                                           chunked, chunk, mla, rope, v, mla_head):
    d = dict(SPEC, num_heads=num_heads, num_kv_heads=num_kv_heads, head_dim=head_dim, sliding_layers=sliding,
             sliding_window=window, chunked_layers=chunked, attention_chunk_size=chunk)
    if mla:
        d.update(kv_lora_rank=512, qk_rope_head_dim=rope, v_head_dim=v, head_dim=mla_head, num_kv_heads=1)
    try:
        m = model_from_dict(d)
    except ModelError as e:
        assert "\n" not in str(e) and str(e).startswith("model: ")
        return
    assert m.num_heads % m.num_kv_heads == 0 and (head_dim or m.hidden_size % m.num_heads == 0)
    assert not m.sliding_layers or m.sliding_window
    assert not m.chunked_layers or m.attention_chunk_size
    if m.kv_lora_rank:
        assert m.qk_rope_head_dim > 0 and m.v_head_dim > 0 and m.head_dim > m.qk_rope_head_dim


def test_llama4_without_moe_layers_and_qwen35_27b_by_name():
    from vidur_specdec.architectures.hybrid import load_aic_config
    from vidur_specdec.architectures.models import resolve_model
    from vidur_specdec.costs import memory

    cfg = copy.deepcopy(load_aic_config("meta-llama/Llama-4-Scout-17B-16E-Instruct"))
    cfg["text_config"]["interleave_moe_layer_step"] = 0
    with pytest.raises(ModelError, match="interleave_moe_layer_step"):
        model_from_hf_config(cfg, "scout")
    m = resolve_model("Qwen/Qwen3.5-27B")  # head_dim 256 given: 24 heads need not divide the 5120 width
    assert (m.hidden_size, m.num_heads, m.head_dim, m.linear_layers) == (5120, 24, 256, 48)
    assert abs(memory.weight_bytes(m) / 2 / 26.9e9 - 1) < 0.01


def test_qwen35_27b_runs_by_name_with_its_mtp():
    from vidur_specdec import simulate

    r = simulate({"model": "Qwen/Qwen3.5-27B", "device": "h200", "workload": {"num_requests": 6},
                  "scheduler": {"max_num_seqs": 64},
                  "speculative": {"method": "mtp", "num_speculative_tokens": 2, "acceptance_rate": 0.6}})
    assert len(r.requests) == 6 and (r.requests["ttft_ms"] > 0).all()
