"""Model architectures known to the simulator (Llama-family dimensions).

One place for every model's shape: the profile builder, the memory model and
the drafter all read it from here. ``model:`` (and ``speculative.draft_model``)
in a run config is resolved by :func:`resolve_model`: a name in
:data:`KNOWN_MODELS`, a Hugging Face ``config.json`` of a Llama-architecture
model, or a YAML file of :class:`ModelSpec` fields.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Dict, Mapping, Union

from vidur_specdec.architectures import moe
from vidur_specdec.architectures.spec import (  # noqa: F401 (re-exported)
    ModelError,
    ModelSpec,
    model_from_dict,
)


def _llama3(name: str, layers: int, hidden: int, heads: int, ffn: int, tied: bool) -> ModelSpec:
    # Every Llama-3.1/3.2/3.3 config.json: 8 KV heads, 128,256-token vocabulary,
    # max_position_embeddings 131072.
    return ModelSpec(name, layers, hidden, heads, 8, ffn, 128256, 131072, tie_word_embeddings=tied)


KNOWN_MODELS: Dict[str, ModelSpec] = {
    m.name: m
    for m in (
        ModelSpec("meta-llama/Llama-2-7b-hf", 32, 4096, 32, 32, 11008, 32000, 4096),
        ModelSpec("meta-llama/Llama-2-13b-hf", 40, 5120, 40, 40, 13824, 32000, 4096),
        ModelSpec("meta-llama/Llama-2-70b-hf", 80, 8192, 64, 8, 28672, 32000, 4096),
        # Llama-3.x: dimensions from each repository's config.json on the Hugging Face Hub
        # (num_hidden_layers, hidden_size, num_attention_heads, intermediate_size, tie_word_embeddings).
        _llama3("meta-llama/Llama-3.1-8B", 32, 4096, 32, 14336, False),
        _llama3("meta-llama/Llama-3.1-8B-Instruct", 32, 4096, 32, 14336, False),
        _llama3("meta-llama/Llama-3.1-70B", 80, 8192, 64, 28672, False),
        _llama3("meta-llama/Llama-3.1-70B-Instruct", 80, 8192, 64, 28672, False),
        _llama3("meta-llama/Llama-3.3-70B-Instruct", 80, 8192, 64, 28672, False),
        _llama3("meta-llama/Llama-3.2-1B", 16, 2048, 32, 8192, True),
        _llama3("meta-llama/Llama-3.2-1B-Instruct", 16, 2048, 32, 8192, True),
        _llama3("meta-llama/Llama-3.2-3B", 28, 3072, 24, 8192, True),
        _llama3("meta-llama/Llama-3.2-3B-Instruct", 28, 3072, 24, 8192, True),
        # Small Llama-architecture drafters used with Llama-2 targets (SpecInfer).
        ModelSpec("JackFram/llama-68m", 2, 768, 12, 12, 3072, 32000, 2048),
        ModelSpec("JackFram/llama-160m", 12, 768, 12, 12, 3072, 32000, 2048),
        ModelSpec("TinyLlama/TinyLlama-1.1B-Chat-v1.0", 22, 2048, 32, 4, 5632, 32000, 2048),
        # Mixture-of-experts targets: each repository's config.json (tests/data/moe/ holds the files;
        # tests/test_moe_models.py checks these against them). ffn_size is the dense layers' MLP
        # width, or the expert width when every layer is MoE.
        *(ModelSpec(n, 48, 2048, 32, 4, 768, 151936, 40960, head_dim=128, num_experts=128,
                    experts_per_token=8, expert_ffn_size=768) for n in ("Qwen/Qwen3-30B-A3B",)),
        ModelSpec("Qwen/Qwen3-235B-A22B", 94, 4096, 64, 4, 1536, 151936, 40960, head_dim=128, num_experts=128,
                  experts_per_token=8, expert_ffn_size=1536),
        ModelSpec("mistralai/Mixtral-8x7B-Instruct-v0.1", 32, 4096, 32, 8, 14336, 32000, 32768, num_experts=8,
                  experts_per_token=2, expert_ffn_size=14336),
        *(ModelSpec(n, 61, 7168, 128, 1, 18432, 129280, 163840, head_dim=192, num_experts=256,
                    experts_per_token=8, expert_ffn_size=2048, dense_layers=3, shared_ffn_size=2048,
                    kv_lora_rank=512, q_lora_rank=1536, qk_rope_head_dim=64, v_head_dim=128, quantization="fp8")
          for n in ("deepseek-ai/DeepSeek-V3", "deepseek-ai/DeepSeek-R1")),
        *(ModelSpec(n, layers, 2880, 64, 8, 2880, 201088, 131072, head_dim=64, num_experts=experts,
                    experts_per_token=4, expert_ffn_size=2880, expert_bias=True, sliding_window=128,
                    sliding_layers=layers // 2, quantization="mxfp4")
          for n, layers, experts in (("openai/gpt-oss-20b", 24, 32), ("openai/gpt-oss-120b", 36, 128))),
    )
}

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
    """A :class:`ModelSpec` from a Hugging Face ``config.json`` of a Llama-architecture model.

    Accepted when ``architectures`` holds ``LlamaForCausalLM`` or ``model_type``
    is ``llama``; ``num_key_value_heads`` defaults to the query heads (LlamaConfig's
    default), ``tie_word_embeddings`` to false, ``head_dim`` to hidden / heads.
    """
    if not isinstance(cfg, Mapping):
        raise ModelError(f"{where}: a config.json must hold a JSON object")
    archs = cfg.get("architectures") or []
    if isinstance(archs, list) and any(a in moe.MOE_ARCHITECTURES for a in archs):
        return moe.model_from_moe_hf_config(cfg, name, where)
    moe.refuse_expert_fields(cfg, where)  # experts are never simulated as a dense MLP
    if "LlamaForCausalLM" not in archs and cfg.get("model_type") != "llama":
        got = ", ".join(map(str, archs)) or cfg.get("model_type") or "none given"
        raise ModelError(f"{where}: only Llama-architecture models and the MoE architectures "
                         f"{', '.join(moe.MOE_ARCHITECTURES)} are supported, got {got}")
    d = {"name": str(cfg.get("_name_or_path") or name)}
    for field_name, key in _HF_KEYS.items():
        if cfg.get(key) is None:
            raise ModelError(f"{where}: config.json has no {key!r}")
        d[field_name] = cfg[key]
    d["num_kv_heads"] = cfg.get("num_key_value_heads") or cfg["num_attention_heads"]
    d["tie_word_embeddings"] = bool(cfg.get("tie_word_embeddings", False))
    if cfg.get("head_dim"):
        d["head_dim"] = cfg["head_dim"]
    return model_from_dict(d, where)


def _is_file(path: Path) -> bool:
    """``path.is_file()``, False for a name the OS refuses (too long, a NUL byte)."""
    try:
        return path.is_file()
    except (OSError, ValueError):
        return False


def resolve_model(value: Union[str, Path, Mapping, ModelSpec], key: str = "model") -> ModelSpec:
    """The :class:`ModelSpec` that ``model:`` (or ``speculative.draft_model``) names.

    ``value`` is a :data:`KNOWN_MODELS` name, the path of a Hugging Face
    ``config.json`` (``.json``) or of a YAML file of ModelSpec fields
    (``.yaml``/``.yml``), a mapping of ModelSpec fields, or a ModelSpec.
    A relative path was already resolved against the config that named it
    (:func:`vidur_specdec.config.paths.resolve_paths`). Raises :class:`ModelError` naming ``key``.
    """
    if isinstance(value, ModelSpec):
        return value
    if isinstance(value, Mapping):
        return model_from_dict(value, key)
    name = str(value)
    if name in KNOWN_MODELS:
        return KNOWN_MODELS[name]
    path = Path(name).expanduser()
    if not (name.endswith((".json", ".yaml", ".yml")) or _is_file(path)):
        raise ModelError(f"{key}: unknown model {name!r}; must be one of {', '.join(KNOWN_MODELS)}, "
                         "or the path of a Hugging Face config.json or a YAML of ModelSpec fields")
    if not _is_file(path):
        raise ModelError(f"{key}: file not found: {path}")
    where = f"{key}: {path}"
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        raise ModelError(f"{where}: cannot read the file") from None
    if path.suffix == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError:
            raise ModelError(f"{where}: is not valid JSON") from None
        return model_from_hf_config(data, path.parent.name or path.stem, where)
    from vidur_specdec.config.files import parse_yaml_text  # duplicate keys refused, as in any config file

    data = parse_yaml_text(text, str(path), key)
    if isinstance(data, Mapping) and ("architectures" in data or "model_type" in data):
        return model_from_hf_config(data, path.stem, where)
    return model_from_dict(data or {}, where)


def get_model(name: str) -> ModelSpec:
    """Look up a known model by its Hugging Face name."""
    try:
        return KNOWN_MODELS[name]
    except KeyError:
        raise KeyError(f"unknown model {name!r}; known: {sorted(KNOWN_MODELS)}") from None
