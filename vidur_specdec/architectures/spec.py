"""The shape of a model: :class:`ModelSpec` (dense Llama-family fields plus the mixture-of-experts ones).

Below both readers: :mod:`.models` (known models, Hugging Face ``config.json``
and YAML files) and :mod:`.moe` (the mixture-of-experts architectures' own
``config.json`` fields). Sizes in elements (tokens, columns, experts), never bytes.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Dict, Mapping

from vidur_specdec.config import ConfigError


class ModelError(ConfigError):
    """A bad model name or model file; the message is one line naming the cause."""


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
    quantization: str = ""  # the checkpoint's own weight format: "" (bf16), "fp8" (linear layers), "mxfp4" (experts)

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

    def kv_bytes_per_token(self, tp: int = 1, dtype_bytes: int = 2) -> int:
        """KV-cache bytes one token occupies on one GPU, all layers (K and V).

        MLA (``kv_lora_rank`` > 0): one compressed latent + rope key per layer,
        replicated on every GPU. Sliding-window layers keep at most
        ``sliding_window`` tokens per request, so only full-attention layers
        grow with the context and are counted here (see docs/model.md).
        """
        if self.kv_lora_rank:
            return dtype_bytes * (self.kv_lora_rank + self.qk_rope_head_dim) * self.num_layers
        kv_heads = -(-self.num_kv_heads // tp)
        return 2 * dtype_bytes * self.head_dim * kv_heads * (self.num_layers - self.sliding_layers)

    def to_dict(self) -> Dict:
        """The fields as a dict; fields at their dense default are left out (a dense model's dict is unchanged)."""
        d = asdict(self)
        for f in fields(self):
            if f.name in _MOE_FIELDS and d[f.name] == f.default:
                del d[f.name]
        return d


_MOE_FIELDS = ("num_experts", "experts_per_token", "expert_ffn_size", "dense_layers", "shared_ffn_size",
               "expert_bias", "kv_lora_rank", "q_lora_rank", "qk_rope_head_dim", "v_head_dim",
               "sliding_window", "sliding_layers", "quantization")


_INT_FIELDS = ("num_layers", "hidden_size", "num_heads", "num_kv_heads", "ffn_size", "vocab_size",
               "max_model_len", "head_dim", "num_experts", "experts_per_token", "expert_ffn_size", "dense_layers",
               "shared_ffn_size", "kv_lora_rank", "q_lora_rank", "qk_rope_head_dim", "v_head_dim",
               "sliding_window", "sliding_layers")
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
    if "expert_bias" in d:
        if not isinstance(d["expert_bias"], bool):
            raise ModelError(f"{where}: expert_bias must be true/false, got {d['expert_bias']!r}")
        out["expert_bias"] = d["expert_bias"]
    if d.get("quantization") not in (None, "", "fp8", "mxfp4"):
        raise ModelError(f"{where}: quantization must be fp8 or mxfp4 (the checkpoint's format), "
                         f"got {d['quantization']!r}")
    out["quantization"] = d.get("quantization") or ""
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
    if spec.dense_layers > spec.num_layers or spec.sliding_layers > spec.num_layers:
        raise ModelError(f"{where}: dense_layers and sliding_layers must not exceed num_layers {spec.num_layers}")
    if spec.num_heads % spec.num_kv_heads:
        raise ModelError(f"{where}: num_heads {spec.num_heads} is not a multiple of num_kv_heads {spec.num_kv_heads}")
    if spec.hidden_size % spec.num_heads:
        # Vidur's ReplicaConfig asserts embedding_dim % num_q_heads == 0.
        raise ModelError(f"{where}: hidden_size {spec.hidden_size} is not a multiple of num_heads {spec.num_heads}")


