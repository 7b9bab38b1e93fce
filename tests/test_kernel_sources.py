"""The kernel-time seam: the roofline source is the builder's own functions; the measured-table source
reproduces the tables' rows; the run's source is chosen by ``profiles:`` and the device."""

import numpy as np
import pytest

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
