"""The KV block pool as vLLM 0.33's KV cache manager lays it out: block size, bytes per block, state pages.

An attention-only model has one KV cache group: a block holds ``block_size`` tokens of every
attention layer (target and drafter), ``block_size × (kv_target + kv_drafter)`` bytes per GPU,
and a request holds ``⌈tokens / block_size⌉`` blocks.

A hybrid model (linear-attention layers beside attention, Qwen3.5's gated delta net) keeps
each running request's fixed state in the **same pool** (vLLM's hybrid KV cache manager):

* **pages made equal** — ``Platform._align_hybrid_block_size`` (``vllm/platforms/interface.py``)
  raises the attention block size to the smallest multiple of the kernel block (16 tokens, or the
  requested ``block_size`` when larger) whose attention page (``block_size`` tokens of one layer)
  holds one state page (one layer's conv + recurrent state for one slot,
  ``MambaStateShapeCalculator.gated_delta_net_state_shape``), and pads the state page to it:
  ``block_size = a·⌈m / (a·kv1)⌉`` with ``a = max(16, block_size asked)``, ``m`` the state page and
  ``kv1`` one attention layer's KV per token; ``page = block_size · kv1``;
* **groups** — ``_get_kv_cache_groups_uniform_page_size`` (``vllm/v1/core/kv_cache_planning.py``)
  puts the layers of each kind in groups of ``g`` layers, ``g`` the smaller kind's layer count
  (the larger when it is under 1.5 times the smaller); the attention layers (the target's and the
  drafter's of the same shape: an MTP layer) make ``⌈A / g⌉`` groups, the state layers ``⌈S / g⌉``;
  one pool block is a page of every layer of the widest group: ``widest · page`` bytes
  (``_get_kv_cache_bytes_per_block``);
* **what a request holds** — in each attention group ``⌈tokens / block_size⌉`` blocks, in each
  state group ``1 + k`` pages while it runs (``MambaManager.get_num_blocks_to_allocate`` with
  ``mamba_cache_mode`` none: ``MambaSpec.num_speculative_blocks = num_speculative_tokens``), taken
  when it is first scheduled and freed with it (or at its preemption).

A model with no attention layer at all (every layer linear attention, no drafter KV) has one
state group of every layer whose block is vLLM's ``mamba_block_size`` = ``max_model_len`` tokens:
a request holds ``⌈(tokens + k · max_model_len) / max_model_len⌉ = 1 + k`` blocks, i.e. one block
for its tokens plus ``k`` state pages here.

Under pipeline parallelism vLLM groups the whole model's layers, then each stage holds its own
layers of each group (``_project_kv_cache_groups_to_worker``): a stage's block is its widest
projected group, and every stage keeps the block count of the tightest.

:func:`layout` gives the model-wide figures (block size, page, groups), :func:`stage_pool` one
GPU's pool block and the state pages a request holds. Bytes per GPU, tokens, blocks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from vidur_specdec.architectures import layer_plan

#: tokens: the kernel block every CUDA attention backend of a GQA model takes (FlashAttention's
#: ``get_supported_kernel_block_sizes``: ``MultipleOf(16)``, vllm/v1/attention/backends/flash_attn.py)
KERNEL_BLOCK = 16


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def group_size(counts) -> int:
    """Layers per KV cache group (vLLM 0.33 ``_get_kv_cache_groups_uniform_page_size``): the smallest kind's
    count, or the largest's when it is under 1.5 times the smallest."""
    lo, hi = min(counts), max(counts)
    return hi if hi < lo * 1.5 else lo


@dataclass(frozen=True)
class Layout:
    """Model-wide figures of a hybrid model's pool (one GPU's share at its tensor-parallel size)."""

    block_size: int  # tokens per block (raised so an attention page holds a state page)
    page_bytes: int  # one layer's page: block_size tokens of one attention layer; the state page padded to it
    attention_layers: int  # the target's attention layers + the drafter's counted in attention pages (A)
    state_layers: int  # S
    attention_groups: int  # ⌈A / g⌉ (0: no attention layer)
    state_groups: int  # ⌈S / g⌉
    slots: int  # state pages a running request holds in each state group: 1 + k


def layout(model, tp: int, block_size: int, num_spec: int, draft_kv: int = 0,
           max_model_len: Optional[int] = None) -> Optional[Layout]:
    """The pool layout of ``model`` at ``tp`` (None: no state layers, the attention-only pool).

    ``block_size``: tokens per block asked (``scheduler.block_size``); ``num_spec``: speculative tokens (state
    slots beyond the first); ``draft_kv``: the drafter's or draft head's KV per token on one GPU (bytes),
    counted as layers of the target's attention page (exact for an MTP layer of the target's shape);
    ``max_model_len``: tokens of a request at most (the block of a model with no attention layer).
    """
    S = layer_plan.state_layers(model)
    if not S:
        return None
    m = layer_plan.state_page_bytes(model, tp, num_spec)
    base = "mla" if model.kv_lora_rank else "full_attention"
    kv1 = layer_plan.MIXERS[base].kv_bytes_per_token(model, tp, model.kv_dtype_bytes)
    A = model.num_layers - S + (_cdiv(draft_kv, kv1) if draft_kv else 0)
    slots = 1 + num_spec
    if A == 0:  # no attention backend: vLLM's mamba block of max_model_len tokens, one group of every layer
        return Layout(int(max_model_len or model.max_model_len), m, 0, S, 0, 1, slots)
    align = max(KERNEL_BLOCK, block_size)
    bs = align * _cdiv(m, align * kv1)
    bs = max(block_size, KERNEL_BLOCK * _cdiv(bs, KERNEL_BLOCK))
    g = group_size((A, S))
    return Layout(bs, bs * kv1, A, S, _cdiv(A, g), _cdiv(S, g), slots)


def stage_pool(lay: Layout, attention_layers: int, state_layers: int, kv_per_token: int) -> tuple:
    """(bytes of one pool block, state pages a running request holds) on one GPU holding ``attention_layers``
    and ``state_layers`` of the model's layers (a pipeline stage's, the drafter's counted on the last) whose
    attention KV is ``kv_per_token`` bytes per token.

    The block is the stage's widest group's pages; where the attention layers do not all share one group
    (a drafter of another shape) it is taken at least as large as ``block_size`` tokens of every attention
    layer, so a request's KV is one block per ``block_size`` tokens and its state pages are counted in
    blocks of that size (rounded up).
    """
    if lay.attention_groups == 0:  # one block of max_model_len tokens per request, and k more
        return state_layers * lay.page_bytes, lay.slots - 1
    widest = max(_cdiv(attention_layers, lay.attention_groups), _cdiv(state_layers, lay.state_groups))
    block = max(widest * lay.page_bytes, lay.block_size * kv_per_token)
    pages = _cdiv(lay.state_groups * lay.slots * widest * lay.page_bytes, block)
    return block, pages


def max_concurrency(num_blocks: int, block_size: int, state_pages: int, max_model_len: int) -> float:
    """vLLM 0.33's ``get_max_concurrency_for_kv_cache_config`` (``vllm/v1/core/kv_cache_utils.py``): the pool's
    blocks over the blocks one request of ``max_model_len`` tokens holds, its state pages included."""
    return num_blocks / (_cdiv(max_model_len, block_size) + state_pages)
