"""One request's state in the engine core: tokens charged and advanced, KV, timestamps, counters.

A :class:`CoreRequest` holds what Vidur's ``Request`` and this project's
``SpecRequest`` hold, as plain slots: the scheduler reads and writes them
directly (no properties on the hot path). Token counts are tokens; times are
seconds of simulated time.

* ``prefill_tokens`` is the prefill target: the prompt, or after a preemption
  by recompute every token that was in the KV cache (the prompt stays a prompt;
  a request preempted while decoding re-prefills ``processed - 1`` tokens and
  the prefill's sample gives back its newest token, so no output token is
  produced twice or lost); ``total_tokens`` is prompt + output and never
  changes; ``processed`` counts tokens done (a finished prefill counts its
  sampled token too, as Vidur counts it).
* A step's end advances its requests from the step plan's columns
  (:func:`advance_step`): a decoding request by its accepted guesses + 1
  (tokens advanced), a prefill chunk by the chunk.
* Counters once completed: ``output_tokens = 1 + decode_steps + accepted_tokens``.

The attribute names ``index``, ``prompt_tokens``, ``output_tokens``,
``num_processed_tokens`` (an alias of ``processed``), ``decode_steps`` and
``output_position`` are what the acceptance and proposal models read; the
request table (:func:`vidur_specdec.engine.metrics.requests_frame`) reads the
timestamps and counters.
"""

from __future__ import annotations


class CoreRequest:
    """A request of the engine core (module docstring)."""

    __slots__ = ("id", "index", "arrived_at", "prompt_tokens", "output_tokens", "prefill_tokens", "total_tokens",
                 "processed", "prefill_complete", "completed", "scheduled", "scheduled_at", "prefill_completed_at",
                 "completed_at", "num_restarts", "decode_steps", "guesses", "accepted_tokens", "acceptance",
                 "proposals", "catchup_tokens", "previous_q_tokens", "replica",
                 # prefill/decode pools (vidur_specdec.engine.core.pools)
                 "prefill_only", "parent", "shadow", "prefill_replica", "decode_replica", "prefill_unit",
                 "decode_unit", "handoff_at", "kv_start_at", "kv_transfer_ms", "kv_transfer_bytes", "kv_loaded_at",
                 "kv_loaded")

    def __init__(self, rid: int, index: int, arrived_at: float, prompt_tokens: int, output_tokens: int) -> None:
        self.id = rid
        self.index = index
        self.arrived_at = arrived_at
        self.prompt_tokens = prompt_tokens
        self.output_tokens = output_tokens
        self.prefill_tokens = prompt_tokens
        self.total_tokens = prompt_tokens + output_tokens
        self.processed = 0
        self.prefill_complete = False
        self.completed = False
        self.scheduled = False
        self.scheduled_at = 0.0
        self.prefill_completed_at = 0.0
        self.completed_at = 0.0
        self.num_restarts = 0
        self.decode_steps = 0
        self.guesses = 0
        self.accepted_tokens = 0
        self.acceptance = None  # its acceptance source, set on first use by the scheduler
        self.proposals = None  # its proposal draws (ngram/suffix), set on first use
        self.catchup_tokens = 1  # tokens advanced in its previous decode step, not yet seen by a drafter head
        self.previous_q_tokens = 1  # tokens charged in its previous decode step (1 + guesses)
        self.replica = -1  # the replica whose scheduler holds it, so runs its steps (-1: none yet)
        self.prefill_only = False
        self.parent = self.shadow = None
        self.kv_loaded = False

    @property
    def num_processed_tokens(self) -> int:
        return self.processed

    @property
    def output_position(self) -> int:
        """Output tokens produced so far (the index of the first token the next decode step produces)."""
        return self.processed - self.prompt_tokens

    def restart(self) -> None:
        """Preempt by recompute (module docstring): re-prefill every token already in the KV cache."""
        recompute = self.processed - 1 if self.prefill_complete else self.prefill_tokens
        self.prefill_tokens = recompute
        self.processed = 0
        self.scheduled = False
        self.completed = False
        self.prefill_complete = False
        self.num_restarts += 1
        self.catchup_tokens = 1
        self.previous_q_tokens = 1

    def on_schedule(self, time: float) -> None:
        """Scheduled into a step at ``time``: the first time ever is its ``scheduled_at``."""
        if self.scheduled:
            return
        self.scheduled = True
        if self.num_restarts == 0:
            self.scheduled_at = time


def advance_step(requests, plan, time: float) -> list:
    """The end of a step at ``time`` (s): each of its ``requests`` (in the order of ``plan``'s columns) advances
    by its tokens advanced, accepted + 1 when decoding (its counters and catch-up move with it) or its chunk when
    prefilling, then finishes its prefill (and samples its first token) or completes. Returns the requests that
    completed (in step order)."""
    done = []
    for r, decoding, q, g, a in zip(requests, plan.decoding, plan.tokens_charged, plan.guesses, plan.accepted):
        if decoding:
            r.decode_steps += 1
            if g:  # no guess, nothing accepted (a plain decode)
                r.guesses += g
                r.accepted_tokens += a
            r.catchup_tokens = q = a + 1
            r.previous_q_tokens = g + 1
        processed = r.processed = r.processed + q
        if processed == r.prefill_tokens:
            r.prefill_complete = True
            r.processed = processed = processed + 1  # the prefill's sampled token
            if r.prefill_completed_at == 0:
                r.prefill_completed_at = time
        if processed == r.total_tokens:
            r.completed_at = time
            r.completed = True
            done.append(r)
    return done
