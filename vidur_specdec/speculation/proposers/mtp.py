"""``mtp``: multi-token-prediction modules (vLLM's ``method: mtp``, DeepSeek-V3 style).

``num_layers`` stacked MTP modules, used sequentially: pass j runs module
``(j − 1) mod n`` — one decoder layer at the target's shape after an
``eh_proj`` (embedding ⊕ hidden, 2·hidden → hidden) — and the target's shared
LM head (full vocabulary). Each pass is priced like an EAGLE pass with one
layer (:mod:`~vidur_specdec.speculation.proposers.eagle`); every module keeps its own KV.
With no ``speculative.model`` the head is one module at the target's shape.
"""

from __future__ import annotations

from vidur_specdec.speculation.proposers.base import register
from vidur_specdec.speculation.proposers.eagle import EagleProposer


@register("mtp")
class MTPProposer(EagleProposer):
    """n stacked MTP modules, one per sequential pass (cycled), shared full-vocabulary LM head."""

    label = "MTP"

    def layers_per_pass(self) -> int:
        return 1  # a pass runs one module; the modules' count only sets weights and KV
