"""The shape of a model: :class:`ModelSpec`, the dimensions of a Llama-family decoder and the fields that extend
it (mixture of experts, multi-head latent and sparse attention, sliding, chunked and linear-attention layers).

Built by :mod:`~vidur_specdec.architectures.parse` (which checks the fields) and listed for known models in
:mod:`~vidur_specdec.architectures.known`; the per-layer arithmetic is :mod:`~vidur_specdec.architectures.layer_plan`'s.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from typing import Dict, Optional

from vidur_specdec.architectures import layer_plan


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
    # vLLM's quantization method of the checkpoint: "" (bf16), "fp8" (every linear layer, W8A8), "mxfp4" (routed
    # experts), "modelopt" (ModelOpt FP8), "modelopt_fp4" (ModelOpt NVFP4), "compressed-tensors" (int4 experts);
    # each part's format: architectures/quant.py part_format
    quantization: str = ""
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
    # where the full-attention layers of a hybrid model sit: comma-separated 0-based indices (its config's
    # layer_types); "" = spread evenly (layer_plan.full_attention_ids). Pipeline stages take their own by position.
    full_attention_layer_ids: str = ""
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
    # expert popularity of the routing model (MoE only; costs/routing.py): "" (= "uniform") or one of MOE_ROUTINGS
    moe_routing: str = ""
    bf16_parts: str = ""  # parts a quantized checkpoint keeps in bf16, comma-separated (quant.PARTS; its exclude list)

    def __post_init__(self) -> None:
        if not self.head_dim:
            object.__setattr__(self, "head_dim", self.hidden_size // self.num_heads)

    @property
    def is_moe(self) -> bool:
        """True when the decoder's MLPs are (mostly) mixture-of-experts layers."""
        return self.num_experts > 0

    @property
    def vidur_q_heads(self) -> int:
        """Query heads as Vidur's ReplicaConfig is given them: ``num_heads``; where ``head_dim`` is given explicitly
        and ``hidden_size`` is not a multiple of ``num_heads`` (Qwen3.5-27B: 24 heads of 256 on a 5120 hidden),
        the largest divisor of both (Vidur asserts ``embedding_dim % num_q_heads == 0`` and derives a head size
        from it that the simulator never reads: it prices every op from this spec's own fields)."""
        return self.num_heads if self.hidden_size % self.num_heads == 0 else math.gcd(self.hidden_size, self.num_heads)

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
            if f.name in OPTIONAL_FIELDS and d[f.name] == f.default:
                del d[f.name]
        return d


# Fields whose default (0, False or "") means the feature is absent: left out of ModelSpec.to_dict at that
# default (a dense model's dict is unchanged), and allowed to be 0 by parse.model_from_dict.
OPTIONAL_FIELDS = ("num_experts", "experts_per_token", "expert_ffn_size", "dense_layers", "shared_ffn_size",
                   "expert_bias", "kv_lora_rank", "q_lora_rank", "qk_rope_head_dim", "v_head_dim",
                   "sliding_window", "sliding_layers", "quantization", "kv_cache_dtype", "mtp_layers",
                   "linear_layers", "linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim",
                   "linear_value_head_dim", "linear_conv_kernel_dim", "attn_output_gate", "mamba_ssm_dtype",
                   "full_attention_layer_ids",
                   "chunked_layers", "attention_chunk_size", "index_n_heads", "index_head_dim", "index_topk",
                   "global_head_dim", "global_kv_heads", "attention_k_eq_v", "moe_routing", "bf16_parts")

#: ``moe_routing`` values: ``uniform`` (every expert equally popular, the default) or ``zipf`` (a skew fitted to
#: published per-expert loads); their popularity exponents live in :mod:`vidur_specdec.costs.routing`.
MOE_ROUTINGS = ("uniform", "zipf")
