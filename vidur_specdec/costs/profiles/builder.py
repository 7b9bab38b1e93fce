"""Analytical per-operator time model, written in Vidur's profile CSV schema.

Every op is a roofline with kernel-level corrections (wave quantisation of
GEMMs and of FlashAttention's decode blocks, L2 residency of small tensors,
launch floors); times are ms per layer, per GPU at tensor parallel size ``tp``.
All numbers come from :mod:`.params`; the functions take ``efficiency``
overrides (same keys as ``params.EFFICIENCY``) so the calibration can try other
values without editing that file. See ``docs/profiles.md`` for the equations.
"""

from __future__ import annotations

import math
from typing import Dict, Mapping, Optional, Tuple

import numpy as np

from vidur_specdec.architectures import quant
from vidur_specdec.architectures.models import ModelSpec
from vidur_specdec.architectures.quant import FORMAT_BYTES
from vidur_specdec.costs.profiles import params as P
from vidur_specdec.hardware.devices import DeviceError, DeviceSpec, get_device

# Op groups used by the comparison against measured profiles and the calibration.
GEMM_OPS = ("attn_pre_proj", "attn_post_proj", "mlp_up_proj", "mlp_down_proj")
ELEMENTWISE_OPS = ("emb", "input_layernorm", "attn_rope", "post_attention_layernorm", "mlp_act", "add")


class ProfileError(ValueError):
    """Bad builder input (unknown device, tensor parallelism that does not fit the model)."""


def device_fields(device) -> Dict:
    """The builder's device figures (``peak_flops``, ``mem_bw``, ``mem_bytes``, ``sms``, ``l2_bytes``).

    ``device`` is a built-in name or a device YAML file (both through
    :func:`vidur_specdec.hardware.devices.get_device`), a DeviceSpec, or a mapping that
    already holds those figures.
    """
    if isinstance(device, Mapping) and not isinstance(device, DeviceSpec):
        return dict(device)
    try:
        return get_device(device).builder_fields()
    except DeviceError as e:
        raise ProfileError(str(e)) from None


def check_tp(spec: ModelSpec, tp: int) -> None:
    """Raise :class:`ProfileError` unless ``tp`` splits the model's heads and MLP evenly."""
    if not isinstance(tp, (int, np.integer)) or tp < 1:
        raise ProfileError(f"tensor parallel size must be a positive integer, got {tp!r}")
    if spec.num_heads % tp:
        raise ProfileError(f"tp={tp} does not divide {spec.name}'s {spec.num_heads} attention heads")
    kv = spec.num_kv_heads
    if kv % tp and tp % kv:
        raise ProfileError(
            f"tp={tp} neither divides nor is a multiple of {spec.name}'s {kv} KV heads"
        )
    if spec.ffn_size % tp:
        raise ProfileError(f"tp={tp} does not divide {spec.name}'s MLP size {spec.ffn_size}")
    if getattr(spec, "expert_ffn_size", 0) % tp:
        raise ProfileError(f"tp={tp} does not divide {spec.name}'s expert width {spec.expert_ffn_size}")


def shard(spec: ModelSpec, tp: int) -> Tuple[int, int, int, int, int]:
    """(hidden, head_dim, q heads, kv heads, ffn) on one of ``tp`` GPUs."""
    q_heads = spec.num_heads // tp
    kv_heads = -(-spec.num_kv_heads // tp)  # replicated when tp > kv heads
    return spec.hidden_size, spec.head_dim, q_heads, kv_heads, spec.ffn_size // tp


def complete_device_fields(device: Mapping) -> Mapping:
    """``device`` with ``sms`` and ``l2_bytes`` filled in (A100 values) when a custom mapping lacks them."""
    if "sms" in device and "l2_bytes" in device:
        return device
    d = dict(device)
    d.setdefault("sms", P.DEVICES["a100"]["sms"])
    d.setdefault("l2_bytes", P.DEVICES["a100"]["l2_bytes"])
    return d


def stream_ms(nbytes, device: Mapping, op: Mapping, l2: Mapping, tokens=None, token_bytes=None, block: Optional[Mapping] = None):
    """Memory-bound kernel: the first ``resident_fraction`` of L2 worth of bytes moves
    ``speedup`` times faster (L2 hits); the rest at ``mem_eff`` of HBM bandwidth.

    Kernels that run one thread block per token (``tokens`` and ``token_bytes`` given)
    cannot go faster than whole waves of one block per SM, each block streaming its
    token's ``token_bytes`` at ``block["bw"]`` bytes/s: that floor sets the time of
    small batches.
    """
    nb = np.asarray(nbytes, dtype=float)
    fast = np.minimum(nb, l2["resident_fraction"] * device["l2_bytes"])
    eff_bytes = fast / l2["speedup"] + (nb - fast)
    t = eff_bytes / (device["mem_bw"] * op["mem_eff"])
    if tokens is not None:
        waves = np.ceil(np.asarray(tokens, dtype=float) / device["sms"])
        t = np.maximum(t, waves * np.asarray(token_bytes, dtype=float) / block["bw"])
    return t * 1e3 + op["launch_ms"]


def gemm_ms(tokens, k: int, n: int, device: Mapping, e: Mapping, b: int, weight_b: Optional[float] = None):
    """[tokens x k] x [k x n] GEMM (2*t*k*n FLOPs; reads input and weights, writes output).

    ``b`` bytes per element; ``weight_b`` bytes per weight when the weights are in
    another format (None: ``b``). ``device["peak_flops"]`` is the rate the GEMM
    runs at (the caller passes the FP8 rate for an fp8 GEMM, :func:`fp8_device`).

    Compute time blends the ideal time with the wave-quantised one (whole waves of
    ``sms`` output tiles of ``gemm_tile_m x gemm_tile_n``); it is combined with the
    weight-streaming time by a power mean (exponent ``overlap_exp``; large = max).
    """
    t = np.asarray(tokens, dtype=float)
    peak, sms = device["peak_flops"], device["sms"]
    tm, tn = P.KERNEL["gemm_tile_m"], P.KERNEL["gemm_tile_n"]
    flops = 2.0 * t * k * n
    if weight_b is None:
        nbytes = b * (t * k + float(k) * n + t * n)
    else:  # weights at their own format (fp8: 1 byte), activations in and out at b
        nbytes = b * (t * k + t * n) + weight_b * float(k) * n
    waves = np.ceil(np.ceil(t / tm) * math.ceil(n / tn) / sms)
    t_flat = flops / (peak * e["compute_eff_max"])
    t_wave = waves * (2.0 * tm * tn * k * sms) / (peak * e["compute_eff_max"])
    w = e["wave_weight"]
    t_compute = (1.0 - w) * t_flat + w * t_wave
    t_memory = nbytes / (device["mem_bw"] * e["mem_eff"])
    pw = e["overlap_exp"]
    return (t_compute**pw + t_memory**pw) ** (1.0 / pw) * 1e3 + e["launch_ms"]


def fp8_device(device: Mapping) -> Mapping:
    """``device`` with ``peak_flops`` at its FP8 tensor-core rate (``fp8_flops``); unchanged when it has none."""
    if not device.get("fp8_flops"):
        return device
    return {**device, "peak_flops": device["fp8_flops"]}


def fp4_device(device: Mapping) -> Mapping:
    """``device`` with ``peak_flops`` at its FP4 tensor-core rate (``fp4_flops``); unchanged when it has none."""
    if not device.get("fp4_flops"):
        return device
    return {**device, "peak_flops": device["fp4_flops"]}


def dtype_device(device: Mapping, dtype: str) -> Tuple[Mapping, Optional[float]]:
    """(``device`` at the tensor-core rate of a ``dtype`` GEMM, bytes per weight or None for bf16).

    ``fp8``: W8A8 at the FP8 rate, 1-byte weights; ``nvfp4``: W4A4 at the FP4 rate, 4.5-bit weights
    (:data:`vidur_specdec.architectures.quant.FORMAT_BYTES`). Activations are read and written in bf16 (the
    per-token cast to fp8 / fp4 is left out).
    """
    if dtype == "fp8":
        return fp8_device(device), FORMAT_BYTES["fp8"]
    if dtype == "nvfp4":
        return fp4_device(device), FORMAT_BYTES["nvfp4"]
    return device, None


def mlp_op_times(
    spec: ModelSpec,
    device: Mapping,
    tp: int,
    num_tokens,
    efficiency: Optional[Mapping] = None,
) -> Dict[str, np.ndarray]:
    """Per-layer time in ms of every mlp.csv op for each entry of ``num_tokens``."""
    e = P.EFFICIENCY if efficiency is None else efficiency
    device = complete_device_fields(device)
    b = P.DTYPE_BYTES
    h, hd, qh, kvh, ffn = shard(spec, tp)
    t = np.asarray(num_tokens, dtype=float)
    act = t * h * b  # one [tokens x hidden] activation, bytes
    g, l2, blk = e["gemm"], e["l2"], e["token_block"]
    em = e["emb"]
    norm_tok = 2 * h * b  # bytes one token's block moves (read x, write y)

    def linear(part):
        # each part at its checkpoint format (quant.gemm_dtype): bf16; W8A8 fp8 (vLLM's fp8 linear method: weights
        # 1 byte, FP8 tensor-core rate); W4A4 NVFP4 (4.5-bit weights, FP4 rate); activations bf16 in and out
        dev, wb = dtype_device(device, quant.gemm_dtype(spec, part))
        return lambda tok, k, n: gemm_ms(tok, k, n, dev, g, b, weight_b=wb)

    attn, o_proj, mlp = linear("attention"), linear("o_proj"), linear("dense_mlp")
    return {
        # vocab-parallel lookup: write T x hidden, read the rows held by this GPU's
        # shard (a share of them), read 8-byte ids
        "emb": stream_ms(act * (1.0 + em["shard_read"] / tp) + 8 * t, device, em, l2),
        # read x, write y, read the weight vector (not sharded by tp); one block per token
        "input_layernorm": stream_ms(2 * act + h * b, device, e["norm"], l2, t, norm_tok, blk),
        "attn_pre_proj": attn(t, h, (qh + 2 * kvh) * hd),
        # rotate q and k in place: read + write; one block per token
        "attn_rope": stream_ms(
            2 * t * (qh + kvh) * hd * b, device, e["attn_rope"], l2, t, 2 * (qh + kvh) * hd * b, blk
        ),
        "attn_post_proj": o_proj(t, qh * hd, h),
        "post_attention_layernorm": stream_ms(2 * act + h * b, device, e["norm"], l2, t, norm_tok, blk),
        "mlp_up_proj": mlp(t, h, 2 * ffn),
        # read gate and up, write their product; one block per token
        "mlp_act": stream_ms(3 * t * ffn * b, device, e["mlp_act"], l2, t, 3 * ffn * b, blk),
        "mlp_down_proj": mlp(t, ffn, h),
        # residual add: read two, write one (not sharded by tp); a flat elementwise kernel
        "add": stream_ms(3 * act, device, e["add"], l2),
    }


def decode_attention_ms(bs, kv, q_heads: int, kv_heads: int, head_dim: int, device: Mapping, d: Mapping,
                        kv_b: Optional[int] = None):
    """FlashAttention-2 decode of ``bs`` requests with ``kv`` cached tokens each.

    One thread block per (request, KV head) -- the query heads of a GQA group share
    a block. With at least ``decode_split_threshold`` x slots blocks, the blocks run
    in whole waves of ``slots = sms x decode_ctas_per_sm``: each wave costs
    ``wave_ms`` plus streaming one block's K/V per slot at ``mem_eff`` of HBM
    bandwidth. With fewer blocks FA2 splits the sequence (split-KV) to fill the
    GPU: one wave of overhead and the bytes at ``mem_eff x split_eff``.
    """
    bs = np.asarray(bs, dtype=float)
    kv = np.asarray(kv, dtype=float)
    b = P.DTYPE_BYTES
    if kv_b is None:
        nbytes = b * bs * head_dim * (2.0 * kv * kv_heads + 2.0 * q_heads)  # K/V of the context; q in, out
    else:  # K/V at the cache's element size (fp8: 1 byte); q and out bf16
        nbytes = bs * head_dim * (kv_b * 2.0 * kv * kv_heads + b * 2.0 * q_heads)
    t_bytes = nbytes / (device["mem_bw"] * d["mem_eff"]) * 1e3
    slots = device["sms"] * P.KERNEL["decode_ctas_per_sm"]
    blocks = np.maximum(bs * kv_heads, 1e-9)
    x = blocks / slots
    waves = np.ceil(x)
    whole = waves * d["wave_ms"] + t_bytes * waves / x
    split = d["wave_ms"] + t_bytes / d["split_eff"]
    return np.where(x < P.KERNEL["decode_split_threshold"], split, whole) + d["launch_ms"]


def prefill_attention_ms(chunk, kv, q_heads: int, kv_heads: int, head_dim: int, device: Mapping, p: Mapping,
                         kv_b: Optional[int] = None):
    """FlashAttention-2 prefill of one ``chunk``-token piece after ``kv`` cached tokens.

    FLOPs ``4 d q c (context_cost K + causal_fraction c)``; the reached share of peak
    grows with the work in flight (query tokens x heads), ``compute_eff_max x n/(n +
    compute_half)`` with ``n = c q / prefill_ref_heads``; the cached K/V read is a
    memory floor; writing the chunk's K/V costs ``kv_write_ms`` per (token x KV head).
    """
    c = np.asarray(chunk, dtype=float)
    kv = np.asarray(kv, dtype=float)
    b = P.DTYPE_BYTES
    flops = 4.0 * head_dim * q_heads * c * (p["context_cost"] * kv + p["causal_fraction"] * c)
    n = c * q_heads / P.KERNEL["prefill_ref_heads"]
    eff = p["compute_eff_max"] * n / (n + p["compute_half"])
    t_compute = flops / (device["peak_flops"] * eff)
    if kv_b is None:
        nbytes = b * head_dim * (2.0 * c * q_heads + 2.0 * (kv + c) * kv_heads)  # q in, out; K/V of kv + chunk
    else:  # K/V at the cache's element size; FLOPs stay at the bf16 rate
        nbytes = head_dim * (b * 2.0 * c * q_heads + kv_b * 2.0 * (kv + c) * kv_heads)
    t_memory = nbytes / (device["mem_bw"] * p["mem_eff"])
    return np.maximum(t_compute, t_memory) * 1e3 + p["kv_write_ms"] * c * kv_heads + p["launch_ms"]


def attention_op_times(
    spec: ModelSpec,
    device: Mapping,
    tp: int,
    batch_size,
    kv_cache_size,
    prefill_chunk_size,
    efficiency: Optional[Mapping] = None,
) -> Dict[str, np.ndarray]:
    """Per-layer time in ms of every attention.csv op for each (batch, kv, chunk) entry.

    A row with ``prefill_chunk_size > 0`` is a prefill of one request (``batch_size``
    ignored): ``attn_decode`` is NaN there, and ``attn_prefill`` is NaN on decode rows.
    """
    e = P.EFFICIENCY if efficiency is None else efficiency
    device = complete_device_fields(device)
    b = P.DTYPE_BYTES
    _, hd, qh, kvh, _ = shard(spec, tp)
    bs, kv, chunk = np.broadcast_arrays(
        np.asarray(batch_size, dtype=float),
        np.asarray(kv_cache_size, dtype=float),
        np.asarray(prefill_chunk_size, dtype=float),
    )
    is_prefill = chunk > 0
    kv_b = 1 if getattr(spec, "kv_cache_dtype", "") == "fp8" else None  # None: bf16, the historical formula
    decode = decode_attention_ms(np.where(is_prefill, 1.0, bs), kv, qh, kvh, hd, device, e["attn_decode"], kv_b)
    c = np.where(is_prefill, chunk, 1.0)  # avoid 0/0 on decode rows (masked below)
    prefill = prefill_attention_ms(c, kv, qh, kvh, hd, device, e["attn_prefill"], kv_b)

    tokens = np.where(is_prefill, chunk, bs)
    out_reshape = stream_ms(2.0 * tokens * qh * hd * b, device, e["attn_output_reshape"], e["l2"])
    in_reshape = np.full(tokens.shape, float(e["attn_input_reshape"]["launch_ms"]))

    return {
        "attn_input_reshape": in_reshape,
        "attn_decode": np.where(is_prefill, np.nan, decode),
        "attn_output_reshape": out_reshape,
        "attn_prefill": np.where(is_prefill, prefill, np.nan),
    }


def median_abs_pct_error(pred, meas) -> float:
    """Median of |pred - meas| / meas in %, over entries with a positive measurement."""
    pred = np.asarray(pred, dtype=float)
    meas = np.asarray(meas, dtype=float)
    ok = np.isfinite(pred) & np.isfinite(meas) & (meas > 0)
    if not ok.any():
        return math.nan
    return float(np.median(np.abs(pred[ok] - meas[ok]) / meas[ok]) * 100.0)
