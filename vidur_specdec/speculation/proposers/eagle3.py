"""``eagle3``: an EAGLE-3 head (vLLM's ``method: eagle3``).

Priced as :mod:`~vidur_specdec.speculation.proposers.eagle` with EAGLE-3's differences
(Li et al. 2025; vLLM ``llama_eagle3.py``): the first pass fuses three target
layers' features through a ``3·hidden → hidden`` projection (later passes feed
the head's own hidden state, no projection); attention reads ``2·hidden``
(embedding ⊕ hidden), so the QKV projection costs twice the target's; the LM
head covers a reduced draft vocabulary (``speculative.draft_vocab_size``, the
head's own, 32,000 for the published heads), which is what makes it draft faster
than EAGLE on a 128k vocabulary.
"""

from __future__ import annotations

from vidur_specdec.speculation.proposers.base import register
from vidur_specdec.speculation.proposers.eagle import EagleProposer


@register("eagle3")
class Eagle3Proposer(EagleProposer):
    """EAGLE-3: fused 3×hidden input on pass 1, 2×hidden attention input, reduced LM head."""

    label = "EAGLE-3"
    fc_every_pass = False
