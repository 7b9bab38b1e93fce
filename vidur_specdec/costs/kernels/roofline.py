"""The ``built`` kernel source: the calibrated analytical roofline of :mod:`vidur_specdec.costs.profiles.builder`.

Every price is the builder's own function at its fitted efficiencies
(:data:`vidur_specdec.costs.profiles.params.EFFICIENCY`, fitted on measured A100
profiles; ``docs/profiles.md``), the MoE layer is :func:`vidur_specdec.costs.moe_layer.moe_layer_ms`
and the all-reduce is the collective model ``engine.all_reduce`` names
(:mod:`vidur_specdec.hardware.collectives`). Times in ms.
"""

from __future__ import annotations

from typing import Callable, Dict, Sequence, Tuple, Union

from vidur_specdec.costs import routing
from vidur_specdec.costs import sparse_attention as SA
from vidur_specdec.costs.kernels.base import NO_MOE, OP_FAMILIES, KernelSource
from vidur_specdec.costs.profiles import builder as B
from vidur_specdec.costs.profiles import params as P
from vidur_specdec.hardware import collectives

BUILT = "built"


class RooflineKernels(KernelSource):
    """Kernel times from the analytical builder on ``device``; ``all_reduce`` a collective-model name or callable."""

    name = BUILT

    def __init__(self, device, all_reduce: Union[str, Callable, None] = None) -> None:
        super().__init__(device)
        self.fields = device.builder_fields()
        if all_reduce is None or isinstance(all_reduce, str):
            all_reduce = collectives.all_reduce_model(all_reduce or collectives.DEFAULT_ALL_REDUCE)
        self._all_reduce = all_reduce

    def _dev(self, dtype: str):
        return B.dtype_device(self.fields, dtype)[0]

    def gemm_ms(self, m, k: int, n: int, dtype: str = "bf16"):
        dev, wb = B.dtype_device(self.fields, dtype)  # W8A8 / W4A4: weights at their format, bf16 activations
        t = B.gemm_ms(m, k, n, dev, P.EFFICIENCY["gemm"], P.DTYPE_BYTES, weight_b=wb)
        return float(t) if getattr(t, "ndim", 0) == 0 else t

    def decode_attention_ms(self, bs, kv, q_heads: int, kv_heads: int, head_dim: int, kv_dtype: str = "bf16"):
        kv_b = 1 if kv_dtype == "fp8" else None
        dev = B.complete_device_fields(self.fields)
        return B.decode_attention_ms(bs, kv, q_heads, kv_heads, head_dim, dev, P.EFFICIENCY["attn_decode"], kv_b)

    def prefill_attention_ms(self, chunk, kv, q_heads: int, kv_heads: int, head_dim: int, kv_dtype: str = "bf16"):
        kv_b = 1 if kv_dtype == "fp8" else None
        dev = B.complete_device_fields(self.fields)
        return B.prefill_attention_ms(chunk, kv, q_heads, kv_heads, head_dim, dev, P.EFFICIENCY["attn_prefill"], kv_b)

    def elementwise_ms(self, nbytes, op: str = "add"):
        return B.stream_ms(nbytes, B.complete_device_fields(self.fields), P.EFFICIENCY[op], P.EFFICIENCY["l2"])

    def all_reduce_ms(self, world: int, nbytes: int) -> float:
        if world <= 1:
            return 0.0
        return float(self._all_reduce(self.device, int(world), int(nbytes)))

    def nccl_all_reduce_ms(self, world: int, nbytes: int) -> float:
        return float(collectives.all_reduce_ms(self.device, int(world), int(nbytes)))

    def fused_moe_ms(self, spec, tp: int, groups: Sequence[int], ep: int = 1,
                     redundant: int = 0, scope: str = "all", dispatched: bool = False) -> Tuple[float, float]:
        # lazy: start-up of `python -m vidur_specdec.main --help` (would load vidur_specdec.architectures.moe)
        from vidur_specdec.costs.moe_layer import moe_layer_ms

        return moe_layer_ms(spec, self.fields, tp, groups, ep=ep, redundant=redundant, scope=scope,
                           dispatched=dispatched)

    def grouped_gemm_ms(self, rows: int, experts: int, k: int, n: int, dtype: str = "bf16") -> float:
        """The builder's grouped-GEMM roofline (as in the MoE layer): FLOPs with a one-tile floor per expert."""
        g = P.EFFICIENCY["gemm"]
        dev = self._dev(dtype)
        wb = B.dtype_device(self.fields, dtype)[1] or P.DTYPE_BYTES
        flops = max(2.0 * rows * k * n, experts * 2.0 * P.KERNEL["gemm_tile_m"] * k * n)
        t_compute = flops / (dev["peak_flops"] * g["compute_eff_max"])
        t_memory = (experts * k * n * wb + rows * (k + n) * P.DTYPE_BYTES) / (dev["mem_bw"] * g["mem_eff"])
        pw = g["overlap_exp"]
        return float((t_compute**pw + t_memory**pw) ** (1.0 / pw) * 1e3 + g["launch_ms"])

    def mlp_op_times(self, spec, tp: int, num_tokens):
        return B.mlp_op_times(spec, self.fields, tp, num_tokens)

    def attention_op_times(self, spec, tp: int, batch_size, kv_cache_size, prefill_chunk_size):
        out = B.attention_op_times(spec, self.fields, tp, batch_size, kv_cache_size, prefill_chunk_size)
        if SA.applies(spec):  # DeepSeek sparse attention: indexer + top-k MLA (the tables' module growth, if any)
            return SA.attention_op_times(self, spec, tp, out, batch_size, kv_cache_size, prefill_chunk_size)
        return out

    def sources(self, tp: int = 1, specs: Sequence = (), ep: int = 1) -> Dict[str, str]:
        out = {f: BUILT for f in OP_FAMILIES}
        if specs and not specs[0].is_moe:
            out["moe"] = NO_MOE
        if specs and specs[0].is_moe:  # only a MoE target's summary names its routing model
            out["moe_routing"] = routing.describe(specs[0])
        if specs and getattr(specs[0], "linear_layers", 0):  # only a hybrid model's summary names this family
            out["linear_attention"] = BUILT
        return out
