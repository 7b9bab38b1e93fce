"""Time of an LM head: the ``[rows x hidden] x [hidden x vocab/tp]`` GEMM that turns hidden states into logits.

Vidur's profiles have no LM-head op, so it is priced with the analytical
profile builder's calibrated GEMM model (:func:`vidur_specdec.costs.profiles.builder.gemm_ms`,
fitted on measured A100 GEMMs, see docs/profiles.md) on the step's device.
``rows`` is the number of positions that need logits (one per plain decode and
per prefill chunk that completes its prompt, ``guesses + 1`` per verify
request); the vocabulary is split over the ``tp`` GPUs (vLLM's
``ParallelLMHead``). Times in ms. Shared by the target's step cost and the
EAGLE-style proposers (whose heads have LM heads of their own).
"""

from __future__ import annotations

from functools import lru_cache

from vidur_specdec.hardware.devices import DeviceSpec
from vidur_specdec.costs.profiles import params as P
from vidur_specdec.costs.profiles.builder import gemm_ms


@lru_cache(maxsize=8192)  # called every step with the same few shapes; DeviceSpec is frozen (hashable)
def lm_head_ms(device: DeviceSpec, hidden: int, vocab: int, tp: int, rows: int) -> float:
    """LM-head GEMM time (ms) for ``rows`` positions on one of ``tp`` GPUs; 0 for no rows."""
    if rows <= 0:
        return 0.0
    n = -(-int(vocab) // int(tp))
    return float(gemm_ms(rows, int(hidden), n, device.builder_fields(), P.EFFICIENCY["gemm"], P.DTYPE_BYTES))
