"""NVFP4 (ModelOpt ``modelopt_fp4``) checkpoints: read from their quantization config, priced from the nvfp4 rows."""

import copy
import dataclasses
import json

import numpy as np
import pytest

from conftest import small
from vidur_specdec.architectures import moe, quant
from vidur_specdec.architectures.errors import ModelError
from vidur_specdec.architectures.hybrid import aic_config_path, load_aic_config
from vidur_specdec.architectures.models import model_from_hf_config, resolve_model
from vidur_specdec.config import ConfigError
from vidur_specdec.costs import fused_moe_table as F
from vidur_specdec.costs.kernels import table_data as TD
from vidur_specdec.costs.kernels.tables import TableKernels
from vidur_specdec.costs.profiles import builder
from vidur_specdec.engine.resolve import load
from vidur_specdec.hardware.devices import get_device

DSV31 = "nvidia/DeepSeek-V3.1-NVFP4"


def _hf_quant(name):
    path = aic_config_path(name)
    return json.loads(path.with_name(path.name.replace("_config.json", "_hf_quant_config.json")).read_text())


def test_deepseek_v31_nvfp4_is_read_from_its_hf_quant_config():
    m = resolve_model(DSV31)
    # config.json has no quantization_config; hf_quant_config.json: NVFP4, FP8 KV, q/kv projections, the MTP
    # layer (model.layers.61*) and lm_head excluded; o_proj, the dense MLPs and every expert NVFP4
    assert (m.quantization, m.bf16_parts, m.kv_cache_dtype, m.mtp_layers) == ("modelopt_fp4", "attention,mtp", "fp8", 1)
    fmt = {p: quant.part_format(m, p) for p in quant.PARTS}
    assert fmt["attention"] == fmt["mtp"] == fmt["lm_head"] == "bf16"
    assert fmt["o_proj"] == fmt["dense_mlp"] == fmt["shared_experts"] == fmt["experts"] == "nvfp4"
    # the same config.json without the hf_quant_config.json beside it is a bf16 checkpoint
    assert resolve_model(str(aic_config_path(DSV31))).quantization == ""


def test_an_hf_quant_config_beside_a_config_json_is_read_as_vllm_reads_it(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(load_aic_config(DSV31)))
    assert resolve_model(str(tmp_path / "config.json")).quantization == ""
    (tmp_path / "hf_quant_config.json").write_text(json.dumps(_hf_quant(DSV31)))
    m = resolve_model(str(tmp_path / "config.json"))
    assert (m.quantization, m.bf16_parts) == ("modelopt_fp4", "attention,mtp")


def test_nvfp4_weight_bytes_are_four_and_a_half_bits_where_the_checkpoint_quantizes():
    m = resolve_model(DSV31)
    h, f, E, Lm, tp = m.hidden_size, m.expert_ffn_size, m.num_experts, m.num_moe_layers, 8
    bf16_experts = dataclasses.replace(m, bf16_parts="attention,experts,mtp")
    # 4 bits + one e4m3 scale per 16 values: 0.5625 B a weight, against bf16's 2
    diff = moe.weight_bytes(bf16_experts, tp) - moe.weight_bytes(m, tp)
    assert diff == pytest.approx(Lm * E * 3 * h * f / tp * (2 - 0.5625), rel=1e-12)
    # o_proj (128 heads x 128 -> 7168) at NVFP4, q/kv at bf16: the split is exact
    bf16_o = dataclasses.replace(m, bf16_parts="attention,mtp,o_proj")
    o = m.num_layers * (m.num_heads // tp) * m.v_head_dim * h
    assert moe.weight_bytes(bf16_o, tp) - moe.weight_bytes(m, tp) == pytest.approx(o * (2 - 0.5625), rel=1e-9)


def _table_row(system, table, **where):
    df = TD.load(system, table[0], "vllm", "0.24.0", table[1])
    for k, v in where.items():
        df = df[df[k] == v]
    assert len(df) == 1
    return float(df.latency.iloc[0])


def test_nvfp4_gemms_and_experts_read_the_tables_nvfp4_rows():
    k = TableKernels(get_device("b200"))
    row = _table_row("b200_sxm", ("gemm", "gemm_perf"), gemm_dtype="nvfp4", m=64, n=7168, k=2048,
                     kernel_source="FlashInferCuteDslNvFp4LinearKernel")
    assert k.gemm_ms(64, 2048, 7168, "nvfp4") == pytest.approx(row, rel=1e-12)
    # compute-bound: W4A4 beats W8A8 beats bf16 (small shapes: the activations' fp4 quantization costs more)
    assert k.gemm_ms(4096, 2048, 7168, "nvfp4") < k.gemm_ms(4096, 2048, 7168, "fp8") < k.gemm_ms(4096, 2048, 7168)
    m = resolve_model(DSV31)
    curve, why = F.try_curve("b200_sxm", m, 8)
    assert why == "" and curve.moe_dtype == "nvfp4" and "trtllm" in curve.kernel.kernel_source
    row = _table_row("b200_sxm", ("moe", "moe_perf"), moe_dtype="nvfp4", kernel_source=curve.kernel.kernel_source,
                     hidden_size=7168, inter_size=2048, topk=8, num_experts=256, moe_tp_size=8, moe_ep_size=1,
                     distribution="balanced", num_tokens=16)
    assert curve.ms(16) == pytest.approx(row, rel=1e-12)
    # the per-layer ops: q/kv projections bf16, o_proj and the dense MLP nvfp4
    t = np.array([4096.0])
    ops = k.mlp_op_times(m, 8, t)
    bf16 = k.mlp_op_times(dataclasses.replace(m, quantization="", bf16_parts=""), 8, t)
    assert ops["attn_pre_proj"][0] == bf16["attn_pre_proj"][0]
    assert ops["attn_post_proj"][0] == pytest.approx(k.gemm_ms(t, 16 * 128, 7168, "nvfp4")[0], rel=1e-12)
    assert ops["mlp_up_proj"][0] == pytest.approx(k.gemm_ms(t, 7168, 2 * 18432 // 8, "nvfp4")[0], rel=1e-12)


def test_deepseek_v31_nvfp4_at_tp8_with_mtp_runs_on_b200_with_nvfp4_rows_and_no_bf16_fallback():
    from vidur_specdec import simulate

    cfg = load(small(num_requests=6, qps=4.0, method="mtp", k=1, alpha=0.85, model=DSV31, device="b200",
                     parallel={"tensor_parallel_size": 8}))
    res = simulate(cfg)
    src = res.summary["kernel_sources"]
    assert src["moe"].endswith("fused MoE nvfp4, flashinfer_trtllm_nvfp4")
    assert "nvfp4 FlashInferCuteDslNvFp4LinearKernel (o_proj, dense_mlp)" in src["gemm"]
    assert "bfloat16 torch.nn.functional.linear (attention, lm_head)" in src["gemm"]
    # no fallback of the target's layers: the one warning is the MTP module's bf16 experts (no rows for them)
    warns = res.summary.get("warnings") or []
    assert not any("missing fused-MoE rows" in w for w in warns)
    assert [w for w in warns if "MTP module in bf16" in w] and len(res.requests) == 6
    mem = res.summary["memory"]
    assert mem["target_kv_bytes_per_token"] == 61 * 576  # the checkpoint's FP8 KV cache (vLLM's auto)
    # weights per GPU: NVFP4 experts, bf16 q/kv and MTP module (its 256 experts at 2 B a weight)
    assert 45e9 < mem["target_weight_bytes"] < 55e9 and 2.5e9 < mem["draft_weight_bytes"] < 3.5e9


@pytest.mark.parametrize("device", ["h200", "h100", "l40s", "a100"])
def test_nvfp4_without_fp4_tensor_cores_is_refused_in_one_line(device):
    with pytest.raises(ConfigError) as e:
        load({"model": DSV31, "device": device, "parallel": {"tensor_parallel_size": 8}})
    msg = str(e.value)
    assert msg.startswith("quantization:") and device in msg and "Marlin" in msg and "\n" not in msg


def test_quantization_key_takes_vllms_names_where_the_checkpoint_has_that_format():
    load({"model": DSV31, "device": "b200", "quantization": "modelopt_fp4", "parallel": {"tensor_parallel_size": 8}})
    with pytest.raises(ConfigError, match=r"^quantization: fp8 differs from nvidia/DeepSeek-V3.1-NVFP4's checkpoint"):
        load({"model": DSV31, "device": "b200", "quantization": "fp8", "parallel": {"tensor_parallel_size": 8}})
    for model in ("meta-llama/Llama-3.1-8B-Instruct", "Qwen/Qwen3-30B-A3B"):  # bf16: vLLM finds no config file
        with pytest.raises(ConfigError, match="^quantization: modelopt_fp4 needs a checkpoint stored in that format"):
            load({"model": model, "device": "b200", "quantization": "modelopt_fp4"})
    with pytest.raises(ConfigError, match="quantization"):
        load({"model": "meta-llama/Llama-3.1-8B-Instruct", "device": "b200", "quantization": "nvfp4"})


def _with_q(name, **changes):
    cfg = copy.deepcopy(load_aic_config(name))
    cfg["quantization_config"] = {**_hf_quant(name), **changes.pop("top", {})}
    cfg["quantization_config"]["quantization"].update(changes)
    return cfg


def test_the_exclude_list_decides_each_parts_format():
    q = _hf_quant(DSV31)["quantization"]
    keep = [p for p in q["exclude_modules"] if "q_a_proj" not in p and "q_b_proj" not in p
            and "kv_a_proj" not in p and "kv_b_proj" not in p]
    m = model_from_hf_config(_with_q(DSV31, exclude_modules=keep), DSV31)
    assert m.bf16_parts == "mtp" and quant.part_format(m, "attention") == "nvfp4"
    half = [p for p in q["exclude_modules"] if not p.startswith("model.layers.1")]  # layers 1, 10-19 quantized
    with pytest.raises(ModelError, match="keeps attention in bf16 in 50 of its 61 layers") as e:
        model_from_hf_config(_with_q(DSV31, exclude_modules=half), DSV31)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("changes,match", [
    ({"group_size": 32}, "group_size 32 is not 16"),
    ({"quant_algo": "MIXED_PRECISION"}, "MIXED_PRECISION"),
    ({"quant_algo": "W8A8_SQ"}, "quant_algo 'W8A8_SQ' is not modeled"),
    ({"exclude_modules": [p for p in _hf_quant(DSV31)["quantization"]["exclude_modules"] if p != "lm_head"]},
     "quantizes lm_head"),
])
def test_an_nvfp4_checkpoint_this_simulator_cannot_price_is_refused_in_one_line(changes, match):
    with pytest.raises(ModelError, match=match) as e:
        model_from_hf_config(_with_q(DSV31, **changes), DSV31)
    assert str(e.value).startswith("model: config.json field 'quantization_config'") and "\n" not in str(e.value)


def test_weight_only_nvfp4_is_refused():
    cfg = copy.deepcopy(load_aic_config("nvidia/GLM-5-NVFP4"))
    cfg["quantization_config"] = {"quant_method": "modelopt", "quant_algo": "NVFP4", "ignore": ["lm_head"],
                                  "config_groups": {"g": {"weights": {"num_bits": 4}, "input_activations": None}}}
    with pytest.raises(ModelError, match="W4A16_NVFP4"):
        model_from_hf_config(cfg, "x")


def test_the_roofline_prices_nvfp4_at_the_fp4_rate_with_four_and_a_half_bit_weights():
    dev = get_device("b200").builder_fields()
    m = resolve_model("nvidia/Qwen3-235B-A22B-NVFP4")  # every projection NVFP4 (only the router and lm_head kept)
    assert m.bf16_parts == "" and quant.gemm_dtype(m, "attention") == "nvfp4"
    base = dataclasses.replace(m, quantization="", kv_cache_dtype="")
    for tokens in (1, 8192):  # memory-bound (0.28x the bytes) and compute-bound (4x the FLOP rate)
        t1 = builder.mlp_op_times(m, dev, 1, [tokens])["attn_pre_proj"][0]
        t0 = builder.mlp_op_times(base, dev, 1, [tokens])["attn_pre_proj"][0]
        assert t1 < 0.5 * t0
    assert get_device("b200").fp4_flops == 2 * get_device("b200").fp8_flops and get_device("h200").fp4_flops == 0


def test_kimi_k25_int4_experts_read_the_marlin_int4_rows_where_vllm_runs_marlin():
    m = resolve_model("moonshotai/Kimi-K2.5")  # compressed-tensors W4A16 int4, group 32: routed experts only
    assert (m.quantization, quant.part_format(m, "experts"), quant.gemm_dtype(m, "attention")) == \
        ("compressed-tensors", "int4", "bf16")
    assert moe.weight_bytes(m, 8) < moe.weight_bytes(dataclasses.replace(m, quantization=""), 8) * 0.3
    curve, why = F.try_curve("h200_sxm", m, 8)
    assert why == "" and curve.moe_dtype == "int4_wo" and "marlin" in curve.kernel.kernel_source
    none, why = F.try_curve("b200_sxm", m, 8)  # vLLM runs FlashInfer's MxInt4 kernel there: no rows
    assert none is None and "int4_wo" in why
    with pytest.raises(ModelError, match="compressed-tensors format 'float-quantized' is not modeled"):
        cfg = copy.deepcopy(load_aic_config("moonshotai/Kimi-K2.5"))
        cfg["text_config"]["quantization_config"]["format"] = "float-quantized"
        model_from_hf_config(cfg, "x")


def test_modelopt_fp8_dense_checkpoint_reads_its_hf_quant_config():
    m = resolve_model("nvidia/Llama-3.1-70B-Instruct-FP8")
    assert (m.quantization, m.kv_cache_dtype, quant.gemm_dtype(m, "dense_mlp"), quant.gemm_dtype(m, "lm_head")) == \
        ("modelopt", "fp8", "fp8", "bf16")
    with pytest.raises(ConfigError, match="^quantization: fp8 differs from nvidia/Llama-3.1-70B-Instruct-FP8's"):
        load({"model": "nvidia/Llama-3.1-70B-Instruct-FP8", "device": "h200", "quantization": "fp8"})
