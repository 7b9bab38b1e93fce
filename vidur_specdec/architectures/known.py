"""The models known by name (:data:`KNOWN_MODELS`, each dimension from the repository's ``config.json``) and
:func:`get_model`, the look-up of one of them."""

from __future__ import annotations

from typing import Dict

from vidur_specdec.architectures.spec import ModelSpec


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
                    kv_lora_rank=512, q_lora_rank=1536, qk_rope_head_dim=64, v_head_dim=128, quantization="fp8",
                    mtp_layers=1)
          for n in ("deepseek-ai/DeepSeek-V3", "deepseek-ai/DeepSeek-R1")),
        # DeepSeek sparse attention (MLA + an indexer picking index_topk tokens), MLA and GQA MoE targets:
        # aiconfigurator-core 0.12.0 model_configs/<org>--<name>_config.json (each repository's config.json;
        # tests/test_sparse_attention_models.py checks these against them)
        ModelSpec("deepseek-ai/DeepSeek-V3.2", 61, 7168, 128, 1, 18432, 129280, 163840, head_dim=192, num_experts=256,
                  experts_per_token=8, expert_ffn_size=2048, dense_layers=3, shared_ffn_size=2048, kv_lora_rank=512,
                  q_lora_rank=1536, qk_rope_head_dim=64, v_head_dim=128, quantization="fp8", mtp_layers=1,
                  index_n_heads=64, index_head_dim=128, index_topk=2048),
        *(ModelSpec(n, 78, 6144, 64, 1, 12288, 154880, 202752, head_dim=256, num_experts=256, experts_per_token=8,
                    expert_ffn_size=2048, dense_layers=3, shared_ffn_size=2048, kv_lora_rank=512, q_lora_rank=2048,
                    qk_rope_head_dim=64, v_head_dim=256, quantization=q, mtp_layers=1, index_n_heads=32,
                    index_head_dim=128, index_topk=2048)
          for n, q in (("zai-org/GLM-5", ""), ("zai-org/GLM-5-FP8", "fp8"))),
        ModelSpec("moonshotai/Kimi-K2-Instruct", 61, 7168, 64, 1, 18432, 163840, 131072, head_dim=192,
                  num_experts=384, experts_per_token=8, expert_ffn_size=2048, dense_layers=1, shared_ffn_size=2048,
                  kv_lora_rank=512, q_lora_rank=1536, qk_rope_head_dim=64, v_head_dim=128, quantization="fp8"),
        ModelSpec("MiniMaxAI/MiniMax-M2.5", 62, 3072, 48, 8, 1536, 200064, 196608, head_dim=128, num_experts=256,
                  experts_per_token=8, expert_ffn_size=1536, quantization="fp8"),
        *(ModelSpec(n, layers, 2880, 64, 8, 2880, 201088, 131072, head_dim=64, num_experts=experts,
                    experts_per_token=4, expert_ffn_size=2880, expert_bias=True, sliding_window=128,
                    sliding_layers=layers // 2, quantization="mxfp4")
          for n, layers, experts in (("openai/gpt-oss-20b", 24, 32), ("openai/gpt-oss-120b", 36, 128))),
    )
}


def get_model(name: str) -> ModelSpec:
    """Look up a known model by its Hugging Face name."""
    try:
        return KNOWN_MODELS[name]
    except KeyError:
        raise KeyError(f"unknown model {name!r}; known: {sorted(KNOWN_MODELS)}") from None
