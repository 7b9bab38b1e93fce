"""GPU memory: how many target KV blocks fit beside the weights (and the drafter), per GPU.

    usable   = device.memory_bytes · (1 − memory_margin_fraction)              one GPU
    weights  = 2 B · (layers · params_per_layer(tp) + embedding_params(tp))   target (+ drafter), bf16
               (fp8 linear layers 1 B, MXFP4 experts 4.25 bits: architectures.moe.weight_bytes)
    per_blk  = block_size · (kv_bytes_per_token(target, tp) + kv_bytes_per_token(drafter, draft_tp))
               (2 B per KV element; 1 B with kv_cache_dtype fp8)
    state    = running · state_bytes_per_request(target, tp, k)              linear-attention layers only
    blocks   = floor((usable − weights_target − weights_drafter − state) / per_blk)

A hybrid model's linear-attention layers (Qwen3.5) hold a fixed conv + recurrent
state per running request instead of KV (:mod:`vidur_specdec.architectures.layer_plan`);
``state`` reserves it for the most requests that can run at once (``running``,
see :func:`vidur_specdec.engine.deployment`), so that KV blocks are what is left.

A model with no KV that grows with the context (:func:`growing_kv`):

* every layer window-bounded (sliding-window attention): the blocks are priced at
  the window layers' KV per token, as vLLM takes sliding-window pages from the same
  pool (``SlidingWindowSpec``); a block is held for the whole context here, where
  vLLM frees the pages that slide out of the window, so the plan errs low on room
  only beyond the window;
* nothing held per token at all (every layer linear attention, no drafter KV): the
  running requests' state is reserved as above and the blocks never bind
  (:data:`UNBOUNDED_BLOCKS`); how many requests run is then set by
  ``scheduler.max_num_seqs``, for which the state was reserved.

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

from dataclasses import asdict, dataclass, replace
from typing import Optional, Union

from vidur_specdec.config import TP_SIZES  # noqa: F401 (re-exported: the TP sizes the simulator models)
from vidur_specdec.hardware.devices import DeviceSpec, get_device
from vidur_specdec.architectures.models import ModelSpec
from vidur_specdec.costs.profiles.params import DTYPE_BYTES  # fp16/bf16 weights and KV
from vidur_specdec.costs.profiles.builder import ProfileError, check_tp

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
    block_size: int  # tokens
    num_blocks: int  # target KV blocks (each with a draft block when a drafter is loaded)
    state_reserve_bytes: int = 0  # linear-attention state of the running requests (0: attention-only model)

    @property
    def draft_blocks(self) -> int:
        return self.num_blocks if self.draft_kv_bytes_per_token else 0

    def to_dict(self) -> dict:
        d = asdict(self)
        if not self.state_reserve_bytes:
            del d["state_reserve_bytes"]  # an attention-only model's summary is unchanged
        d["draft_blocks"] = self.draft_blocks
        return d


def growing_kv(model: ModelSpec, tp: int) -> int:
    """Bytes per token (one GPU) a block of ``model`` holds: its growing KV, else its window-bounded KV
    (a model whose every attention layer slides), else 0 (nothing held per token)."""
    kv = model.kv_bytes_per_token(tp, model.kv_dtype_bytes)
    if kv:
        return kv
    from vidur_specdec.architectures.layer_plan import window_kv_bytes_per_token  # same layer below

    return window_kv_bytes_per_token(model, tp, model.kv_dtype_bytes)


def _blocks(free: int, block_size: int, per_token: int) -> int:
    """Blocks of ``block_size`` tokens at ``per_token`` bytes in ``free`` bytes; :data:`UNBOUNDED_BLOCKS` when a
    token holds nothing (the running requests' state was taken before)."""
    if free <= 0:
        return 0
    if per_token <= 0:
        return UNBOUNDED_BLOCKS
    return free // (block_size * per_token)


def _no_room(model, draft, what: str, w: int, state: int, usable: int, dev) -> NoRoomError:
    held = (f" and the linear-attention state of the running requests ({state / GIB:.1f} GiB, reserved for "
            "scheduler.max_num_seqs of them: fewer fit with a lower max_num_seqs)") if state else ""
    return NoRoomError(f"{model.name}{' + ' + draft.name if draft else ''} weights ({w / GIB:.1f} GiB per GPU "
                       f"{what}){held} leave no room for KV in {usable / GIB:.1f} GiB usable on one {dev.name}")


def plan(model: ModelSpec, device: Union[str, DeviceSpec], block_size: int, memory_margin_fraction: float,
         draft: Optional[ModelSpec] = None, tp: int = 1, draft_tp: Optional[int] = None,
         head: tuple = (0, 0), ep: int = 1, state_reserve: int = 0, pp: int = 1, redundant: int = 0) -> MemoryPlan:
    """KV blocks per GPU for ``model`` at tensor parallel ``tp`` (and ``draft`` at ``draft_tp``) on ``device``.

    ``device`` is a :class:`DeviceSpec` or a built-in name; memory is its
    ``memory_bytes``. ``draft_tp`` None means ``tp``. ``head`` is (weight bytes,
    KV bytes per token) per GPU of a draft head on the target's GPUs
    (EAGLE-family, Medusa, MTP): counted with the drafter's. ``ep`` > 1: the
    target's experts expert-parallel over ``ep`` GPUs (``redundant``: EPLB's spare copies).
    ``state_reserve``: bytes per GPU of the running requests' fixed linear-attention state, taken
    before KV blocks. ``pp`` > 1: the tightest of the pipeline stages (:func:`stage_plan`; models
    with linear-attention layers are refused under pipeline parallelism before this). Raises
    :class:`NoRoomError` when the weights leave no room for a single block.
    """
    if pp > 1:
        return min((stage_plan(model, device, block_size, memory_margin_fraction, draft, tp, draft_tp, head, ep,
                               pp, s, redundant) for s in range(pp)), key=lambda m: m.num_blocks)
    dev = get_device(device)
    dtp = tp if draft_tp is None else draft_tp
    usable = int(dev.memory_bytes * (1.0 - memory_margin_fraction))
    w_t = weight_bytes(model, tp, ep, redundant)
    w_d = (weight_bytes(draft, dtp) if draft else 0) + int(head[0])
    kv_t = growing_kv(model, tp)
    kv_d = (growing_kv(draft, dtp) if draft else 0) + int(head[1])
    free = usable - w_t - w_d - int(state_reserve)
    blocks = _blocks(free, block_size, kv_t + kv_d)
    if blocks < 1:
        raise _no_room(model, draft, f"at tensor_parallel_size {tp}{' with expert parallel' if ep > 1 else ''}",
                       w_t + w_d, int(state_reserve), usable, dev)
    return MemoryPlan(usable, w_t, w_d, kv_t, kv_d, block_size, int(blocks), int(state_reserve))


def stage_plan(model: ModelSpec, device: Union[str, DeviceSpec], block_size: int, memory_margin_fraction: float,
               draft: Optional[ModelSpec], tp: int, draft_tp: Optional[int], head: tuple, ep: int, pp: int,
               stage: int, redundant: int = 0) -> MemoryPlan:
    """The plan of one GPU of pipeline stage ``stage`` (of ``pp``): its layers' weights and KV.

    The stage holds its decoder layers (vLLM's split, :func:`vidur_specdec.costs.pipeline.stage_layers`),
    the embedding on the first stage, the LM head on the last (a tied embedding on both), and the drafter
    or draft head only on the last (vLLM 0.33 ``gpu_model_runner.py``: "we put the entire draft model on
    the last PP rank"). KV bytes per token scale with the stage's layers (exact for full-attention
    layers; a sliding-window model's are taken in proportion).
    """
    from vidur_specdec.costs.pipeline import stage_range  # same layer; kept lazy like the MoE import above

    dev = get_device(device)
    dtp = tp if draft_tp is None else draft_tp
    last = stage == pp - 1
    start, end = stage_range(model.num_layers, pp, stage)
    n = end - start
    dense = max(0, min(end, model.dense_layers) - start)
    part = replace(model, num_layers=n, dense_layers=dense)
    usable = int(dev.memory_bytes * (1.0 - memory_margin_fraction))
    one = model.vocab_size * model.hidden_size // tp  # one vocabulary matrix per GPU
    held = (stage == 0) + last if not model.tie_word_embeddings else 1
    w_t = weight_bytes(part, tp, ep, redundant) - DTYPE_BYTES * model.embedding_params(tp) + DTYPE_BYTES * held * one
    w_d = ((weight_bytes(draft, dtp) if draft else 0) + int(head[0])) if last else 0
    kv_t = growing_kv(model, tp) * n // model.num_layers
    kv_d = ((growing_kv(draft, dtp) if draft else 0) + int(head[1])) if last else 0
    free = usable - w_t - w_d
    blocks = _blocks(free, block_size, kv_t + kv_d)
    if blocks < 1:
        raise _no_room(model, draft, f"of pipeline stage {stage} at tensor_parallel_size {tp}", w_t + w_d, 0,
                       usable, dev)
    return MemoryPlan(usable, int(w_t), int(w_d), int(kv_t), int(kv_d), block_size, int(blocks))


def min_blocks_to_finish(total_tokens: int, block_size: int, watermark_fraction: float) -> int:
    """Fewest KV blocks with which one request of ``total_tokens`` (prompt + output) can finish alone.

    Two rules of Vidur's Sarathi set the bound: a running request continues only
    while at least one block is free, so its ``ceil(total/block_size)`` blocks
    need one more; and a (re-)admitted request's prefill — at most
    ``total − 1`` tokens — must leave ``int(watermark_fraction · num_blocks)``
    blocks free. With fewer blocks the request restarts forever (or never starts).
    """
    n = -(-total_tokens // block_size) + 1
    while -(-(total_tokens - 1) // block_size) + int(watermark_fraction * n) > n:
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
