"""Hybrid linear-attention targets (Qwen3.5): their Hugging Face configs, read by their own field names.

``Qwen3_5MoeForConditionalGeneration`` / ``Qwen3_5ForConditionalGeneration``
(the language model under ``text_config``) and ``Qwen3NextForCausalLM`` (flat):
``layer_types`` (or ``full_attention_interval``: every n-th layer full
attention, the rest ``linear_attention``), the gated-delta-net shapes
``linear_num_key_heads``, ``linear_num_value_heads``, ``linear_key_head_dim``,
``linear_value_head_dim``, ``linear_conv_kernel_dim``, ``mamba_ssm_dtype``, the
full-attention ``attn_output_gate``, the MoE fields ``num_experts``,
``num_experts_per_tok``, ``moe_intermediate_size``,
``shared_expert_intermediate_size``, ``decoder_sparse_step``, ``mlp_only_layers``,
and ``mtp_num_hidden_layers`` (the checkpoint's MTP modules). vLLM 0.33 files:
``model_executor/models/qwen3_5.py``, ``qwen3_next.py``, ``qwen3_5_mtp.py``.

A field this module cannot price is refused in one line naming it (for example
``mtp_use_dedicated_embeddings`` true, or a layer type other than
``linear_attention`` / ``full_attention``). The vision tower of the
``ConditionalGeneration`` checkpoints is not counted (text-only serving).
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping, Optional

from vidur_specdec.architectures import moe
from vidur_specdec.architectures.moe import _bool, _err, _int, _layer_types

HYBRID_ARCHITECTURES = ("Qwen3_5MoeForConditionalGeneration", "Qwen3_5ForConditionalGeneration",
                        "Qwen3NextForCausalLM", "Qwen3_5MoeForCausalLM", "Qwen3_5ForCausalLM")
_LAYER_TYPES = ("linear_attention", "full_attention")
# expert keys these configuration classes define (anything else describing experts is refused)
_EXPERT_KEYS = {"num_experts", "num_experts_per_tok", "moe_intermediate_size", "decoder_sparse_step",
                "mlp_only_layers", "shared_expert_intermediate_size"}


def is_hybrid(cfg: Mapping) -> bool:
    return moe.has_architecture(cfg, HYBRID_ARCHITECTURES)


def model_from_hybrid_hf_config(cfg: Mapping, name: str, where: str) -> dict:
    """:class:`~vidur_specdec.architectures.models.ModelSpec` fields of a Qwen3.5 / Qwen3-Next ``config.json``."""
    arch, text = moe.text_config(cfg, HYBRID_ARCHITECTURES, _EXPERT_KEYS, where)
    if _bool(text, "mtp_use_dedicated_embeddings", where):
        raise _err(where, "mtp_use_dedicated_embeddings", "is true; an MTP module with its own embedding "
                   "is not modeled (its weights would be missed)")
    L = _int(text, "num_hidden_layers", where)
    h, H = _int(text, "hidden_size", where), _int(text, "num_attention_heads", where)
    types = text.get("layer_types")
    if types is None:
        n = _int(text, "full_attention_interval", where)
        types = ["full_attention" if (i + 1) % n == 0 else "linear_attention" for i in range(L)]
    _layer_types(types, L, _LAYER_TYPES, where)
    ssm = text.get("mamba_ssm_dtype") or ""
    if ssm not in ("", "float32", "bfloat16", "float16"):
        raise _err(where, "mamba_ssm_dtype", f"must be float32, bfloat16 or float16, got {ssm!r}")
    d = {"name": str(cfg.get("_name_or_path") or name), "num_layers": L, "hidden_size": h, "num_heads": H,
         "num_kv_heads": _int(text, "num_key_value_heads", where, default=H),
         "vocab_size": _int(text, "vocab_size", where),
         "max_model_len": _int(text, "max_position_embeddings", where),
         "tie_word_embeddings": _bool(cfg, "tie_word_embeddings", where,
                                      default=_bool(text, "tie_word_embeddings", where)),
         **({"head_dim": _int(text, "head_dim", where)} if text.get("head_dim") is not None else {}),
         "attn_output_gate": _bool(text, "attn_output_gate", where, default=True),
         "linear_layers": types.count("linear_attention"),
         "full_attention_layer_ids": ",".join(str(i) for i, t in enumerate(types) if t == "full_attention"),
         "linear_num_key_heads": _int(text, "linear_num_key_heads", where),
         "linear_num_value_heads": _int(text, "linear_num_value_heads", where),
         "linear_key_head_dim": _int(text, "linear_key_head_dim", where),
         "linear_value_head_dim": _int(text, "linear_value_head_dim", where),
         "linear_conv_kernel_dim": _int(text, "linear_conv_kernel_dim", where),
         "mamba_ssm_dtype": ssm,
         "mtp_layers": _int(text, "mtp_num_hidden_layers", where, default=0, minimum=0),
         "quantization": moe._quantization(text if "quantization_config" in text else cfg, arch, where)}
    if "num_experts" in text:
        step = _int(text, "decoder_sparse_step", where, default=1)
        only = text.get("mlp_only_layers") or []
        if not isinstance(only, list) or any(isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < L
                                             for i in only):
            raise _err(where, "mlp_only_layers", f"must list layer indices in [0, {L})")
        n_moe = sum(1 for i in range(L) if i not in only and (i + 1) % step == 0)
        f = _int(text, "moe_intermediate_size", where)
        d.update(num_experts=_int(text, "num_experts", where), experts_per_token=_int(text, "num_experts_per_tok", where),
                 expert_ffn_size=f, dense_layers=L - n_moe,
                 ffn_size=_int(text, "intermediate_size", where) if n_moe < L else f,
                 shared_ffn_size=_int(text, "shared_expert_intermediate_size", where, default=0, minimum=0))
    else:
        d["ffn_size"] = _int(text, "intermediate_size", where)
    return d


def aic_config_path(name: str) -> Optional[Path]:
    """The ``config.json`` aiconfigurator-core ships for Hugging Face model ``name`` (``model_configs/``), or None."""
    if "/" not in name or any(c in name for c in "\\\0") or ".." in name:
        return None
    try:
        import aiconfigurator_core
    except ImportError:
        return None
    path = Path(aiconfigurator_core.__file__).parent / "model_configs" / (name.replace("/", "--") + "_config.json")
    return path if path.is_file() else None


def load_aic_config(name: str, where: str = "model") -> Optional[dict]:
    """The shipped ``config.json`` for ``name`` (read by the checked reader: a corrupt file is one line naming
    it), or None when aiconfigurator-core ships none."""
    from vidur_specdec.architectures.config_json import read_config_json

    path = aic_config_path(name)
    if path is None:
        return None
    cfg = dict(read_config_json(path, f"{where}: {name}"))
    cfg["_name_or_path"] = name  # the name it ships under (NVIDIA's Llama-3.1-70B FP8 carries a local path)
    return cfg
