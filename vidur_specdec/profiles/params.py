"""Every number the analytical profile builder uses, as plain data.

Nothing else in :mod:`vidur_specdec.profiles` holds a device figure or a
tuning constant: a calibration replaces the values below (same keys) and the
builder picks them up. Units are in the comments; times are milliseconds (ms),
rates are per second, sizes are bytes.

Efficiency shapes (see ``docs/profiles.md``):

* ``compute_eff(n) = compute_eff_max * n / (n + compute_half)`` -- the fraction
  of peak FLOP/s a kernel reaches grows with its work size ``n`` (tokens for a
  GEMM, query tokens for prefill attention) and saturates at ``compute_eff_max``.
* ``mem_eff`` -- fraction of peak HBM bandwidth reached by a memory-bound kernel
  (for decode attention it also grows with the batch, see ``attn_decode``).
* ``launch_ms`` -- fixed cost per kernel (launch + tail), added once per op.

The values were hand-tuned against Vidur's measured A100 Llama-2-7B TP1
profile (the sanity table is in ``docs/profiles.md``); they are a starting
point, not a calibration.
"""

from __future__ import annotations

from typing import Dict

# Bytes per element of weights, activations and KV cache (BF16/FP16).
DTYPE_BYTES: int = 2

# Vidur's paged-KV block size written into attention.csv (tokens per block).
BLOCK_SIZE: int = 16

# Attention backend label written into attention.csv (Vidur's enum string).
ATTENTION_BACKEND: str = "AttentionBackend.FLASH_ATTENTION"

# Device datasheet figures. peak_flops: dense BF16/FP16 tensor-core FLOP/s
# (no sparsity); mem_bw: HBM bandwidth in bytes/s; mem_bytes: HBM capacity.
DEVICES: Dict[str, Dict] = {
    # NVIDIA A100 80GB SXM (HBM2e): 312 TFLOP/s, 2039 GB/s.
    "a100": {"peak_flops": 312e12, "mem_bw": 2039e9, "mem_bytes": 80 * 10**9},
    # NVIDIA H100 SXM5 80GB (HBM3): 989 TFLOP/s, 3350 GB/s.
    "h100": {"peak_flops": 989e12, "mem_bw": 3350e9, "mem_bytes": 80 * 10**9},
    # NVIDIA H200 SXM 141GB (HBM3e): 989 TFLOP/s, 4800 GB/s.
    "h200": {"peak_flops": 989e12, "mem_bw": 4800e9, "mem_bytes": 141 * 10**9},
}

# Efficiency and launch terms, shared by every device (a calibration may later
# make them per device).
EFFICIENCY: Dict[str, Dict] = {
    # Dense projections (attn_pre_proj, attn_post_proj, mlp_up_proj,
    # mlp_down_proj): roofline of a [tokens x K] x [K x N] GEMM.
    "gemm": {
        "compute_eff_max": 0.72,  # fraction of peak FLOP/s at large token counts
        "compute_half": 50.0,  # tokens at which half of compute_eff_max is reached
        "mem_eff": 0.82,  # fraction of peak HBM bandwidth streaming the weights
        "launch_ms": 0.007,  # ms per GEMM kernel
    },
    # Memory-bound elementwise ops: time = bytes / (mem_bw * mem_eff) + launch_ms.
    "emb": {"mem_eff": 0.14, "launch_ms": 0.004},  # embedding gather (vocab-parallel)
    "norm": {"mem_eff": 0.40, "launch_ms": 0.0035},  # RMSNorm (both norms)
    "attn_rope": {"mem_eff": 0.48, "launch_ms": 0.0045},  # rotary on q and k, in place
    "mlp_act": {"mem_eff": 0.52, "launch_ms": 0.006},  # SiLU(gate) * up
    "add": {"mem_eff": 0.92, "launch_ms": 0.0015},  # residual add
    # Copy of the attention output back to [tokens x heads*head_dim].
    "attn_output_reshape": {"mem_eff": 0.80, "launch_ms": 0.0017},
    # The input reshape is a view (no kernel): Vidur measures 0.0 ms.
    "attn_input_reshape": {"launch_ms": 0.0},
    # FlashAttention decode: streams the K/V cache of every request; the
    # bandwidth reached grows with the batch,
    # mem_eff(batch) = mem_eff_max * batch / (batch + batch_half).
    "attn_decode": {
        "mem_eff_max": 0.95,  # fraction of peak HBM bandwidth at large batch
        "batch_half": 0.8,  # requests at which half of mem_eff_max is reached
        "compute_eff": 0.30,  # fraction of peak FLOP/s for QK^T and PV (rarely binding)
        "per_seq_kv_head_ms": 0.000034,  # ms per (request x KV head on this GPU)
        "launch_ms": 0.006,  # ms per decode attention call
    },
    # FlashAttention prefill of one request's chunk.
    "attn_prefill": {
        "compute_eff_max": 0.33,  # fraction of peak FLOP/s for long chunks
        "compute_half": 24.0,  # query tokens at which half of compute_eff_max is reached
        "causal_fraction": 1.0,  # share of the in-chunk causal square computed (0.5 = ideal skip)
        "mem_eff": 0.80,  # fraction of peak HBM bandwidth reading the cached K/V
        "launch_ms": 0.020,  # ms per prefill attention call
    },
}

# Grid written by the builder (see docs/profiles.md).
GRID: Dict[str, int] = {
    "mlp_max_tokens": 4096,  # num_tokens: 1, 2, 4, then 8..mlp_max_tokens step 8
    "mlp_token_step": 8,
    "decode_max_batch": 128,  # batch_size 1..decode_max_batch
    "decode_kv_step": 64,  # kv_cache_size decode_kv_step..max_model_len step decode_kv_step
    "prefill_chunk_step": 32,  # prefill_chunk_size step..max_model_len step
    "prefill_kv_step": 64,  # kv_cache_size 0..(max_model_len - chunk) step
}

# Decimal places of every time written to the CSVs.
TIME_DECIMALS: int = 6
