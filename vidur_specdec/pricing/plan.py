"""The step plan: what one engine step computes, in one immutable record the step pricer reads.

A scheduler (the engine core's, or the Vidur-backed one) decides, for each step
it forms, every request's **tokens charged** (query tokens: ``k``-bounded
``guesses + 1`` for a decoding request, the chunk for a prefill), its
**guesses** and its **accepted** guesses (tokens advanced: ``accepted + 1``),
and the step's flags (the ``k`` its guesses were drawn with, whether a GPU
drafter runs its sync pass at scheduled k = 0, a data-parallel group's per-rank
parts, the prompts whose draft KV a decode instance recomputes). It writes all
of it once into a :class:`StepPlan`; the step pricer
(:class:`~vidur_specdec.pricing.pricer.StepPricer`), the step recorders and
``tune``/``validate`` read only it. Plans are also built without a scheduler:
:func:`decode_plan` (``tune``'s uniform decode steps), :func:`plan_from_lists`
and :func:`plan_from_sums` (a step log's sums, ``validate``).

Both records are tuples (immutable, cheap to build: the engine core makes one
per simulated step). Units: every count is tokens unless named otherwise;
``context`` is the tokens a request had in its KV cache before the step.
"""

from __future__ import annotations

from itertools import chain
from typing import List, NamedTuple, Optional, Sequence, Tuple


class StepComposition(NamedTuple):
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
    decode_catchup: List[int] = []
    decode_prev_q: List[int] = []
    drafter_sync: bool = False

    @property
    def max_guesses(self) -> int:
        q = self.decode_q
        return max(q) - 1 if q else 0


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


class StepPlan(NamedTuple):
    """One engine step as the scheduler planned it: per-request columns (decoding requests first, then
    prefill chunks, as Sarathi forms a step; a data-parallel group's: its ranks' side by side) and flags.

    Columns (one entry per request): ``request_ids``, ``indices`` (workload
    positions), ``decoding`` (prefill complete: a decode or verify step; else a
    prefill chunk), ``tokens_charged``, ``context``, ``guesses``, ``accepted``.
    Flags: ``k`` (the k the step's guesses were drawn with, steps.csv ``k``; a
    data-parallel group's: the largest of its ranks'), ``drafter_sync``
    (scheduled k is 0 under a per-batch-size schedule and a GPU drafter still
    runs its first pass), ``dp_parts`` (a data-parallel group's step: each
    rank's plan, None for a rank that runs vLLM's dummy batch; None otherwise),
    ``draft_recompute`` (tokens of each loaded prompt whose draft KV a decode
    instance recomputes in this step: its drafter runs over them).
    Totals, in tokens unless named: ``num_tokens`` (all charged), ``num_decodes``
    (requests), ``guesses_total``, ``accepted_total``, ``prefill_tokens``,
    ``context_tokens``, ``logit_rows`` (positions that need logits),
    ``verifying`` (decoding requests with guesses). The plan is also the step in
    :class:`StepComposition`'s shape (``decode_q``, ``decode_ctx``, ``prefill``,
    ``decode_catchup``, ``decode_prev_q``, ``max_guesses``; ``composition`` is the
    plan itself), which the proposers and the verify-cost policies read (lists:
    read only).
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
    num_tokens: int
    num_decodes: int
    guesses_total: int
    accepted_total: int
    prefill_tokens: int
    context_tokens: int
    logit_rows: int
    verifying: int
    decode_q: List[int]
    decode_ctx: List[int]
    prefill: List[Tuple[int, int]]
    decode_catchup: List[int]
    decode_prev_q: List[int]
    dp_parts: Optional[Tuple[Optional["StepPlan"], ...]] = None
    draft_recompute: Tuple[int, ...] = ()

    @property
    def composition(self) -> "StepPlan":
        """The step in :class:`StepComposition`'s shape: the plan itself."""
        return self

    @property
    def max_guesses(self) -> int:
        q = self.decode_q
        return max(q) - 1 if q else 0

    @property
    def num_requests(self) -> int:
        """Requests in the step (a data-parallel group: on all its ranks)."""
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


class DecodePart(NamedTuple):
    """The decoding requests of a step, as columns in step order (lists, one entry per request).

    ``catchup`` / ``previous_q``: each request's tokens advanced / charged in its previous decode step
    (1 when unknown).
    """

    ids: List[int]
    indices: List[int]
    charged: List[int]  # tokens charged: 1 + guesses
    context: List[int]
    guesses: List[int]
    accepted: List[int]
    catchup: List[int]
    previous_q: List[int]


class PrefillPart(NamedTuple):
    """The prefill chunks of a step, as columns in step order; ``completes``: the chunk reaches its prompt's end
    (its last position needs logits)."""

    ids: List[int]
    indices: List[int]
    chunks: List[int]
    context: List[int]
    completes: List[bool]


NO_PREFILL = PrefillPart([], [], [], [], [])
# ``from_fields(Record, fields)``: a NamedTuple record from all its fields at once, without the generated
# constructor's argument handling (the engine core builds a StepPlan and a DecodePart per simulated step); every
# field is passed, so the record is the same
from_fields = tuple.__new__


def build_plan(k: int, drafter_sync: bool, dec: DecodePart, pre: PrefillPart = NO_PREFILL,
               draft_recompute: Tuple[int, ...] = ()) -> StepPlan:
    """The plan of a step whose decoding requests (``dec``) come first and its prefill chunks (``pre``) after,
    the order every Sarathi step is formed in (:mod:`vidur_specdec.engine.core.sarathi`). The one constructor
    of a scheduled step's plan: the engine core, the Vidur-backed scheduler and the builders below call it."""
    nd, npf = len(dec.ids), len(pre.ids)
    dq = dec.charged
    d_tokens = sum(dq)
    p_tokens = sum(pre.chunks)
    num_tokens = d_tokens + p_tokens
    if npf:
        zeros = (0,) * npf
        return from_fields(StepPlan, (
            k, drafter_sync, tuple(dec.ids + pre.ids), tuple(dec.indices + pre.indices),
            (True,) * nd + (False,) * npf, tuple(dq + pre.chunks), tuple(dec.context + pre.context),
            tuple(dec.guesses) + zeros, tuple(dec.accepted) + zeros, num_tokens, nd,
            sum(dec.guesses), sum(dec.accepted), p_tokens, sum(dec.context) + sum(pre.context),
            d_tokens + sum(pre.completes), nd - dq.count(1), dq, dec.context,
            list(zip(pre.context, pre.chunks)), dec.catchup, dec.previous_q, None, tuple(draft_recompute)))
    return from_fields(StepPlan, (
        k, drafter_sync, tuple(dec.ids), tuple(dec.indices), (True,) * nd, tuple(dq),
        tuple(dec.context), tuple(dec.guesses), tuple(dec.accepted), num_tokens, nd,
        sum(dec.guesses), sum(dec.accepted), 0, sum(dec.context), d_tokens, nd - dq.count(1), dq,
        dec.context, [], dec.catchup, dec.previous_q, None, tuple(draft_recompute)))


def merge_ranks(parts: Sequence[Optional[StepPlan]]) -> StepPlan:
    """A data-parallel group's step: its ranks' plans side by side (None: the rank runs the dummy batch).

    Columns are the ranks' in rank order, totals their sums, ``k`` the largest
    rank's, ``drafter_sync`` set when any rank's is; ``dp_parts`` keeps the parts.
    """
    live = [p for p in parts if p is not None]

    def cat(name):
        return tuple(chain.from_iterable([getattr(p, name) for p in live]))

    def total(name):
        return sum([getattr(p, name) for p in live])

    def joined(name):
        return list(chain.from_iterable([getattr(p, name) for p in live]))

    sync = any(p.drafter_sync for p in live)
    return StepPlan(max(p.k for p in live), sync, cat("request_ids"), cat("indices"), cat("decoding"),
                    cat("tokens_charged"), cat("context"), cat("guesses"), cat("accepted"),
                    total("num_tokens"), total("num_decodes"), total("guesses_total"), total("accepted_total"),
                    total("prefill_tokens"), total("context_tokens"), total("logit_rows"), total("verifying"),
                    joined("decode_q"), joined("decode_ctx"), joined("prefill"), joined("decode_catchup"),
                    joined("decode_prev_q"), tuple(parts), cat("draft_recompute"))


def idle_rank_plan(num_tokens: int = 1) -> StepPlan:
    """The step of a rank with no request: ``num_tokens`` tokens of no request, nothing to log or sample."""
    return StepPlan(0, False, (), (), (), (), (), (), (), num_tokens, 0, 0, 0, 0, 0, 0, 0, [], [], [], [], [])


def decode_plan(batch_size: int, k: int, context: int, ranks: int = 1) -> StepPlan:
    """A step of ``batch_size`` decoding requests, each charged ``k + 1`` tokens at ``context`` tokens of KV
    (none accepted; a request's previous step charged and advanced 1); ``ranks`` > 1: every rank of a
    data-parallel group runs that same step (``tune``'s per-rank batch size)."""
    n = batch_size
    plan = build_plan(k, False, DecodePart(list(range(n)), [-1] * n, [k + 1] * n, [context] * n, [k] * n, [0] * n,
                                           [1] * n, [1] * n))
    return merge_ranks([plan] * ranks) if ranks > 1 else plan


def plan_from_lists(decode_q: Sequence[int], decode_ctx: Sequence[int], prefill: Sequence[Tuple[int, int]],
                    k: Optional[int] = None, num_tokens: Optional[int] = None) -> StepPlan:
    """A step from its decoding requests' tokens charged and context and its prefill chunks
    ``(context before, chunk)``; every chunk is taken to complete its prompt (one logits row each);
    ``k`` None: the largest guesses in the step; ``num_tokens`` the step's token count when it is not
    the sum of its parts (a step log's padded batch: the linear layers run on it)."""
    n, m = len(decode_q), len(prefill)
    dec = DecodePart(list(range(n)), [-1] * n, list(decode_q), list(decode_ctx), [q - 1 for q in decode_q], [0] * n,
                     [1] * n, [1] * n)
    pre = PrefillPart(list(range(n, n + m)), [-1] * m, [c for _, c in prefill], [kv for kv, _ in prefill], [True] * m)
    plan = build_plan(max((q - 1 for q in decode_q), default=0) if k is None else k, False, dec, pre)
    if num_tokens is not None and int(num_tokens) != plan.num_tokens:
        n = int(num_tokens)
        plan = plan._replace(num_tokens=n)
    return plan


def _spread(total: int, n: int) -> List[int]:
    """``total`` split into ``n`` integers that differ by at most one."""
    if n <= 0:
        return []
    base, rem = divmod(int(total), n)
    return [base + 1] * rem + [base] * (n - rem)


def split_sums(num_reqs: int, decode_reqs: int, spec_tokens: int, prefill_tokens: int,
               ctx_tokens: int) -> Tuple[List[int], List[int], List[Tuple[int, int]]]:
    """A composition ``(decode_q, decode_ctx, prefill)`` rebuilt from a step log's sums.

    The approximation and the direction of its error (docs/validation.md):

    * guesses are spread evenly over the decoding requests (integers differing
      by at most one). Exact for ``shared_kv``; ``per_token`` attention is convex
      in a request's guesses, so an uneven real split costs a little more than
      predicted (under-prediction);
    * context (summed over all requests) is given to the decoding requests,
      evenly; prefill chunks are taken to start at context 0 (a fresh prompt)
      unless no request decodes; a chunk that continues a long prompt moves its
      context onto the decodes (decode attention over-predicted, that chunk's
      prefill attention under-predicted);
    * prefill tokens are spread evenly over the requests that do not decode;
      prefill attention grows faster than linearly with chunk length, so uneven
      chunks cost more than predicted (under-prediction).
    """
    d = int(decode_reqs)
    prefill_reqs = max(int(num_reqs) - d, 1 if prefill_tokens > 0 else 0)
    decode_q = [1 + g for g in _spread(spec_tokens, d)]
    chunks = [c for c in _spread(prefill_tokens, prefill_reqs) if c > 0]
    if d > 0:
        decode_ctx = _spread(ctx_tokens, d)
        prefill = [(0, c) for c in chunks]
    else:
        decode_ctx = []
        prefill = list(zip(_spread(ctx_tokens, len(chunks)), chunks)) if chunks else []
    return decode_q, decode_ctx, prefill


def plan_from_sums(num_reqs: int, decode_reqs: int, spec_tokens: int, prefill_tokens: int, ctx_tokens: int,
                   k: Optional[int] = None, num_tokens: Optional[int] = None) -> StepPlan:
    """A step log's row (its sums) as a :class:`StepPlan`, by :func:`split_sums`."""
    return plan_from_lists(*split_sums(num_reqs, decode_reqs, spec_tokens, prefill_tokens, ctx_tokens), k=k,
                           num_tokens=num_tokens)
