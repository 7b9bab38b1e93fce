"""The kernel-time seam: the roofline source is the builder's own functions; the measured-table source
reproduces the tables' rows; the run's source is chosen by ``profiles:`` and the device."""

import numpy as np
import pytest
from conftest import REPO

from vidur_specdec.architectures.models import get_model
from vidur_specdec.costs import kernels as K
from vidur_specdec.costs.lm_head import lm_head_ms
from vidur_specdec.costs.moe_layer import moe_layer_ms
from vidur_specdec.costs.profiles import params as P
from vidur_specdec.costs.profiles.builder import attention_op_times, gemm_ms, mlp_op_times
from vidur_specdec.hardware.collectives import vllm_custom_all_reduce_ms
from vidur_specdec.hardware.devices import get_device

H100 = get_device("h100")


def test_roofline_source_is_the_builder():
    k = K.make("built", H100)
    spec = get_model("meta-llama/Llama-3.1-8B-Instruct")
    tokens = [1, 7, 512]
    ref = mlp_op_times(spec, H100.builder_fields(), 1, tokens)
    got = k.mlp_op_times(spec, 1, tokens)
    assert all(np.array_equal(ref[op], got[op]) for op in ref)
    ref = attention_op_times(spec, H100.builder_fields(), 1, [4, 1], [900, 0], [0, 256])
    got = k.attention_op_times(spec, 1, [4, 1], [900, 0], [0, 256])
    assert all(np.array_equal(ref[op], got[op], equal_nan=True) for op in ref)
    assert k.gemm_ms(9, 4096, 1024) == float(gemm_ms(9, 4096, 1024, H100.builder_fields(), P.EFFICIENCY["gemm"], 2))
    assert k.lm_head_ms(4096, 128256, 2, 5) == lm_head_ms(H100, 4096, 128256, 2, 5)
    assert k.all_reduce_ms(4, 65536) == vllm_custom_all_reduce_ms(H100, 4, 65536)
    qwen = get_model("Qwen/Qwen3-30B-A3B")
    assert k.fused_moe_ms(qwen, 1, [4, 1]) == moe_layer_ms(qwen, H100.builder_fields(), 1, [4, 1])
    assert set(k.sources()) == set(K.OP_FAMILIES) and set(k.sources().values()) == {"built"}


def test_registry_and_unbound():
    assert {"built", "tables"} <= set(K.KERNEL_SOURCES)
    assert K.unbound().device.name == K.UNBOUND_DEVICE
    assert K.as_kernels(H100).device is H100
    assert K.for_run("built", H100).name == "built"
    assert K.for_run("shipped", get_device("a100")).name == "built"  # the A100 example keeps the roofline


def test_a_missing_table_is_one_line(monkeypatch, tmp_path):
    from vidur_specdec.config import ConfigError
    from vidur_specdec.costs.kernels import table_data

    monkeypatch.setattr(table_data, "data_root", lambda: tmp_path)
    with pytest.raises(ConfigError) as e:
        K.for_run("shipped", H100)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("profiles: aiconfigurator-core 0.12.0 has no gemm_perf table for h100_sxm")
    assert K.for_run("built", H100).name == "built"  # the roofline needs no table


def test_tables_are_the_default_where_they_exist():
    assert K.for_run("shipped", H100).name == "tables"
    assert K.for_run("shipped", get_device("b200")).sources(4)["all_reduce"].startswith("measured: b200_sxm")
    ds = get_model("deepseek-ai/DeepSeek-V3")  # multi-head latent attention: the MLA module rows
    src = K.for_run("shipped", get_device("h200")).sources(8, [ds])
    assert src["attention_decode"] == src["attention_prefill"] == (
        "measured: h200_sxm, vllm 0.24.0 (aiconfigurator-core 0.12.0); MLA module FLASH_ATTN_MLA / FLASH_ATTN")
    assert src["elementwise"].startswith("built (no measured table")
    dense = K.for_run("shipped", H100).sources(1, [get_model("meta-llama/Llama-3.1-8B-Instruct")])
    assert dense["moe"] == K.for_run("built", H100).sources(1, [get_model("meta-llama/Llama-3.1-8B-Instruct")])["moe"] \
        == "none (dense model)"


def test_a_missing_mla_table_is_one_line(monkeypatch):
    from vidur_specdec.config import ConfigError
    from vidur_specdec.costs.kernels import mla_table

    monkeypatch.setattr(mla_table, "MLA_VERSION", "0.0.0")
    mla_table.table.cache_clear()
    try:
        with pytest.raises(ConfigError) as e:
            K.for_run("shipped", get_device("h200")).sources(8, [get_model("deepseek-ai/DeepSeek-V3")])
    finally:
        mla_table.table.cache_clear()
    assert str(e.value) == ("profiles: aiconfigurator-core 0.12.0 has no mla_generation_module_perf table for h200_sxm "
                            "(mla, vllm 0.0.0); set profiles: built for the analytical roofline")


def test_run_warns_of_the_a100_example_budget_on_another_gpu():
    from vidur_specdec.engine.resolve import load
    from vidur_specdec.engine.warnings import config_warnings

    cfg = load(str(REPO / "configs/default.yaml"), ["device=h100", "model=meta-llama/Llama-3.1-8B-Instruct"])
    assert any(w.startswith("scheduler.max_num_batched_tokens 512 and max_num_seqs 128 are the A100 example's")
               for w in config_warnings(cfg))
    assert not any("A100 example" in w for w in config_warnings(load(str(REPO / "configs/default.yaml"))))
    assert not any("A100 example" in w for w in config_warnings(load(str(REPO / "configs/llama3.1-8b-h100.yaml"))))
