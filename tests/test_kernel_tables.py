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
    """Each message reads the rows of the path vLLM 0.33 takes: FlashInfer's kernels (the TRT-LLM rows) up to their
    limit, then the custom all-reduce, then NCCL."""
    from vidur_specdec.costs.kernels.tables import TRTLLM_AR_VERSION
    from vidur_specdec.hardware import custom_all_reduce as CUSTOM_AR

    name = source.device.name
    fi = TD.load(source.system, "comm", "trtllm", TRTLLM_AR_VERSION, "custom_allreduce_perf") \
        if name in CUSTOM_AR.CAPABILITY else None
    ar = TD.load(source.system, "comm", "vllm", source.ar_version, "custom_allreduce_perf")
    rows = ar[(ar.kernel_source == "vLLM_custom_graph") & (ar.message_size * 2 < 8 * 1024 * 1024)]
    rows = rows[[not CUSTOM_AR.flashinfer_applies(name, r.num_gpus, r.message_size * 2) for r in rows.itertuples()]]
    if len(rows):
        pred = [source.all_reduce_ms(r.num_gpus, r.message_size * 2) for r in rows.itertuples()]
        assert _median_err(pred, rows.latency) < 0.03, source.system
    if fi is not None:
        rows = fi[[CUSTOM_AR.flashinfer_applies(name, r.num_gpus, r.message_size * 2) for r in fi.itertuples()]]
        rows = rows[rows.num_gpus.isin(ar.num_gpus.unique())]
        assert len(rows) >= 20
        pred = [source.all_reduce_ms(r.num_gpus, r.message_size * 2) for r in rows.itertuples()]
        assert _median_err(pred, rows.latency) < 0.03, source.system
    nccl = TD.load(source.system, "comm", "nccl", source.nccl_version, "nccl_perf")
    rows = nccl[(nccl.op_name == "all_reduce") & (nccl.nccl_dtype == "half")]
    pred = [source.nccl_all_reduce_ms(r.num_gpus, r.message_size * 2) for r in rows.itertuples()]
    assert _median_err(pred, rows.latency) < 0.03, source.system


def test_a_decode_all_reduce_is_cheaper_on_blackwell_and_a_missing_world_is_the_roofline():
    """16 tokens of Llama-3.1-70B (256 KiB) on 8 GPUs: FlashInfer's kernels on both, B200 below H200; GB200's
    tables hold no 8-GPU rows (one tray is 4 GPUs), so its 8-GPU all-reduce is the roofline's, and says so."""
    from vidur_specdec.costs.kernels.roofline import RooflineKernels

    h200, b200, gb200 = (TableKernels(get_device(d)) for d in ("h200", "b200", "gb200"))
    msg = 16 * 8192 * 2
    assert b200.all_reduce_ms(8, msg) < h200.all_reduce_ms(8, msg)
    assert "trtllm 1.3.0rc20 all-reduce kernels" in b200.sources(8)["all_reduce"]
    assert gb200.all_reduce_ms(8, msg) == RooflineKernels(get_device("gb200")).all_reduce_ms(8, msg)
    assert gb200.sources(8)["all_reduce"].startswith("built (gb200's tables hold no 8-GPU")
    nccl = TableKernels(get_device("b200"), "nccl")
    assert nccl.all_reduce_ms(8, msg) == nccl.nccl_all_reduce_ms(8, msg)  # engine.all_reduce: nccl, unchanged


# the MLA decode kernel vLLM 0.33 runs with a bf16 KV cache, and the longest prompt it takes on that path
MLA_DECODE = {"h200": ("FLASH_ATTN_MLA", 512), "b200": ("FLASHINFER_MLA", 1)}


@pytest.mark.parametrize("gpu", sorted(MLA_DECODE))
def test_mla_rows(gpu):
    """DeepSeek-V3's attention block (its projections, RoPE and the attention op) reproduces the MLA module rows."""
    from vidur_specdec.architectures.models import get_model

    ds = get_model("deepseek-ai/DeepSeek-V3")  # fp8 (block) projections, bf16 KV cache
    k = TableKernels(get_device(gpu))
    kernel, short = MLA_DECODE[gpu]

    def block(tp, tokens, att):
        ops = k.mlp_op_times(ds, tp, tokens)
        return ops["attn_pre_proj"] + ops["attn_rope"] + ops["attn_post_proj"] + att

    for tp in (4, 8):
        gen = TD.load(k.system, "mla", "vllm", "0.24.0", "mla_generation_module_perf")
        gen = _sample(gen[(gen.kernel_source == kernel) & (gen.num_heads == 128 // tp) & (gen.gemm_type == "fp8_block")
                          & (gen.kv_cache_dtype == "bfloat16")], 4)
        b, s = gen.batch_size.to_numpy(float), gen.step.to_numpy(float)
        pred = block(tp, b, k.attention_op_times(ds, tp, b, s, 0)["attn_decode"])
        assert _median_err(pred, gen.latency) < 0.03, (gpu, tp, "decode")
        ctx = TD.load(k.system, "mla", "vllm", "0.24.0", "mla_context_module_perf")
        ctx = ctx[(ctx.num_heads == 128 // tp) & (ctx.gemm_type == "fp8_block") & (ctx.kv_cache_dtype == "bfloat16")
                  & (ctx.batch_size == 1) & (ctx.kernel_source == np.where(ctx.isl <= short, kernel, "FLASH_ATTN"))]
        isl = ctx.isl.to_numpy(float)
        pred = block(tp, isl, k.attention_op_times(ds, tp, 1, 0, isl)["attn_prefill"])
        assert len(ctx) >= 10 and _median_err(pred, ctx.latency) < 0.03, (gpu, tp, "prefill")
