"""The speculative request: Vidur's ``Request`` that advances by accepted + 1.

Vidur advances a request twice per step, in ``BatchStage.on_stage_end`` and in
``Batch.on_batch_end``, each time by the step's ``num_q_tokens`` (tokens
charged). For a verify step the scheduler plans ``guesses`` and ``accepted``;
this class turns the charge (guesses + 1) into the progress (accepted + 1) in
both places, so ``num_q_tokens`` stays the charge everywhere else.

It also fixes ``Request.restart()`` (preemption by recompute): Vidur's keeps the
stage-progress fields (so a preempted request crashes) and turns an
unprocessed prompt into output tokens.
"""

from __future__ import annotations

from typing import Optional

from vidur.entities import Request


class SpecRequest(Request):
    """A request with separate tokens-charged / tokens-advanced accounting.

    ``index`` is the request's position in the workload (it keys its
    acceptance stream). Counters: ``decode_steps`` (steps in which it decodes,
    plain or with guesses), ``guesses``, ``accepted_tokens``; they satisfy
    ``output_tokens = 1 + decode_steps + accepted_tokens`` once completed.
    """

    def __init__(self, arrived_at: float, num_prefill_tokens: int, num_decode_tokens: int,
                 index: int = 0) -> None:
        super().__init__(arrived_at, num_prefill_tokens, num_decode_tokens)
        self.index = index
        self.prompt_tokens = num_prefill_tokens
        self.output_tokens = num_decode_tokens
        self.decode_steps = 0
        self.guesses = 0
        self.accepted_tokens = 0
        self.acceptance = None  # the request's acceptance source, set lazily by the scheduler
        self.proposals = None  # the request's proposal draws (ngram/suffix), set lazily by the scheduler
        self.catchup_tokens = 1  # tokens advanced in its previous step, not yet seen by a drafter head
        self.previous_q_tokens = 1  # tokens charged in its previous decode step (1 + guesses): a drafter's pass 1
        self._planned: Optional[tuple] = None  # (guesses, accepted) of the running step

    # ------------------------------------------------------------------ planning
    def plan_verify(self, guesses: int, accepted: int) -> None:
        """Set the running decode step's guesses (charged: guesses+1) and accepted (advanced: accepted+1)."""
        assert 0 <= accepted <= guesses
        assert accepted + 1 <= self.total_tokens - self._num_processed_tokens, "would overshoot"
        self._planned = (guesses, accepted)

    @property
    def output_position(self) -> int:
        """Output tokens produced so far (the index of the first token the next decode step produces)."""
        return self._num_processed_tokens - self.prompt_tokens

    @property
    def planned(self) -> Optional[tuple]:
        """(guesses, accepted) of the step in flight, or None for a prefill step."""
        return self._planned

    def _advanced(self, tokens_charged: int) -> int:
        if self._planned is None:
            return tokens_charged  # prefill chunk: every token charged is progress
        guesses, accepted = self._planned
        assert tokens_charged == guesses + 1, (tokens_charged, guesses)
        return accepted + 1

    # ------------------------------------------------------------------ Vidur hooks
    def on_batch_stage_end(self, time, stage_id, execution_time, model_execution_time,
                           num_tokens_stage_processed) -> None:
        super().on_batch_stage_end(time, stage_id, execution_time, model_execution_time,
                                   self._advanced(num_tokens_stage_processed))

    def on_batch_end(self, time: float, num_tokens_processed: int) -> None:
        tokens_advanced = self._advanced(num_tokens_processed)
        if self._planned is not None:
            guesses, accepted = self._planned
            self.decode_steps += 1
            self.guesses += guesses
            self.accepted_tokens += accepted
            self.catchup_tokens = accepted + 1
            self.previous_q_tokens = guesses + 1
            self._planned = None
        super().on_batch_end(time, tokens_advanced)

    def restart(self) -> None:
        """Preempt by recompute: re-prefill every token already in the KV cache.

        The prompt stays a prompt (a request preempted mid-prefill re-prefills
        the same tokens from the start). A request preempted while decoding had
        ``processed - 1`` tokens in KV (the newest sampled token is not yet
        written); it re-prefills those, and the prefill's sample gives back that
        newest token, so no output token is produced twice or lost.
        """
        total = self.total_tokens
        if self._is_prefill_complete:
            recompute = self._num_processed_tokens - 1
        else:  # preempted mid-(re)prefill: its prefill target is unchanged
            recompute = self._num_prefill_tokens
        super().restart()
        self._num_prefill_tokens = recompute
        self._num_decode_tokens = total - recompute
        self._num_stage_processed_tokens = 0
        self._is_prefill_stage_complete = False
        self._planned = None
        self.catchup_tokens = 1
        self.previous_q_tokens = 1
