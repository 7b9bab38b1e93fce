"""The speculative Sarathi schedule, written once over the engine core's request state.

One :class:`SarathiRank` is one vLLM engine core's scheduler (a replica's, or
one data-parallel rank's): its waiting queue, its running requests, its KV
blocks and its token budget. :meth:`SarathiRank.next_step` forms the next step
exactly as the Vidur-backed reference does (Vidur 0.0.26's
``SarathiReplicaScheduler._get_next_batch`` with this project's speculative
changes, :mod:`vidur_specdec.engine.reference.scheduler`, whose docstring states the
rules; ``tests/test_engine_core.py`` holds the two to identical tables):

1. running requests, oldest first: a decoding request is charged ``1 +
   guesses`` (guesses bounded by k, the tokens it still needs, the budget left
   after one token for each decode still to be placed, and a drafter's context;
   a token tree all or nothing), and first holds KV blocks for ``processed + 1 +
   guesses + lookahead`` tokens; when the blocks do not fit, the newest running
   request is preempted by recompute (or this one, when none is left);
   running prefills continue their chunks within the budget;
2. waiting requests, first come first served, while ``max_num_seqs``, the micro-batch
   and the budget allow and their prompt's blocks (with a hybrid model's state pages,
   ``state_blocks``) fit above the watermark;
3. every decoding request of the step draws its accepted guesses from its own
   acceptance source; the step's k comes from the per-batch-size schedule
   looked up by the previous step's request count.

:meth:`SarathiRank.end_step` advances every request of a finished step by its
tokens advanced, frees a completed request's blocks and puts the others back
among the running. Token counts are tokens, KV is counted in blocks. A hybrid model's
request holds ``state_blocks`` blocks of linear-attention state beside its KV blocks while it
runs (vLLM's hybrid KV cache manager, :mod:`vidur_specdec.costs.block_pool`): they are taken
with its first blocks (:meth:`SarathiRank.allocate`), counted in ``allocated`` but not in
``alloc`` (which holds its KV blocks), and freed with it, at completion or preemption.
"""

from __future__ import annotations

from math import ceil
from typing import List, Optional

from vidur_specdec.engine.core.request import advance_step
from vidur_specdec.pricing.plan import DecodePart, PrefillPart, build_plan, from_fields
from vidur_specdec.speculation.schedule import KSchedule


class Step:
    """A formed step: its requests (in the order of the plan's columns) and the step plan the pricer reads (their
    tokens charged, guesses and accepted guesses)."""

    __slots__ = ("requests", "plan", "rank", "parts")

    def __init__(self, requests: list, plan, rank=None, parts=None) -> None:
        self.requests = requests
        self.plan = plan
        self.rank = rank
        self.parts = parts  # a data-parallel group's step: each rank's Step (None: its dummy batch)


class SarathiRank:
    """One scheduler's state and the speculative Sarathi schedule over it (module docstring).

    ``sched``: the run's :class:`~vidur_specdec.engine.reference.scheduler.SpecSarathiSchedulerConfig` (token budget,
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
        self.allocated = 0  # blocks held in all (state pages included)
        self.state_blocks = int(getattr(sched, "state_blocks", 0))  # state pages of each admitted request
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
        self.trace = acc is not None and hasattr(acc, "line")  # an acceptance trace: its lines may give proposals
        self.proposes_less = self.proposal_model is not None or self.trace  # a request may guess fewer than k
        self.charge_empty = self.proposal_model is not None and self.proposal_model.runner == "v2"
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
        """``blocks`` more KV blocks for request ``rid``; its first ones come with its state pages."""
        held = self.alloc.get(rid)
        self.allocated += blocks if held is not None else blocks + self.state_blocks
        self.alloc[rid] = (held or 0) + blocks

    def free(self, rid: int) -> None:
        self.allocated -= self.alloc.pop(rid) + self.state_blocks

    def can_allocate(self, r) -> bool:
        """Whether a waiting request can start: a new (or restarted) one needs its prompt's blocks and its state
        pages above the watermark; one already holding blocks (a decode instance's loaded prompt) one free block
        (Sarathi's rule; a decoding request's blocks, guesses and lookahead included, are found in
        :meth:`next_step`)."""
        if r.id not in self.alloc:
            return self.num_blocks - self.allocated - ceil(r.prefill_tokens / self.block_size) \
                - self.state_blocks >= self.watermark_blocks
        return self.num_blocks - self.allocated >= 1

    def _allocate_new(self, r) -> None:
        self.allocate(r.id, ceil(r.prefill_tokens / self.block_size))

    # ------------------------------------------------------------------ tokens charged
    def _proposed(self, r, k: int) -> Optional[int]:
        """Guesses the proposer makes for ``r`` this step (None: k, a fixed-k proposer)."""
        if self.trace:
            p = self._source(r).proposed_at(r.processed - r.prompt_tokens)
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
        return self.trace and self._source(r).proposed_at(r.processed - r.prompt_tokens) is not None

    def _wanted_guesses(self, r) -> int:
        """Guesses with an unlimited budget: min(k, tokens left − 1, drafter context left)."""
        processed = r.processed
        left = r.total_tokens - processed - 1
        if self.tree_nodes is not None:
            return self.tree_nodes if left >= 1 else 0
        k = self.k
        wanted = k if k < left else left
        if self.proposes_less:
            proposed = self._proposed(r, k)
            if proposed is not None and proposed < k:
                if proposed == 0:
                    self.no_proposal.add(r.id)  # accepts nothing; no acceptance drawn
                if not (self.charge_empty and not self._from_trace(r)):
                    wanted = min(wanted, proposed)  # v1 (or a trace): charged only what was proposed
        if self.max_draft_context is not None:
            wanted = min(wanted, self.max_draft_context - processed)
        return wanted if wanted > 0 else 0

    # ------------------------------------------------------------------ forming a step
    def next_step(self) -> Optional[Step]:
        """The next step (module docstring), or None when nothing can run; pops its requests from the queues."""
        if self.no_proposal:
            self.no_proposal.clear()
        running = self.running
        cap = self.max_micro_batch
        chunk = self.chunk_size
        lookahead = self.lookahead
        tree = self.tree_nodes
        guessing = self.k_max > 0 or tree is not None
        k = self.k
        n_run = len(running)
        # decodes still to be placed, each keeping one token of the budget: only counted when the budget could
        # bind (every running request charged its most guesses + 1 would not fit); else no guess is ever cut
        to_place = 0
        if guessing and n_run * (1 + (k if tree is None or k > tree else tree)) > chunk:
            for r in running:
                if r.prefill_complete:
                    to_place += 1
            if to_place > cap:
                to_place = cap
        dec, pre = [], []  # the step's decoding requests and prefill chunks, in step order
        dq, pq = [], []  # their tokens charged
        skipped, prefills = [], []
        total = 0
        alloc = self.alloc
        bs = self.block_size
        # a guess count with no proposer, trace, drafter context or tree to cut it: min(k, tokens left - 1)
        plain = guessing and tree is None and not self.proposes_less and self.max_draft_context is None
        num_blocks = self.num_blocks
        free = num_blocks - self.allocated  # blocks free (kept here, written back after the decodes are placed)
        # the decoding requests' plan columns, their accepted guesses drawn as each is placed (rule 3: one draw
        # per decode step from the request's own source, so the order of draws across requests does not matter)
        acc = self.acceptance
        no_proposal = self.no_proposal
        ids, idx, ctx, gs, accs, catch, prev = [], [], [], [], [], [], []
        i = 0  # running[i:] not yet looked at; preemption takes victims from the end
        nd = 0
        while i < n_run:
            if nd == cap:
                break
            r = running[i]
            i += 1
            if not r.prefill_complete:
                prefills.append(r)
                continue
            # tokens charged: 1 + guesses, one token of the budget kept for every decode still to be placed
            if not guessing:  # no proposer (or k = 0 and no tree): one token, nothing kept for later decodes
                guesses = 0
            else:
                if to_place > 0:
                    to_place -= 1
                if plain:
                    guesses = r.total_tokens - r.processed - 1
                    if guesses > k:
                        guesses = k
                else:
                    guesses = self._wanted_guesses(r)
                budget = chunk - total - to_place - 1
                if guesses > budget:
                    guesses = budget if budget > 0 else 0
                if tree is not None and guesses < tree:
                    guesses = 0  # a tree is not cut to fit the budget: the request decodes plainly this step
            rid = r.id
            res = guesses + lookahead  # tokens past processed + 1 its KV is held for (this step)
            # KV blocks: with guesses or lookahead for processed + 1 + reserve tokens (at least one block free),
            # else vLLM's one free block, taking one when the newest token starts a block
            held = alloc[rid]
            if res > 0:
                take = -(-(r.processed + res + 1) // bs) - held
                if take < 0:
                    take = 0
                need = take if take > 1 else 1
            else:
                need = 1
                take = 1 if r.processed > held * bs else 0
            if free < need:  # preempt the newest running request until r's blocks fit, or r itself
                self.allocated = num_blocks - free
                while num_blocks - self.allocated < need:
                    if i < n_run:
                        victim = running.pop()
                        n_run -= 1
                        victim.restart()
                        self.free(victim.id)
                        self.queue.insert(0, victim)
                    else:
                        r.restart()
                        self.free(rid)
                        self.queue.insert(0, r)
                        break
                free = num_blocks - self.allocated
                if rid not in alloc:  # r itself was preempted
                    continue
            if take:
                free -= take
                alloc[rid] = held + take
            q = 1 + guesses
            total += q
            dec.append(r)
            dq.append(q)
            nd += 1
            ids.append(rid)
            idx.append(r.index)
            processed = r.processed
            ctx.append(processed)
            if acc is not None:
                if no_proposal and rid in no_proposal:
                    accepted = 0
                else:  # a tree keeps an accepted path of depth <= tokens still needed
                    src = r.acceptance
                    if src is None:
                        src = r.acceptance = acc.for_request(r)
                    accepted = src.next(guesses if tree is None else min(guesses, r.total_tokens - processed - 1),
                                        processed - r.prompt_tokens)
                gs.append(guesses)
                accs.append(accepted)
                catch.append(r.catchup_tokens)
                prev.append(r.previous_q_tokens)
        self.allocated = num_blocks - free
        if acc is None:  # no speculation: no guesses, nothing drawn; every catch-up and previous charge is 1
            gs = accs = [0] * nd
            catch = prev = [1] * nd
        running = running[i:]
        for r in prefills:
            q = r.prefill_tokens - r.processed
            if q > chunk - total:
                q = chunk - total
            if q <= 0:
                skipped.append(r)
                continue
            total += q
            pre.append(r)
            pq.append(q)
        if skipped or running:
            running = skipped + running
            running.sort(key=_arrived)
        self.running = running
        queue = self.queue
        cap_seqs = self.batch_size_cap
        while queue:
            if len(alloc) == cap_seqs or len(dec) + len(pre) == cap:
                break
            r = queue[0]
            if not self.can_allocate(r):
                break
            q = r.prefill_tokens - r.processed
            if q > chunk - total:
                q = chunk - total
            if q <= 0:
                break
            queue.pop(0)
            if r.id in alloc:  # a decode instance's loaded prompt: its blocks are held
                self._allocate_held(r)
            else:
                self._allocate_new(r)
            total += q
            pre.append(r)
            pq.append(q)
        if not dec and not pre:
            return None
        return Step(dec + pre, self._plan(from_fields(DecodePart, (ids, idx, dq, ctx, gs, accs, catch, prev)), pre, pq))

    def _allocate_held(self, r) -> None:
        """A request already holding blocks (a decode instance's loaded prompt) takes one more when its next
        token starts a block (Sarathi's rule)."""
        if r.processed - self.alloc[r.id] * self.block_size > 0:
            self.allocate(r.id, 1)

    def _plan(self, d: DecodePart, pre: list, pq: list):
        """The step's plan: its decoding requests' columns ``d`` (accepted guesses drawn) and its prefill chunks
        (``pre``, ``pq`` tokens each); moves the k schedule on to the next step's k."""
        k = self.k  # the k this step's guesses were drawn with (steps.csv column k)
        # a scheduled k = 0 step: vLLM's GPU drafter still runs its first pass to keep its KV in sync
        sync = self.drafter_sync and self.schedule is not None and k == 0
        if self.schedule is not None:  # the next step's k, from this step's scheduled requests (vLLM)
            self.k = self.schedule.k_for(len(d.ids) + len(pre))
        if not pre:
            return build_plan(k, sync, d)
        p = PrefillPart([r.id for r in pre], [r.index for r in pre], pq, [r.processed for r in pre],
                        [r.processed + q >= r.prefill_tokens for r, q in zip(pre, pq)])
        return build_plan(k, sync, d, p, self._draft_recompute(pre))

    def _draft_recompute(self, prefills) -> tuple:
        """Tokens each loaded prompt's drafter pass covers in this step, on a decode instance whose draft KV was
        not moved (``disaggregation.draft_kv: recompute``): the prompt but its last token."""
        if not self.recompute_draft:
            return ()
        return tuple(r.prompt_tokens - 1 for r in prefills
                     if r.kv_loaded and not r.prefill_complete and r.num_restarts == 0
                     and r.processed == r.prompt_tokens - 1 and r.prompt_tokens > 1)

    # ------------------------------------------------------------------ a step ends
    def end_step(self, step: Step, time: float) -> list:
        """Advance the step's requests at ``time`` (s); returns them (completed ones have freed their KV)."""
        self.release(step, advance_step(step.requests, step.plan, time))
        return step.requests

    def release(self, step: Step, done=None) -> None:
        """The step's requests leave it: completed ones free their blocks, the others run on (in step order).
        ``done``: the requests of the step that completed, when the caller knows them (None: each is looked at)."""
        if done is not None and not done:  # none completed (most steps): all run on
            self.running += step.requests
            return
        for r in step.requests:
            if r.completed:
                self.free(r.id)
            else:
                self.running.append(r)


def _arrived(r) -> float:
    return r.arrived_at
