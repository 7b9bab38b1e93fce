"""The speculative Sarathi replica scheduler (pipeline parallel 1).

Sarathi builds each step from running decodes first, then running prefills,
then new requests, under a token budget (``chunk_size``). This subclass changes
three things for a decoding request and leaves the rest to Sarathi:

* **tokens charged** — it asks for ``1 + guesses`` query tokens, where
  ``guesses = min(k, tokens_left − 1, budget_left − 1)`` (never below 0;
  ``budget_left`` keeps one token for each decode still to be placed, and a
  drafter's guesses also stop at its own context limit): near its end a
  request only guesses what it still needs, and guesses are shortened so
  verify tokens fit the budget, as vLLM's scheduler does. A
  decode always keeps its one token even when the budget is spent (Sarathi's
  rule, so plain decoding is never starved and k = 0 is exactly Sarathi).
* **lookahead KV** — a decoding request first holds blocks for
  ``processed + guesses + 1 + lookahead`` tokens, ``lookahead`` being vLLM's
  ``num_lookahead_tokens`` (k for a GPU drafter — eagle, eagle3, mtp,
  draft_model — whose next draft writes KV past the verified tokens; 0 for
  ngram, suffix, medusa, fixed; vLLM 0.33 ``vllm/config/vllm.py:625-652`` and
  ``allocate_slots`` in ``vllm/v1/core/sched/scheduler.py:914-918``). A request
  with neither guesses nor lookahead keeps Sarathi's rule; when the blocks don't
  fit, Sarathi's preempt-by-recompute path runs as usual.
* **per-batch-size k** — with a schedule (vLLM's
  ``num_speculative_tokens_per_batch_size``, :mod:`vidur_specdec.speculation.schedule`)
  the k of a step's guesses is looked up by the number of requests scheduled
  in the previous step, prefills included: vLLM picks k in ``schedule()``
  from ``len(num_scheduled_tokens)`` and the drafter proposes that many
  guesses after the step's forward, to be verified in the next step. The
  first step uses the static k (vLLM: no request scheduled -> static k).
  Lookahead KV stays sized by the static maximum k, as in vLLM. A step whose
  scheduled k is 0 is marked (the step plan's ``drafter_sync``) so a GPU drafter still pays
  its first pass (vLLM keeps the drafter's KV in sync at k = 0).
* **tokens advanced** — each decoding request in the new batch draws its
  accepted guesses from its own acceptance source (a seeded stream, or its
  trace line at its output position) and is told ``(guesses, accepted)``;
  :class:`~vidur_specdec.engine.reference.request.SpecRequest` then advances by ``accepted + 1``.
* **the step plan** — the formed step (per request: tokens charged, context,
  guesses, accepted; the step's k and drafter-sync flag) is written once into a
  :class:`~vidur_specdec.engine.reference.step_plan.StepPlan` attached to the batch
  (:func:`~vidur_specdec.engine.reference.step_plan.attach`), which the predictor and the
  step recorders read.
* **proposals that may be empty or short** — with a proposal model
  (``ngram``/``suffix``, :mod:`vidur_specdec.speculation.proposals`) or a
  trace line's ``proposed`` counts, a request makes 0..k guesses in a step.
  On ``engine.model_runner: v1`` (and always for a trace's ``proposed``) it is
  charged ``1 + proposed`` and one without a proposal decodes plainly: one
  token, no lookahead KV, no acceptance drawn. On v2 a request without a
  match is still charged k + 1 (vLLM fills the slots) and accepts nothing.
* **state pages** — a hybrid model's request holds ``state_blocks`` blocks of linear-attention
  state beside its KV blocks while it runs (vLLM's hybrid KV cache manager,
  :mod:`vidur_specdec.costs.block_pool`): a new (or restarted) request needs its prompt's
  blocks and its state pages above the watermark; the pages are taken with its first blocks,
  counted in ``_num_allocated_blocks`` but not in the allocation map (which holds its KV
  blocks, as Sarathi's decode rule reads it), and freed with it.
* **token trees** — with ``tree_nodes`` N set, a request that guesses drafts
  the whole tree: it is charged N + 1 query tokens (or decodes plainly when
  the budget lacks room), and its accepted guesses are the accepted path's
  depth, capped at the tokens it still needs.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import ceil
from typing import Any, Dict, List, Optional, Tuple

from vidur.config import SarathiSchedulerConfig
from vidur.scheduler.replica_scheduler.replica_scheduler_registry import ReplicaSchedulerRegistry
from vidur.scheduler.replica_scheduler.sarathi_replica_scheduler import SarathiReplicaScheduler
from vidur.types import BaseIntEnum

from vidur_specdec.engine.reference.step_plan import attach, plan_batch
from vidur_specdec.speculation.schedule import KSchedule


class SpecDecSchedulerType(BaseIntEnum):
    """Registry keys of this project (values >= 100 never collide with Vidur's)."""

    SPEC_SARATHI = 100


@dataclass
class SpecSarathiSchedulerConfig(SarathiSchedulerConfig):
    """Sarathi's config plus k and the acceptance model (None: no speculation)."""

    num_speculative_tokens: int = 0
    acceptance: Any = None  # vidur_specdec.speculation.acceptance.AcceptanceModel or acceptance_trace.TraceAcceptance
    tree_nodes: Optional[int] = None  # a token tree's node count: every step with guesses charges all of them
    max_draft_context: Optional[int] = None  # the drafter's max_model_len (tokens), if a drafter proposes
    k_schedule: Optional[List[Tuple[int, int, int]]] = None  # [(lo, hi, k)], vLLM's per-batch-size schedule
    proposals: Any = None  # vidur_specdec.speculation.proposals.ProposalModel (ngram/suffix), None: always k
    num_lookahead_tokens: int = 0  # KV slots past 1 + guesses (vLLM: k for eagle/eagle3/mtp/draft_model, else 0)
    drafter_sync: bool = False  # a GPU drafter runs its first pass on steps whose scheduled k is 0
    state_blocks: int = 0  # blocks a running request holds for a hybrid model's linear-attention state

    @staticmethod
    def get_type():
        return SpecDecSchedulerType.SPEC_SARATHI


class SpecSarathiReplicaScheduler(SarathiReplicaScheduler):
    """Sarathi with verify steps: charges 1 + guesses, advances accepted + 1."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        cfg: SpecSarathiSchedulerConfig = self._config
        self._acceptance = cfg.acceptance
        self._k_max = cfg.num_speculative_tokens if cfg.acceptance is not None else 0
        self._k = self._k_max  # k of the step being built
        self._schedule = (KSchedule(cfg.k_schedule, self._k_max, cfg.batch_size_cap)
                          if cfg.k_schedule and self._k_max > 0 else None)
        self._max_draft_context = cfg.max_draft_context
        self._tree_nodes = cfg.tree_nodes if cfg.acceptance is not None else None
        self._reserve: Dict[int, int] = {}  # request id -> tokens past processed + 1 its KV is reserved for
        self._lookahead = cfg.num_lookahead_tokens if cfg.acceptance is not None else 0
        self._drafter_sync = bool(cfg.drafter_sync) and cfg.acceptance is not None
        self._decodes_to_place = 0  # decodes of the step being built not yet given their tokens
        self._proposals = cfg.proposals if cfg.acceptance is not None else None
        self._charge_empty = self._proposals is not None and self._proposals.runner == "v2"
        self._no_proposal: set = set()  # request ids of the step being built whose proposer made no guess
        self._state_blocks = int(cfg.state_blocks)

    # ------------------------------------------------------------------ state pages (hybrid models)
    def allocate(self, request_id: int, num_blocks: int) -> None:
        """``num_blocks`` more KV blocks; a request's first ones come with its state pages (hybrid models)."""
        new = request_id not in self._allocation_map
        super().allocate(request_id, num_blocks)
        if new and self._state_blocks:
            self._num_allocated_blocks += self._state_blocks

    def free(self, *request_ids) -> None:
        super().free(*request_ids)
        self._num_allocated_blocks -= self._state_blocks * len(request_ids)

    @property
    def state_blocks(self) -> int:
        """Blocks each admitted request holds for a hybrid model's linear-attention state (0: none)."""
        return self._state_blocks

    # ------------------------------------------------------------------ tokens charged
    def _wanted_guesses(self, request, k: Optional[int] = None) -> int:
        """Guesses with an unlimited budget: min(k, tokens left − 1, drafter context left).

        With a token tree a request drafts the whole tree (N nodes) or nothing;
        its accepted depth is capped at the tokens it still needs. ``k`` None is
        the step's k (a per-batch-size schedule's, else the static one).
        """
        processed = request.num_processed_tokens
        left = request.total_tokens - processed - 1
        if self._tree_nodes is not None:
            return self._tree_nodes if left >= 1 else 0
        k = self._k if k is None else k
        wanted = min(k, left)
        proposed = self._proposed(request, k)
        if proposed is not None and proposed < k:
            if proposed == 0:
                self._no_proposal.add(request.id)  # accepts nothing; no acceptance drawn
            if not (self._charge_empty and not self._from_trace(request)):
                wanted = min(wanted, proposed)  # v1 (or a trace): charged only what was proposed
        if self._max_draft_context is not None:  # the drafter stops at its own context limit (as vLLM)
            wanted = min(wanted, self._max_draft_context - processed)
        return max(0, wanted)

    def _source(self, request):
        """The request's acceptance source (set on first use)."""
        if request.acceptance is None and self._acceptance is not None:
            request.acceptance = self._acceptance.for_request(request)
        return request.acceptance

    def _from_trace(self, request) -> bool:
        src = self._source(request)
        return src is not None and getattr(src, "proposed_at", None) is not None \
            and src.proposed_at(request.output_position) is not None

    def _proposed(self, request, k: int) -> Optional[int]:
        """Guesses the proposer makes for the request this step (None: k, a fixed-k proposer)."""
        src = self._source(request)
        if src is not None and getattr(src, "proposed_at", None) is not None:
            p = src.proposed_at(request.output_position)
            if p is not None:
                return min(k, p)
        if self._proposals is None:
            return None
        if request.proposals is None:
            request.proposals = self._proposals.for_request(request)
        return request.proposals.guesses(request.decode_steps, k, request.num_processed_tokens)

    def _get_request_next_num_q_tokens(self, request, num_batch_tokens: int) -> int:
        if not self._is_prefill_complete(request):
            return super()._get_request_next_num_q_tokens(request, num_batch_tokens)
        # keep one token of the budget for every decode still to be placed in this step
        self._decodes_to_place = max(0, self._decodes_to_place - 1)
        budget_left = self._config.chunk_size - num_batch_tokens - self._decodes_to_place
        guesses = max(0, min(self._wanted_guesses(request), budget_left - 1))
        if self._tree_nodes is not None and guesses < self._tree_nodes:
            guesses = 0  # a tree is not cut to fit the budget: the request decodes plainly this step
        # KV for this step's guesses plus vLLM's lookahead slots (sized by the static k, schedule or not)
        self._reserve[request.id] = guesses + self._lookahead
        return 1 + guesses

    # ------------------------------------------------------------------ lookahead KV
    def _lookahead_blocks(self, request) -> int:
        """Blocks to add so the request holds ``processed + 1 + guesses + lookahead`` tokens."""
        tokens = request.num_processed_tokens + self._reserve[request.id] + 1
        return max(0, ceil(tokens / self._cache_config.block_size) - self._allocation_map[request.id])

    def _speculating(self, request) -> bool:
        return request.id in self._allocation_map and self._reserve.get(request.id, 0) > 0

    def _can_allocate_request(self, request) -> bool:
        if self._state_blocks and request.id not in self._allocation_map:  # its prompt's blocks and its state
            need = ceil(request.num_prefill_tokens / self._cache_config.block_size) + self._state_blocks
            return self._cache_config.num_blocks - self._num_allocated_blocks - need >= self._watermark_blocks
        if not self._speculating(request):
            return super()._can_allocate_request(request)
        free = self._cache_config.num_blocks - self._num_allocated_blocks
        return free >= max(1, self._lookahead_blocks(request))

    def _allocate_request(self, request) -> None:
        if not self._speculating(request):
            return super()._allocate_request(request)
        blocks = self._lookahead_blocks(request)
        if blocks:
            self.allocate(request.id, blocks)

    # ------------------------------------------------------------------ tokens advanced
    def _get_next_batch(self, time: float):
        self._reserve.clear()
        self._no_proposal.clear()
        self._decodes_to_place = min(
            self._max_micro_batch_size,
            sum(1 for r in self._preempted_requests if self._is_prefill_complete(r)),
        )
        batch = super()._get_next_batch(time)
        if batch is None:
            return None
        k = self._k  # the k this step's guesses were drawn with (steps.csv column k)
        # a scheduled k = 0 step: vLLM's GPU drafter still runs its first pass to keep its KV in sync
        sync = self._drafter_sync and self._schedule is not None and k == 0
        if self._schedule is not None:  # the next step's k, from this step's scheduled requests (vLLM)
            self._k = self._schedule.k_for(len(batch.requests))
        acc = self._acceptance
        for request, q in zip(batch.requests, batch.num_q_tokens):
            if not request.is_prefill_complete:
                continue
            guesses = q - 1
            accepted = 0
            if acc is not None and request.id in self._no_proposal:
                pass  # no proposal (or v2's filled slots without a match): nothing drawn, nothing accepted
            elif acc is not None:
                if request.acceptance is None:
                    request.acceptance = acc.for_request(request)
                # one draw per decode step; a tree keeps an accepted path of depth <= tokens still needed
                limit = guesses if self._tree_nodes is None else min(guesses, request.total_tokens
                                                                      - request.num_processed_tokens - 1)
                accepted = request.acceptance.next(limit, request.output_position)
            request.plan_verify(guesses, accepted)
        attach(batch, plan_batch(batch, k, sync, self._draft_recompute(batch)))
        return batch

    def _draft_recompute(self, batch) -> tuple:
        """Tokens of each prompt whose draft KV this step recomputes (a decode instance's; none here)."""
        return ()


ReplicaSchedulerRegistry.register(SpecDecSchedulerType.SPEC_SARATHI, SpecSarathiReplicaScheduler)
