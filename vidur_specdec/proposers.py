"""Proposers: the time a step spends making guesses before the target verifies them.

The proposer runs before the target's forward pass and its time is added to
the step (no overlap). Each proposer prices one step from its
:class:`~vidur_specdec.predictor.StepComposition`; times in ms.

* ``ngram`` — prompt-lookup on the CPU: a fixed cost per step in which any
  request proposes, whatever k.
* ``fixed`` — a drafter of constant cost: ``fixed_cost_ms`` per proposal round,
  one round per guess position (k rounds for a full draft).
* ``draft_model`` — a small model run as k sequential decode passes, timed by
  its own fitted :class:`~vidur_specdec.predictor.OperatorTimeModel`. Pass j
  carries the requests proposing at least j guesses, at context ctx + j. The
  drafter also prefills every prompt chunk of the step (in pass 1), so its
  prefill lands in the step and hence in TTFT.
"""

from __future__ import annotations


class Proposer:
    """Base class: ``step_time_ms(comp)`` for one step."""

    name = "none"

    def step_time_ms(self, comp) -> float:
        return 0.0


class NgramProposer(Proposer):
    """Fixed CPU cost (ms) per step that proposes at least one guess."""

    name = "ngram"

    def __init__(self, cost_ms: float) -> None:
        self.cost_ms = cost_ms

    def step_time_ms(self, comp) -> float:
        return self.cost_ms if comp.max_guesses > 0 else 0.0


class FixedProposer(Proposer):
    """``cost_ms`` per proposal round; a step runs as many rounds as its longest draft."""

    name = "fixed"

    def __init__(self, cost_ms: float) -> None:
        self.cost_ms = cost_ms

    def step_time_ms(self, comp) -> float:
        return self.cost_ms * comp.max_guesses


class DraftModelProposer(Proposer):
    """k sequential decode passes of a drafter (plus its prefill of the step's prompt chunks)."""

    name = "draft_model"

    def __init__(self, model, num_layers: int) -> None:
        self.model = model  # OperatorTimeModel of the drafter
        self.num_layers = num_layers

    def step_time_ms(self, comp) -> float:
        m = self.model
        guesses = [q - 1 for q in comp.decode_q]
        passes = max(guesses, default=0)
        prefill_tokens = sum(c for _, c in comp.prefill)
        layer_ms = 0.0
        if prefill_tokens:
            # Pass 1 also prefills the prompt chunks of this step.
            layer_ms += sum(m.prefill_attention_ms(kv, c) for kv, c in comp.prefill)
        for j in range(1, passes + 1):
            ctx = [c + j for c, g in zip(comp.decode_ctx, guesses) if g >= j]
            tokens = len(ctx) + (prefill_tokens if j == 1 else 0)
            layer_ms += m.linear_sum_ms(tokens) + m.decode_attention_ms(len(ctx), sum(ctx) / len(ctx))
        if passes == 0 and prefill_tokens:
            layer_ms += m.linear_sum_ms(prefill_tokens)
        return layer_ms * self.num_layers


def build(spec, draft_model=None, draft_layers: int = 0) -> Proposer:
    """The proposer for ``speculative`` settings; ``none`` (or k = 0) costs nothing."""
    if not spec.enabled:
        return Proposer()
    if spec.method == "ngram":
        return NgramProposer(spec.ngram_cost_ms)
    if spec.method == "fixed":
        return FixedProposer(spec.fixed_cost_ms)
    if spec.method == "draft_model":
        if draft_model is None:
            raise ValueError("draft_model proposer needs the drafter's fitted time model")
        return DraftModelProposer(draft_model, draft_layers)
    raise ValueError(f"unknown speculative.method {spec.method!r}")
