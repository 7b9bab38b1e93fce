"""Architectures known to need what the simulator cannot price: each refused in one line naming the feature.

A ``config.json`` naming one of :data:`UNMODELED` is refused before its fields are read, with the
architecture feature that is missing (a mixer, attention or MoE kind no kernel source here prices;
the vLLM 0.33 model file that runs it). An architecture neither here nor read by a family module
is refused by :func:`vidur_specdec.architectures.parse.model_from_hf_config` naming the ones read.
"""

from __future__ import annotations

from typing import Mapping

from vidur_specdec.architectures.errors import ModelError

UNMODELED = {
    "DeepseekV4ForCausalLM": "compressed sparse attention (compress_ratios: compressed and heavily compressed KV "
                             "with its own indexer), manifold-constrained hyper-connections (hc_mult) and hash-routed "
                             "MoE layers (num_hash_layers); vLLM 0.33 vllm/models/deepseek_v4",
    "KimiK3ForConditionalGeneration": "Kimi Delta Attention layers (linear_attn_config.kda_layers) beside gated MLA, "
                                      "and a latent MoE (routed_expert_hidden_size below hidden_size); vLLM 0.33 "
                                      "vllm/models/kimi_k3",
    "KimiLinearForCausalLM": "Kimi Delta Attention layers (linear_attn_config.kda_layers); vLLM 0.33 "
                             "vllm/models/kimi_k3",
    "MiniMaxM3ForCausalLM": "MiniMax sparse attention (sparse_attention_config: an index_q/index_k top-k selector) "
                            "(vLLM 0.33 registers MiniMax-M3 as MiniMaxM3SparseForCausalLM, vllm/models/minimax_m3)",
    "MiniMaxM3SparseForConditionalGeneration": "MiniMax sparse attention (sparse_attention_config: an index_q/"
                                               "index_k top-k selector); vLLM 0.33 vllm/models/minimax_m3",
    "NemotronHForCausalLM": "Mamba-2 mixer layers (hybrid_override_pattern 'M'), and latent MoE in the larger "
                            "Nemotron 3; vLLM 0.33 nemotron_h.py",
    "DeciLMForCausalLM": "per-layer block_configs (layers with no attention or no MLP, per-layer KV groups and MLP "
                         "widths from neural architecture search); vLLM 0.33 nemotron_nas.py",
    "MiMoV2FlashForCausalLM": "sliding-window and full layers of different shapes (hybrid_layer_pattern, swa_* "
                              "heads) with value heads smaller than query/key heads (v_head_dim 128 of 192) and "
                              "attention sinks; vLLM 0.33 mimo_v2.py",
    "Step3p7FlashForCausalLM": "sliding-window layers beside full ones (layer_types) with MoE router bias and "
                               "scaling, a layer kind only gpt-oss and Gemma 4 are read with (vLLM 0.33 registers no "
                               "Step3p7FlashForCausalLM; step3p7.py serves Step3p7ForConditionalGeneration)",
}


def refuse_unmodeled(cfg: Mapping, where: str) -> None:
    """Raise :class:`ModelError` in one line when ``cfg`` names an architecture of :data:`UNMODELED`."""
    archs = cfg.get("architectures") or []
    for a in archs if isinstance(archs, list) else []:
        if a in UNMODELED:
            raise ModelError(f"{where}: architecture {a} is not modeled: {UNMODELED[a]}")
