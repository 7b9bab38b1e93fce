"""The step plan: what the scheduler decided for one engine step, in one immutable record.

The speculative scheduler (:mod:`vidur_specdec.engine.scheduler`) decides, for
each step it forms, every request's **tokens charged** (query tokens: ``k``-bounded
``guesses + 1`` for a decoding request, the chunk for a prefill), its
**guesses** and its **accepted** guesses (tokens advanced: ``accepted + 1``), and
the step's flags (the ``k`` its guesses were drawn with, whether a GPU drafter
runs its sync pass at scheduled k = 0, a data-parallel group's per-rank parts).
It writes all of it once into a :class:`StepPlan`; the predictor
(:mod:`~vidur_specdec.engine.predictor`, :mod:`~vidur_specdec.engine.dp_predictor`),
the step recorders (:mod:`~vidur_specdec.engine.metrics`,
:mod:`~vidur_specdec.engine.pipeline_metrics`) and tune's step pricer read only it.

**Where the plan lives.** Vidur creates the :class:`~vidur.entities.Batch` and hands
the same object to the stage scheduler, to the predictor
(``get_execution_time(batch, stage)``) and back to the replica scheduler's
``on_batch_end``; the predictor is built by Vidur apart from the scheduler, and a
replica may have several batches in flight (pipeline stages, a data-parallel
group's ranks). So the plan rides on the batch: :func:`attach` sets one attribute,
:data:`PLAN_ATTRIBUTE`, once (a second plan for the same batch is refused), and
:func:`plan_of` reads it. A mapping keyed by batch id would need a registry that
both the scheduler and the predictor reach and a removal at batch end; the
attribute lives exactly as long as the batch. The recorders never see the batch
(Vidur hands them a ``BatchStage``): the plan reaches them on the step time the
predictor returns (``execution_time.plan``). This module is the only one that
reads or writes an attribute of a Vidur batch beyond Vidur's own fields (a test
greps the package for it).

A batch formed outside the speculative scheduler (Vidur's own Sarathi in the
baseline run, a hand-built batch in a script or test) has no plan attached;
:func:`plan_of` derives one from its public fields: k 0, every decoding request's
guesses ``tokens charged − 1``, accepted from the request's ``planned`` when it
has one, else 0.

Units: every count is tokens unless named otherwise; ``context`` is the tokens a
request had in its KV cache before the step.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, NamedTuple, Optional, Sequence, Tuple

PLAN_ATTRIBUTE = "step_plan"  # the one attribute this project sets on a Vidur Batch


@dataclass(frozen=True)
class StepComposition:
    """What one step computes, in the shape the proposers and the verify-cost policies read.

    ``decode_q[i]`` is tokens charged to decoding request i (1 + guesses) and
    ``decode_ctx[i]`` the tokens it already had (its KV before the step);
    ``prefill`` holds (context before the chunk, chunk tokens) per prefill request;
    ``decode_catchup[i]`` the tokens request i advanced in its previous step
    (accepted + 1), which a drafter head has yet to process (1 when unknown);
    ``decode_prev_q[i]`` the tokens it was charged in its previous step (1 + its
    guesses then; 1 when unknown); ``drafter_sync`` marks a step whose
    scheduled k is 0 under a per-batch-size schedule, on which vLLM's GPU
    drafter still runs its first pass to keep its KV in sync. Read-only: a
    step's composition is part of its :class:`StepPlan`.
    """

    num_tokens: int
    decode_q: List[int]
    decode_ctx: List[int]
    prefill: List[Tuple[int, int]]
    decode_catchup: List[int] = field(default_factory=list)
    decode_prev_q: List[int] = field(default_factory=list)
    drafter_sync: bool = False

    @classmethod
    def of(cls, batch) -> "StepComposition":
        """The composition of a batch's plan (:func:`plan_of`)."""
        return plan_of(batch).composition

    @property
    def max_guesses(self) -> int:
        return max(self.decode_q, default=1) - 1


class RequestPlan(NamedTuple):
    """One request's share of a step (a view of :class:`StepPlan`'s columns).

    ``tokens_charged`` is its query tokens (``guesses + 1`` decoding, the chunk
    prefilling); ``context`` its KV tokens before the step; ``k`` the k its
    guesses were drawn with (its rank's under data parallel); ``guesses`` and
    ``accepted`` are 0 for a prefill chunk.
    """

    request_id: int
    index: int  # its position in the workload (-1 when the request has none)
    k: int
    decoding: bool
    tokens_charged: int
    context: int
    guesses: int
    accepted: int

    @property
    def tokens_advanced(self) -> int:
        """Progress the step makes: accepted + 1 decoding, the whole chunk prefilling."""
        return self.accepted + 1 if self.decoding else self.tokens_charged

    @property
    def prefill_chunk(self) -> int:
        """Prompt tokens the step prefills (0 for a decoding request)."""
        return 0 if self.decoding else self.tokens_charged


@dataclass(frozen=True)
class StepPlan:
    """One engine step as the scheduler planned it: per-request columns (in the batch's order) and flags.

    Columns (one entry per request): ``request_ids`` (Vidur's ids), ``indices``
    (workload positions), ``decoding`` (prefill complete: a decode or verify
    step; else a prefill chunk), ``tokens_charged``, ``context``, ``guesses``,
    ``accepted``. Flags: ``k`` (the k the step's guesses were drawn with,
    steps.csv ``k``; a data-parallel group's: the largest of its ranks'),
    ``drafter_sync`` (scheduled k is 0 under a per-batch-size schedule and a GPU
    drafter still runs its first pass), ``dp_parts`` (a data-parallel group's
    step: each rank's plan, None for a rank that runs vLLM's dummy batch; None
    otherwise); ``has_prefill`` / ``decode_only`` are read from the columns.
    Totals, in tokens unless named: ``num_tokens`` (all charged), ``num_decodes``
    (requests), ``guesses_total``, ``accepted_total``,
    ``prefill_tokens``, ``context_tokens``, ``logit_rows`` (positions that need
    logits, as :func:`vidur_specdec.costs.step_overheads.logit_rows` counts
    them), ``verifying`` (decoding requests with guesses). ``composition`` is the
    same step in :class:`StepComposition`'s shape.
    """

    k: int
    drafter_sync: bool
    request_ids: Tuple[int, ...]
    indices: Tuple[int, ...]
    decoding: Tuple[bool, ...]
    tokens_charged: Tuple[int, ...]
    context: Tuple[int, ...]
    guesses: Tuple[int, ...]
    accepted: Tuple[int, ...]
    composition: StepComposition
    num_tokens: int
    num_decodes: int
    guesses_total: int
    accepted_total: int
    prefill_tokens: int
    context_tokens: int
    logit_rows: int
    verifying: int
    dp_parts: Optional[Tuple[Optional["StepPlan"], ...]] = None

    def __len__(self) -> int:
        return len(self.request_ids)

    @property
    def has_prefill(self) -> bool:
        """Some request prefills a chunk this step (a data-parallel group: on some rank)."""
        return self.num_decodes < len(self.request_ids)

    @property
    def decode_only(self) -> bool:
        """Every request decodes or verifies (no prefill chunk; an idle rank's dummy step counts)."""
        return not self.has_prefill

    @property
    def requests(self) -> Tuple[RequestPlan, ...]:
        """Per-request records (built on each call; the columns are the plan)."""
        k = self.k
        return tuple(RequestPlan(i, x, k, d, q, c, g, a) for i, x, d, q, c, g, a in zip(
            self.request_ids, self.indices, self.decoding, self.tokens_charged, self.context, self.guesses,
            self.accepted))


def plan_batch(batch, k: int = 0, drafter_sync: bool = False) -> StepPlan:
    """The plan of a formed batch: its requests as they stand (``planned`` = (guesses, accepted) where set).

    Read once per batch by the scheduler, before any request of it advances.
    """
    ids, idx, dec, charged, ctx, gs, acc = [], [], [], [], [], [], []
    dq, dctx, pf, dc, dp = [], [], [], [], []
    rows = verifying = guesses_total = accepted_total = prefill_tokens = 0
    for req, q, kv in zip(batch.requests, batch.num_q_tokens, batch.num_kv_tokens):
        c = kv - q
        ids.append(getattr(req, "id", -1))
        idx.append(getattr(req, "index", -1))
        charged.append(q)
        ctx.append(c)
        if req.is_prefill_complete:
            planned = getattr(req, "planned", None)
            g, a = planned if planned is not None else (q - 1, 0)
            dec.append(True)
            gs.append(g)
            acc.append(a)
            guesses_total += g
            accepted_total += a
            dq.append(q)
            dctx.append(c)
            dc.append(getattr(req, "catchup_tokens", 1))
            dp.append(getattr(req, "previous_q_tokens", 1))
            rows += q
            if q > 1:
                verifying += 1
        else:
            dec.append(False)
            gs.append(0)
            acc.append(0)
            prefill_tokens += q
            pf.append((c, q))
            if kv >= req.num_prefill_tokens:  # the chunk completes the prompt: its last position needs logits
                rows += 1
    num_tokens = batch.total_num_q_tokens
    comp = StepComposition(num_tokens, dq, dctx, pf, dc, dp, drafter_sync)
    return StepPlan(k, drafter_sync, tuple(ids), tuple(idx), tuple(dec), tuple(charged), tuple(ctx), tuple(gs),
                    tuple(acc), comp, num_tokens, len(dq), guesses_total, accepted_total, prefill_tokens,
                    sum(ctx), rows, verifying)


def merge_ranks(parts: Sequence[Optional[StepPlan]]) -> StepPlan:
    """A data-parallel group's step: its ranks' plans side by side (None: the rank runs the dummy batch).

    Columns are the ranks' in rank order, totals their sums, ``k`` the largest
    rank's, ``drafter_sync`` set when any rank's is; ``dp_parts`` keeps the parts.
    """
    live = [p for p in parts if p is not None]

    def cat(name):
        return tuple(x for p in live for x in getattr(p, name))

    def total(name):
        return sum(getattr(p, name) for p in live)

    def joined(name):
        return [x for p in live for x in getattr(p.composition, name)]

    sync = any(p.drafter_sync for p in live)
    comp = StepComposition(total("num_tokens"), joined("decode_q"), joined("decode_ctx"), joined("prefill"),
                           joined("decode_catchup"), joined("decode_prev_q"), sync)
    return StepPlan(max(p.k for p in live), sync, cat("request_ids"), cat("indices"), cat("decoding"),
                    cat("tokens_charged"), cat("context"), cat("guesses"), cat("accepted"), comp,
                    total("num_tokens"), total("num_decodes"), total("guesses_total"), total("accepted_total"),
                    total("prefill_tokens"), total("context_tokens"), total("logit_rows"), total("verifying"),
                    tuple(parts))


def idle_rank_plan(num_tokens: int = 1) -> StepPlan:
    """The step of a rank with no request: ``num_tokens`` tokens of no request, nothing to log or sample."""
    return StepPlan(0, False, (), (), (), (), (), (), (), StepComposition(num_tokens, [], [], []),
                    num_tokens, 0, 0, 0, 0, 0, 0, 0)


def attach(batch, plan: StepPlan) -> None:
    """Set ``batch``'s plan (once: a batch already planned is refused)."""
    if getattr(batch, PLAN_ATTRIBUTE, None) is not None:
        raise ValueError(f"batch {getattr(batch, 'id', '?')} already has a step plan")
    setattr(batch, PLAN_ATTRIBUTE, plan)


def plan_of(batch) -> StepPlan:
    """The plan attached to ``batch`` (a plan is its own), else one derived from its public fields."""
    if isinstance(batch, StepPlan):
        return batch
    plan = getattr(batch, PLAN_ATTRIBUTE, None)
    return plan if plan is not None else plan_batch(batch)
