"""Llama 4 (``Llama4ForConditionalGeneration``): chunked local attention beside global layers, MoE with a shared expert.

Read from ``text_config`` by its own field names (vLLM 0.33 ``model_executor/models/llama4.py``):
``no_rope_layers`` (0 marks a global NoPE layer; default: every fourth layer, transformers'
``no_rope_layer_interval`` 4), ``attention_chunk_size`` (a RoPE layer attends only within its
chunk: ``use_chunked_local_attn``), ``num_local_experts``, ``num_experts_per_tok``,
``intermediate_size`` (one routed expert's and the shared expert's width), ``intermediate_size_mlp``
(the dense layers' MLP), ``interleave_moe_layer_step`` (MoE on layers ``(i + 1) % step == 0``).
The chunked layers are registered as the ``chunked_attention`` mixer
(:mod:`~vidur_specdec.architectures.layer_plan`): their KV is charged as growing and they are
priced as full attention (exact up to ``attention_chunk_size`` tokens of context; beyond it both err
high). The vision tower is not counted (text-only serving).
"""

from __future__ import annotations

from typing import Mapping

from vidur_specdec.architectures import moe
from vidur_specdec.architectures.layer_plan import Mixer, _gqa_kv, attention_params, register_mixer
from vidur_specdec.architectures.moe import _err, _int

LLAMA4_ARCHITECTURES = ("Llama4ForConditionalGeneration", "Llama4ForCausalLM")
_EXPERT_KEYS = {"num_local_experts", "num_experts_per_tok"}

# chunked local attention: KV charged as growing (a request holds at most attention_chunk_size tokens of it)
register_mixer(Mixer("chunked_attention", _gqa_kv, attention_params, window=lambda s: s.attention_chunk_size),
               count=lambda s: s.chunked_layers)


def is_llama4(cfg: Mapping) -> bool:
    return moe.has_architecture(cfg, LLAMA4_ARCHITECTURES)


def model_from_llama4_hf_config(cfg: Mapping, name: str, where: str) -> dict:
    """:class:`~vidur_specdec.architectures.models.ModelSpec` fields of a Llama 4 ``config.json``."""
    arch, text = moe.text_config(cfg, LLAMA4_ARCHITECTURES, _EXPERT_KEYS, where)
    L = _int(text, "num_hidden_layers", where)
    h, H = _int(text, "hidden_size", where), _int(text, "num_attention_heads", where)
    nope = text.get("no_rope_layers") or [int((i + 1) % 4 != 0) for i in range(L)]
    if not isinstance(nope, list) or len(nope) != L or any(v not in (0, 1) for v in nope):
        raise _err(where, "no_rope_layers", f"must list {L} of 0/1")
    chunk = _int(text, "attention_chunk_size", where, default=0, minimum=0)
    # vLLM 0.33 llama4.py Llama4DecoderLayer: is_moe_layer = step > 0 and (i + 1) % step == 0, so 0 leaves no MoE
    # layer at all while num_local_experts describes experts that would never run
    step = _int(text, "interleave_moe_layer_step", where, default=1, minimum=1)
    n_moe = sum(1 for i in range(L) if step > 0 and (i + 1) % step == 0)
    f = _int(text, "intermediate_size", where)
    return {"name": str(cfg.get("_name_or_path") or name), "num_layers": L, "hidden_size": h, "num_heads": H,
            "num_kv_heads": _int(text, "num_key_value_heads", where, default=H),
            **({"head_dim": _int(text, "head_dim", where)} if text.get("head_dim") is not None else {}),
            "vocab_size": _int(text, "vocab_size", where),
            "max_model_len": _int(text, "max_position_embeddings", where),
            "tie_word_embeddings": moe._bool(cfg, "tie_word_embeddings", where),
            "num_experts": _int(text, "num_local_experts", where),
            "experts_per_token": _int(text, "num_experts_per_tok", where),
            "expert_ffn_size": f, "shared_ffn_size": f, "dense_layers": L - n_moe,
            "ffn_size": _int(text, "intermediate_size_mlp", where) if n_moe < L else f,
            "chunked_layers": sum(nope) if chunk else 0, "attention_chunk_size": chunk,
            "quantization": moe._quantization(text if "quantization_config" in text else cfg, arch, where)}
