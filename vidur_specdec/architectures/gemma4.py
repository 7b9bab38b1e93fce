"""Gemma 4 (``Gemma4ForConditionalGeneration``): sliding-window layers beside global layers of their own head shape.

Read from ``text_config`` by its own field names (transformers 5.5 ``Gemma4TextConfig``; vLLM 0.33
``model_executor/models/gemma4.py``):

* ``layer_types`` — ``sliding_attention`` layers attend the last ``sliding_window`` tokens with
  ``head_dim`` and ``num_key_value_heads``; ``full_attention`` (global) layers attend the whole
  context with ``global_head_dim`` and ``num_global_key_value_heads`` (vLLM: ``per_layer_config``);
* ``attention_k_eq_v`` — global layers ship ``k_proj`` only; vLLM loads it into both the K and V
  slots of ``qkv_proj`` (``_gemma4_layer_weights_mapper``), so its GPU holds K twice and its KV
  cache keeps K and V (V passes its own norm);
* ``enable_moe_block`` with ``num_experts``, ``top_k_experts``, ``moe_intermediate_size``
  (``expert_intermediate_size``) — every layer runs its dense gated MLP (``intermediate_size``)
  *and* a routed expert block beside it on the same residual; the dense MLP is priced as an
  always-on shared expert (``shared_ffn_size``);
* ``final_logit_softcapping`` — an elementwise tanh on the logits, left out (a few vector ops
  over the vocabulary per token, inside the LM-head time's error);
* ``tie_word_embeddings``, ``vocab_size``, ``max_position_embeddings``.

Refused in one line, each changing cost in a way not modelled: ``hidden_size_per_layer_input`` > 0
(per-layer embeddings, Gemma 4 E2B/E4B), ``num_kv_shared_layers`` > 0 (layers reading another
layer's KV), ``use_double_wide_mlp``, ``attn_logit_softcapping`` (a soft-capped attention kernel),
a layer type other than the two above. The vision and audio towers are not counted (text-only serving).

The global layers are registered as the ``global_attention`` mixer
(:mod:`~vidur_specdec.architectures.layer_plan`): KV grows with the context at their own head shape;
the sliding layers are the ``sliding_attention`` mixer (at most ``sliding_window`` tokens held).
Units: weights as counts, KV in bytes, one GPU of ``tp``.
"""

from __future__ import annotations

from typing import Mapping

from vidur_specdec.architectures import moe
from vidur_specdec.architectures.layer_plan import Mixer, register_mixer
from vidur_specdec.architectures.moe import _bool, _err, _int, _layer_types

GEMMA4_ARCHITECTURES = ("Gemma4ForConditionalGeneration", "Gemma4ForCausalLM")
_LAYER_TYPES = ("sliding_attention", "full_attention")
_EXPERT_KEYS = {"num_experts", "moe_intermediate_size"}


def global_kv_bytes(spec, tp: int, dtype_bytes: int) -> int:
    """Growing KV of one global layer per token on one GPU (K and V at ``global_head_dim``), bytes."""
    return 2 * dtype_bytes * spec.global_head_dim * -(-spec.global_kv_heads // tp)


def global_params(spec, tp: int = 1) -> int:
    """One global layer's projections on one GPU: q, k, v (K loaded twice under ``attention_k_eq_v``, as vLLM
    holds it) and o, at ``global_head_dim``; the per-head q/k norms (``global_head_dim`` each) are left out."""
    h, H, d = spec.hidden_size, spec.num_heads // tp, spec.global_head_dim
    kv = -(-spec.global_kv_heads // tp)
    return h * d * (H + 2 * kv) + H * d * h


register_mixer(Mixer("global_attention", global_kv_bytes, global_params),
               count=lambda s: (s.num_layers - s.sliding_layers) if s.global_head_dim else 0)


def is_gemma4(cfg: Mapping) -> bool:
    return moe.has_architecture(cfg, GEMMA4_ARCHITECTURES)


def model_from_gemma4_hf_config(cfg: Mapping, name: str, where: str) -> dict:
    """:class:`~vidur_specdec.architectures.models.ModelSpec` fields of a Gemma 4 ``config.json``."""
    arch, text = moe.text_config(cfg, GEMMA4_ARCHITECTURES, _EXPERT_KEYS, where, null_ok=True)
    if _int(text, "hidden_size_per_layer_input", where, default=0, minimum=0):
        raise _err(where, "hidden_size_per_layer_input", "is set: per-layer embeddings (Gemma 4 E2B/E4B) are not "
                   "modeled (their table and per-layer projections would be missed)")
    if _int(text, "num_kv_shared_layers", where, default=0, minimum=0):
        raise _err(where, "num_kv_shared_layers", "is set: layers that read another layer's KV are not modeled "
                   "(their KV would be charged twice)")
    if _bool(text, "use_double_wide_mlp", where):
        raise _err(where, "use_double_wide_mlp", "is true: a double-width MLP is not modeled")
    if text.get("attn_logit_softcapping") is not None:
        raise _err(where, "attn_logit_softcapping", "is set: a soft-capped attention kernel is not modeled")
    L = _int(text, "num_hidden_layers", where)
    h, H = _int(text, "hidden_size", where), _int(text, "num_attention_heads", where)
    types = text.get("layer_types")
    _layer_types(types, L, _LAYER_TYPES, where)
    sliding = types.count("sliding_attention")
    kv = _int(text, "num_key_value_heads", where, default=H)
    d = {"name": str(cfg.get("_name_or_path") or name), "num_layers": L, "hidden_size": h, "num_heads": H,
         "num_kv_heads": kv, "head_dim": _int(text, "head_dim", where, default=h // H),
         "vocab_size": _int(text, "vocab_size", where),
         "max_model_len": _int(text, "max_position_embeddings", where),
         "tie_word_embeddings": _bool(cfg, "tie_word_embeddings", where,
                                      default=_bool(text, "tie_word_embeddings", where)),
         "sliding_window": _int(text, "sliding_window", where) if sliding else 0, "sliding_layers": sliding,
         "global_head_dim": _int(text, "global_head_dim", where, default=_int(text, "head_dim", where,
                                                                                default=h // H)),
         "global_kv_heads": _int(text, "num_global_key_value_heads", where, default=kv),
         "attention_k_eq_v": _bool(text, "attention_k_eq_v", where),
         "quantization": moe._quantization(text if "quantization_config" in text else cfg, arch, where)}
    # vLLM builds the expert block when num_experts is set; enable_moe_block is the transformers switch
    experts = text.get("num_experts") is not None
    if experts != _bool(text, "enable_moe_block", where, default=experts):
        raise _err(where, "enable_moe_block", f"({text.get('enable_moe_block')!r}) disagrees with num_experts "
                   f"({text.get('num_experts')!r})")
    f = _int(text, "intermediate_size", where)
    if experts:
        ef = text.get("moe_intermediate_size", text.get("expert_intermediate_size"))
        ef = _int({"moe_intermediate_size": ef}, "moe_intermediate_size", where)
        d.update(num_experts=_int(text, "num_experts", where), experts_per_token=_int(text, "top_k_experts", where),
                 expert_ffn_size=ef, ffn_size=ef, shared_ffn_size=f)  # the dense MLP beside every expert block
    else:
        d["ffn_size"] = f
    return d
