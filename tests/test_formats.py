"""Weight and KV formats: vLLM's quantization and kv_cache_dtype, in memory and in time."""

import pytest

from vidur_specdec.architectures.models import KNOWN_MODELS
from vidur_specdec.config import ConfigError
from vidur_specdec.costs import memory
from vidur_specdec.costs.profiles import builder
from vidur_specdec.engine import deployment
from vidur_specdec.engine.resolve import load
from vidur_specdec.hardware.devices import get_device
from vidur_specdec.sweep.definition import identity

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"


def _model(**kw):
    return deployment.resolved_model(load({"model": LLAMA, "device": "h100", **kw}))


@pytest.mark.parametrize("key,value", [("quantization", "awq"), ("quantization", "int8"), ("kv_cache_dtype", "fp8_e5m2")])
def test_unmodelled_value_is_one_line_naming_key_and_value(key, value):
    with pytest.raises(ConfigError) as e:
        load({"model": LLAMA, "device": "h100", key: value})
    msg = str(e.value)
    assert msg.startswith(f"{key}:") and repr(value) in msg and "\n" not in msg


def test_defaults_keep_the_checkpoint_and_bf16_kv():
    m = _model()
    assert m == KNOWN_MODELS[LLAMA]
    assert deployment.resolved_model(load({"model": "openai/gpt-oss-120b", "device": "h100"})).quantization == "mxfp4"


def test_fp8_weights_halve_the_dense_bytes_and_fp8_kv_halves_kv_bytes():
    base, q = _model(), _model(quantization="fp8")
    emb = 2 * base.embedding_params()  # embedding and LM head stay bf16
    assert memory.weight_bytes(q) - emb == pytest.approx((memory.weight_bytes(base) - emb) / 2, rel=1e-9)
    kv = _model(kv_cache_dtype="fp8")
    assert kv.kv_bytes_per_token() * 2 == base.kv_bytes_per_token(1, 2)
    p0 = memory.plan(base, "h100", 16, 0.1)
    p1 = memory.plan(kv, "h100", 16, 0.1)
    assert p1.target_kv_bytes_per_token * 2 == p0.target_kv_bytes_per_token
    assert p1.num_blocks == pytest.approx(2 * p0.num_blocks, abs=1)


def test_fp8_runs_faster_in_time_where_the_device_has_fp8():
    dev = get_device("h100").builder_fields()
    base, q = _model(), _model(quantization="fp8")
    for tokens in (1, 4096):  # memory-bound (half the bytes) and compute-bound (twice the FLOP rate)
        t0 = builder.mlp_op_times(base, dev, 1, [tokens])
        t1 = builder.mlp_op_times(q, dev, 1, [tokens])
        assert t1["mlp_up_proj"][0] < 0.75 * t0["mlp_up_proj"][0]
        assert t1["add"][0] == t0["add"][0]  # elementwise ops stay bf16
    kv = _model(kv_cache_dtype="fp8")
    a0 = builder.attention_op_times(base, dev, 1, [64], [4096], [0])["attn_decode"][0]
    a1 = builder.attention_op_times(kv, dev, 1, [64], [4096], [0])["attn_decode"][0]
    assert a1 < 0.7 * a0


@pytest.mark.parametrize("kw,key", [({"quantization": "fp8"}, "quantization"),
                                    ({"kv_cache_dtype": "fp8"}, "kv_cache_dtype"),
                                    ({"model": "deepseek-ai/DeepSeek-V3", "parallel": {"tensor_parallel_size": 8}},
                                     "quantization")])
def test_fp8_on_a100_is_refused_in_one_line(kw, key):
    with pytest.raises(ConfigError) as e:
        load({"model": LLAMA, "device": "a100", **kw})
    assert str(e.value).startswith(f"{key}:") and "a100" in str(e.value) and "\n" not in str(e.value)


def test_a_format_other_than_the_checkpoints_is_refused():
    with pytest.raises(ConfigError, match=r"^quantization: fp8 differs from openai/gpt-oss-120b's checkpoint"):
        load({"model": "openai/gpt-oss-120b", "device": "h100", "quantization": "fp8"})
    with pytest.raises(ConfigError, match="^quantization: mxfp4 needs an MXFP4 checkpoint"):
        load({"model": LLAMA, "device": "h100", "quantization": "mxfp4"})
    assert _model(quantization=None).quantization == ""
    load({"model": "openai/gpt-oss-120b", "device": "h100", "quantization": "mxfp4"})  # its own: accepted


def test_new_keys_at_their_default_leave_row_identity_unchanged():
    d = identity(load({"model": LLAMA, "device": "h100"}))
    assert "quantization" not in d and "kv_cache_dtype" not in d
    assert identity(load({"model": LLAMA, "device": "h100", "kv_cache_dtype": "fp8"}))["kv_cache_dtype"] == "fp8"


def test_fp8_device_figure_is_the_dense_datasheet_rate():
    assert get_device("h100").fp8_flops == pytest.approx(2 * get_device("h100").bf16_flops, rel=0.001)
    assert get_device("a100").fp8_flops == 0 and "fp8_flops" not in get_device("a100").builder_fields()
