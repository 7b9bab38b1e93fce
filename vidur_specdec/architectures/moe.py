"""Mixture-of-experts targets: their Hugging Face configs, parameter counts and weight bytes.

These architectures are read, each by its own ``config.json`` field names
(transformers' configuration classes):

* ``Qwen3MoeForCausalLM`` — ``num_experts``, ``num_experts_per_tok``, ``moe_intermediate_size``,
  ``decoder_sparse_step``, ``mlp_only_layers``, ``intermediate_size`` (dense layers),
  ``shared_expert_intermediate_size`` (must be 0: vLLM 0.33's ``qwen3_moe.py`` has no shared expert)
* ``MixtralForCausalLM`` — ``num_local_experts``, ``num_experts_per_tok``, ``intermediate_size`` (= expert width)
* ``DeepseekV3ForCausalLM`` — ``n_routed_experts``, ``num_experts_per_tok``, ``moe_intermediate_size``,
  ``n_shared_experts``, ``first_k_dense_replace``, ``moe_layer_freq``, ``intermediate_size`` (dense
  layers), the MLA ranks; ``quantization_config`` fp8, ModelOpt NVFP4 (``modelopt_fp4``) or
  compressed-tensors int4 experts (:mod:`~vidur_specdec.architectures.quant`)
* ``GptOssForCausalLM`` — ``num_local_experts``, ``num_experts_per_tok``, ``intermediate_size``
  (= expert width), ``layer_types``/``sliding_window``; ``quantization_config`` mxfp4
* ``DeepseekV32ForCausalLM``, ``GlmMoeDsaForCausalLM`` — DeepseekV3's fields plus DeepSeek sparse
  attention: ``index_n_heads``, ``index_head_dim``, ``index_topk`` (GLM-5 also ``qk_head_dim``, checked
  against ``qk_nope_head_dim + qk_rope_head_dim``; GLM-5.1 NVFP4 and GLM-5.2 ``mlp_layer_types``, checked
  against ``first_k_dense_replace``; GLM-5.2's IndexCache, ``indexer_types`` / ``index_topk_freq``, refused)
* ``MiniMaxM2ForCausalLM`` — ``num_local_experts``, ``num_experts_per_tok``, ``intermediate_size``
  (= expert width), ``head_dim``, ``shared_intermediate_size`` (must be 0: vLLM 0.33's
  ``minimax_m2.py`` has no shared expert); its ``num_mtp_modules`` are skipped by vLLM 0.33's loader,
  so the model has no MTP drafter here

A config that carries an expert field its architecture does not define (for
example a Mixtral config relabelled ``LlamaForCausalLM`` that still has
``num_local_experts``) is refused in one line naming the field: it is never
simulated as a dense model. Counts are numbers of weights; bytes are per GPU.
"""

from __future__ import annotations

from typing import Mapping

from vidur_specdec.architectures.errors import ModelError
from vidur_specdec.architectures.quant import FORMAT_BYTES
from vidur_specdec.architectures.layer_plan import attention_params, indexer_params, mixer_params  # noqa: F401 (re-exported)
from vidur_specdec.config import ConfigError

MOE_ARCHITECTURES = ("Qwen3MoeForCausalLM", "MixtralForCausalLM", "DeepseekV3ForCausalLM", "GptOssForCausalLM",
                     "DeepseekV32ForCausalLM", "GlmMoeDsaForCausalLM", "MiniMaxM2ForCausalLM")
# DeepSeek-V3-shaped (MLA + MoE with shared experts); the last two add DeepSeek sparse attention
_DEEPSEEK_LIKE = ("DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM", "GlmMoeDsaForCausalLM")
_SPARSE_ATTENTION = ("DeepseekV32ForCausalLM", "GlmMoeDsaForCausalLM")

# Every config.json key (across Hugging Face MoE families) that says something about experts.
EXPERT_KEYS = frozenset({
    "num_experts", "num_local_experts", "n_routed_experts", "num_routed_experts", "num_experts_per_tok",
    "experts_per_token", "moe_intermediate_size", "shared_expert_intermediate_size", "n_shared_experts",
    "num_shared_experts", "first_k_dense_replace", "moe_layer_freq", "decoder_sparse_step", "mlp_only_layers",
    "moe_k", "moe_num_experts", "moe_topk", "num_experts_per_layer", "expert_interval", "moe_layer_start_index",
    "moe_layer_end_index", "ep_size", "n_group", "topk_group", "moe_every_n_layers", "num_experts_per_group",
    "shared_intermediate_size", "dense_intermediate_size", "moe_layers", "mlp_layer_types", "num_expert_group",
})
# The expert keys each architecture's transformers configuration class defines.
_MODELED = {
    "Qwen3MoeForCausalLM": {"num_experts", "num_experts_per_tok", "moe_intermediate_size", "decoder_sparse_step",
                            "mlp_only_layers", "shared_expert_intermediate_size"},
    "MixtralForCausalLM": {"num_local_experts", "num_experts_per_tok"},
    "DeepseekV3ForCausalLM": {"n_routed_experts", "num_experts_per_tok", "moe_intermediate_size", "n_shared_experts",
                              "first_k_dense_replace", "moe_layer_freq", "ep_size", "n_group", "topk_group"},
    "GptOssForCausalLM": {"num_local_experts", "num_experts_per_tok", "experts_per_token"},
    "MiniMaxM2ForCausalLM": {"num_local_experts", "num_experts_per_tok", "shared_intermediate_size"},
}
for _a in _SPARSE_ATTENTION:
    _MODELED[_a] = _MODELED["DeepseekV3ForCausalLM"]
# GLM-5.1 NVFP4 and GLM-5.2 also write mlp_layer_types (checked against first_k_dense_replace) and num_experts
# (NVIDIA's GLM-5.2 NVFP4: checked equal to n_routed_experts)
_MODELED["GlmMoeDsaForCausalLM"] = _MODELED["GlmMoeDsaForCausalLM"] | {"mlp_layer_types", "num_experts"}
# Bytes per weight of each format (quant.FORMAT_BYTES, which cites them), "" for bf16
BYTES_PER_WEIGHT = {"": 2.0, **FORMAT_BYTES}


def _err(where: str, key: str, why: str) -> ConfigError:
    return ModelError(f"{where}: config.json field {key!r} {why}")


def refuse_expert_fields(cfg: Mapping, where: str) -> None:
    """Raise on an expert field in the config of a dense architecture (never simulate experts as dense)."""
    found = sorted(EXPERT_KEYS & set(cfg))
    if found:
        archs = ", ".join(map(str, cfg.get("architectures") or [])) or str(cfg.get("model_type"))
        raise _err(where, found[0], f"describes experts, but architectures says {archs}; "
                   f"use the model's own architecture ({', '.join(MOE_ARCHITECTURES)})")


def has_architecture(cfg: Mapping, architectures) -> bool:
    """True when ``cfg``'s ``architectures`` list names one of ``architectures``."""
    archs = cfg.get("architectures") or []
    return isinstance(archs, list) and any(a in architectures for a in archs)


def text_config(cfg: Mapping, architectures, expert_keys, where: str, null_ok: bool = False):
    """(the architecture ``cfg`` names, its ``text_config`` or ``cfg`` itself) of a multimodal-style config.

    An expert field (:data:`EXPERT_KEYS`) outside ``expert_keys`` is refused in one line naming it
    (``null_ok``: unless its value is null).
    """
    arch = next(a for a in cfg["architectures"] if a in architectures)
    text = cfg.get("text_config", cfg)
    if not isinstance(text, Mapping):
        raise _err(where, "text_config", "must be a JSON object")
    for key in sorted(EXPERT_KEYS & set(text)):
        if key not in expert_keys and not (null_ok and text[key] is None):
            raise _err(where, key, f"is not a {arch} field; this model cannot represent it")
    return arch, text


def _int(cfg: Mapping, key: str, where: str, default=None, minimum: int = 1) -> int:
    v = cfg.get(key, default)
    if v is None:
        raise _err(where, key, "is missing")
    if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
        raise _err(where, key, f"must be an integer >= {minimum}, got {v!r}")
    return v


def _bool(cfg: Mapping, key: str, where: str, default: bool = False) -> bool:
    """A true/false field (a string such as "false" is refused, not read as true)."""
    v = cfg.get(key)
    if v is None:
        return default
    if not isinstance(v, bool):
        raise _err(where, key, f"must be true or false, got {v!r}")
    return v


def _layer_types(types, num_layers: int, priced, where: str) -> list:
    """A ``layer_types`` field: a list of ``num_layers`` entries, each one of ``priced`` (the layer kinds the
    architecture's module prices); else one line naming the field."""
    if not isinstance(types, list) or len(types) != num_layers:
        raise _err(where, "layer_types", f"must list {num_layers} layer types")
    for t in types:
        if t not in priced:
            raise _err(where, "layer_types", f"holds {t!r}, a layer type that cannot be priced "
                       f"(priced: {', '.join(priced)})")
    return types


def _quantization(cfg: Mapping, arch: str, where: str) -> str:
    q = cfg.get("quantization_config")
    if not q:
        return ""
    method = q.get("quant_method") if isinstance(q, Mapping) else None
    if method == "fp8" and arch != "GptOssForCausalLM":
        if q.get("fmt", "e4m3") not in ("e4m3", "float8_e4m3fn") or q.get("activation_scheme", "dynamic") != "dynamic":
            raise _err(where, "quantization_config", "fp8 other than e4m3 with dynamic activations is not modeled")
        return "fp8"
    if method == "mxfp4" and arch == "GptOssForCausalLM":
        return "mxfp4"
    if isinstance(q, Mapping) and arch != "GptOssForCausalLM":  # ModelOpt NVFP4 / FP8, compressed-tensors int4
        from vidur_specdec.architectures import checkpoint_format as ckpt

        found = ckpt.modelopt_method(q, where)
        if found:
            return found
        if method == "compressed-tensors":
            return ckpt.compressed_tensors_method(q, where)
    modeled = "mxfp4" if arch == "GptOssForCausalLM" else \
        "fp8 (e4m3, dynamic activations), modelopt (NVFP4, FP8), compressed-tensors (int4 experts)"
    raise _err(where, "quantization_config", f"quant_method {method!r} is not modeled for {arch} (modeled: "
               f"{modeled}); its weights would be priced at the wrong size")


def model_from_moe_hf_config(cfg: Mapping, name: str, where: str):
    """The :class:`~vidur_specdec.architectures.models.ModelSpec` fields of a MoE model's ``config.json``.

    A mapping for :func:`~vidur_specdec.architectures.models.model_from_dict`, which checks and builds it.
    """
    arch = next(a for a in (cfg.get("architectures") or []) if a in MOE_ARCHITECTURES)
    for key in sorted(EXPERT_KEYS & set(cfg)):
        if key not in _MODELED[arch]:
            raise _err(where, key, f"is not a {arch} field; this model cannot represent it")
    L = _int(cfg, "num_hidden_layers", where)
    h = _int(cfg, "hidden_size", where)
    H = _int(cfg, "num_attention_heads", where)
    d = {"name": str(cfg.get("_name_or_path") or name), "num_layers": L, "hidden_size": h, "num_heads": H,
         "num_kv_heads": _int(cfg, "num_key_value_heads", where, default=H), "vocab_size": _int(cfg, "vocab_size", where),
         "max_model_len": _int(cfg, "max_position_embeddings", where),
         "tie_word_embeddings": _bool(cfg, "tie_word_embeddings", where),
         "experts_per_token": _int(cfg, "num_experts_per_tok", where),
         "quantization": _quantization(cfg, arch, where)}
    if cfg.get("sliding_window") and arch != "GptOssForCausalLM" and (
            cfg.get("use_sliding_window") or arch == "MixtralForCausalLM"):
        raise _err(where, "sliding_window", f"is set on a {arch}; sliding attention is modeled for GptOss only")
    if arch == "Qwen3MoeForCausalLM":
        if _int(cfg, "shared_expert_intermediate_size", where, default=0, minimum=0):
            raise _err(where, "shared_expert_intermediate_size", "is not 0; vLLM 0.33's qwen3_moe.py has no shared "
                       "expert")
        step = _int(cfg, "decoder_sparse_step", where, default=1)
        only = cfg.get("mlp_only_layers") or []
        if not isinstance(only, list) or any(isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < L
                                             for i in only):
            raise _err(where, "mlp_only_layers", f"must list layer indices in [0, {L})")
        moe = sum(1 for i in range(L) if i not in only and (i + 1) % step == 0)
        f = _int(cfg, "moe_intermediate_size", where)
        d.update(num_experts=_int(cfg, "num_experts", where), expert_ffn_size=f, dense_layers=L - moe,
                 ffn_size=_int(cfg, "intermediate_size", where) if moe < L else f,
                 head_dim=_int(cfg, "head_dim", where, default=h // H))
    elif arch == "MixtralForCausalLM":
        f = _int(cfg, "intermediate_size", where)
        d.update(num_experts=_int(cfg, "num_local_experts", where), expert_ffn_size=f, ffn_size=f)
        if cfg.get("head_dim"):
            d["head_dim"] = _int(cfg, "head_dim", where)
    elif arch == "MiniMaxM2ForCausalLM":
        _minimax_m2(cfg, d, where)
    elif arch in _DEEPSEEK_LIKE:
        if cfg.get("ep_size", 1) != 1:
            raise _err(where, "ep_size", "must be 1 (expert parallelism is a deployment setting, not the model's)")
        k_dense = _int(cfg, "first_k_dense_replace", where, default=0, minimum=0)
        freq = _int(cfg, "moe_layer_freq", where, default=1)
        moe = sum(1 for i in range(L) if i >= k_dense and i % freq == 0)
        _mlp_layer_types(cfg, L, [i >= k_dense and i % freq == 0 for i in range(L)], where)
        if cfg.get("num_experts") is not None and cfg["num_experts"] != cfg.get("n_routed_experts"):
            raise _err(where, "num_experts", f"({cfg['num_experts']!r}) disagrees with n_routed_experts "
                       f"({cfg.get('n_routed_experts')!r})")
        f = _int(cfg, "moe_intermediate_size", where)
        rope, nope = _int(cfg, "qk_rope_head_dim", where), _int(cfg, "qk_nope_head_dim", where)
        d.update(num_experts=_int(cfg, "n_routed_experts", where), expert_ffn_size=f, dense_layers=L - moe,
                 ffn_size=_int(cfg, "intermediate_size", where),
                 shared_ffn_size=f * _int(cfg, "n_shared_experts", where, default=0, minimum=0),
                 # MLA: every query head attends one shared compressed latent, priced as one KV head
                 num_kv_heads=1, head_dim=nope + rope, kv_lora_rank=_int(cfg, "kv_lora_rank", where),
                 q_lora_rank=_int(cfg, "q_lora_rank", where, default=0, minimum=0), qk_rope_head_dim=rope,
                 v_head_dim=_int(cfg, "v_head_dim", where),
                 mtp_layers=_int(cfg, "num_nextn_predict_layers", where, default=0, minimum=0))
        if arch in _SPARSE_ATTENTION:
            _sparse_attention(cfg, d, where)
    else:  # GptOssForCausalLM
        k = d["experts_per_token"]
        if "experts_per_token" in cfg and cfg["experts_per_token"] != k:
            raise _err(where, "experts_per_token", f"({cfg['experts_per_token']!r}) disagrees with "
                       f"num_experts_per_tok ({k})")
        types = list(cfg.get("layer_types") or ["sliding_attention", "full_attention"] * (L // 2))
        if len(types) != L or not set(types) <= {"sliding_attention", "full_attention"}:
            raise _err(where, "layer_types", f"must list {L} of sliding_attention/full_attention")
        f = _int(cfg, "intermediate_size", where)
        d.update(num_experts=_int(cfg, "num_local_experts", where), expert_ffn_size=f, ffn_size=f,
                 head_dim=_int(cfg, "head_dim", where), expert_bias=True,
                 sliding_window=_int(cfg, "sliding_window", where),
                 sliding_layers=types.count("sliding_attention"))
    return d


def _mlp_layer_types(cfg: Mapping, L: int, moe_layers, where: str) -> None:
    """``mlp_layer_types`` (GLM-5.1 NVFP4, GLM-5.2: ``dense`` / ``sparse`` per layer) must name the layers
    ``first_k_dense_replace`` and ``moe_layer_freq`` make MoE (vLLM 0.33 ``deepseek_v2.py`` builds them from those)."""
    types = cfg.get("mlp_layer_types")
    if types is None:
        return
    want = ["sparse" if m else "dense" for m in moe_layers]
    if not isinstance(types, list) or types[:L] != want:
        raise _err(where, "mlp_layer_types", f"disagrees with first_k_dense_replace / moe_layer_freq "
                   f"({want.count('dense')} dense layers, then MoE)")


# IndexCache (GLM-5.2): layers that reuse another layer's top-k instead of running their own indexer
_INDEX_CACHE_KEYS = ("indexer_types", "index_topk_freq", "index_topk_pattern")


def _sparse_attention(cfg: Mapping, d: dict, where: str) -> None:
    """DeepSeek sparse attention's indexer fields (DeepSeek-V3.2, GLM-5) into ``d``."""
    for key in _INDEX_CACHE_KEYS:
        v = cfg.get(key)
        if v is not None and v != 1 and not (isinstance(v, list) and set(v) <= {"full", "F"}):
            raise _err(where, key, "shares one layer's indexer top-k with the next ones (IndexCache; vLLM 0.33 "
                       "deepseek_v2.py skip_topk): layers without their own indexer and its keys are not modeled "
                       "(every layer would be charged an indexer)")
    d.update(index_n_heads=_int(cfg, "index_n_heads", where), index_head_dim=_int(cfg, "index_head_dim", where),
             index_topk=_int(cfg, "index_topk", where))
    qk = d["head_dim"]  # qk_nope_head_dim + qk_rope_head_dim
    if cfg.get("qk_head_dim") is not None and _int(cfg, "qk_head_dim", where) != qk:
        raise _err(where, "qk_head_dim", f"({cfg['qk_head_dim']}) is not qk_nope_head_dim + qk_rope_head_dim ({qk})")
    if d["index_head_dim"] % 128:
        raise _err(where, "index_head_dim", "must be a multiple of 128 (vLLM's fp8 indexer keys: one scale per 128)")


def _minimax_m2(cfg: Mapping, d: dict, where: str) -> None:
    """MiniMax-M2's fields into ``d``: GQA attention, every layer MoE (vLLM 0.33 ``minimax_m2.py``)."""
    if _int(cfg, "shared_intermediate_size", where, default=0, minimum=0):
        raise _err(where, "shared_intermediate_size", "is not 0; vLLM 0.33's MiniMax-M2 has no shared expert")
    if _bool(cfg, "attention_bias", where):
        raise _err(where, "attention_bias", "is true; MiniMax-M2's attention biases are not modeled")
    if cfg.get("attn_type_list") and any(t != 1 for t in cfg["attn_type_list"]):
        raise _err(where, "attn_type_list", "names linear-attention layers (MiniMax-M1); only full attention "
                   "(MiniMax-M2) is modeled")
    f = _int(cfg, "intermediate_size", where)
    d.update(num_experts=_int(cfg, "num_local_experts", where), expert_ffn_size=f, ffn_size=f,
             head_dim=_int(cfg, "head_dim", where, default=d["hidden_size"] // d["num_heads"]))


# --------------------------------------------------------------------------- counts and bytes


def _mixers(spec, tp: int) -> int:
    """Token-mixer weights of all layers (the layer plan's; ``L x attention_params`` for attention-only models)."""
    if not (getattr(spec, "linear_layers", 0) or getattr(spec, "global_head_dim", 0)):
        return spec.num_layers * attention_params(spec, tp)
    return mixer_params(spec, tp)



def expert_params(spec) -> int:
    """One routed expert: gate, up and down matrices (+ their biases on gpt-oss)."""
    h, f = spec.hidden_size, spec.expert_ffn_size
    return 3 * h * f + ((2 * f + h) if spec.expert_bias else 0)


def router_params(spec) -> int:
    return spec.hidden_size * spec.num_experts + (spec.num_experts if spec.expert_bias or spec.kv_lora_rank else 0)


def param_counts(spec) -> dict:
    """Total and active weights of the whole model (decoder layers + embedding + LM head; norms left out)."""
    L, Lm = spec.num_layers, spec.num_moe_layers
    attn = _mixers(spec, 1)
    dense = (L - Lm) * 3 * spec.hidden_size * spec.ffn_size
    common = Lm * (router_params(spec) + 3 * spec.hidden_size * spec.shared_ffn_size)
    emb = spec.embedding_params()
    total = attn + dense + common + Lm * spec.num_experts * expert_params(spec) + emb
    active = attn + dense + common + Lm * spec.experts_per_token * expert_params(spec) + emb
    return {"total": total, "active": active}


def weight_bytes(spec, tp: int = 1, experts_per_gpu=None) -> float:
    """Bytes of one GPU's weights, each part at its checkpoint format (:func:`~vidur_specdec.architectures.quant.part_format`).

    Experts are split ``1/tp`` wide on every GPU (tensor parallel), or whole
    experts ``experts_per_gpu`` to a GPU when given (expert parallel). fp8 covers
    every linear layer; mxfp4 the routed experts only (their biases, attention,
    router, embedding and LM head stay bf16, as in the gpt-oss checkpoints);
    ModelOpt NVFP4 every linear layer its exclude list does not keep in bf16.
    The router, the indexer's ``wk`` + ``weights_proj``, biases, embedding and
    LM head stay bf16.
    """
    from vidur_specdec.architectures import quant

    a, o = quant.weight_bytes(spec, "attention"), quant.weight_bytes(spec, "o_proj")
    L, Lm, h = spec.num_layers, spec.num_moe_layers, spec.hidden_size
    idx_q, idx_k = indexer_params(spec)
    body = a * _mixers(spec, tp)
    if o != a:  # o_proj in another format (NVFP4 DeepSeek: bf16 q/kv, NVFP4 o_proj); full-attention layers only
        v = spec.v_head_dim if spec.kv_lora_rank else spec.head_dim
        body += (o - a) * (L - spec.linear_layers) * (spec.num_heads // tp) * v * h
    body += (quant.weight_bytes(spec, "indexer") - a) * L * idx_q + (2.0 - a) * L * idx_k
    body += quant.weight_bytes(spec, "dense_mlp") * (L - Lm) * 3 * h * spec.ffn_size / tp
    shared = quant.weight_bytes(spec, "shared_experts") * 3 * h * spec.shared_ffn_size / tp
    body += Lm * (2.0 * router_params(spec) + shared)
    matrices = 3 * h * spec.expert_ffn_size
    biases = expert_params(spec) - matrices
    n_exp = spec.num_experts / tp if experts_per_gpu is None else experts_per_gpu
    body += Lm * n_exp * (quant.weight_bytes(spec, "experts") * matrices + 2.0 * biases)
    return body + 2.0 * spec.embedding_params(tp)
