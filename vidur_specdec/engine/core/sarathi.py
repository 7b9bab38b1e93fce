"""The speculative Sarathi schedule, written once over the engine core's request state.

One :class:`SarathiRank` is one vLLM engine core's scheduler (a replica's, or
one data-parallel rank's): its waiting queue, its running requests, its KV
blocks and its token budget. :meth:`SarathiRank.next_step` forms the next step
exactly as the Vidur-backed reference does (Vidur 0.0.26's
``SarathiReplicaScheduler._get_next_batch`` with this project's speculative
changes, :mod:`vidur_specdec.engine.scheduler`, whose docstring states the
rules; ``tests/test_engine_core.py`` holds the two to identical tables):

1. running requests, oldest first: a decoding request is charged ``1 +
   guesses`` (guesses bounded by k, the tokens it still needs, the budget left
   after one token for each decode still to be placed, and a drafter's context;
   a token tree all or nothing), and first holds KV blocks for ``processed + 1 +
   guesses + lookahead`` tokens; when the blocks do not fit, the newest running
   request is preempted by recompute (or this one, when none is left);
   running prefills continue their chunks within the budget;
2. waiting requests, first come first served, while ``max_num_seqs``, the micro-batch
   and the budget allow and their prompt's blocks fit above the watermark;
3. every decoding request of the step draws its accepted guesses from its own
   acceptance source; the step's k comes from the per-batch-size schedule
   looked up by the previous step's request count.

:meth:`SarathiRank.end_step` advances every request of a finished step by its
tokens advanced, frees a completed request's blocks and puts the others back
among the running. Token counts are tokens, KV is counted in blocks.
"""

from __future__ import annotations

from math import ceil
from typing import List, Optional

from vidur_specdec.pricing.plan import build_plan
from vidur_specdec.speculation.schedule import KSchedule


class Step:
    """A formed step: its requests, their tokens charged and the step plan the pricer reads."""

    __slots__ = ("requests", "q", "plan", "rank", "parts")

    def __init__(self, requests: list, q: list, plan, rank=None, parts=None) -> None:
        self.requests = requests
        self.q = q
        self.plan = plan
        self.rank = rank
        self.parts = parts  # a data-parallel group's step: each rank's Step (None: its dummy batch)


class SarathiRank:
    """One scheduler's state and the speculative Sarathi schedule over it (module docstring).

    ``sched``: the run's :class:`~vidur_specdec.engine.scheduler.SpecSarathiSchedulerConfig` (token budget,
    ``max_num_seqs``, k, acceptance, tree, proposals, lookahead); ``num_blocks``/``block_size``: the KV cache
    (blocks, tokens per block); ``watermark_fraction``: blocks a new request must leave free; ``num_stages``:
    pipeline stages (the micro-batch is ``max_num_seqs / stages``).
    """

    def __init__(self, sched, num_blocks: int, block_size: int, watermark_fraction: float, num_stages: int = 1) -> None:
        self.chunk_size = sched.chunk_size
        self.batch_size_cap = sched.batch_size_cap
        self.max_micro_batch = sched.batch_size_cap // num_stages
        self.num_blocks = int(num_blocks)
        self.block_size = int(block_size)
        self.watermark_blocks = int(watermark_fraction * self.num_blocks)
        self.num_stages = num_stages
        self.queue: List = []  # waiting: new arrivals, and preempted requests at the front
        self.running: List = []  # scheduled before, not completed, not in a step in flight (oldest first)
        self.alloc = {}  # request id -> KV blocks it holds
        self.allocated = 0  # blocks held in all
        acc = sched.acceptance
        self.acceptance = acc
        self.k_max = sched.num_speculative_tokens if acc is not None else 0
        self.k = self.k_max  # k of the step being built
        self.schedule = (KSchedule(sched.k_schedule, self.k_max, sched.batch_size_cap)
                         if sched.k_schedule and self.k_max > 0 else None)
        self.max_draft_context = sched.max_draft_context
        self.tree_nodes = sched.tree_nodes if acc is not None else None
        self.lookahead = sched.num_lookahead_tokens if acc is not None else 0
        self.drafter_sync = bool(sched.drafter_sync) and acc is not None
        self.proposal_model = sched.proposals if acc is not None else None
        self.charge_empty = self.proposal_model is not None and self.proposal_model.runner == "v2"
        self.reserve = {}  # request id -> tokens past processed + 1 its KV is held for (this step)
        self.no_proposal = set()  # request ids of this step whose proposer made no guess
        self.recompute_draft = False  # a decode instance re-running its drafter over loaded prompts (pools)

    # ------------------------------------------------------------------ the queue
    def add(self, request) -> None:
        self.queue.append(request)

    @property
    def num_pending(self) -> int:
        return len(self.queue)

    def is_empty(self) -> bool:
        return not self.queue and not self.alloc

    # ------------------------------------------------------------------ KV blocks
    def allocate(self, rid: int, blocks: int) -> None:
        self.allocated += blocks
        self.alloc[rid] = self.alloc.get(rid, 0) + blocks

    def free(self, rid: int) -> None:
        self.allocated -= self.alloc.pop(rid)

    def _lookahead_blocks(self, r) -> int:
        tokens = r.processed + self.reserve[r.id] + 1
        return max(0, ceil(tokens / self.block_size) - self.alloc[r.id])

    def can_allocate(self, r) -> bool:
        rid = r.id
        if rid not in self.alloc:  # a new (or restarted) request: its prompt's blocks above the watermark
            return self.num_blocks - self.allocated - ceil(r.prefill_tokens / self.block_size) >= self.watermark_blocks
        if self.reserve.get(rid, 0) > 0:  # speculating: its guesses' and lookahead's blocks
            return self.num_blocks - self.allocated >= max(1, self._lookahead_blocks(r))
        return self.num_blocks - self.allocated >= 1  # vLLM needs at least one free block

    def _allocate_for(self, r) -> None:
        rid = r.id
        if rid not in self.alloc:
            self.allocate(rid, ceil(r.prefill_tokens / self.block_size))
            return
        if self.reserve.get(rid, 0) > 0:
            blocks = self._lookahead_blocks(r)
            if blocks:
                self.allocate(rid, blocks)
            return
        if r.processed - self.alloc[rid] * self.block_size > 0:  # the one token past its blocks
            self.allocate(rid, 1)

    # ------------------------------------------------------------------ tokens charged
    def _proposed(self, r, k: int) -> Optional[int]:
        """Guesses the proposer makes for ``r`` this step (None: k, a fixed-k proposer)."""
        src = self._source(r)
        if src is not None and getattr(src, "proposed_at", None) is not None:
            p = src.proposed_at(r.processed - r.prompt_tokens)
            if p is not None:
                return min(k, p)
        if self.proposal_model is None:
            return None
        if r.proposals is None:
            r.proposals = self.proposal_model.for_request(r)
        return r.proposals.guesses(r.decode_steps, k, r.processed)

    def _source(self, r):
        if r.acceptance is None and self.acceptance is not None:
            r.acceptance = self.acceptance.for_request(r)
        return r.acceptance

    def _from_trace(self, r) -> bool:
        src = self._source(r)
        return src is not None and getattr(src, "proposed_at", None) is not None \
            and src.proposed_at(r.processed - r.prompt_tokens) is not None

    def _wanted_guesses(self, r) -> int:
        """Guesses with an unlimited budget: min(k, tokens left − 1, drafter context left)."""
        processed = r.processed
        left = r.total_tokens - processed - 1
        if self.tree_nodes is not None:
            return self.tree_nodes if left >= 1 else 0
        k = self.k
        wanted = min(k, left)
        if self.acceptance is not None:
            proposed = self._proposed(r, k)
            if proposed is not None and proposed < k:
                if proposed == 0:
                    self.no_proposal.add(r.id)  # accepts nothing; no acceptance drawn
                if not (self.charge_empty and not self._from_trace(r)):
                    wanted = min(wanted, proposed)  # v1 (or a trace): charged only what was proposed
        if self.max_draft_context is not None:
            wanted = min(wanted, self.max_draft_context - processed)
        return max(0, wanted)

    # ------------------------------------------------------------------ forming a step
    def next_step(self) -> Optional[Step]:
        """The next step (module docstring), or None when nothing can run; pops its requests from the queues."""
        reserve = self.reserve
        reserve.clear()
        self.no_proposal.clear()
        running = self.running
        cap = self.max_micro_batch
        decodes = sum(1 for r in running if r.prefill_complete)
        to_place = cap if decodes > cap else decodes
        chunk = self.chunk_size
        lookahead = self.lookahead
        tree = self.tree_nodes
        requests, qs, kvs, skipped, prefills = [], [], [], [], []
        total = 0
        while running:
            if len(requests) == cap:
                break
            r = running.pop(0)
            if not r.prefill_complete:
                prefills.append(r)
                continue
            # tokens charged: 1 + guesses, one token of the budget kept for every decode still to be placed
            to_place = to_place - 1 if to_place > 0 else 0
            budget_left = chunk - total - to_place
            guesses = self._wanted_guesses(r) if self.k_max or tree is not None else 0
            if guesses > budget_left - 1:
                guesses = budget_left - 1
            if guesses < 0:
                guesses = 0
            if tree is not None and guesses < tree:
                guesses = 0  # a tree is not cut to fit the budget: the request decodes plainly this step
            reserve[r.id] = guesses + lookahead
            q = 1 + guesses
            while not self.can_allocate(r):
                if running:
                    victim = running.pop()
                    victim.restart()
                    self.free(victim.id)
                    self.queue.insert(0, victim)
                else:
                    r.restart()
                    self.free(r.id)
                    self.queue.insert(0, r)
                    break
            else:
                self._allocate_for(r)
                total += q
                requests.append(r)
                qs.append(q)
                kvs.append(r.processed + q)
        for r in prefills:
            q = min(r.prefill_tokens - r.processed, chunk - total)
            if q <= 0:
                skipped.append(r)
                continue
            total += q
            requests.append(r)
            qs.append(q)
            kvs.append(r.processed + q)
        if skipped or running:
            running = skipped + running
            running.sort(key=_arrived)
        self.running = running
        queue = self.queue
        cap_seqs = self.batch_size_cap
        while queue:
            if len(self.alloc) == cap_seqs or len(requests) == cap:
                break
            r = queue[0]
            if not self.can_allocate(r):
                break
            q = min(r.prefill_tokens - r.processed, chunk - total) if not r.prefill_complete else 1
            if q <= 0:
                break
            queue.pop(0)
            self._allocate_for(r)
            total += q
            requests.append(r)
            qs.append(q)
            kvs.append(r.processed + q)
        if not requests:
            return None
        return Step(requests, qs, self._plan(requests, qs, kvs))

    def _plan(self, requests, qs, kvs):
        """Draw each decoding request's accepted guesses and write the step's plan."""
        k = self.k  # the k this step's guesses were drawn with (steps.csv column k)
        # a scheduled k = 0 step: vLLM's GPU drafter still runs its first pass to keep its KV in sync
        sync = self.drafter_sync and self.schedule is not None and k == 0
        if self.schedule is not None:  # the next step's k, from this step's scheduled requests (vLLM)
            self.k = self.schedule.k_for(len(requests))
        acc = self.acceptance
        tree = self.tree_nodes
        no_proposal = self.no_proposal
        rows = []
        for r, q, kv in zip(requests, qs, kvs):
            if not r.prefill_complete:
                rows.append((r.id, r.index, False, q, kv - q, 0, 0, 1, 1, kv >= r.prefill_tokens))
                continue
            guesses = q - 1
            accepted = 0
            if acc is not None and r.id not in no_proposal:
                if r.acceptance is None:
                    r.acceptance = acc.for_request(r)
                # one draw per decode step; a tree keeps an accepted path of depth <= tokens still needed
                limit = guesses if tree is None else min(guesses, r.total_tokens - r.processed - 1)
                accepted = r.acceptance.next(limit, r.processed - r.prompt_tokens)
            r.planned_guesses = guesses
            r.planned_accepted = accepted
            rows.append((r.id, r.index, True, q, kv - q, guesses, accepted, r.catchup_tokens, r.previous_q_tokens,
                         False))
        return build_plan(k, sync, rows, self._draft_recompute(requests))

    def _draft_recompute(self, requests) -> tuple:
        """Tokens each loaded prompt's drafter pass covers in this step, on a decode instance whose draft KV was
        not moved (``disaggregation.draft_kv: recompute``): the prompt but its last token."""
        if not self.recompute_draft:
            return ()
        return tuple(r.prompt_tokens - 1 for r in requests
                     if r.kv_loaded and not r.prefill_complete and r.num_restarts == 0
                     and r.processed == r.prompt_tokens - 1 and r.prompt_tokens > 1)

    # ------------------------------------------------------------------ a step ends
    def end_step(self, step: Step, time: float) -> list:
        """Advance the step's requests at ``time`` (s); returns them (completed ones have freed their KV)."""
        for r, q in zip(step.requests, step.q):
            r.advance(time, q)
        self.release(step)
        return step.requests

    def release(self, step: Step) -> None:
        """The step's requests leave it: completed ones free their blocks, the others run on."""
        for r in step.requests:
            if r.completed:
                self.free(r.id)
            else:
                self.running.append(r)


def _arrived(r) -> float:
    return r.arrived_at
