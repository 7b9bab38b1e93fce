"""Gated-delta-net (linear attention) kernel times: vLLM's measured table, else a memory-bound roofline.

One linear-attention layer of a step, on one of ``tp`` GPUs (per-GPU heads
``Hk/tp``, ``Hv/tp``), as vLLM 0.33 runs it
(``model_executor/layers/mamba/gdn/qwen_gdn_linear_attn.py``, ``v1/attention/backends/gdn_attn.py``):

* **decode** (one token per request): ``causal_conv1d_update`` + the packed
  recurrent kernel (``fused_recurrent_gated_delta_rule_packed_decode``); it
  reads and writes each request's recurrent state once.
* **verify** (a request with ``q`` = k + 1 tokens): the spec path of
  ``fused_recurrent_gated_delta_rule`` with ``ssm_state_indices`` of shape
  ``[batch, k + 1]`` and ``num_accepted_tokens``: it loads the state kept at
  the last accepted position (no recomputation: vLLM keeps one state slot per
  speculative position) and, looping over the q tokens, writes the state after
  every token to its slot (``third_party/flash_linear_attention/ops/fused_recurrent.py``).
  It moves ``1 + q`` states where a decode moves 2, so it is priced as the decode
  table's time at the same batch × ``(1 + q) / 2`` (the kernel is bound by state
  traffic: 4 MiB of fp32 state per request and layer at TP 1 for Qwen3.5-397B);
  the conv update at ``batch · q`` tokens.
* **prefill** (chunks): ``causal_conv1d_fn`` + ``chunk_gated_delta_rule``; a
  step's chunks (one varlen call) priced as one sequence of their summed tokens.

Table: ``linear_attention/vllm/0.24.0/gdn_perf`` of ``aiconfigurator-core``
(rows by ``d_model``, per-GPU ``num_k_heads``/``num_v_heads``, head dims, batch, seq_len);
linear in batch / tokens between rows, proportional beyond the last. Without
rows for the shape (or on a GPU without the table) the roofline: state bytes
(and, for prefill, q/k/v/out activations) at HBM bandwidth through the
source's ``elementwise_ms``, plus the chunked algorithm's matmuls
(``4 Hv dk dv`` FLOPs per token) through ``gemm_ms``. Units: ms per layer.
"""

from __future__ import annotations

from typing import Dict, Optional, Sequence, Tuple

import numpy as np

GDN_VERSION = "0.24.0"
_DECODE = ("causal_conv1d_update", "fused_recurrent_gated_delta_rule_packed_decode")
_PREFILL = ("causal_conv1d_fn", "chunk_gated_delta_rule_flashinfer")


def _shape(spec, tp: int) -> Tuple[int, int, int, int, int]:
    return (spec.hidden_size, spec.linear_num_key_heads // tp, spec.linear_key_head_dim,
            spec.linear_num_value_heads // tp, spec.linear_value_head_dim)


def state_bytes(spec, tp: int) -> int:
    """One request's recurrent state in one layer on one GPU (bytes)."""
    from vidur_specdec.architectures.layer_plan import SSM_DTYPE_BYTES

    _, hk, dk, hv, dv = _shape(spec, tp)
    return hv * dk * dv * SSM_DTYPE_BYTES[spec.mamba_ssm_dtype]


class GdnTable:
    """The measured rows of one (system, per-GPU shape): decode time by batch, prefill time by tokens (ms)."""

    def __init__(self, df) -> None:
        gen = df[df.phase == "generation"]
        self.conv_b, self.conv_t = self._curve(gen[gen.kernel_source == _DECODE[0]], "batch_size")
        self.rec_b, self.rec_t = self._curve(gen[gen.kernel_source == _DECODE[1]], "batch_size")
        ctx = df[(df.phase == "context") & (df.batch_size == 1)]
        parts = [self._curve(ctx[ctx.kernel_source == k], "seq_len") for k in _PREFILL]
        self.pre_n = parts[0][0]
        self.pre_t = parts[0][1] + np.interp(self.pre_n, parts[1][0], parts[1][1])

    @staticmethod
    def _curve(rows, col):
        g = rows.groupby(col)["latency"].median().sort_index()
        return g.index.to_numpy(float), np.maximum.accumulate(g.to_numpy(float))

    @staticmethod
    def _at(x: float, xs: np.ndarray, ts: np.ndarray) -> float:
        if x <= 0:
            return 0.0
        if x > xs[-1]:
            return float(ts[-1] * x / xs[-1])
        return float(np.interp(x, xs, ts))

    def decode_ms(self, groups: Sequence[int]) -> float:
        n = len(groups)
        if not n:
            return 0.0
        tokens = sum(groups)
        moved = sum(1 + q for q in groups) / (2.0 * n)  # states moved per request over a decode's 2
        return self._at(tokens, self.conv_b, self.conv_t) + self._at(n, self.rec_b, self.rec_t) * moved

    def prefill_ms(self, tokens: int) -> float:
        return self._at(tokens, self.pre_n, self.pre_t)


_TABLES: Dict[tuple, Optional[GdnTable]] = {}


def table(system: str, spec, tp: int) -> Optional[GdnTable]:
    """The measured rows for ``spec`` at ``tp`` on ``system`` (None: the package has none for that shape)."""
    key = (system, _shape(spec, tp))
    if key not in _TABLES:
        from vidur_specdec.costs.kernels import table_data as TD

        df = TD.load_optional(system, "linear_attention", "vllm", GDN_VERSION, "gdn_perf")  # a bad file: raised
        if df is None:
            _TABLES[key] = None
            return None
        h, hk, dk, hv, dv = key[1]
        rows = df[(df.d_model == h) & (df.num_k_heads == hk) & (df.head_k_dim == dk) & (df.num_v_heads == hv)
                  & (df.head_v_dim == dv) & (df.d_conv == spec.linear_conv_kernel_dim)]
        ok = all((rows.kernel_source == k).any() for k in _DECODE + _PREFILL)
        _TABLES[key] = GdnTable(rows) if ok else None
    return _TABLES[key]


def label(system: str) -> str:
    from vidur_specdec.costs.kernels import table_data as TD

    return f"measured: {system}, vllm {GDN_VERSION} gdn_perf ({TD.PACKAGE} {TD.PACKAGE_VERSION})"


# --------------------------------------------------------------------------- roofline


def roofline_decode_ms(kernels, spec, tp: int, groups: Sequence[int]) -> float:
    """State traffic of ``groups`` (tokens per request): ``(1 + q)`` states each, at HBM bandwidth."""
    if not groups:
        return 0.0
    moved = sum(1 + q for q in groups) * state_bytes(spec, tp)
    return float(kernels.elementwise_ms(moved))


def roofline_prefill_ms(kernels, spec, tp: int, chunks: Sequence[int]) -> float:
    """Chunked delta rule: state read/write per chunk, q/k/v/out activations, ``4 Hv dk dv`` FLOPs per token."""
    tokens = sum(chunks)
    if tokens <= 0:
        return 0.0
    _, hk, dk, hv, dv = _shape(spec, tp)
    act = tokens * 2 * (2 * hk * dk + 2 * hv * dv)
    mem = float(kernels.elementwise_ms(act + 2 * len(chunks) * state_bytes(spec, tp)))
    return mem + float(kernels.gemm_ms(tokens, dk, 2 * hv * dv))
