"""Models that hold no KV growing with the context: every layer linear attention, or every layer a sliding
window. They run, with the state and window memory they hold, and never divide by their zero growing KV."""

import copy

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vidur_specdec.architectures import layer_plan as LP
from vidur_specdec.architectures.hybrid import load_aic_config
from vidur_specdec.architectures.models import model_from_dict, model_from_hf_config
from vidur_specdec.config import ConfigError
from vidur_specdec.costs import memory

Q397 = "Qwen/Qwen3.5-397B-A17B"


def all_linear(layers: int, key_heads: int = 16, value_heads: int = 64) -> dict:
    cfg = copy.deepcopy(load_aic_config(Q397))
    t = cfg["text_config"]
    t.update(num_hidden_layers=layers, layer_types=["linear_attention"] * layers, linear_num_key_heads=key_heads,
             linear_num_value_heads=value_heads)
    return cfg


def all_sliding(layers=12, hidden=1024, heads=16, kv_heads=4, window=256) -> dict:
    return {"name": "all-sliding", "num_layers": layers, "hidden_size": hidden, "num_heads": heads,
            "num_kv_heads": kv_heads, "ffn_size": 4 * hidden, "vocab_size": 32000, "sliding_window": window,
            "sliding_layers": layers}


@settings(max_examples=25)
@given(layers=st.integers(1, 80), kv=st.sampled_from([1, 2, 4, 8]), tp=st.sampled_from([1, 2, 4, 8]),
       window=st.integers(1, 8192), k=st.integers(0, 8), running=st.integers(1, 512),
       device=st.sampled_from(["a100", "h100", "h200", "l40s"]), margin=st.floats(0.0, 0.9))
def test_the_memory_plan_of_a_model_without_growing_kv_never_divides_by_zero(layers, kv, tp, window, k, running,
                                                                               device, margin):
    sliding = model_from_dict(all_sliding(layers, 1024, 16, kv, window))
    linear = model_from_hf_config(all_linear(layers), "all-linear")
    for m in (sliding, linear):
        try:
            plan = memory.plan(m, device, 16, margin, tp=tp, num_spec=k)
        except memory.NoRoomError as e:
            assert "\n" not in str(e) and "leave no room" in str(e)
            continue
        assert plan.num_blocks >= 1
        if m is sliding:  # the window-bounded KV prices the blocks
            assert plan.target_kv_bytes_per_token == LP.window_kv_bytes_per_token(m, tp, 2) > 0
        else:  # nothing per token: each running request's state takes a block of max_model_len tokens (vLLM's
            # hybrid allocator with no attention group), plus its speculative slots' pages
            assert plan.target_kv_bytes_per_token == 0 and plan.block_bytes > 0
            assert plan.block_size == plan.max_model_len and plan.state_pages == k


def test_sliding_blocks_are_the_window_layers_kv_and_a_mixed_model_keeps_its_growing_kv():
    m = model_from_dict(all_sliding(layers=12, hidden=1024, heads=16, kv_heads=4, window=256))
    assert m.kv_bytes_per_token(1) == 0
    assert memory.growing_kv(m, 1) == 12 * 2 * 2 * 64 * 4
    half = model_from_dict({**all_sliding(), "sliding_layers": 6})
    assert memory.growing_kv(half, 1) == half.kv_bytes_per_token(1) == 6 * 2 * 2 * 64 * 4


def _run(tmp_path, model, longest=600, **extra):
    from vidur_specdec import simulate

    cfg = {"model": str(model), "device": "h200", "seed": 3,
           "workload": {"num_requests": 12, "qps": 8.0,
                        "prompt_tokens": {"dist": "uniform", "min": 16, "max": longest},
                        "output_tokens": {"dist": "uniform", "min": 4, "max": 40}}, **extra}
    return simulate(cfg)


@settings(max_examples=4)
@given(window=st.sampled_from([64, 512]), k=st.integers(0, 3), longest=st.integers(20, 2000))
def test_an_all_sliding_model_runs_with_its_window_memory(tmp_path_factory, window, k, longest):
    import yaml

    d = tmp_path_factory.mktemp("m")
    path = d / "model.yaml"
    path.write_text(yaml.safe_dump(all_sliding(layers=4, window=window)))
    res = _run(d, path, longest, speculative={"method": "ngram", "num_speculative_tokens": k,
                                              "acceptance_rate": 0.6}, scheduler={"max_num_seqs": 64})
    r = res.requests
    assert len(r) == 12 and (r["ttft_ms"] > 0).all() and (r["e2e_ms"] >= r["ttft_ms"]).all()
    assert res.summary["memory"]["target_kv_bytes_per_token"] > 0


@settings(max_examples=3)
@given(k=st.integers(0, 2), seqs=st.integers(1, 256))
def test_an_all_linear_hybrid_runs_with_its_state_in_the_block_pool(tmp_path_factory, k, seqs):
    import json

    d = tmp_path_factory.mktemp("m")
    path = d / "config.json"
    path.write_text(json.dumps(all_linear(4, key_heads=4, value_heads=8)))
    try:
        res = _run(d, path, scheduler={"max_num_seqs": seqs},
                   speculative={"method": "ngram", "num_speculative_tokens": k, "acceptance_rate": 0.6})
    except ConfigError as e:  # a shape the tables or the roofline refuse is one line, never a traceback
        assert "\n" not in str(e)
        pytest.skip(str(e))
    r = res.requests
    assert len(r) == 12 and (r["ttft_ms"] > 0).all()
    mem = res.summary["memory"]
    assert mem["target_kv_bytes_per_token"] == 0 and mem["block_size"] == mem["max_model_len"] > 0
