"""Multimodal checkpoints whose language model is an architecture read elsewhere: their ``text_config``, unwrapped.

vLLM 0.33 serves these as ``...ForConditionalGeneration`` models whose text decoder is an
existing one (``model_executor/models/kimi_k25.py``: a DeepSeek-V3 language model;
``qwen3_vl.py`` / ``qwen3_vl_moe.py``: Qwen3 / Qwen3-MoE with multimodal rotary positions and
DeepStack visual features added to the first layers' hidden states on image tokens only).
:func:`unwrap` turns such a ``config.json`` into the flat config of its language model (the
``text_config`` fields under the inner architecture, the checkpoint's ``quantization_config``
and ``tie_word_embeddings``), which the family modules then read. The vision tower, projector
and DeepStack merges are not counted: text-only serving (their weights, a few hundred MB to
a few GB, are left out of memory: an under-estimate).
"""

from __future__ import annotations

from typing import Mapping, Optional

from vidur_specdec.architectures.errors import ModelError

#: outer architecture -> the language model's architecture (when its text_config does not name it)
WRAPPED = {"KimiK25ForConditionalGeneration": "DeepseekV3ForCausalLM",
           "Qwen3VLForConditionalGeneration": "Qwen3ForCausalLM",
           "Qwen3VLMoeForConditionalGeneration": "Qwen3MoeForCausalLM"}


def unwrap(cfg: Mapping, where: str) -> Optional[dict]:
    """The flat config of ``cfg``'s language model when ``cfg`` names a :data:`WRAPPED` architecture, else None."""
    archs = cfg.get("architectures") or []
    outer = next((a for a in archs if a in WRAPPED), None) if isinstance(archs, list) else None
    if outer is None:
        return None
    text = cfg.get("text_config")
    if not isinstance(text, Mapping):
        raise ModelError(f"{where}: config.json field 'text_config' must be a JSON object for {outer}")
    inner = text.get("architectures") or [WRAPPED[outer]]
    if inner != [WRAPPED[outer]]:
        raise ModelError(f"{where}: config.json field 'text_config' names {inner}; {outer} is read with a "
                         f"{WRAPPED[outer]} language model")
    flat = {k: v for k, v in text.items() if k not in ("architectures", "quantization_config", "_name_or_path")}
    flat["architectures"] = [WRAPPED[outer]]
    if cfg.get("_name_or_path") or text.get("_name_or_path"):
        flat["_name_or_path"] = cfg.get("_name_or_path") or text.get("_name_or_path")
    if "tie_word_embeddings" in cfg:
        flat["tie_word_embeddings"] = cfg["tie_word_embeddings"]
    q = cfg.get("quantization_config")
    q = text.get("quantization_config") if q is None else q
    if q is not None:
        flat["quantization_config"] = q
    return flat
