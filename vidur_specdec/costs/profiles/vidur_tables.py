"""An analytical profile as Vidur's profile CSVs: their columns, the grid their rows are written at, the tables.

:func:`build_mlp_df` and :func:`build_attention_df` write the op times of
:mod:`~vidur_specdec.costs.profiles.builder` (or of a kernel source) in the schema
of Vidur's ``mlp.csv`` and ``attention.csv`` (:data:`MLP_COLUMNS`,
:data:`ATTENTION_COLUMNS`): one row per token count of :func:`mlp_token_grid`
and per (batch size, chunk, context) of :func:`attention_grid`, every statistic
the same time (an analytical profile has no spread). Times are ms per layer.
"""

from __future__ import annotations

from typing import Dict, Mapping, Optional

import numpy as np
import pandas as pd

from vidur_specdec.architectures.models import ModelSpec
from vidur_specdec.costs.profiles import params as P
from vidur_specdec.costs.profiles.builder import attention_op_times, check_tp, mlp_op_times

STAT_SUFFIXES = ("min", "max", "mean", "median", "std")

MLP_OPS = (
    "emb",
    "input_layernorm",
    "attn_pre_proj",
    "attn_rope",
    "attn_post_proj",
    "post_attention_layernorm",
    "mlp_up_proj",
    "mlp_act",
    "mlp_down_proj",
    "add",
)
MLP_META = (
    "n_head",
    "n_kv_head",
    "n_embd",
    "n_expanded_embd",
    "vocab_size",
    "use_gated_mlp",
    "num_tokens",
    "num_tensor_parallel_workers",
)
ATTENTION_OPS = ("attn_input_reshape", "attn_decode", "attn_output_reshape", "attn_prefill")
ATTENTION_META = (
    "n_embd",
    "n_q_head",
    "n_kv_head",
    "block_size",
    "num_tensor_parallel_workers",
    "max_model_len",
    "batch_size",
    "prefill_chunk_size",
    "kv_cache_size",
    "is_prefill",
    "attention_backend",
)


def _stat_columns(ops) -> list:
    return [f"time_stats.{op}.{s}" for op in ops for s in STAT_SUFFIXES]


MLP_COLUMNS = _stat_columns(MLP_OPS) + list(MLP_META)
ATTENTION_COLUMNS = _stat_columns(ATTENTION_OPS) + list(ATTENTION_META)


def mlp_token_grid(max_tokens: Optional[int] = None, step: Optional[int] = None) -> np.ndarray:
    """num_tokens written to mlp.csv: 1, 2, 4, then step..max_tokens in steps of ``step``."""
    max_tokens = P.GRID["mlp_max_tokens"] if max_tokens is None else max_tokens
    step = P.GRID["mlp_token_step"] if step is None else step
    head = [n for n in (1, 2, 4) if n < step and n <= max_tokens]
    return np.array(head + list(range(step, max_tokens + 1, step)), dtype=np.int64)


def attention_grid(max_model_len: int, grid: Optional[Mapping] = None,
                   max_chunk: Optional[int] = None) -> pd.DataFrame:
    """(batch_size, prefill_chunk_size, kv_cache_size) rows: all decode rows, then prefill rows.

    Decode: batch 1..decode_max_batch x kv decode_kv_step..max_model_len (a decode always has
    context). Prefill: chunk step..max_model_len x kv 0..(max_model_len - chunk); with
    ``max_chunk`` (profiles on demand: no chunk exceeds the scheduler's chunk size) chunk
    step..max_chunk x kv 0..max_model_len, a full rectangle.
    """
    g = P.GRID if grid is None else grid
    kv_step, c_step = g["decode_kv_step"], g["prefill_chunk_step"]
    b = np.repeat(np.arange(1, g["decode_max_batch"] + 1), len(range(kv_step, max_model_len + 1, kv_step)))
    kv = np.tile(np.arange(kv_step, max_model_len + 1, kv_step), g["decode_max_batch"])
    parts = [(b, np.zeros_like(b), kv)]
    if max_chunk is None:
        for chunk in range(c_step, max_model_len + 1, c_step):
            kvs = np.arange(0, max_model_len - chunk + 1, g["prefill_kv_step"])
            parts.append((np.ones_like(kvs), np.full_like(kvs, chunk), kvs))
    else:
        chunks = np.arange(c_step, max_chunk + 1, c_step)
        kvs = np.arange(0, max_model_len + 1, g["prefill_kv_step"])
        parts.append((np.ones(len(chunks) * len(kvs), dtype=np.int64), np.repeat(chunks, len(kvs)),
                      np.tile(kvs, len(chunks))))
    cols = [np.concatenate([p[i] for p in parts]).astype(np.int64) for i in range(3)]
    return pd.DataFrame({"batch_size": cols[0], "prefill_chunk_size": cols[1], "kv_cache_size": cols[2]})


def attention_grid_rows(max_model_len: int, grid: Optional[Mapping] = None, max_chunk: Optional[int] = None) -> int:
    """``len(attention_grid(max_model_len, grid, max_chunk))``, counted without building it."""
    g = P.GRID if grid is None else grid
    kv_step, c_step, p_step = g["decode_kv_step"], g["prefill_chunk_step"], g["prefill_kv_step"]
    rows = g["decode_max_batch"] * (max_model_len // kv_step)
    if max_chunk is None:
        rows += sum((max_model_len - chunk) // p_step + 1 for chunk in range(c_step, max_model_len + 1, c_step))
    else:
        rows += (max_chunk // c_step) * (max_model_len // p_step + 1)
    return rows


def _stats(times: np.ndarray) -> Dict[str, np.ndarray]:
    """Analytical profiles have no spread: min = max = mean = median, std 0 (NaN stays NaN)."""
    t = np.round(times, P.TIME_DECIMALS)
    std = np.where(np.isnan(t), np.nan, 0.0)
    return {"min": t, "max": t, "mean": t, "median": t, "std": std}


def _time_columns(ops, times: Mapping) -> Dict[str, np.ndarray]:
    """Vidur's ``time_stats.<op>.<stat>`` columns (ms) of ``ops``, from each op's times."""
    return {f"time_stats.{op}.{s}": v for op in ops for s, v in _stats(times[op]).items()}


def build_mlp_df(
    spec: ModelSpec,
    device: Mapping,
    tp: int,
    max_tokens: Optional[int] = None,
    efficiency: Optional[Mapping] = None,
    kernels=None,
) -> pd.DataFrame:
    """mlp.csv content (Vidur schema) for one model, device and tp.

    ``kernels`` (a :class:`~vidur_specdec.costs.kernels.KernelSource`) prices the ops instead of this module's
    roofline at ``efficiency``.
    """
    check_tp(spec, tp)
    tokens = mlp_token_grid(max_tokens)
    if kernels is not None:
        times = kernels.mlp_op_times(spec, tp, tokens)
    else:
        times = mlp_op_times(spec, device, tp, tokens, efficiency)
    cols = _time_columns(MLP_OPS, times)
    n = len(tokens)
    meta = {
        "n_head": spec.num_heads,
        "n_kv_head": spec.num_kv_heads,
        "n_embd": spec.hidden_size,
        "n_expanded_embd": spec.ffn_size,
        "vocab_size": spec.vocab_size,
        "use_gated_mlp": True,
    }
    for k, v in meta.items():
        cols[k] = np.full(n, v)
    cols["num_tokens"] = tokens
    cols["num_tensor_parallel_workers"] = np.full(n, tp, dtype=np.int64)
    return pd.DataFrame(cols, columns=MLP_COLUMNS)


def build_attention_df(
    spec: ModelSpec,
    device: Mapping,
    tp: int,
    efficiency: Optional[Mapping] = None,
    max_chunk: Optional[int] = None,
    kernels=None,
) -> pd.DataFrame:
    """attention.csv content (Vidur schema) for one model, device and tp (``max_chunk``: see :func:`attention_grid`;
    ``kernels``: as in :func:`build_mlp_df`)."""
    check_tp(spec, tp)
    grid = attention_grid(spec.max_model_len, max_chunk=max_chunk)
    if kernels is not None:
        times = kernels.attention_op_times(spec, tp, grid["batch_size"].to_numpy(), grid["kv_cache_size"].to_numpy(),
                                           grid["prefill_chunk_size"].to_numpy())
    else:
        times = attention_op_times(
            spec, device, tp, grid["batch_size"], grid["kv_cache_size"], grid["prefill_chunk_size"], efficiency
        )
    cols = _time_columns(ATTENTION_OPS, times)
    n = len(grid)
    cols["n_embd"] = np.full(n, spec.hidden_size)
    cols["n_q_head"] = np.full(n, spec.num_heads)
    cols["n_kv_head"] = np.full(n, spec.num_kv_heads)
    cols["block_size"] = np.full(n, P.BLOCK_SIZE)
    cols["num_tensor_parallel_workers"] = np.full(n, tp)
    cols["max_model_len"] = np.full(n, spec.max_model_len)
    cols["batch_size"] = grid["batch_size"].to_numpy()
    cols["prefill_chunk_size"] = grid["prefill_chunk_size"].to_numpy()
    cols["kv_cache_size"] = grid["kv_cache_size"].to_numpy()
    cols["is_prefill"] = grid["prefill_chunk_size"].to_numpy() > 0
    cols["attention_backend"] = np.full(n, P.ATTENTION_BACKEND, dtype=object)
    return pd.DataFrame(cols, columns=ATTENTION_COLUMNS)
