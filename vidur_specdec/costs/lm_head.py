"""Time of an LM head: the ``[rows x hidden] x [hidden x vocab/tp]`` GEMM that turns hidden states into logits.

Vidur's profiles have no LM-head op, so it is priced as one GEMM by the run's
kernel source (:mod:`vidur_specdec.costs.kernels`: the measured tables where
they cover the GPU, else the analytical builder's calibrated GEMM model,
fitted on measured A100 GEMMs, see docs/profiles.md). ``rows`` is the number
of positions that need logits (one per plain decode and per prefill chunk that
completes its prompt, ``guesses + 1`` per verify request); the vocabulary is
split over the ``tp`` GPUs (vLLM's ``ParallelLMHead``). Times in ms. Shared by
the target's step cost and the EAGLE-style proposers (whose heads have LM heads
of their own).
"""

from __future__ import annotations

from vidur_specdec.costs.kernels import as_kernels


def lm_head_ms(kernels, hidden: int, vocab: int, tp: int, rows: int) -> float:
    """LM-head GEMM time (ms) for ``rows`` positions on one of ``tp`` GPUs; 0 for no rows.

    ``kernels`` is the run's :class:`~vidur_specdec.costs.kernels.KernelSource` (a DeviceSpec: the roofline on it).
    """
    return as_kernels(kernels).lm_head_ms(hidden, vocab, tp, rows)
