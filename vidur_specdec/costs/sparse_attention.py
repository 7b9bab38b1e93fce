"""DeepSeek sparse attention (DSA: DeepSeek-V3.2, GLM-5): the indexer and the top-k MLA it selects.

A DSA layer (vLLM 0.33 ``model_executor/models/deepseek_v2.py`` ``Indexer`` and
``model_executor/layers/sparse_attn_indexer.py``; ``v1/attention/backends/mla/flashmla_sparse.py``)
runs, per query token:

1. the **indexer projections**: ``wq_b`` (q latent -> ``index_n_heads x index_head_dim``, the checkpoint's
   format) and the fused ``wk_weights_proj`` (hidden -> ``index_head_dim + index_n_heads``, bf16), both
   replicated on every GPU;
2. the **lightning indexer**: fp8 scores of the query's ``index_n_heads`` heads against the fp8 index key of
   every cached token (DeepGEMM ``fp8_paged_mqa_logits``; ``2 x heads x head_dim`` FLOPs and one 132-byte
   key read per (query, cached token), fp32 logits written and read back by the top-k), then a top-k;
3. **MLA over the** ``min(index_topk, context)`` **selected tokens** (FlashMLA sparse), priced with the
   run's own MLA decode kernel at that context.

Decode rows (``attn_decode``, ``batch`` requests of one query each): the sum of the three. Where
AIConfigurator holds a measured ``dsa_generation_module`` table for the GPU and model
(:data:`TABLE_SOURCES`: vLLM 0.24.0, else SGLang 0.5.14, same FlashMLA-sparse and DeepGEMM kernels),
the layer's whole attention is the measured module ``T(b, ctx)``: ``attn_decode`` is ``T`` less the attention
ops the run already charges on those tokens (its projections, rope and reshapes), never below the roofline
of the three parts above. Prefill rows (``attn_prefill``, a chunk of
``c`` tokens after ``kv``): projections on ``c`` tokens, the causal indexer over ``kv + c`` keys, and the
dense MLA prefill price scaled by the share of (query, key) pairs the top-k keeps. Every time is ms for
one layer on one GPU; sizes in tokens.

A verify block of ``k + 1`` tokens: vLLM's indexer scores all ``next_n = k + 1`` query rows of a request in
one kernel (keys read once) and each row takes **its own top-k**, which FlashMLA-sparse gathers per row.
The simulator's ``per_token`` verify policy prices ``k + 1`` decode reads, which is exact for the sparse
MLA and the indexer's FLOPs but reads the index keys ``k + 1`` times (an over-estimate at long context);
``shared_kv`` prices one read, which misses the k extra top-k gathers (an under-estimate). See docs/model.md.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Dict, Optional

import numpy as np

from vidur_specdec.architectures import quant

CODE_DIGEST = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()  # joins built-profile cache keys
LOGIT_BYTES = 4  # fp32 indexer logits: written by the scoring kernel, read by the top-k
# (framework, version) of AIConfigurator's sparse_attention tables, in order of preference
TABLE_SOURCES = (("vllm", "0.24.0"), ("sglang", "0.5.14"))
TABLE = "dsa_generation_module_perf"
_TABLE_CACHE: Dict[tuple, Optional[tuple]] = {}


def applies(spec) -> bool:
    """True when ``spec`` has DeepSeek sparse attention (``index_topk`` > 0)."""
    return bool(getattr(spec, "index_topk", 0))


def _dtype(spec) -> str:
    """The format of the layer's q/kv projections (the DSA module rows' gemm_type)."""
    return quant.gemm_dtype(spec, "attention")


GEMM_TYPES = {"fp8": "fp8_block", "bf16": "bfloat16", "nvfp4": "nvfp4"}  # the module rows' gemm_type


def projections_ms(kernels, spec, tokens):
    """The indexer's two projections over ``tokens`` query tokens (ms, one GPU; replicated weights)."""
    hi, di = spec.index_n_heads, spec.index_head_dim
    t = np.asarray(tokens, dtype=float)
    q = kernels.gemm_ms(t, spec.q_lora_rank or spec.hidden_size, hi * di, quant.gemm_dtype(spec, "indexer"))
    k = kernels.gemm_ms(t, spec.hidden_size, di + hi, "bf16")
    return np.where(t > 0, q + k, 0.0)


def _roofline_ms(kernels, flops, nbytes):
    """max(compute at the fp8 rate, memory) + one launch (ms): the indexer's scoring kernel + top-k."""
    f = getattr(kernels, "fields", None) or kernels.device.builder_fields()
    peak = f.get("fp8_flops") or f["peak_flops"]
    compute = np.asarray(flops, dtype=float) / (peak * 0.6) * 1e3  # 0.6: a DeepGEMM-like share of peak
    memory = kernels.elementwise_ms(np.asarray(nbytes, dtype=float), "add")
    return np.maximum(compute, memory)


def indexer_ms(kernels, spec, queries, keys_read, pairs):
    """Scoring ``pairs`` (query, cached token) pairs reading ``keys_read`` index keys, then the top-k (ms)."""
    hi, di = spec.index_n_heads, spec.index_head_dim
    flops = 2.0 * hi * di * np.asarray(pairs, dtype=float)
    nbytes = (spec.index_key_bytes * np.asarray(keys_read, dtype=float) + 2 * LOGIT_BYTES * np.asarray(pairs, dtype=float)
              + np.asarray(queries, dtype=float) * hi * di)
    return _roofline_ms(kernels, flops, nbytes)


def _mla_shape(spec, tp: int):
    """(q heads, KV heads, head size, KV dtype) per GPU, as the run prices MLA attention."""
    return spec.num_heads // tp, 1, spec.head_dim, "fp8" if getattr(spec, "kv_cache_dtype", "") == "fp8" else "bf16"


def decode_core_roofline(kernels, spec, tp: int, bs, kv):
    """Indexer scoring + top-k + sparse MLA of ``bs`` one-query requests at context ``kv`` (ms)."""
    bs, kv = np.asarray(bs, dtype=float), np.asarray(kv, dtype=float)
    mla = kernels.decode_attention_ms(bs, np.minimum(kv, spec.index_topk), *_mla_shape(spec, tp))
    return indexer_ms(kernels, spec, bs, bs * kv, bs * kv) + mla


def _table(kernels, spec, tp: int):
    """(label, (batches, contexts, latency grid)) of the measured DSA decode module, or None."""
    system = getattr(kernels, "system", None)
    if system is None:
        return None
    key = (system, spec.name, spec.num_heads // tp, _dtype(spec), getattr(spec, "kv_cache_dtype", ""),
           tuple(getattr(spec, f) for f in _SHAPE))
    if key in _TABLE_CACHE:
        return _TABLE_CACHE[key]
    from vidur_specdec.costs.kernels import table_data as TD

    out = None
    for model in (spec.name, *same_shape(spec)):  # a checkpoint of another name (NVFP4) reads its base model's rows
        for framework, version in TABLE_SOURCES:
            df = TD.load_optional(system, "sparse_attention", framework, version, TABLE)  # a bad file: raised
            if df is None:
                continue
            kv_dtype = "fp8" if key[4] == "fp8" else "bfloat16"
            rows = df[(df.model == model) & (df.num_heads == key[2]) & (df.op_name == "dsa_generation_module")
                      & (df.gemm_type == GEMM_TYPES[key[3]])
                      & (df.kv_cache_dtype == kv_dtype)]
            if "tp_size" in rows and rows.tp_size.nunique() > 1:  # SGLang: one tp per head count; prefer the run's
                rows = rows[rows.tp_size == (tp if tp in set(rows.tp_size) else rows.tp_size.min())]
            if "kernel_source" in rows and rows.kernel_source.nunique() > 1:
                rows = rows[rows.kernel_source == sorted(rows.kernel_source.unique())[0]]
            if len(rows) and rows.batch_size.nunique() > 1 and rows.step.nunique() > 1:
                rows = rows.groupby(["batch_size", "step"], as_index=False)["latency"].median()
                of = "" if model == spec.name else f"; rows of {model}, the same attention shape"
                out = (f"measured: {system}, {framework} {version} ({TD.PACKAGE} {TD.PACKAGE_VERSION}, {TABLE}{of})",
                       TD.dense_grid(rows, "batch_size", "step"))
                break
        if out is not None:
            break
    _TABLE_CACHE[key] = out
    return out


_SHAPE = ("hidden_size", "num_heads", "kv_lora_rank", "q_lora_rank", "qk_rope_head_dim", "head_dim", "v_head_dim",
          "index_n_heads", "index_head_dim", "index_topk")


def same_shape(spec):
    """Known sparse-attention models (their names, sorted) whose attention layer has ``spec``'s shape: where the
    tables hold no rows under ``spec``'s own name (NVIDIA's NVFP4 DeepSeek-V3.2 and GLM-5), their rows are read."""
    from vidur_specdec.architectures.known import KNOWN_MODELS

    want = tuple(getattr(spec, f) for f in _SHAPE)
    return sorted(n for n, m in KNOWN_MODELS.items() if n != spec.name and m.index_topk
                  and tuple(getattr(m, f) for f in _SHAPE) == want)


def source(kernels, spec, tp: int) -> str:
    """Where the decode indexer + sparse-MLA time comes from (a table's label, or ``built``)."""
    t = _table(kernels, spec, tp)
    return t[0] if t else "built"


def decode_ms(kernels, spec, tp: int, bs, kv, charged):
    """``attn_decode`` of ``bs`` one-query requests at context ``kv`` (ms): the measured DSA module less the
    attention ops the run already charges (``charged``: its projections, rope and reshapes at ``bs`` tokens),
    never below the roofline (projections + indexer + sparse MLA); the roofline alone without a table."""
    bs, kv = np.asarray(bs, dtype=float), np.asarray(kv, dtype=float)
    roofline = projections_ms(kernels, spec, bs) + decode_core_roofline(kernels, spec, tp, bs, kv)
    t = _table(kernels, spec, tp)
    if t is None:
        return roofline
    from vidur_specdec.costs.kernels import table_data as TD

    return np.maximum(TD.grid2(bs, kv, *t[1]) - charged, roofline)


def prefill_ms(kernels, spec, tp: int, chunk, kv):
    """Projections, causal indexer and sparse MLA of one ``chunk``-token prefill after ``kv`` cached (ms)."""
    c, kv = np.asarray(chunk, dtype=float), np.asarray(kv, dtype=float)
    dense_pairs = c * kv + c * (c + 1) / 2.0
    # query i (1..c) attends min(topk, kv + i) tokens: the sum in closed form
    T = float(spec.index_topk)
    n_full = np.clip(T - kv, 0.0, c)  # queries whose whole context fits in the top-k
    sparse_pairs = n_full * kv + n_full * (n_full + 1) / 2.0 + (c - n_full) * T
    dense = kernels.prefill_attention_ms(c, kv, *_mla_shape(spec, tp))
    mla = dense * sparse_pairs / np.maximum(dense_pairs, 1.0)
    return projections_ms(kernels, spec, c) + indexer_ms(kernels, spec, c, kv + c, dense_pairs) + mla


def attention_op_times(kernels, spec, tp: int, out: Dict, batch_size, kv_cache_size, prefill_chunk_size) -> Dict:
    """``out`` (the run's attention.csv ops) with ``attn_decode`` / ``attn_prefill`` priced as DSA."""
    bs, kv, chunk = np.broadcast_arrays(*(np.asarray(a, dtype=float) for a in
                                          (batch_size, kv_cache_size, prefill_chunk_size)))
    pre = chunk > 0
    b = np.where(pre, 1.0, bs)
    linear = kernels.mlp_op_times(quant.module_spec(spec), tp, b)  # at the module rows' GEMM dtype
    charged = sum(np.asarray(linear[op], dtype=float) for op in ("attn_pre_proj", "attn_post_proj", "attn_rope"))
    charged = charged + out["attn_input_reshape"] + out["attn_output_reshape"]
    dec = decode_ms(kernels, spec, tp, b, kv, charged)
    pf = prefill_ms(kernels, spec, tp, np.where(pre, chunk, 1.0), kv)
    return {**out, "attn_decode": np.where(pre, np.nan, dec), "attn_prefill": np.where(pre, pf, np.nan)}
