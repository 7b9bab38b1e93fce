"""Model architectures known to the simulator (Llama-family dimensions).

One place for every model's shape: the profile builder, the memory model and
the drafter all read it from here. A model not listed can be described by a
YAML/dict of the same fields (see :func:`model_from_dict`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Dict, Mapping


@dataclass(frozen=True)
class ModelSpec:
    """Dimensions of a Llama-architecture decoder (gated SiLU MLP, RMSNorm, RoPE)."""

    name: str
    num_layers: int
    hidden_size: int  # n_embd
    num_heads: int  # query heads
    num_kv_heads: int
    ffn_size: int  # n_expanded_embd (intermediate size of the gated MLP)
    vocab_size: int
    max_model_len: int = 4096

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_heads

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

    def kv_bytes_per_token(self, tp: int = 1, dtype_bytes: int = 2) -> int:
        """KV-cache bytes one token occupies on one GPU, all layers (K and V)."""
        kv_heads = -(-self.num_kv_heads // tp)
        return 2 * dtype_bytes * self.head_dim * kv_heads * self.num_layers

    def to_dict(self) -> Dict:
        return asdict(self)


KNOWN_MODELS: Dict[str, ModelSpec] = {
    m.name: m
    for m in (
        ModelSpec("meta-llama/Llama-2-7b-hf", 32, 4096, 32, 32, 11008, 32000, 4096),
        ModelSpec("meta-llama/Llama-2-13b-hf", 40, 5120, 40, 40, 13824, 32000, 4096),
        ModelSpec("meta-llama/Llama-2-70b-hf", 80, 8192, 64, 8, 28672, 32000, 4096),
        # Small Llama-architecture drafters used with Llama-2 targets (SpecInfer).
        ModelSpec("JackFram/llama-68m", 2, 768, 12, 12, 3072, 32000, 2048),
        ModelSpec("JackFram/llama-160m", 12, 768, 12, 12, 3072, 32000, 2048),
        ModelSpec("TinyLlama/TinyLlama-1.1B-Chat-v1.0", 22, 2048, 32, 4, 5632, 32000, 2048),
    )
}


def model_from_dict(d: Mapping) -> ModelSpec:
    """Build a :class:`ModelSpec` from a mapping with the dataclass's field names."""
    names = {f.name for f in fields(ModelSpec)}
    unknown = set(d) - names
    if unknown:
        raise ValueError(f"unknown model fields {sorted(unknown)}; allowed: {sorted(names)}")
    return ModelSpec(**d)


def get_model(name: str) -> ModelSpec:
    """Look up a known model by its Hugging Face name."""
    try:
        return KNOWN_MODELS[name]
    except KeyError:
        raise KeyError(f"unknown model {name!r}; known: {sorted(KNOWN_MODELS)}") from None
