"""GPU memory: how many KV blocks fit beside the weights (and the drafter), per GPU.

    usable   = device.memory_bytes · (1 − memory_margin_fraction)              one GPU
    weights  = 2 B · (layers · params_per_layer(tp) + embedding_params(tp))   target (+ drafter), bf16
               (fp8 linear layers 1 B, MXFP4 experts 4.25 bits: architectures.moe.weight_bytes)
    per_blk  = block_size · (kv_bytes_per_token(target, tp) + kv_bytes_per_token(drafter, draft_tp))
               (2 B per KV element; 1 B with kv_cache_dtype fp8)
    blocks   = floor((usable − weights_target − weights_drafter) / per_blk)

A hybrid model's linear-attention layers (Qwen3.5) hold a fixed conv + recurrent
state per running request instead of KV (:mod:`vidur_specdec.architectures.layer_plan`);
as vLLM's hybrid KV cache manager does, that state takes pages of the same block pool
(:mod:`vidur_specdec.costs.block_pool`): the block size is raised until an attention
page holds a state page, ``per_blk`` is a page of every layer of the widest KV cache
group, and a running request holds ``state_pages`` blocks beside its KV blocks
(``MemoryPlan.state_pages``). Nothing is reserved up front: how many requests run is
what the pool allows.

A model with no KV that grows with the context (:func:`growing_kv`):

* every layer window-bounded (sliding-window attention): the blocks are priced at
  the window layers' KV per token, as vLLM takes sliding-window pages from the same
  pool (``SlidingWindowSpec``); a block is held for the whole context here, where
  vLLM frees the pages that slide out of the window, so the plan errs low on room
  only beyond the window;
* every layer linear attention: the block pool holds the running requests' state
  pages alone (:mod:`vidur_specdec.costs.block_pool`: one block of ``max_model_len``
  tokens per request, as vLLM lays it out); a block that would hold nothing at
  all never binds (:data:`UNBOUNDED_BLOCKS`).

With tensor parallelism every GPU of the replica holds 1/tp of the weights
(query heads, MLP columns and vocabulary split; KV heads split, or replicated
when tp exceeds them) and the KV of its own heads, so the plan is that of one
GPU. A drafter at ``draft_tp`` < tp (vLLM: 1) sits whole on the first GPU of the
group; that GPU is the tightest, so it sets the block count (vLLM takes the
minimum over workers).

The drafter keeps its own KV for every token the target holds, so each target
block has a (smaller) draft block beside it: both are charged in ``per_blk``
and the target block count shrinks accordingly. Per-layer weights and KV bytes
per token are Vidur's own formulas (``ParamCounter``/``MemoryPlanner``); unlike
Vidur, embedding and LM-head weights are counted and blocks are not rounded
down to whole max-length sequences (see docs/model.md).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Optional, Union

from vidur_specdec.config import TP_SIZES  # noqa: F401 (re-exported: the TP sizes the simulator models)
from vidur_specdec.hardware.devices import DeviceSpec, get_device
from vidur_specdec.architectures.models import ModelSpec
from vidur_specdec.costs.profiles.params import DTYPE_BYTES  # fp16/bf16 weights and KV
from vidur_specdec.costs.profiles.builder import ProfileError, check_tp
from vidur_specdec.costs import block_pool

GIB = 1024**3
#: the block count of a model that holds nothing per token (no growing KV, no window, no drafter KV): the
#: scheduler's blocks never bind (2**30 blocks of 16 tokens would hold 16 G tokens)
UNBOUNDED_BLOCKS = 1 << 30


class NoRoomError(ValueError):
    """The weights (and drafter) leave no room for KV on one GPU; ``plan`` raises it."""


def weight_bytes(model: ModelSpec, tp: int = 1, ep: int = 1, redundant: int = 0) -> int:
    """Bytes of one GPU's share of the weights: decoder layers + embedding + LM head.

    A mixture-of-experts model counts every expert at its checkpoint's format
    (:func:`vidur_specdec.architectures.moe.weight_bytes`); with expert parallel
    ``ep`` > 1 each GPU holds ``num_experts / ep`` whole experts instead of a
    ``1/tp`` slice of every expert; ``redundant`` EPLB copies add
    ``redundant / ep`` experts per GPU.
    """
    # the layer plan's counts: experts, formats, Gemma 4's global layers, a dense hybrid's linear-attention layers
    # and gated attention (Qwen3.5-27B); the plain Llama formula below for every other dense model
    if model.is_moe or model.quantization or model.global_head_dim or model.linear_layers or model.attn_output_gate:
        # lazy: start-up of `python -m vidur_specdec.main --help` (would load vidur_specdec.architectures.moe)
        from vidur_specdec.architectures.moe import weight_bytes as moe_weight_bytes

        per_gpu = (model.num_experts + redundant) / ep if ep > 1 else None
        return int(moe_weight_bytes(model, tp, experts_per_gpu=per_gpu))
    layers = model.num_layers * model.params_per_layer(tp)
    return DTYPE_BYTES * (layers + model.embedding_params(tp))


@dataclass(frozen=True)
class MemoryPlan:
    """The KV budget of one replica (bytes unless stated)."""

    usable_bytes: int
    target_weight_bytes: int
    draft_weight_bytes: int
    target_kv_bytes_per_token: int
    draft_kv_bytes_per_token: int
    block_size: int  # tokens (a hybrid model's: raised so an attention page holds a state page)
    num_blocks: int  # blocks of the pool (target KV, each with a draft block when a drafter is loaded)
    state_pages: int = 0  # blocks a running request holds for its linear-attention state (0: attention-only model)
    block_bytes: int = 0  # bytes of one block on one GPU (0: block_size x the KV bytes per token)
    max_model_len: int = 0  # tokens of the longest request the model takes (vLLM's max_model_len)

    @property
    def draft_blocks(self) -> int:
        return self.num_blocks if self.draft_kv_bytes_per_token else 0

    @property
    def max_concurrency(self) -> float:
        """vLLM's "Maximum concurrency for ``max_model_len`` tokens per request"
        (:func:`~vidur_specdec.costs.block_pool.max_concurrency`)."""
        return block_pool.max_concurrency(self.num_blocks, self.block_size, self.state_pages, self.max_model_len)

    @property
    def kv_cache_size_tokens(self) -> int:
        """vLLM's "GPU KV cache size: N tokens": the maximum concurrency times ``max_model_len``
        (``get_kv_cache_capacity``)."""
        return int(self.max_concurrency * self.max_model_len)

    def vllm_line(self) -> str:
        """The line vLLM 0.33 logs once its KV cache is laid out (``update_kv_cache_capacity``,
        ``vllm/v1/core/kv_cache_utils.py``)."""
        return (f"GPU KV cache size: {self.kv_cache_size_tokens:,} tokens, Maximum concurrency for "
                f"{self.max_model_len:,} tokens per request: {self.max_concurrency:.2f}x")

    def pool_note(self) -> str:
        """What a hybrid model's pool holds beyond KV (vLLM logs the raised block size at start-up); "" otherwise."""
        if not self.state_pages:
            return ""
        if not self.target_kv_bytes_per_token + self.draft_kv_bytes_per_token:  # no attention layer at all
            return (f"no attention layer: one {self.block_size}-token block (vLLM's mamba block, max_model_len) and "
                    f"{self.state_pages} more state pages per running request")
        return (f"{self.block_size}-token blocks, raised so an attention page holds a linear-attention state page; "
                f"{self.state_pages} state pages per running request")

    def to_dict(self) -> dict:
        d = asdict(self)
        for key in ("state_pages", "block_bytes"):
            if not d[key]:
                del d[key]  # an attention-only model's summary keeps its keys
        d["draft_blocks"] = self.draft_blocks
        if self.max_model_len:
            d["kv_cache_size_tokens"] = self.kv_cache_size_tokens
            d["kv_cache_max_concurrency"] = round(self.max_concurrency, 4)
        return d


def growing_kv(model: ModelSpec, tp: int) -> int:
    """Bytes per token (one GPU) a block of ``model`` holds: its growing KV, else its window-bounded KV
    (a model whose every attention layer slides), else 0 (nothing held per token)."""
    kv = model.kv_bytes_per_token(tp, model.kv_dtype_bytes)
    if kv:
        return kv
    from vidur_specdec.architectures.layer_plan import window_kv_bytes_per_token  # same layer below

    return window_kv_bytes_per_token(model, tp, model.kv_dtype_bytes)


def _blocks(free: int, per_block: int) -> int:
    """Blocks of ``per_block`` bytes (KV of a block's tokens, and a hybrid model's share of state pages) in ``free``
    bytes; :data:`UNBOUNDED_BLOCKS` when a block holds nothing."""
    if free <= 0:
        return 0
    if per_block <= 0:
        return UNBOUNDED_BLOCKS
    return free // per_block


def _no_room(model, draft, what: str, w: int, usable: int, dev) -> NoRoomError:
    return NoRoomError(f"{model.name}{' + ' + draft.name if draft else ''} weights ({w / GIB:.1f} GiB per GPU "
                       f"{what}) leave no room for KV in {usable / GIB:.1f} GiB usable on one {dev.name}")


def plan(model: ModelSpec, device: Union[str, DeviceSpec], block_size: int, memory_margin_fraction: float,
         draft: Optional[ModelSpec] = None, tp: int = 1, draft_tp: Optional[int] = None,
         head: tuple = (0, 0), ep: int = 1, num_spec: int = 0, pp: int = 1, redundant: int = 0) -> MemoryPlan:
    """KV blocks per GPU for ``model`` at tensor parallel ``tp`` (and ``draft`` at ``draft_tp``) on ``device``.

    ``device`` is a :class:`DeviceSpec` or a built-in name; memory is its
    ``memory_bytes``. ``draft_tp`` None means ``tp``. ``head`` is (weight bytes,
    KV bytes per token) per GPU of a draft head on the target's GPUs
    (EAGLE-family, Medusa, MTP): counted with the drafter's. ``ep`` > 1: the
    target's experts expert-parallel over ``ep`` GPUs (``redundant``: EPLB's spare copies).
    ``num_spec``: speculative tokens, a linear-attention layer's state slots beyond the first (vLLM's
    ``num_speculative_tokens``). ``pp`` > 1: the tightest of the pipeline stages (:func:`stage_plan`).
    Raises :class:`NoRoomError` when the weights leave no room for a single block.
    """
    if pp > 1:
        return min((stage_plan(model, device, block_size, memory_margin_fraction, draft, tp, draft_tp, head, ep,
                               pp, s, redundant, num_spec) for s in range(pp)), key=lambda m: m.num_blocks)
    dev = get_device(device)
    dtp = tp if draft_tp is None else draft_tp
    usable = int(dev.memory_bytes * (1.0 - memory_margin_fraction))
    w_t = weight_bytes(model, tp, ep, redundant)
    w_d = (weight_bytes(draft, dtp) if draft else 0) + int(head[0])
    kv_t = growing_kv(model, tp)
    kv_d = (growing_kv(draft, dtp) if draft else 0) + int(head[1])
    lay = block_pool.layout(model, tp, block_size, num_spec, kv_d)
    bs, per_blk, pages = block_size, block_size * (kv_t + kv_d), 0
    if lay is not None:
        bs = lay.block_size
        per_blk, pages = block_pool.stage_pool(lay, lay.attention_layers, lay.state_layers, kv_t + kv_d)
    free = usable - w_t - w_d
    blocks = _blocks(free, per_blk)
    if blocks < 1:
        raise _no_room(model, draft, f"at tensor_parallel_size {tp}{' with expert parallel' if ep > 1 else ''}",
                       w_t + w_d, usable, dev)
    return MemoryPlan(usable, w_t, w_d, kv_t, kv_d, bs, int(blocks), pages, per_blk if lay else 0,
                      model.max_model_len)


def stage_plan(model: ModelSpec, device: Union[str, DeviceSpec], block_size: int, memory_margin_fraction: float,
               draft: Optional[ModelSpec], tp: int, draft_tp: Optional[int], head: tuple, ep: int, pp: int,
               stage: int, redundant: int = 0, num_spec: int = 0) -> MemoryPlan:
    """The plan of one GPU of pipeline stage ``stage`` (of ``pp``): its layers' weights and KV.

    The stage holds its decoder layers (vLLM's split, :func:`vidur_specdec.costs.pipeline.stage_layers`),
    the embedding on the first stage, the LM head on the last (a tied embedding on both), and the drafter
    or draft head only on the last (vLLM 0.33 ``gpu_model_runner.py``: "we put the entire draft model on
    the last PP rank"). KV bytes per token scale with the stage's layers (exact for full-attention
    layers; a sliding-window model's are taken in proportion). A hybrid model's stage holds its own
    linear-attention and full-attention layers by position
    (:func:`~vidur_specdec.architectures.layer_plan.layers_part`), their weights and KV exactly, and its share
    of the block pool's groups (:mod:`~vidur_specdec.costs.block_pool`).
    """
    from vidur_specdec.costs.pipeline import stage_range  # same layer; kept lazy like the MoE import above
    from vidur_specdec.architectures.layer_plan import layers_part, state_layers

    dev = get_device(device)
    dtp = tp if draft_tp is None else draft_tp
    last = stage == pp - 1
    start, end = stage_range(model.num_layers, pp, stage)
    n = end - start
    part = layers_part(model, start, end)
    usable = int(dev.memory_bytes * (1.0 - memory_margin_fraction))
    one = model.vocab_size * model.hidden_size // tp  # one vocabulary matrix per GPU
    held = (stage == 0) + last if not model.tie_word_embeddings else 1
    w_t = weight_bytes(part, tp, ep, redundant) - DTYPE_BYTES * model.embedding_params(tp) + DTYPE_BYTES * held * one
    w_d = ((weight_bytes(draft, dtp) if draft else 0) + int(head[0])) if last else 0
    kv_t = growing_kv(model, tp) * n // model.num_layers
    kv_all_d = (growing_kv(draft, dtp) if draft else 0) + int(head[1])
    kv_d = kv_all_d if last else 0
    lay = block_pool.layout(model, tp, block_size, num_spec, kv_all_d)
    bs, per_blk, pages = block_size, block_size * (kv_t + kv_d), 0
    if lay is not None:
        kv_t = part.kv_bytes_per_token(tp, model.kv_dtype_bytes)
        s_layers = state_layers(part)
        drafted = lay.attention_layers - (model.num_layers - lay.state_layers)  # the drafter's, on the last stage
        bs = lay.block_size
        per_blk, pages = block_pool.stage_pool(lay, n - s_layers + (drafted if last else 0), s_layers, kv_t + kv_d)
    free = usable - w_t - w_d
    blocks = _blocks(free, per_blk)
    if blocks < 1:
        raise _no_room(model, draft, f"of pipeline stage {stage} at tensor_parallel_size {tp}", w_t + w_d, usable,
                       dev)
    return MemoryPlan(usable, int(w_t), int(w_d), int(kv_t), int(kv_d), bs, int(blocks), pages,
                      per_blk if lay else 0, model.max_model_len)


def min_blocks_to_finish(total_tokens: int, block_size: int, watermark_fraction: float, state_pages: int = 0) -> int:
    """Fewest blocks with which one request of ``total_tokens`` (prompt + output) can finish alone.

    Two rules of Vidur's Sarathi set the bound: a running request continues only
    while at least one block is free, so its ``ceil(total/block_size)`` blocks
    (and its ``state_pages``) need one more; and a (re-)admitted request's prefill —
    at most ``total − 1`` tokens — with its state pages must leave
    ``int(watermark_fraction · num_blocks)`` blocks free. With fewer blocks the
    request restarts forever (or never starts).
    """
    n = -(-total_tokens // block_size) + 1 + state_pages
    while -(-(total_tokens - 1) // block_size) + state_pages + int(watermark_fraction * n) > n:
        n += 1
    return n


def tp_fits(model: ModelSpec, tp: int) -> bool:
    """True when ``tp`` splits ``model`` evenly: the one rule of :func:`vidur_specdec.costs.profiles.builder.check_tp`.

    vLLM's rule (``ModelConfig.verify_with_parallel_config``: attention heads
    divisible by tp; ``get_num_kv_heads``: KV heads split when tp divides them,
    replicated when they divide tp; MLP columns split evenly).
    """
    try:
        check_tp(model, tp)
    except ProfileError:
        return False
    return True
