"""``suffix``: suffix decoding on the CPU (vLLM's ``method: suffix``, Arctic Inference).

Suffix decoding matches the request's latest tokens against suffix trees of
its own context and of earlier requests' outputs and proposes a variable
number of guesses: ``max_spec_tokens = suffix_decoding_max_spec_factor ×``
the matched length, up to k and ``suffix_decoding_max_tree_depth`` (vLLM 0.33
``vllm/config/speculative.py``: depth 24, 10000 cached requests, factor 1.0,
min token probability 0.1). How often a step matches is
``speculative.proposal_rate`` and how long a proposal is follows
:mod:`vidur_specdec.speculation.proposals`. vLLM 0.33 runs ``suffix`` on model
runner V1 only (V2 lists it as unsupported and falls back), so a request
without a match is charged one token whatever ``engine.model_runner`` says.

Cost: a fixed CPU time (``speculative.suffix_cost_ms``, ms) per step in which
any request proposes, like ``ngram``: the tree lookups and updates run on the
host between steps. No published per-step time was found; the default is
``ngram_cost_ms``'s 0.1 ms.
"""

from __future__ import annotations

from vidur_specdec.speculation.proposers.base import ConstantCostProposer, register


@register("suffix")
class SuffixProposer(ConstantCostProposer):
    """Fixed CPU cost (ms) per step that proposes at least one guess; 0..k guesses per request."""

    label = "suffix"
    variable_proposals = True
    cost_key = "suffix_cost_ms"
