"""``dspark``: DSpark, a block drafter with a sequential Markov head (vLLM's ``method: dspark``).

DSpark reuses DFlash's machinery (:mod:`~vidur_specdec.speculation.proposers.dflash`:
the context K/V from the target's hidden states, one parallel backbone pass) with
two differences (``vllm/v1/worker/gpu/spec_decode/dspark/speculator.py``,
``vllm/model_executor/models/qwen3_dspark.py``, vLLM 0.33):

* **anchor as first prediction** — each request carries k query tokens (the anchor and
  k − 1 noise tokens), not 1 + k, and every position is sampled; so k may reach the
  trained ``block_size`` and vLLM reserves k lookahead slots (``sample_from_anchor``,
  the default; the speculators-format 1 + k layout is not modelled);
* **sequential Markov sampling** — after the backbone's LM head over the k positions,
  k steps run one after the other, each adding a low-rank transition bias from the
  token sampled before: an embedding row (``vocab × markov_rank``, ``markov_w1``), a
  ``[requests × markov_rank] × [markov_rank × draft vocab]`` GEMM (``markov_w2``,
  replicated: TP 1), the add and the argmax over the vocabulary. This part grows with
  k (one weight read of ``markov_w2`` per guess); the backbone does not.

All inside the drafter's CUDA graph (one replay). The Markov head's weights count
against memory with the backbone's (:meth:`HeadSpec.memory_bytes
<vidur_specdec.speculation.proposers.heads.HeadSpec.memory_bytes>`).
"""

from __future__ import annotations

from vidur_specdec.costs.profiles.params import DTYPE_BYTES
from vidur_specdec.speculation.proposers.base import register
from vidur_specdec.speculation.proposers.dflash import DFlashProposer, gemm_ms


@register("dspark")
class DSparkProposer(DFlashProposer):
    """A DFlash-style backbone pass over k anchor-first queries, then k sequential Markov-head samples."""

    label = "DSpark"

    @classmethod
    def max_guesses(cls, head) -> int:
        return head.block_size

    @classmethod
    def queries_per_request(cls, k: int) -> int:
        return k

    def sequential_ms(self, requests: int, k: int, kernels, o) -> float:
        """k Markov steps (ms): the bias GEMM, the bias added to the base logits, and the argmax."""
        h = self.head
        if requests <= 0 or k <= 0:
            return 0.0
        one = (gemm_ms(kernels, requests, h.markov_rank, h.output_vocab)
               + float(kernels.elementwise_ms(3 * requests * h.output_vocab * DTYPE_BYTES))
               + o.sample_ms(requests, h.output_vocab))
        return k * one

    def step_parts(self, comp) -> dict:
        parts = super().step_parts(comp)
        parts["sample"] = 0.0  # the guesses are sampled in the Markov steps (``sequential``), not after the LM head
        return parts
