"""A :class:`~vidur_specdec.architectures.spec.ModelSpec` from a mapping of its fields (:func:`model_from_dict`,
with the shape checks) or from a Hugging Face ``config.json`` (:func:`model_from_hf_config`, which hands the
architectures it does not read itself to moe, hybrid, llama4 and gemma4). Bad input raises
:class:`~vidur_specdec.architectures.errors.ModelError` in one line starting with ``where``."""

from __future__ import annotations

from dataclasses import fields
from typing import Mapping

from vidur_specdec.architectures.errors import ModelError
from vidur_specdec.architectures.spec import MOE_ROUTINGS, OPTIONAL_FIELDS, ModelSpec


_INT_FIELDS = ("num_layers", "hidden_size", "num_heads", "num_kv_heads", "ffn_size", "vocab_size",
               "max_model_len", "head_dim", "num_experts", "experts_per_token", "expert_ffn_size", "dense_layers",
               "shared_ffn_size", "kv_lora_rank", "q_lora_rank", "qk_rope_head_dim", "v_head_dim",
               "sliding_window", "sliding_layers", "mtp_layers", "linear_layers", "linear_num_key_heads",
               "linear_num_value_heads", "linear_key_head_dim", "linear_value_head_dim", "linear_conv_kernel_dim",
               "chunked_layers", "attention_chunk_size", "index_n_heads", "index_head_dim", "index_topk",
               "global_head_dim", "global_kv_heads")
_ZERO_OK = ("head_dim",) + OPTIONAL_FIELDS


def model_from_dict(d: Mapping, where: str = "model") -> ModelSpec:
    """Build a :class:`ModelSpec` from a mapping with the dataclass's field names.

    Raises :class:`ModelError` (one line, starting with ``where``) on an unknown,
    missing or non-positive field.
    """
    if not isinstance(d, Mapping):
        raise ModelError(f"{where}: must be a mapping of ModelSpec fields")
    names = [f.name for f in fields(ModelSpec)]
    unknown = sorted(set(d) - set(names))
    if unknown:
        raise ModelError(f"{where}: unknown model field {unknown[0]!r}; allowed: {', '.join(names)}")
    required = [f.name for f in fields(ModelSpec) if f.name not in ("max_model_len", "tie_word_embeddings",
                                                                    "head_dim") + OPTIONAL_FIELDS]
    for key in required:
        if d.get(key) is None:
            raise ModelError(f"{where}: missing model field {key!r} (needs {', '.join(required)})")
    out = {"name": str(d["name"])}
    for key in _INT_FIELDS:
        if key not in d or d[key] is None:
            continue
        v = d[key]
        if isinstance(v, bool) or not isinstance(v, int) or v < (0 if key in _ZERO_OK else 1):
            raise ModelError(f"{where}: {key} must be a positive integer, got {v!r}")
        out[key] = v
    if "tie_word_embeddings" in d:
        if not isinstance(d["tie_word_embeddings"], bool):
            raise ModelError(f"{where}: tie_word_embeddings must be true/false, got {d['tie_word_embeddings']!r}")
        out["tie_word_embeddings"] = d["tie_word_embeddings"]
    for flag in ("expert_bias", "attn_output_gate", "attention_k_eq_v"):
        if flag in d:
            if not isinstance(d[flag], bool):
                raise ModelError(f"{where}: {flag} must be true/false, got {d[flag]!r}")
            out[flag] = d[flag]
    if d.get("mamba_ssm_dtype") not in (None, "", "bfloat16", "float16", "float32"):
        raise ModelError(f"{where}: mamba_ssm_dtype must be float32, bfloat16 or float16, got {d['mamba_ssm_dtype']!r}")
    out["mamba_ssm_dtype"] = d.get("mamba_ssm_dtype") or ""
    ids = d.get("full_attention_layer_ids") or ""
    if ids:
        if not isinstance(ids, str) or not all(x.strip().isdigit() for x in ids.split(",")):
            raise ModelError(f"{where}: full_attention_layer_ids must be comma-separated layer indices, got {ids!r}")
        out["full_attention_layer_ids"] = ",".join(str(i) for i in sorted({int(x) for x in ids.split(",")}))
    from vidur_specdec.architectures import quant

    if d.get("quantization") not in (None, "") + quant.METHODS:
        raise ModelError(f"{where}: quantization must be one of {', '.join(quant.METHODS)} (vLLM's method for the "
                         f"checkpoint's format), got {d['quantization']!r}")
    out["quantization"] = d.get("quantization") or ""
    parts = d.get("bf16_parts") or ""
    if not isinstance(parts, str) or not set(p for p in parts.split(",") if p) <= set(quant.PARTS):
        raise ModelError(f"{where}: bf16_parts must be a comma-separated list of {', '.join(quant.PARTS)}, "
                         f"got {parts!r}")
    if parts:
        out["bf16_parts"] = ",".join(sorted(set(p for p in parts.split(",") if p)))
    if d.get("kv_cache_dtype") not in (None, "", "fp8"):
        raise ModelError(f"{where}: kv_cache_dtype must be fp8 or empty (bf16), got {d['kv_cache_dtype']!r}")
    out["kv_cache_dtype"] = d.get("kv_cache_dtype") or ""
    if d.get("moe_routing") not in (None, "", *MOE_ROUTINGS):
        raise ModelError(f"{where}: moe_routing must be one of {', '.join(MOE_ROUTINGS)}, got {d['moe_routing']!r}")
    if d.get("moe_routing") and not d.get("num_experts"):
        raise ModelError(f"{where}: moe_routing {d['moe_routing']} needs routed experts; {d['name']} is dense "
                         "(no num_experts)")
    out["moe_routing"] = d.get("moe_routing") or ""
    if out.get("global_head_dim"):
        from vidur_specdec.architectures import gemma4  # noqa: F401 (registers the global_attention mixer)
    spec = ModelSpec(**out)
    _check_shape(spec, where, explicit_head_dim=bool(out.get("head_dim")))
    return spec


def _check_shape(spec: ModelSpec, where: str, explicit_head_dim: bool = False) -> None:
    moe = (spec.num_experts, spec.experts_per_token, spec.expert_ffn_size)
    if any(moe) and not all(moe):
        raise ModelError(f"{where}: a mixture-of-experts model needs num_experts, experts_per_token and "
                         "expert_ffn_size all set")
    if spec.experts_per_token > spec.num_experts:
        raise ModelError(f"{where}: experts_per_token {spec.experts_per_token} exceeds num_experts "
                         f"{spec.num_experts}")
    if spec.dense_layers > spec.num_layers or \
            spec.sliding_layers + spec.linear_layers + spec.chunked_layers > spec.num_layers:
        raise ModelError(f"{where}: dense_layers, and sliding_layers + linear_layers + chunked_layers, must not "
                         f"exceed num_layers "
                         f"{spec.num_layers}")
    gdn = (spec.linear_num_key_heads, spec.linear_num_value_heads, spec.linear_key_head_dim,
           spec.linear_value_head_dim, spec.linear_conv_kernel_dim)
    if spec.linear_layers and not all(gdn):
        raise ModelError(f"{where}: linear_layers needs linear_num_key_heads, linear_num_value_heads, "
                         "linear_key_head_dim, linear_value_head_dim and linear_conv_kernel_dim")
    if spec.full_attention_layer_ids:
        ids = [int(x) for x in spec.full_attention_layer_ids.split(",")]
        if not spec.linear_layers or len(ids) != spec.num_layers - spec.linear_layers or ids[-1] >= spec.num_layers:
            raise ModelError(f"{where}: full_attention_layer_ids must list the {spec.num_layers - spec.linear_layers} "
                             f"full-attention layers (indices below num_layers {spec.num_layers}) beside "
                             f"linear_layers {spec.linear_layers}")
    index = (spec.index_n_heads, spec.index_head_dim, spec.index_topk)
    if any(index) and not (all(index) and spec.kv_lora_rank):
        raise ModelError(f"{where}: sparse attention needs index_n_heads, index_head_dim and index_topk all set, "
                         "on a multi-head latent attention model (kv_lora_rank)")
    if bool(spec.global_head_dim) != bool(spec.global_kv_heads) or (spec.global_head_dim and not spec.sliding_layers):
        raise ModelError(f"{where}: global_head_dim and global_kv_heads go together, beside sliding_layers")
    if spec.num_heads % spec.num_kv_heads:
        # vLLM 0.33 model_executor/layers/attention/attention.py: assert num_heads % num_kv_heads == 0
        raise ModelError(f"{where}: num_heads {spec.num_heads} is not a multiple of num_kv_heads {spec.num_kv_heads} "
                         "(vLLM's attention layer groups query heads evenly over KV heads)")
    if spec.hidden_size % spec.num_heads and not explicit_head_dim:
        # without head_dim, vLLM and transformers take hidden_size // num_heads; a remainder means the config is
        # missing its head_dim (a model with its own head_dim, such as Qwen3.5-27B's 256, needs no multiple)
        raise ModelError(f"{where}: hidden_size {spec.hidden_size} is not a multiple of num_heads {spec.num_heads}, "
                         "and no head_dim is given; give head_dim")
    if spec.sliding_layers and not spec.sliding_window:
        # vLLM 0.33 attention.py: a layer without a window (per_layer_sliding_window None) attends everything
        raise ModelError(f"{where}: sliding_layers {spec.sliding_layers} without sliding_window; a layer without a "
                         "window is full attention in vLLM (give sliding_window, or drop sliding_layers)")
    if spec.chunked_layers and not spec.attention_chunk_size:
        # vLLM 0.33 llama4.py: use_chunked_local_attn = not nope and config.attention_chunk_size
        raise ModelError(f"{where}: chunked_layers {spec.chunked_layers} without attention_chunk_size; vLLM runs a "
                         "layer without a chunk size as full attention (give attention_chunk_size)")
    if spec.kv_lora_rank and not (spec.qk_rope_head_dim and spec.v_head_dim and spec.head_dim > spec.qk_rope_head_dim):
        # vLLM 0.33 deepseek_v2.py DeepseekV2MLAAttention: q split into nope and rope parts, values at v_head_dim
        raise ModelError(f"{where}: multi-head latent attention (kv_lora_rank {spec.kv_lora_rank}) needs "
                         f"qk_rope_head_dim, v_head_dim and a nope part (head_dim - qk_rope_head_dim) all > 0; got "
                         f"qk_rope_head_dim {spec.qk_rope_head_dim}, v_head_dim {spec.v_head_dim}, head_dim "
                         f"{spec.head_dim}")
    if spec.linear_layers and spec.linear_num_value_heads % spec.linear_num_key_heads:
        # vLLM 0.33 qwen_gdn_linear_attn.py groups the value heads under each key head (num_v_heads // num_k_heads)
        raise ModelError(f"{where}: linear_num_value_heads {spec.linear_num_value_heads} is not a multiple of "
                         f"linear_num_key_heads {spec.linear_num_key_heads} (vLLM's gated delta net groups value "
                         "heads under key heads)")


# Dense decoders read as Llama (LlamaConfig's field names; ``head_dim`` given explicitly where it is): Qwen3
# (vLLM 0.33 qwen3.py: Llama's layer plus per-head q/k RMSNorm, left out) and MiMo (mimo.py: Qwen2's layer, q/k/v
# biases left out, plus MTP layers)
DENSE_ARCHITECTURES = ("LlamaForCausalLM", "Qwen3ForCausalLM", "MiMoForCausalLM")
# Hugging Face config.json keys -> ModelSpec fields (LlamaConfig's names).
_HF_KEYS = {
    "num_layers": "num_hidden_layers",
    "hidden_size": "hidden_size",
    "num_heads": "num_attention_heads",
    "ffn_size": "intermediate_size",
    "vocab_size": "vocab_size",
    "max_model_len": "max_position_embeddings",
}


def model_from_hf_config(cfg: Mapping, name: str, where: str = "model") -> ModelSpec:
    """A :class:`ModelSpec` from a Hugging Face ``config.json`` (:func:`_model_from_hf_config`), with the parts its
    checkpoint format keeps in bf16 and the KV cache it declares
    (:func:`~vidur_specdec.architectures.checkpoint_format.checkpoint_parts`).

    An architecture known to need what cannot be priced is refused first
    (:mod:`~vidur_specdec.architectures.unmodeled`); a multimodal wrapper is read as its language model
    (:mod:`~vidur_specdec.architectures.wrapped`)."""
    from vidur_specdec.architectures import unmodeled, wrapped

    if isinstance(cfg, Mapping):
        unmodeled.refuse_unmodeled(cfg, where)  # an architecture known to need what cannot be priced: one line
        cfg = wrapped.unwrap(cfg, where) or cfg  # a multimodal wrapper: its language model's config
    spec = _model_from_hf_config(cfg, name, where)
    if spec.quantization in ("modelopt", "modelopt_fp4", "compressed-tensors"):
        from dataclasses import replace

        from vidur_specdec.architectures import checkpoint_format

        archs = [a for a in (cfg.get("architectures") or []) if isinstance(a, str)] or ["LlamaForCausalLM"]
        spec = replace(spec, **checkpoint_format.checkpoint_parts(cfg, spec, archs[0], where))
    return spec


def _model_from_hf_config(cfg: Mapping, name: str, where: str = "model") -> ModelSpec:
    """A :class:`ModelSpec` from a Hugging Face ``config.json`` of a Llama-architecture model.

    Accepted when ``architectures`` holds ``LlamaForCausalLM`` or ``model_type``
    is ``llama``; ``num_key_value_heads`` defaults to the query heads (LlamaConfig's
    default), ``tie_word_embeddings`` to false, ``head_dim`` to hidden / heads.
    """
    if not isinstance(cfg, Mapping):
        raise ModelError(f"{where}: a config.json must hold a JSON object")
    archs = cfg.get("architectures") or []
    if not isinstance(archs, list) or not all(isinstance(a, str) for a in archs):
        raise ModelError(f"{where}: config.json field 'architectures' must be a list of class names, got "
                         f"{str(archs)[:80]!r}")
    # lazy: start-up of `python -m vidur_specdec.main --help` (would load vidur_specdec.architectures.moe)
    from vidur_specdec.architectures import gemma4, hybrid, llama4, moe
    from vidur_specdec.architectures.wrapped import WRAPPED

    if gemma4.is_gemma4(cfg):
        return model_from_dict(gemma4.model_from_gemma4_hf_config(cfg, name, where), where)
    if hybrid.is_hybrid(cfg):
        return model_from_dict(hybrid.model_from_hybrid_hf_config(cfg, name, where), where)
    if llama4.is_llama4(cfg):
        return model_from_dict(llama4.model_from_llama4_hf_config(cfg, name, where), where)
    if isinstance(archs, list) and any(a in moe.MOE_ARCHITECTURES for a in archs):
        return model_from_dict(moe.model_from_moe_hf_config(cfg, name, where), where)
    moe.refuse_expert_fields(cfg, where)  # experts are never simulated as a dense MLP
    if not any(a in DENSE_ARCHITECTURES for a in archs) and cfg.get("model_type") != "llama":
        got = ", ".join(map(str, archs)) or cfg.get("model_type") or "none given"
        raise ModelError(f"{where}: only Llama-architecture models and the architectures "
                         f"{', '.join(DENSE_ARCHITECTURES[1:] + moe.MOE_ARCHITECTURES + hybrid.HYBRID_ARCHITECTURES)}, "
                         f"{', '.join(llama4.LLAMA4_ARCHITECTURES + gemma4.GEMMA4_ARCHITECTURES + tuple(WRAPPED))}"
                         f" are supported, got {got}")
    d = {"name": str(cfg.get("_name_or_path") or name)}
    for field_name, key in _HF_KEYS.items():
        if cfg.get(key) is None:
            raise ModelError(f"{where}: config.json has no {key!r}")
        d[field_name] = moe._int(cfg, key, where)
    d["num_kv_heads"] = moe._int(cfg, "num_key_value_heads", where, default=d["num_heads"])
    d["tie_word_embeddings"] = moe._bool(cfg, "tie_word_embeddings", where)
    if cfg.get("head_dim") is not None:
        d["head_dim"] = moe._int(cfg, "head_dim", where)
    # vLLM 0.33 vllm/model_executor/models/llama.py: a layer attends a sliding window when layer_types says
    # "sliding_attention" (use_sliding_window: the Qwen2-style switch); the dense path prices full attention.
    sliding = moe._bool(cfg, "use_sliding_window", where) or "sliding_attention" in (cfg.get("layer_types") or [])
    if cfg.get("sliding_window") and sliding:
        raise moe._err(where, "sliding_window", "is used (use_sliding_window or layer_types); sliding attention "
                       "is not modeled for a Llama-architecture model (only gpt-oss), which would be priced as "
                       "full attention")
    d["quantization"] = moe._quantization(cfg, "LlamaForCausalLM", where)  # fp8 e4m3; AWQ, GPTQ, ... refused
    if "MiMoForCausalLM" in archs:  # vLLM 0.33 mimo_mtp.py: its MTP layers (one decoder layer each)
        d["mtp_layers"] = moe._int(cfg, "num_nextn_predict_layers", where, default=0, minimum=0)
    return model_from_dict(d, where)
