"""Model architectures known to the simulator (Llama-family dimensions).

One place for every model's shape: the profile builder, the memory model and
the drafter all read it from here. ``model:`` (and ``speculative.draft_model``)
in a run config is resolved by :func:`resolve_model`: a name in
:data:`KNOWN_MODELS`, a Hugging Face ``config.json`` of a Llama-architecture
model, or a YAML file of :class:`ModelSpec` fields.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Dict, Mapping, Optional, Union

from vidur_specdec.architectures import layer_plan
from vidur_specdec.architectures.errors import ModelError
from vidur_specdec.config import ConfigError  # noqa: F401 (ModelError's base, imported from here by callers)
from vidur_specdec.config.files import parse_yaml_text  # duplicate keys refused, as in any config file


@dataclass(frozen=True)
class ModelSpec:
    """Dimensions of a Llama-architecture decoder (gated SiLU MLP, RMSNorm, RoPE).

    ``head_dim`` 0 means ``hidden_size // num_heads`` (set in ``__post_init__``);
    ``tie_word_embeddings`` True means the LM head reuses the embedding matrix
    (Llama-3.2-1B/3B), so its weights are stored once.
    """

    name: str
    num_layers: int
    hidden_size: int  # n_embd
    num_heads: int  # query heads
    num_kv_heads: int
    ffn_size: int  # n_expanded_embd (intermediate size of the gated MLP)
    vocab_size: int
    max_model_len: int = 4096  # tokens
    tie_word_embeddings: bool = False
    head_dim: int = 0  # 0: hidden_size // num_heads
    # Mixture-of-experts fields (all 0/False: a dense model). See architectures/moe.py.
    num_experts: int = 0  # routed experts per MoE layer
    experts_per_token: int = 0  # top-k routed experts each token wakes
    expert_ffn_size: int = 0  # intermediate size of one routed expert
    dense_layers: int = 0  # decoder layers whose MLP is a dense gated MLP of ffn_size (DeepSeek: 3)
    shared_ffn_size: int = 0  # summed intermediate size of the always-on shared experts (0: none)
    expert_bias: bool = False  # experts and router carry biases (gpt-oss)
    kv_lora_rank: int = 0  # >0: multi-head latent attention (DeepSeek); KV = kv_lora_rank + qk_rope_head_dim
    q_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    v_head_dim: int = 0
    sliding_window: int = 0  # tokens a sliding-window layer attends (gpt-oss 128)
    sliding_layers: int = 0  # how many decoder layers use the sliding window
    quantization: str = ""  # weight format: "" (bf16), "fp8" (every linear layer, W8A8), "mxfp4" (routed experts)
    kv_cache_dtype: str = ""  # KV-cache element: "" (bf16, 2 bytes) or "fp8" (e4m3, 1 byte)
    mtp_layers: int = 0  # multi-token-prediction modules shipped with the checkpoint (num_nextn_predict_layers)
    # Hybrid linear attention (Qwen3.5's gated delta net, architectures/hybrid.py); 0: none
    linear_layers: int = 0  # decoder layers whose token mixer is a gated delta net (layer_types linear_attention)
    linear_num_key_heads: int = 0
    linear_num_value_heads: int = 0
    linear_key_head_dim: int = 0
    linear_value_head_dim: int = 0
    linear_conv_kernel_dim: int = 0  # causal conv width K (tokens)
    attn_output_gate: bool = False  # full-attention layers gate their output (q_proj twice as wide)
    mamba_ssm_dtype: str = ""  # recurrent-state element: "" (model dtype, bf16) or float32
    chunked_layers: int = 0  # layers of chunked local attention (Llama 4, architectures/llama4.py)
    attention_chunk_size: int = 0  # tokens of one attention chunk
    # DeepSeek sparse attention (DeepSeek-V3.2, GLM-5; 0: dense MLA): a lightning indexer of index_n_heads heads of
    # index_head_dim scores every cached token, then MLA attends the index_topk best (costs/sparse_attention.py)
    index_n_heads: int = 0
    index_head_dim: int = 0
    index_topk: int = 0  # tokens
    # Gemma 4 (architectures/gemma4.py): global (full-attention) layers with their own head shape; 0: none
    global_head_dim: int = 0  # head size of the global layers (the sliding layers use head_dim)
    global_kv_heads: int = 0  # KV heads of the global layers
    attention_k_eq_v: bool = False  # global layers ship K only, loaded as both K and V (vLLM holds it twice)

    def __post_init__(self) -> None:
        if not self.head_dim:
            object.__setattr__(self, "head_dim", self.hidden_size // self.num_heads)

    @property
    def is_moe(self) -> bool:
        """True when the decoder's MLPs are (mostly) mixture-of-experts layers."""
        return self.num_experts > 0

    @property
    def num_moe_layers(self) -> int:
        return self.num_layers - self.dense_layers if self.is_moe else 0

    def params_per_layer(self, tp: int = 1) -> int:
        """Weights of one decoder layer on one of ``tp`` GPUs (count, not bytes).

        Same formula as Vidur's ``ParamCounter``: QKV + O projections and the
        three gated-MLP matrices; norms are negligible and left out.
        """
        q_heads = self.num_heads // tp
        kv_heads = -(-self.num_kv_heads // tp)
        attn = self.hidden_size * self.head_dim * (q_heads + 2 * kv_heads)
        attn += self.hidden_size * self.head_dim * q_heads
        mlp = 3 * self.hidden_size * self.ffn_size // tp
        return attn + mlp

    def embedding_params(self, tp: int = 1) -> int:
        """Embedding + LM-head weights on one of ``tp`` GPUs (vocabulary-parallel); once when tied."""
        return (1 if self.tie_word_embeddings else 2) * self.vocab_size * self.hidden_size // tp

    @property
    def is_sparse_attention(self) -> bool:
        """True for DeepSeek sparse attention: an indexer picks ``index_topk`` tokens for MLA to attend."""
        return self.index_topk > 0

    @property
    def index_key_bytes(self) -> int:
        """Bytes of one token's indexer key in one layer: fp8 keys + one fp32 scale per 128 values.

        vLLM 0.33 ``model_executor/models/deepseek_v2.py`` (``Indexer``: ``head_dim + head_dim //
        quant_block_size * 4``, block 128): 132 B at ``index_head_dim`` 128; 0 without sparse attention.
        """
        d = self.index_head_dim if self.index_topk else 0
        return d + d // 128 * 4

    @property
    def kv_dtype_bytes(self) -> int:
        """Bytes of one KV-cache element: 1 for an fp8 KV cache, else 2 (bf16)."""
        return 1 if self.kv_cache_dtype == "fp8" else 2

    @property
    def linear_weight_bytes(self) -> int:
        """Bytes of one weight of the attention and dense-MLP projections: 1 when fp8, else 2 (bf16)."""
        return 1 if self.quantization == "fp8" else 2

    def kv_bytes_per_token(self, tp: int = 1, dtype_bytes: Optional[int] = None) -> int:
        """KV-cache bytes one token occupies on one GPU, all layers (K and V).

        ``dtype_bytes`` None: the model's KV element size (:attr:`kv_dtype_bytes`).

        MLA (``kv_lora_rank`` > 0): one compressed latent + rope key per layer,
        replicated on every GPU. Sliding-window layers keep at most
        ``sliding_window`` tokens per request, so only full-attention layers
        grow with the context and are counted here (see docs/model.md).
        """
        if dtype_bytes is None:
            dtype_bytes = self.kv_dtype_bytes
        return layer_plan.kv_bytes_per_token(self, tp, dtype_bytes)

    def state_bytes_per_request(self, tp: int = 1, num_spec: int = 0) -> int:
        """Fixed per-request state on one GPU (linear-attention layers; 0 for attention-only models), bytes."""
        return layer_plan.state_bytes_per_request(self, tp, num_spec)

    def to_dict(self) -> Dict:
        """The fields as a dict; fields at their dense default are left out (a dense model's dict is unchanged)."""
        d = asdict(self)
        for f in fields(self):
            if f.name in _MOE_FIELDS and d[f.name] == f.default:
                del d[f.name]
        return d


_MOE_FIELDS = ("num_experts", "experts_per_token", "expert_ffn_size", "dense_layers", "shared_ffn_size",
               "expert_bias", "kv_lora_rank", "q_lora_rank", "qk_rope_head_dim", "v_head_dim",
               "sliding_window", "sliding_layers", "quantization", "kv_cache_dtype", "mtp_layers",
               "linear_layers", "linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim",
               "linear_value_head_dim", "linear_conv_kernel_dim", "attn_output_gate", "mamba_ssm_dtype",
               "chunked_layers", "attention_chunk_size", "index_n_heads", "index_head_dim", "index_topk",
               "global_head_dim", "global_kv_heads", "attention_k_eq_v")


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

_INT_FIELDS = ("num_layers", "hidden_size", "num_heads", "num_kv_heads", "ffn_size", "vocab_size",
               "max_model_len", "head_dim", "num_experts", "experts_per_token", "expert_ffn_size", "dense_layers",
               "shared_ffn_size", "kv_lora_rank", "q_lora_rank", "qk_rope_head_dim", "v_head_dim",
               "sliding_window", "sliding_layers", "mtp_layers", "linear_layers", "linear_num_key_heads",
               "linear_num_value_heads", "linear_key_head_dim", "linear_value_head_dim", "linear_conv_kernel_dim",
               "chunked_layers", "attention_chunk_size", "index_n_heads", "index_head_dim", "index_topk",
               "global_head_dim", "global_kv_heads")
_ZERO_OK = ("head_dim",) + _MOE_FIELDS


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
                                                                    "head_dim") + _MOE_FIELDS]
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
    if d.get("quantization") not in (None, "", "fp8", "mxfp4"):
        raise ModelError(f"{where}: quantization must be fp8 or mxfp4 (the checkpoint's format), "
                         f"got {d['quantization']!r}")
    out["quantization"] = d.get("quantization") or ""
    if d.get("kv_cache_dtype") not in (None, "", "fp8"):
        raise ModelError(f"{where}: kv_cache_dtype must be fp8 or empty (bf16), got {d['kv_cache_dtype']!r}")
    out["kv_cache_dtype"] = d.get("kv_cache_dtype") or ""
    if out.get("global_head_dim"):
        from vidur_specdec.architectures import gemma4  # noqa: F401 (registers the global_attention mixer)
    spec = ModelSpec(**out)
    _check_shape(spec, where)
    return spec


def _check_shape(spec: ModelSpec, where: str) -> None:
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
    index = (spec.index_n_heads, spec.index_head_dim, spec.index_topk)
    if any(index) and not (all(index) and spec.kv_lora_rank):
        raise ModelError(f"{where}: sparse attention needs index_n_heads, index_head_dim and index_topk all set, "
                         "on a multi-head latent attention model (kv_lora_rank)")
    if bool(spec.global_head_dim) != bool(spec.global_kv_heads) or (spec.global_head_dim and not spec.sliding_layers):
        raise ModelError(f"{where}: global_head_dim and global_kv_heads go together, beside sliding_layers")
    if spec.num_heads % spec.num_kv_heads:
        raise ModelError(f"{where}: num_heads {spec.num_heads} is not a multiple of num_kv_heads {spec.num_kv_heads}")
    if spec.hidden_size % spec.num_heads:
        # Vidur's ReplicaConfig asserts embedding_dim % num_q_heads == 0.
        raise ModelError(f"{where}: hidden_size {spec.hidden_size} is not a multiple of num_heads {spec.num_heads}")


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
    # lazy: start-up of `python -m vidur_specdec.main --help` (would load vidur_specdec.architectures.moe)
    from vidur_specdec.architectures import gemma4, hybrid, llama4, moe

    if gemma4.is_gemma4(cfg):
        return model_from_dict(gemma4.model_from_gemma4_hf_config(cfg, name, where), where)
    if hybrid.is_hybrid(cfg):
        return model_from_dict(hybrid.model_from_hybrid_hf_config(cfg, name, where), where)
    if llama4.is_llama4(cfg):
        return model_from_dict(llama4.model_from_llama4_hf_config(cfg, name, where), where)
    if isinstance(archs, list) and any(a in moe.MOE_ARCHITECTURES for a in archs):
        return model_from_dict(moe.model_from_moe_hf_config(cfg, name, where), where)
    moe.refuse_expert_fields(cfg, where)  # experts are never simulated as a dense MLP
    if "LlamaForCausalLM" not in archs and cfg.get("model_type") != "llama":
        got = ", ".join(map(str, archs)) or cfg.get("model_type") or "none given"
        raise ModelError(f"{where}: only Llama-architecture models and the architectures "
                         f"{', '.join(moe.MOE_ARCHITECTURES + hybrid.HYBRID_ARCHITECTURES + llama4.LLAMA4_ARCHITECTURES + gemma4.GEMMA4_ARCHITECTURES)}"
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
    shipped = _shipped_config(name)
    if shipped is not None:
        return model_from_hf_config(shipped, name, f"{key}: {name}")
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

    data = parse_yaml_text(text, str(path), key)
    if isinstance(data, Mapping) and ("architectures" in data or "model_type" in data):
        return model_from_hf_config(data, path.stem, where)
    return model_from_dict(data or {}, where)


def _shipped_config(name: str) -> Optional[Mapping]:
    """The ``config.json`` aiconfigurator-core ships for Hugging Face model ``name`` (its ``model_configs/``), or
    None (the name is then a path or unknown); an architecture that cannot be priced is refused by
    :func:`model_from_hf_config` in one line naming it."""
    if name.endswith((".json", ".yaml", ".yml")):
        return None
    from vidur_specdec.architectures import hybrid  # lazy: start-up

    return hybrid.load_aic_config(name)


def get_model(name: str) -> ModelSpec:
    """Look up a known model by its Hugging Face name."""
    try:
        return KNOWN_MODELS[name]
    except KeyError:
        raise KeyError(f"unknown model {name!r}; known: {sorted(KNOWN_MODELS)}") from None
