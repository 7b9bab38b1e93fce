"""``fixed``: a drafter of constant cost (not a vLLM method; a what-if knob).

``speculative.fixed_cost_ms`` per proposal round, one round per guess position:
a step runs as many rounds as its longest draft, whatever the batch.
"""

from __future__ import annotations

from vidur_specdec.speculation.proposers.base import ConstantCostProposer, register


@register("fixed")
class FixedProposer(ConstantCostProposer):
    """``cost_ms`` per proposal round; a step runs as many rounds as its longest draft."""

    label = "fixed cost"
    cost_key = "fixed_cost_ms"
    per_round = True
