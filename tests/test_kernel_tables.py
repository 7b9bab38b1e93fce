"""The measured-table kernel source reproduces the tables' own rows (median error under 3 %), per op
family and GPU, at a seeded sample of each table's measured points."""

import numpy as np
import pytest

from vidur_specdec.costs.kernels import table_data as TD
from vidur_specdec.costs.kernels.tables import (ATTENTION_KERNELS, GEMM_DTYPES, SYSTEMS, VLLM_VERSION,
                                                TableKernels)
from vidur_specdec.hardware.devices import get_device

SAMPLE = 40
HEADS = ((32, 8), (16, 2), (8, 1), (32, 4))  # per-GPU (query, KV) heads of Llama-3.1-8B/70B and Qwen3-30B-A3B


def _median_err(pred, meas):
    pred, meas = np.asarray(pred, float), np.asarray(meas, float)
    return float(np.median(np.abs(pred - meas) / meas))


def _heads(df):
    return np.logical_or.reduce([(df.num_heads == q) & (df.num_key_value_heads == kv) for q, kv in HEADS])


def _sample(df, seed):
    return df.sample(n=min(SAMPLE, len(df)), random_state=seed)


@pytest.fixture(scope="module", params=sorted(SYSTEMS))
def source(request):
    return TableKernels(get_device(request.param))


def test_gemm_rows(source):
    df = TD.load(source.system, "gemm", "vllm", VLLM_VERSION, "gemm_perf")
    for dtype, (gd, kernel) in GEMM_DTYPES.items():
        rows = _sample(df[(df.gemm_dtype == gd) & (df.kernel_source == kernel) & (df.n <= 16384) & (df.k <= 16384)], 1)
        pred = [source.gemm_ms(r.m, r.k, r.n, dtype) for r in rows.itertuples()]
        assert _median_err(pred, rows.latency) < 0.03, (source.system, dtype)


def test_attention_rows(source):
    dec_kernel, pre_kernel = ATTENTION_KERNELS[source.device.name]
    gen = TD.load(source.system, "attention", "vllm", VLLM_VERSION, "generation_attention_perf")
    gen = gen[(gen.kernel_source == dec_kernel) & (gen.window_size == 0) & (gen.head_dim == 128)
              & (gen.kv_cache_dtype == "bfloat16") & _heads(gen)]
    rows = _sample(gen, 2)
    pred = [float(source.decode_attention_ms(r.batch_size, r.step, r.num_heads, r.num_key_value_heads, r.head_dim))
            for r in rows.itertuples()]
    assert _median_err(pred, rows.latency) < 0.03, source.system
    ctx = TD.load(source.system, "attention", "vllm", VLLM_VERSION, "context_attention_perf")
    ctx = ctx[(ctx.kernel_source == pre_kernel) & (ctx.window_size == 0) & (ctx.batch_size == 1)
              & (ctx.head_dim == 128) & (ctx.kv_cache_dtype == "bfloat16") & _heads(ctx)]
    rows = _sample(ctx, 3)
    pred = [float(source.prefill_attention_ms(r.isl, 0, r.num_heads, r.num_key_value_heads, r.head_dim))
            for r in rows.itertuples()]
    assert _median_err(pred, rows.latency) < 0.03, source.system


def test_all_reduce_rows(source):
    ar = TD.load(source.system, "comm", "vllm", source.ar_version, "custom_allreduce_perf")
    rows = ar[(ar.kernel_source == "vLLM_custom_graph") & (ar.message_size * 2 < 8 * 1024 * 1024)]
    pred = [source.all_reduce_ms(r.num_gpus, r.message_size * 2) for r in rows.itertuples()]
    assert _median_err(pred, rows.latency) < 0.03, source.system
    nccl = TD.load(source.system, "comm", "nccl", source.nccl_version, "nccl_perf")
    rows = nccl[(nccl.op_name == "all_reduce") & (nccl.nccl_dtype == "half")]
    pred = [source.nccl_all_reduce_ms(r.num_gpus, r.message_size * 2) for r in rows.itertuples()]
    assert _median_err(pred, rows.latency) < 0.03, source.system
