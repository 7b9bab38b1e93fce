"""``ngram``: prompt lookup on the CPU (vLLM's ``method: ngram``).

A fixed cost (``speculative.ngram_cost_ms``, ms) per step in which any request
proposes, whatever k or batch: the lookup is a host-side scan that vLLM runs
for the whole batch at once. How often a request's context matches is
``speculative.proposal_rate`` (:mod:`vidur_specdec.speculation.proposals`).
"""

from __future__ import annotations

from vidur_specdec.speculation.proposers.base import ConstantCostProposer, register


@register("ngram")
class NgramProposer(ConstantCostProposer):
    """Fixed CPU cost (ms) per step that proposes at least one guess."""

    label = "n-gram"
    variable_proposals = True  # a step without a match proposes nothing (speculation/proposals.py)
    cost_key = "ngram_cost_ms"
