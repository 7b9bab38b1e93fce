"""The one seam for kernel times: what every operator price of a run goes through.

A :class:`KernelSource` prices the kernels a step launches on one GPU of the
run's device — dense GEMMs (bf16, fp8), grouped expert GEMMs (the fused MoE
layer), decode and prefill attention, memory-bound elementwise kernels and the
tensor-parallel all-reduce — and says, per op family, where its figures come
from (:meth:`KernelSource.sources`). The resolved deployment carries one
(:attr:`vidur_specdec.engine.deployment.Deployment.kernels`); the per-layer
profile, the LM head, the MoE layer, a speculative head's own layers and the
drafters all ask it. Implementations register by name (:mod:`vidur_specdec.costs.kernels`):
``built`` (:mod:`.roofline`, the calibrated analytical builder) and ``tables``
(:mod:`.tables`, kernel latencies measured on vLLM). A new GPU or a new
source is one module.

Units: times in ms; sizes in elements (tokens, heads) unless named ``nbytes``.
"""

from __future__ import annotations

from typing import Dict, List, Mapping, Sequence, Tuple

import numpy as np

from vidur_specdec.config.memo import BoundedMemo

#: Op families a source names in ``summary.json`` (``kernel_sources``).
OP_FAMILIES = ("gemm", "attention_decode", "attention_prefill", "elementwise", "all_reduce", "moe", "lm_head")
#: ``kernel_sources.moe`` of a model without MoE layers (every source)
NO_MOE = "none (dense model)"


class KernelSource:
    """Kernel times (ms) on one GPU of ``device``; subclasses implement the primitives."""

    name = "base"

    def __init__(self, device) -> None:
        self.device = device  # vidur_specdec.hardware.devices.DeviceSpec
        self._lm_head = BoundedMemo(8192)  # (hidden, vocab, tp, rows) -> ms

    # ------------------------------------------------------------------ primitives
    def gemm_ms(self, m, k: int, n: int, dtype: str = "bf16"):
        """``[m x k] x [k x n]`` GEMM (ms) for each entry of ``m``; ``dtype`` ``bf16`` or ``fp8`` (W8A8)."""
        raise NotImplementedError

    def decode_attention_ms(self, bs, kv, q_heads: int, kv_heads: int, head_dim: int, kv_dtype: str = "bf16"):
        """Decode attention (ms) of ``bs`` requests with ``kv`` cached tokens each (per-GPU heads)."""
        raise NotImplementedError

    def prefill_attention_ms(self, chunk, kv, q_heads: int, kv_heads: int, head_dim: int, kv_dtype: str = "bf16"):
        """Prefill attention (ms) of one ``chunk``-token piece after ``kv`` cached tokens (per-GPU heads)."""
        raise NotImplementedError

    def elementwise_ms(self, nbytes, op: str = "add"):
        """A memory-bound elementwise kernel (ms) moving ``nbytes`` bytes (``op``: the builder's op key)."""
        raise NotImplementedError

    def all_reduce_ms(self, world: int, nbytes: int) -> float:
        """One all-reduce (ms) of ``nbytes`` (the tensor's size per GPU) among ``world`` GPUs; 0 at world 1."""
        raise NotImplementedError

    def nccl_all_reduce_ms(self, world: int, nbytes: int) -> float:
        """One NCCL all-reduce (ms), for collectives vLLM runs outside its custom all-reduce (logits gather)."""
        raise NotImplementedError

    def fused_moe_ms(self, spec, tp: int, groups: Sequence[int], ep: int = 1,
                     redundant: int = 0, scope: str = "all", dispatched: bool = False) -> Tuple[float, float]:
        """(ms of one MoE layer on one GPU, distinct routed experts woken) for a step's token ``groups``;
        ``redundant``: EPLB's spare expert copies over the ``ep`` GPUs (0: none); ``scope``: ``all``, ``local``
        (router and shared experts) or ``routed`` (routed experts, busiest GPU); ``dispatched``: an all-to-all
        delivers each GPU only its own rows (data parallel > 1)."""
        raise NotImplementedError

    def all_to_all_ms(self, spec, mode: str, tokens: float, ep: int) -> Tuple[float, float]:
        """(dispatch ms, combine ms) of one MoE layer's expert-parallel all-to-all, ``tokens`` sent per rank,
        ``mode`` ``decode`` (DeepEP low latency) or ``prefill`` (DeepEP normal); :class:`ConfigError` where the
        source has no measured all-to-all (data parallel > 1 is refused there)."""
        from vidur_specdec.config.errors import ConfigError

        raise ConfigError(f"parallel.data_parallel_size: no measured all-to-all on {self.device.name} with the "
                          f"{self.name} kernels; data parallel > 1 needs profiles: shipped (or measured) on a GPU "
                          "whose tables hold DeepEP's (h100, h200, b200, b300, gb200, gb300)")

    def all_to_all_source(self, spec, ep: int) -> str:
        """Where :meth:`all_to_all_ms` reads its times at expert-parallel size ``ep`` (``summary.json``
        ``kernel_sources.all_to_all`` of a data-parallel run): measured, and what is scaled from what."""
        return "none (no measured all-to-all)"

    def grouped_gemm_ms(self, rows: int, experts: int, k: int, n: int, dtype: str = "bf16") -> float:
        """A grouped GEMM (ms): ``rows`` token rows spread over ``experts`` weight matrices ``[k x n]``."""
        raise NotImplementedError

    def sources(self, tp: int = 1, specs: Sequence = (), ep: int = 1) -> Dict[str, str]:
        """Per op family of :data:`OP_FAMILIES`, at tensor-parallel size ``tp``: where its times come from
        (``built``, or the measured tables named by GPU, framework and version); ``specs`` the run's
        ModelSpecs (target, drafter), whose attention shapes a table may not cover; ``ep`` the target's
        expert-parallel size (its MoE layers)."""
        raise NotImplementedError

    def warnings(self, tp: int = 1, specs: Sequence = (), ep: int = 1) -> List[str]:
        """One line per op the source was meant to measure but prices on the roofline for want of rows."""
        return []

    def identity(self) -> Mapping:
        """What the source's figures depend on beyond the device (for cache keys of profiles it builds)."""
        return {"kernels": self.name}

    def linear_attention_ms(self, spec, tp: int, decode_groups: Sequence[int], prefill_chunks: Sequence[int]) -> float:
        """One gated-delta-net layer of a step (ms): ``decode_groups`` tokens per decoding request (1 + guesses),
        ``prefill_chunks`` tokens per prefill chunk. The roofline here; :mod:`.gdn` explains both sources."""
        from vidur_specdec.costs.kernels import gdn

        return gdn.roofline_decode_ms(self, spec, tp, decode_groups) + \
            gdn.roofline_prefill_ms(self, spec, tp, prefill_chunks)

    # ------------------------------------------------------------------ composed from the primitives
    def mlp_op_times(self, spec, tp: int, num_tokens) -> Dict[str, np.ndarray]:
        """Per-layer time (ms) of every ``mlp.csv`` op for each entry of ``num_tokens`` (Vidur's names)."""
        raise NotImplementedError

    def attention_op_times(self, spec, tp: int, batch_size, kv_cache_size, prefill_chunk_size) -> Dict[str, np.ndarray]:
        """Per-layer time (ms) of every ``attention.csv`` op for each (batch, kv, chunk) entry."""
        raise NotImplementedError

    def lm_head_ms(self, hidden: int, vocab: int, tp: int, rows: int) -> float:
        """LM-head GEMM ``[rows x hidden] x [hidden x vocab/tp]`` (ms); 0 for no rows. Cached per shape."""
        if rows <= 0:
            return 0.0
        key = (int(hidden), int(vocab), int(tp), int(rows))
        t = self._lm_head.get(key)
        if t is None:
            n = -(-int(vocab) // int(tp))
            t = self._lm_head.put(key, float(self.gemm_ms(int(rows), int(hidden), n, "bf16")))
        return t
