"""``fixed``: a drafter of constant cost (not a vLLM method; a what-if knob).

``speculative.fixed_cost_ms`` per proposal round, one round per guess position:
a step runs as many rounds as its longest draft, whatever the batch.
"""

from __future__ import annotations

from vidur_specdec.speculation.proposers.base import Proposer, register


@register("fixed")
class FixedProposer(Proposer):
    """``cost_ms`` per proposal round; a step runs as many rounds as its longest draft."""

    label = "fixed cost"

    def __init__(self, cost_ms: float) -> None:
        self.cost_ms = cost_ms

    @classmethod
    def from_config(cls, cfg, target_time, cache_dir=None, **context):
        return cls(cfg.speculative.fixed_cost_ms)

    def step_time_ms(self, comp) -> float:
        return self.cost_ms * comp.max_guesses
