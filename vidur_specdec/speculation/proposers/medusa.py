"""``medusa``: Medusa heads (vLLM's ``method: medusa``), one parallel pass.

Medusa-1 (Cai et al. 2024): ``medusa_heads`` heads read the target's last
hidden state; head i (guess i) is ``num_layers`` residual blocks
(``hidden → hidden`` linear + SiLU) and its own LM head over the full
vocabulary. All heads run in one pass after the target, so drafting does not
grow with sequential passes, only with the heads used: a step with g guesses
runs heads 1..g, head i on the requests guessing at least i. Linear blocks and
LM heads are priced by the calibrated GEMM model (:mod:`vidur_specdec.costs.lm_head`)
at TP 1 (vLLM runs Medusa with draft TP 1). No KV; weights count against memory.
k may not exceed the head count. Trees are not supported.
"""

from __future__ import annotations

from vidur_specdec.config import ConfigError
from vidur_specdec.costs.lm_head import lm_head_ms
from vidur_specdec.speculation.proposers.base import _target_spec, Proposer, guesses_of, register
from vidur_specdec.speculation.proposers.eagle import gemm_ms
from vidur_specdec.hardware.devices import get_device


@register("medusa")
class MedusaProposer(Proposer):
    """k Medusa heads in one pass: residual block(s) + own LM head per head."""

    label = "Medusa"
    weights_key = "speculative.model"

    def __init__(self, head) -> None:
        self.head = head

    @classmethod
    def from_config(cls, cfg, target_time, cache_dir=None, **context):
        # lazy: start-up of `python -m vidur_specdec.main --help` (would load vidur_specdec.speculation.proposers.heads)
        from vidur_specdec.speculation.proposers import heads

        head = heads.resolve(cfg, "medusa", _target_spec(cfg, context))
        k = cfg.speculative.num_speculative_tokens
        if k > head.medusa_heads:
            raise ConfigError(f"speculative.num_speculative_tokens: {head.name} has {head.medusa_heads} heads; "
                              f"k must be <= {head.medusa_heads}, got {k}")
        return cls(head)

    @classmethod
    def weights_name(cls, cfg, target):
        # lazy: start-up of `python -m vidur_specdec.main --help` (would load vidur_specdec.speculation.proposers.heads)
        from vidur_specdec.speculation.proposers import heads

        return heads.weights_name(cfg, cls.name, target)

    def memory_bytes(self, tp: int = 1):
        return self.head.memory_bytes(1)

    def step_time_ms(self, comp) -> float:
        ctx = getattr(self, "ctx", None)
        if ctx is None or ctx.device is None:
            device = get_device("a100")
        else:
            device = ctx.device
        h = self.head
        guesses = guesses_of(comp)
        t = 0.0
        for i in range(1, max(guesses, default=0) + 1):
            rows = sum(1 for g in guesses if g >= i)
            t += h.num_layers * gemm_ms(device, rows, h.hidden_size, h.hidden_size)
            t += lm_head_ms(device, h.hidden_size, h.vocab_size, 1, rows)
        return t
