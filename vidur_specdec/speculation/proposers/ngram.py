"""``ngram``: prompt lookup on the CPU (vLLM's ``method: ngram``).

A fixed cost (``speculative.ngram_cost_ms``, ms) per step in which any request
proposes, whatever k or batch: the lookup is a host-side scan that vLLM runs
for the whole batch at once. How often a request's context matches is
``speculative.proposal_rate`` (:mod:`vidur_specdec.speculation.proposals`).
"""

from __future__ import annotations

from vidur_specdec.speculation.proposers.base import Proposer, register


@register("ngram")
class NgramProposer(Proposer):
    """Fixed CPU cost (ms) per step that proposes at least one guess."""

    label = "n-gram"
    variable_proposals = True  # a step without a match proposes nothing (speculation/proposals.py)

    def __init__(self, cost_ms: float) -> None:
        self.cost_ms = cost_ms

    @classmethod
    def from_config(cls, cfg, target_time, cache_dir=None, **context):
        return cls(cfg.speculative.ngram_cost_ms)

    def step_time_ms(self, comp) -> float:
        return self.cost_ms if comp.max_guesses > 0 else 0.0
