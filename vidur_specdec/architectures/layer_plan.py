"""A model's layer plan: its decoder layers as kinds × counts, each with its weights and its state.

A :class:`~vidur_specdec.architectures.models.ModelSpec` keeps the checkpoint's
fields; :func:`layer_plan` turns them into :class:`LayerKind` rows — one per
(token mixer, MLP) pair the model has — and the memory model and the predictor
read the plan instead of assuming ``num_layers`` identical Llama layers.

A token mixer is registered by name in :data:`MIXERS` (:func:`register_mixer`):
what one layer of it holds on one of ``tp`` GPUs

* ``kv_bytes_per_token`` — KV that grows with the context (bytes per token),
* ``window`` — tokens a window-bounded mixer keeps at most (0: unbounded),
* ``state_bytes`` — a fixed per-request state (bytes; linear attention's conv
  and recurrent state), given the number of speculative tokens the engine keeps
  a state slot for,
* ``params`` — its projection weights (count).

Mixers registered here: ``full_attention`` (GQA/MHA), ``sliding_attention``
(gpt-oss: window-bounded, its KV not charged as growing), ``mla`` (DeepSeek's
latent KV) and ``linear_attention`` (Qwen3.5's gated delta net). Another module
registers more (``register_mixer``) and :func:`mixer_counts` learns of them
through :data:`COUNTERS`. Units: bytes and weight counts per GPU.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, List, Tuple


@dataclass(frozen=True)
class Mixer:
    """One token-mixer kind: per-layer functions of (spec, tp, ...) on one GPU."""

    name: str
    kv_bytes_per_token: Callable  # (spec, tp, dtype_bytes) -> bytes of growing KV per token
    params: Callable  # (spec, tp) -> projection weights (count)
    state_bytes: Callable = lambda spec, tp, num_spec=0: 0  # fixed bytes per request
    window: Callable = lambda spec: 0  # tokens kept at most (0: grows with the context)


MIXERS: Dict[str, Mixer] = {}
#: name -> (spec -> how many of the model's layers use that mixer); the first mixer takes the rest
COUNTERS: Dict[str, Callable] = {}


def register_mixer(mixer: Mixer, count: Callable = None) -> Mixer:
    """Register ``mixer``; ``count(spec)`` says how many layers of a model use it (None: the default mixer)."""
    MIXERS[mixer.name] = mixer
    if count is not None:
        COUNTERS[mixer.name] = count
    return mixer


@dataclass(frozen=True)
class LayerKind:
    """``count`` decoder layers with the same token mixer and MLP (``dense`` or ``moe``)."""

    mixer: str
    mlp: str
    count: int


def mixer_counts(spec) -> Dict[str, int]:
    """Layers per token mixer: each registered counter's share, the base mixer (full or MLA) the rest."""
    counts = {name: int(f(spec)) for name, f in COUNTERS.items() if f(spec)}
    base = "mla" if spec.kv_lora_rank else "full_attention"
    counts = {base: spec.num_layers - sum(counts.values()), **counts}
    return {k: v for k, v in counts.items() if v}


def layer_plan(spec) -> Tuple[LayerKind, ...]:
    """The model's layers as kinds × counts.

    Joint counts of (mixer, MLP) are exact when either axis is uniform (every
    model known: DeepSeek's dense layers are all MLA; Qwen3.5's and gpt-oss's
    MLPs are all MoE); otherwise the dense MLPs are spread over the mixers in
    proportion (weights and per-request state do not depend on the pairing).
    """
    mixers = mixer_counts(spec)
    dense = spec.num_layers - spec.num_moe_layers
    out: List[LayerKind] = []
    left = dense
    for i, (m, n) in enumerate(mixers.items()):
        d = left if i == len(mixers) - 1 else min(left, round(dense * n / spec.num_layers))
        left -= d
        out += [LayerKind(m, "dense", d), LayerKind(m, "moe", n - d)]
    return tuple(k for k in out if k.count)


def kv_bytes_per_token(spec, tp: int, dtype_bytes: int) -> int:
    """Growing KV (bytes per token, all layers, one GPU)."""
    return sum(n * MIXERS[m].kv_bytes_per_token(spec, tp, dtype_bytes) for m, n in mixer_counts(spec).items())


def state_bytes_per_request(spec, tp: int = 1, num_spec: int = 0) -> int:
    """Fixed per-request state (bytes, all layers, one GPU) with ``num_spec`` speculative slots."""
    return sum(n * MIXERS[m].state_bytes(spec, tp, num_spec) for m, n in mixer_counts(spec).items())


def state_layers(spec) -> int:
    """Decoder layers whose token mixer holds a fixed per-request state (vLLM's ``MambaSpec`` layers), count."""
    return sum(n for m, n in mixer_counts(spec).items() if MIXERS[m].state_bytes(spec, 1, 0))


def state_page_bytes(spec, tp: int = 1, num_spec: int = 0) -> int:
    """One state layer's page on one GPU: its state for one slot (bytes; vLLM's ``MambaSpec.page_size_bytes``
    before padding), the largest of the model's state mixers' (vLLM pads every state page to the largest)."""
    return max((MIXERS[m].state_bytes(spec, tp, num_spec) // (1 + num_spec) for m in mixer_counts(spec)
                if MIXERS[m].state_bytes(spec, 1, 0)), default=0)


def full_attention_ids(spec) -> Tuple[int, ...]:
    """0-based indices of a hybrid model's full-attention layers, in order (its config's ``layer_types``, kept in
    ``full_attention_layer_ids``); without them, or when they do not fit the spec (a part of a model built by
    ``dataclasses.replace``), spread evenly as ``full_attention_interval`` places them: layer ``i`` is full attention
    when ``(i + 1) F / L`` passes a whole number (every fourth of 60 layers for 15 of them: 3, 7, ..., 59)."""
    L = spec.num_layers
    F = L - spec.linear_layers
    text = getattr(spec, "full_attention_layer_ids", "")
    if text:
        ids = tuple(int(x) for x in text.split(","))
        if len(ids) == F and all(0 <= i < L for i in ids):
            return ids
    return tuple(i for i in range(L) if (i + 1) * F // L > i * F // L)


def linear_layers_in(spec, start: int, end: int) -> int:
    """Linear-attention layers among decoder layers ``[start, end)`` (by position: :func:`full_attention_ids`)."""
    if not spec.linear_layers:
        return 0
    full = sum(1 for i in full_attention_ids(spec) if start <= i < end)
    return (end - start) - full


def layers_part(spec, start: int, end: int):
    """The spec of decoder layers ``[start, end)`` (a pipeline stage's): its own count of dense layers (the model's
    leading ones) and of linear-attention layers by position; the model's other fields."""
    from dataclasses import replace

    n = end - start
    dense = max(0, min(end, spec.dense_layers) - start)
    if not spec.linear_layers:
        return replace(spec, num_layers=n, dense_layers=dense)
    ids = ",".join(str(i - start) for i in full_attention_ids(spec) if start <= i < end)
    return replace(spec, num_layers=n, dense_layers=dense, linear_layers=linear_layers_in(spec, start, end),
                   full_attention_layer_ids=ids)


def window_bytes_per_request(spec, tp: int, dtype_bytes: int) -> int:
    """KV a request holds at most in window-bounded layers (bytes, one GPU; not charged as growing KV)."""
    total = 0
    for m, n in mixer_counts(spec).items():
        w = MIXERS[m].window(spec)
        if w:
            total += n * w * _gqa_kv(spec, tp, dtype_bytes)
    return total


def window_kv_bytes_per_token(spec, tp: int, dtype_bytes: int) -> int:
    """KV per token (bytes, all layers, one GPU) of the window-bounded layers that are not charged as growing
    (sliding-window layers; chunked layers are charged as growing already). The memory plan prices its blocks
    with it when nothing else grows (:func:`vidur_specdec.costs.memory.plan`)."""
    total = 0
    for m, n in mixer_counts(spec).items():
        mixer = MIXERS[m]
        if mixer.window(spec) and not mixer.kv_bytes_per_token(spec, tp, dtype_bytes):
            total += n * _gqa_kv(spec, tp, dtype_bytes)
    return total


def mixer_params(spec, tp: int = 1) -> int:
    """Token-mixer weights of all layers on one GPU (count)."""
    return sum(n * MIXERS[m].params(spec, tp) for m, n in mixer_counts(spec).items())


# --------------------------------------------------------------------------- the registered mixers


def _gqa_kv(spec, tp: int, dtype_bytes: int) -> int:
    return 2 * dtype_bytes * spec.head_dim * -(-spec.num_kv_heads // tp)


def attention_params(spec, tp: int = 1) -> int:
    """Attention projection weights of one layer on one of ``tp`` GPUs (MLA: its low-rank factors)."""
    h, H = spec.hidden_size, spec.num_heads // tp
    if spec.kv_lora_rank:
        qk = spec.head_dim  # qk_nope + qk_rope
        nope = qk - spec.qk_rope_head_dim
        q = (h * spec.q_lora_rank + spec.q_lora_rank * H * qk) if spec.q_lora_rank else h * H * qk
        kv = h * (spec.kv_lora_rank + spec.qk_rope_head_dim)  # replicated: the shared latent
        kv += spec.kv_lora_rank * H * (nope + spec.v_head_dim)
        return q + kv + H * spec.v_head_dim * h + sum(indexer_params(spec))
    kv = -(-spec.num_kv_heads // tp)
    n = h * spec.head_dim * (H + 2 * kv) + H * spec.head_dim * h
    if getattr(spec, "attn_output_gate", False):  # Qwen3-Next/3.5: q_proj also emits a per-head output gate
        n += h * spec.head_dim * H
    if spec.expert_bias:  # gpt-oss: q/k/v/o biases and one sink logit per head
        n += spec.head_dim * (H + 2 * kv) + h + H
    return n


def indexer_params(spec) -> tuple:
    """(wq_b, wk + weights_proj) weights of one layer's sparse-attention indexer, on every GPU (0, 0 when dense).

    vLLM 0.33 ``deepseek_v2.py`` ``Indexer``: ``wq_b`` (q_lora_rank -> heads x head dim) is replicated at the
    checkpoint's format; the fused ``wk_weights_proj`` (hidden -> head dim + heads) is replicated in bf16.
    """
    if not getattr(spec, "index_topk", 0):
        return 0, 0
    hi, di = spec.index_n_heads, spec.index_head_dim
    return (spec.q_lora_rank or spec.hidden_size) * hi * di, spec.hidden_size * (di + hi)


def _mla_kv(spec, tp: int, dtype_bytes: int) -> int:
    """One layer's MLA KV per token (bytes): the shared latent + rope key, replicated on every GPU; with
    DeepSeek sparse attention also the indexer's fp8 key (``ModelSpec.index_key_bytes``), and at an fp8 cache
    vLLM 0.33's ``fp8_ds_mla`` layout (``v1/attention/backends/mla/flashmla_sparse.py``: 512 fp8 values, one
    fp32 scale per 128 of them, the rope part in bf16; 656 B for DeepSeek-V3.2)."""
    latent = dtype_bytes * (spec.kv_lora_rank + spec.qk_rope_head_dim)
    if getattr(spec, "index_topk", 0) and dtype_bytes == 1:
        latent = spec.kv_lora_rank + spec.kv_lora_rank // 128 * 4 + 2 * spec.qk_rope_head_dim
    return latent + spec.index_key_bytes


register_mixer(Mixer("full_attention", _gqa_kv, attention_params))
register_mixer(Mixer("mla", _mla_kv, attention_params))
register_mixer(Mixer("sliding_attention", lambda s, tp, b: 0, attention_params, window=lambda s: s.sliding_window),
               count=lambda s: s.sliding_layers)


# ---- gated delta net (Qwen3-Next / Qwen3.5), vLLM 0.33 model_executor/layers/mamba/gdn/qwen_gdn_linear_attn.py

SSM_DTYPE_BYTES = {"": 2, "bfloat16": 2, "float16": 2, "float32": 4}


def gdn_conv_dim(spec) -> int:
    """Channels of the causal conv (q, k and v): ``2 Hk dk + Hv dv``."""
    return 2 * spec.linear_num_key_heads * spec.linear_key_head_dim + \
        spec.linear_num_value_heads * spec.linear_value_head_dim


def gdn_params(spec, tp: int = 1) -> int:
    """One gated-delta-net layer's weights on one of ``tp`` GPUs: in_proj_qkvz (``h x (2 Hk dk + 2 Hv dv)``),
    in_proj_ba (``h x 2 Hv``), conv1d (``conv_dim x K``), A_log and dt_bias (``Hv`` each), the gated norm
    (``dv``) and out_proj (``Hv dv x h``)."""
    h, hv, dv = spec.hidden_size, spec.linear_num_value_heads, spec.linear_value_head_dim
    qkvz = gdn_conv_dim(spec) + hv * dv
    return (h * qkvz + h * 2 * hv + gdn_conv_dim(spec) * spec.linear_conv_kernel_dim + 2 * hv + hv * dv * h) // tp + dv


def gdn_state_bytes(spec, tp: int = 1, num_spec: int = 0) -> int:
    """Per-request state of one layer on one GPU: vLLM's ``MambaStateShapeCalculator.gated_delta_net_state_shape``
    (conv ``conv_dim/tp x (K - 1 + num_spec)`` at the model dtype, recurrent ``Hv/tp x dv x dk`` at
    ``mamba_ssm_dtype``) times the ``1 + num_spec`` slots a request holds under speculation
    (``MambaSpec.num_speculative_blocks`` = ``num_speculative_tokens``, layers/mamba/abstract.py)."""
    conv = gdn_conv_dim(spec) // tp * (spec.linear_conv_kernel_dim - 1 + num_spec) * 2
    ssm = spec.linear_num_value_heads // tp * spec.linear_value_head_dim * spec.linear_key_head_dim
    return (1 + num_spec) * (conv + ssm * SSM_DTYPE_BYTES[spec.mamba_ssm_dtype])


register_mixer(Mixer("linear_attention", lambda s, tp, b: 0, gdn_params, state_bytes=gdn_state_bytes),
               count=lambda s: s.linear_layers)
