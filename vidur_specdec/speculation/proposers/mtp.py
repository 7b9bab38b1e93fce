"""``mtp``: multi-token-prediction modules (vLLM's ``method: mtp``, DeepSeek-V3 style).

``num_layers`` stacked MTP modules, used sequentially: pass j runs module
``(j − 1) mod n`` — one decoder layer at the target's shape after an
``eh_proj`` (embedding ⊕ hidden, 2·hidden → hidden) — and the target's shared
LM head (full vocabulary). Each pass is priced like an EAGLE pass with one
layer (:mod:`~vidur_specdec.speculation.proposers.eagle`); every module keeps its own KV. An MoE
module's experts and weights are at the format the checkpoint stores the module in
(:func:`vidur_specdec.architectures.quant.mtp_spec`: NVFP4 checkpoints keep it bf16); its other
ops are the target's per-layer profile, at the target's formats.
With no ``speculative.model`` the head is one module at the target's shape.
Under data parallel (a rank of a DP + EP group) each pass's MoE layer is an
expert-parallel layer over every rank's tokens: the rank prices its router and
shared experts here, and the group its routed experts and the module's own
dispatch and combine (:meth:`MTPProposer.moe_passes`,
:mod:`vidur_specdec.pricing.data_parallel`).
"""

from __future__ import annotations

from dataclasses import replace

from vidur_specdec.config.memo import BoundedMemo
from vidur_specdec.architectures import quant
from vidur_specdec.speculation.proposers.base import register
from vidur_specdec.speculation.proposers.eagle import EagleProposer


def _pass_groups(p) -> list:
    """A drafter pass's token groups (:mod:`vidur_specdec.costs.routing`): each request's run, each prefill chunk."""
    return [q for q in p.q if q > 0] + [c for _, c in p.prefill if c > 0]


@register("mtp")
class MTPProposer(EagleProposer):
    """n stacked MTP modules, one per sequential pass (cycled), shared full-vocabulary LM head."""

    label = "MTP"

    def layers_per_pass(self) -> int:
        return 1  # a pass runs one module; the modules' count only sets weights and KV

    def layer_mlp_ms(self, p, device, tp: int) -> float:
        """An MoE target's MTP module: its MoE layer (own experts, same routing) in place of the profile's MLP.

        The pass's tokens are routed like the target's: pass 1's catch-up run of
        each request (and each prefill chunk) is one group, later passes one
        token per drafting request (:func:`vidur_specdec.costs.routing.expected_distinct`).
        """
        if not self.head.moe or self.target_spec is None:
            return super().layer_mlp_ms(p, device, tp)
        groups = _pass_groups(p)
        if not groups:
            return 0.0
        # a data-parallel rank prices its own share (router, shared experts); the group adds the routed experts
        # over every rank's tokens and the module's dispatch and combine (vidur_specdec/pricing/data_parallel.py)
        scope = "local" if getattr(getattr(self, "ctx", None), "data_parallel", False) else "all"
        key = (tuple(sorted(groups)), tp, device, scope)
        cache = self.__dict__.get("_moe_cache")
        if cache is None:
            cache = self._moe_cache = BoundedMemo(65536)
        ms = cache.get(key)
        if ms is None:  # the run's kernel source prices the MoE layer (once per group multiset), at the
            # format the checkpoint stores its MTP module in (an NVFP4 checkpoint keeps it bf16: quant.mtp_spec)
            ms = cache.put(key, self.kernels_on(device).fused_moe_ms(self.moe_spec(), tp, groups, ep=self.ep,
                                                                     scope=scope)[0])
        return ms - self.target_mlp_ms(p.tokens)

    def moe_spec(self):
        """The MTP module's MoE layer: the target's at the format the checkpoint stores the module in (None on a
        dense target)."""
        if not self.head.moe or self.target_spec is None:
            return None
        spec = self.__dict__.get("_moe_spec")
        if spec is None:
            spec = self._moe_spec = quant.mtp_spec(self.target_spec)
        return spec

    def moe_passes(self, comp):
        """Each pass's token groups through the module's MoE layer (pass 1's catch-up runs and prefill chunks,
        then one token per drafting request), one layer per pass."""
        if self.moe_spec() is None:
            return []
        return [g for g in (_pass_groups(p) for p in self.passes(comp)) if g]

    def memory_bytes(self, tp: int = 1):
        """(weight bytes, KV bytes per token) per GPU; an MoE target's modules count their experts and MLA KV."""
        t = self.target_spec
        if not self.head.moe or t is None:
            return super().memory_bytes(tp)
        t = quant.mtp_spec(t)  # the module's own format (an NVFP4 checkpoint keeps it bf16)

        # lazy: start-up of `python -m vidur_specdec.main --help` (would load vidur_specdec.architectures.moe)
        from vidur_specdec.architectures.moe import weight_bytes

        # n modules, each one MoE decoder layer of the target (all experts, the checkpoint's format) plus
        # eh_proj (2 hidden -> hidden, bf16, replicated); embedding and LM head are the target's
        one = replace(t, num_layers=1, dense_layers=0, linear_layers=0, tie_word_embeddings=True, vocab_size=0)
        per_gpu = t.num_experts / self.ep if self.ep > 1 else None
        w = weight_bytes(one, tp, experts_per_gpu=per_gpu) + 2 * 2 * t.hidden_size * t.hidden_size
        kv = replace(t, num_layers=1, sliding_layers=0, linear_layers=0).kv_bytes_per_token(tp)  # a full-attention layer
        return int(self.head.num_layers * w), int(self.head.num_layers * kv)
