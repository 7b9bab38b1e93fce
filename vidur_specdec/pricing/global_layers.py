"""Sliding-window layers beside global layers of another head shape (Gemma 4): the mean layer's attention (ms).

The fitted operator model is built at the sliding layers' shape (``head_dim``,
``num_kv_heads``); a step's mean layer is the share-weighted mean of

* sliding layers: their fitted attention with each request's context cut to
  ``sliding_window`` tokens (vLLM 0.33 ``per_layer_sliding_window``; a prefill
  chunk longer than the window is still priced attending all of it: errs high);
* global layers: the same kernels over the whole context, scaled to their own
  head shape — decode (memory bound) by the ratio of KV bytes per token
  (``global_kv_heads x global_head_dim`` over ``num_kv_heads x head_dim``),
  prefill (compute bound) by the ratio of query-head width
  (``global_head_dim / head_dim``, the same query heads);
* projections: q, k, v and o GEMMs of each shape from the kernel source
  (``attention_k_eq_v``: vLLM still multiplies K into both K and V slots).

Times in ms per layer on one GPU of ``tp``.
"""

from __future__ import annotations

from typing import Dict, Sequence, Tuple


class GlobalLayerMix:
    """The mean attention layer of a model with ``sliding_layers`` sliding and the rest global layers."""

    def __init__(self, spec, tp: int, kernels) -> None:
        self.spec, self.tp, self.kernels = spec, tp, kernels
        self.sliding_share = spec.sliding_layers / spec.num_layers
        kv_s = -(-spec.num_kv_heads // tp) * spec.head_dim
        kv_g = -(-spec.global_kv_heads // tp) * spec.global_head_dim
        self.decode_scale = kv_g / kv_s  # global over sliding KV bytes per token
        self.prefill_scale = spec.global_head_dim / spec.head_dim  # global over sliding query width
        self._proj: Dict[int, Tuple[float, float]] = {}

    def decode_ms(self, attention_ms, q: Sequence[int], ctx: Sequence[int]) -> float:
        """``attention_ms(q, ctx)`` is the fitted (sliding-shape) decode attention over full contexts."""
        w = self.spec.sliding_window
        s = self.sliding_share
        return s * attention_ms(q, [min(c, w) for c in ctx]) + (1 - s) * self.decode_scale * attention_ms(q, ctx)

    def prefill_ms(self, prefill_ms, chunks: Sequence[Tuple[int, int]]) -> float:
        """``prefill_ms(kv, chunk)``: the fitted prefill attention of a chunk after ``kv`` tokens of context."""
        w = self.spec.sliding_window
        s = self.sliding_share
        slide = sum(prefill_ms(min(kv, w), c) for kv, c in chunks)
        full = sum(prefill_ms(kv, c) for kv, c in chunks)
        return s * slide + (1 - s) * self.prefill_scale * full

    def proj_ms(self, tokens: int) -> Tuple[float, float]:
        """(q/k/v, o) projections of the mean layer (ms) from the kernel source's GEMMs, memoised per token count."""
        got = self._proj.get(tokens)
        if got is None:
            s, tp, g = self.spec, self.tp, self.kernels.gemm_ms
            dt = "fp8" if s.quantization == "fp8" else "bf16"
            H = s.num_heads // tp
            out = []
            for d, kv in ((s.head_dim, s.num_kv_heads), (s.global_head_dim, s.global_kv_heads)):
                kv = -(-kv // tp)
                out.append((float(g(tokens, s.hidden_size, d * (H + 2 * kv), dt)),
                            float(g(tokens, H * d, s.hidden_size, dt))))
            f = self.sliding_share
            got = (f * out[0][0] + (1 - f) * out[1][0], f * out[0][1] + (1 - f) * out[1][1])
            if len(self._proj) >= 65536:
                self._proj.clear()
            self._proj[tokens] = got
        return got
