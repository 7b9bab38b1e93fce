"""The mean decoder layer of a step: per-op times (ms) over the step's tokens, on one GPU.

The fitted operator model (:class:`~vidur_specdec.costs.operator_model.OperatorTimeModel`)
prices a Llama-shaped layer's ops; models that mix layer kinds are priced as
the layer-count-weighted mean layer, each part from its own module:

* **MoE** (dense leading layers + MoE layers): the MLP ops are the per-layer
  mean of the dense layers (the profile's MLP ops) and the MoE layers
  (:meth:`~vidur_specdec.costs.kernels.base.KernelSource.fused_moe_ms`, priced from
  the step's token groups once per plan); the MoE share rides on ``up_proj``;
* **hybrid linear attention** (Qwen3.5's gated delta net beside full
  attention): projections from the kernel source's GEMMs, the linear layers'
  whole step (:meth:`~vidur_specdec.costs.kernels.base.KernelSource.linear_attention_ms`)
  riding on the decode op; a pipeline stage's mean layer takes the stage's own
  full-attention share (``full_share``);
* **sliding beside global layers** of another head shape (Gemma 4):
  :class:`~vidur_specdec.pricing.global_layers.GlobalLayerMix`.

:meth:`MeanLayer.ops` returns the 14 values of Vidur's ``ExecutionTime`` (ms,
:data:`~vidur_specdec.pricing.price.EXECUTION_TIME_FIELDS` order). Memos are bounded: steady
decode steps repeat their token counts and group sizes, prefill mixes rarely do.
"""

from __future__ import annotations

from typing import Optional, Tuple

from vidur_specdec.config.memo import BoundedMemo
from vidur_specdec.architectures.layer_plan import gdn_conv_dim
from vidur_specdec.pricing.global_layers import GlobalLayerMix

MEMO_LIMIT = 65536  # entries kept per memo before it is cleared


class MeanLayer:
    """The per-op times of a step's mean layer (module docstring) for one deployment."""

    def __init__(self, target, model, tp: int, kernels, verify_cost, ep: int = 1,
                 full_share: Optional[float] = None) -> None:
        self.m = target
        self.spec = model
        self.tp = tp
        self.kernels = kernels
        self.verify = verify_cost
        self.ep = ep
        self.hidden = model.hidden_size
        self.moe_spec = model if model.is_moe else None
        self.dense_share = model.dense_layers / model.num_layers if model.is_moe else 1.0
        self.hybrid = model if getattr(model, "linear_layers", 0) else None
        # the full-attention share of the layers priced: the model's, or a pipeline stage's own (``full_share``)
        self.full_share = (1.0 if not self.hybrid else full_share if full_share is not None
                           else (model.num_layers - model.linear_layers) / model.num_layers)
        self.global_mix = GlobalLayerMix(model, tp, kernels) if getattr(model, "global_head_dim", 0) else None
        self._linear = BoundedMemo(MEMO_LIMIT)  # tokens -> (rope, pre, post, up, down, act, attn_norm, mlp_norm, add, tp)
        self._moe_memo = BoundedMemo(MEMO_LIMIT)  # group sizes -> (ms, experts woken)
        self._gdn_memo = BoundedMemo(MEMO_LIMIT)  # (decodes, their tokens, chunks, their tokens) -> ms
        self._proj_memo = BoundedMemo(MEMO_LIMIT)  # tokens -> (input, output projection ms)
        self._moe_for = self._moe_value = None  # the last plan whose MoE layer was priced, and its price

    # ------------------------------------------------------------------ the step's ops
    def ops(self, plan, moe=None, dense_share: float = 1.0, pp_send: float = 0.0, attention=None) -> tuple:
        """Vidur's ``ExecutionTime`` values (ms) of the step's mean layer; ``moe`` (ms, experts) of a MoE layer;
        ``dense_share`` the share of the priced layers whose MLP is dense; ``pp_send`` the stage's send (ms);
        ``attention`` this layer's :meth:`attention` of the plan, when the caller has it."""
        T = plan.num_tokens
        lin = self._linear.get(T)
        if lin is None:
            lin = self._linear_ops(T)
        rope, pre, post, up, down, act, attn_norm, mlp_norm, add, tp_comm = lin
        comp = plan  # a step plan is its own composition (StepPlan.composition)
        if moe is not None:  # the MoE layers' share rides on up_proj; their down_proj and act are inside it
            up = dense_share * up + (1.0 - dense_share) * moe[0]
            down = dense_share * down
            act = dense_share * act
        decode, prefill = attention if attention is not None else (self.decode_ms(plan, comp), self.prefill_ms(comp))
        return (rope, 0.0, decode, prefill, pre, post, up, down, act, attn_norm, mlp_norm, add, tp_comm, pp_send)

    def attention(self, plan) -> Tuple[float, float]:
        """(decode and verify attention, prefill attention) of the plan's mean layer (ms)."""
        comp = plan.composition
        return self.decode_ms(plan, comp), self.prefill_ms(comp)

    def _linear_ops(self, T: int) -> tuple:
        """The ops that depend on the step's token count only (memoised)."""
        m = self.m
        if self.hybrid is not None:
            pre, post = self._hybrid_proj(T)
        elif self.global_mix is not None:
            pre, post = self.global_mix.proj_ms(T)
        else:
            pre, post = m.linear_ms("attn_pre_proj", T), m.linear_ms("attn_post_proj", T)
        tp_comm = self.kernels.all_reduce_ms(self.tp, T * self.hidden * 2) if self.tp > 1 else 0.0
        out = (m.linear_ms("attn_rope", T), pre, post, m.linear_ms("mlp_up_proj", T), m.linear_ms("mlp_down_proj", T),
               m.linear_ms("mlp_act", T), m.linear_ms("input_layernorm", T), m.linear_ms("post_attention_layernorm", T),
               m.linear_ms("add", T), tp_comm)
        self._linear.put(T, out)
        return out

    # ------------------------------------------------------------------ attention
    def decode_ms(self, plan, comp) -> float:
        """Decode and verify attention of the step's decoding requests (ms, mean layer)."""
        if self.hybrid is not None:  # the gated-delta-net layers' whole step rides on the decode op
            full = self.verify.attention_ms(self.m, comp.decode_q, comp.decode_ctx) if comp.decode_q else 0.0
            if self.full_share == 1.0:  # a pipeline stage of full-attention layers only
                return full
            return self.full_share * full + (1.0 - self.full_share) * self.linear_attention_ms(comp)
        if not comp.decode_q:
            return 0.0
        if self.global_mix is not None:
            return self.global_mix.decode_ms(lambda q, c: self.verify.attention_ms(self.m, q, c),
                                             comp.decode_q, comp.decode_ctx)
        return self.verify.attention_ms(self.m, comp.decode_q, comp.decode_ctx)

    def prefill_ms(self, comp) -> float:
        """Prefill attention of the step's chunks (ms, mean layer)."""
        if not comp.prefill and self.global_mix is None:
            return 0.0
        m = self.m
        if self.global_mix is not None:
            return self.global_mix.prefill_ms(m.prefill_attention_ms, comp.prefill)
        full = sum(m.prefill_attention_ms(kv, c) for kv, c in comp.prefill)
        return full if self.hybrid is None else self.full_share * full

    # ------------------------------------------------------------------ hybrid linear attention
    def _hybrid_proj(self, tokens: int) -> Tuple[float, float]:
        """(input, output) projections of the mean layer of a hybrid model (ms), from the kernel source's GEMMs:
        full-attention layers q (with its output gate), k, v / o; gated-delta-net layers in_proj_qkvz + in_proj_ba /
        out_proj (vLLM 0.33 ``qwen_gdn_linear_attn.py``; the two input projections priced as one GEMM)."""
        got = self._proj_memo.get(tokens)
        if got is None:
            s, tp, g = self.hybrid, self.tp, self.kernels.gemm_ms
            dt = "fp8" if s.quantization == "fp8" else "bf16"
            q = s.num_heads // tp * s.head_dim * (2 if s.attn_output_gate else 1)
            kv = 2 * -(-s.num_kv_heads // tp) * s.head_dim
            hv = s.linear_num_value_heads * s.linear_value_head_dim
            full = (float(g(tokens, s.hidden_size, q + kv, dt)), float(g(tokens, s.num_heads // tp * s.head_dim,
                                                                          s.hidden_size, dt)))
            lin = (float(g(tokens, s.hidden_size, (gdn_conv_dim(s) + hv + 2 * s.linear_num_value_heads) // tp, dt)),
                   float(g(tokens, hv // tp, s.hidden_size, dt)))
            f = self.full_share
            got = (f * full[0] + (1 - f) * lin[0], f * full[1] + (1 - f) * lin[1])
            self._proj_memo.put(tokens, got)
        return got

    def linear_attention_ms(self, comp) -> float:
        """One gated-delta-net layer of the step (ms), priced by the kernel source (memoised)."""
        chunks = [c for _, c in comp.prefill]
        # the cost depends on the decoding requests, their summed tokens and the prefill tokens only
        key = (len(comp.decode_q), sum(comp.decode_q), len(chunks), sum(chunks))
        cached = self._gdn_memo.get(key)
        if cached is None:
            cached = self._gdn_memo.put(key, self.kernels.linear_attention_ms(self.hybrid, self.tp, comp.decode_q,
                                                                              chunks))
        return cached

    # ------------------------------------------------------------------ mixture of experts
    def moe(self, plan) -> Tuple[float, float]:
        """(ms of one MoE layer, distinct experts it wakes) for this step (memoised by its token groups)."""
        if self._moe_for is plan:
            return self._moe_value
        comp = plan.composition
        groups = list(comp.decode_q) + [c for _, c in comp.prefill]
        key = tuple(sorted(groups))  # the cost depends on the multiset of group sizes only
        cached = self._moe_memo.get(key)
        if cached is None:
            cached = self._moe_memo.put(key, self.kernels.fused_moe_ms(self.moe_spec, self.tp, groups, ep=self.ep))
        self._moe_for, self._moe_value = plan, cached
        return cached
