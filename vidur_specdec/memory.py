"""GPU memory: how many target KV blocks fit beside the weights (and the drafter).

    usable   = device_memory · (1 − memory_margin_fraction)
    weights  = 2 B · (layers · params_per_layer + 2 · vocab · hidden)       target (+ drafter)
    per_blk  = block_size · (kv_bytes_per_token(target) + kv_bytes_per_token(drafter))
    blocks   = floor((usable − weights_target − weights_drafter) / per_blk)

The drafter keeps its own KV for every token the target holds, so each target
block has a (smaller) draft block beside it: both are charged in ``per_blk``
and the target block count shrinks accordingly. Per-layer weights and KV bytes
per token are Vidur's own formulas (``ParamCounter``/``MemoryPlanner``); unlike
Vidur, embedding and LM-head weights are counted and blocks are not rounded
down to whole max-length sequences (see docs/model.md).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Optional

from vidur_specdec.models import ModelSpec

GIB = 1024**3
DEVICE_MEMORY_GB = {"a100": 80, "h100": 80, "h200": 141}  # GiB, as Vidur's device SKUs count them
DTYPE_BYTES = 2  # fp16/bf16 weights and KV


def weight_bytes(model: ModelSpec, tp: int = 1) -> int:
    """Bytes of one GPU's share of the weights: decoder layers + embedding + LM head."""
    layers = model.num_layers * model.params_per_layer(tp)
    embed_and_head = 2 * model.vocab_size * model.hidden_size // tp
    return DTYPE_BYTES * (layers + embed_and_head)


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

    @property
    def draft_blocks(self) -> int:
        return self.num_blocks if self.draft_kv_bytes_per_token else 0

    def to_dict(self) -> dict:
        d = asdict(self)
        d["draft_blocks"] = self.draft_blocks
        return d


def plan(model: ModelSpec, device: str, block_size: int, memory_margin_fraction: float,
         draft: Optional[ModelSpec] = None, tp: int = 1, head: tuple = (0, 0)) -> MemoryPlan:
    """KV blocks for ``model`` (and ``draft``, if loaded) on ``device``.

    ``head`` is (weight bytes, KV bytes per token) of a draft head on the
    target's GPUs (EAGLE-family, Medusa): counted with the drafter's.

    Raises ``ValueError`` when the weights leave no room for a single block.
    """
    usable = int(DEVICE_MEMORY_GB[device] * GIB * (1.0 - memory_margin_fraction))
    w_t = weight_bytes(model, tp)
    w_d = (weight_bytes(draft, tp) if draft else 0) + int(head[0])
    kv_t = model.kv_bytes_per_token(tp, DTYPE_BYTES)
    kv_d = (draft.kv_bytes_per_token(tp, DTYPE_BYTES) if draft else 0) + int(head[1])
    free = usable - w_t - w_d
    blocks = free // (block_size * (kv_t + kv_d)) if free > 0 else 0
    if blocks < 1:
        raise ValueError(f"{model.name}{' + ' + draft.name if draft else ''} weights leave no room "
                         f"for KV on {device} with memory_margin_fraction {memory_margin_fraction}")
    return MemoryPlan(usable, w_t, w_d, kv_t, kv_d, block_size, int(blocks))


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
