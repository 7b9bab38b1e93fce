"""The engine core's event loop: replicas stepping back to back, a heap for what crosses them.

One heap of ``(time, seq, handler, payload)`` (seconds of simulated time; ``seq``
the order events were made in, which breaks ties as Vidur's event ids do):
arrivals, the global scheduler's assignments, step ends, KV transfers between
pools. A replica's step is formed, priced (:class:`~vidur_specdec.pricing.pricer.StepPricer`)
and recorded in one go and its end is one event; at its end the replica
advances the step's requests and forms the next step at once unless another
event is due at that same instant, in which case the next step waits for it as
it would in Vidur (its events then run first). Pipeline-parallel replicas keep
Vidur's stage events (a stage's queue, its busy flag, micro-batches in flight).

The order of simultaneous events is Vidur's (``tests/test_engine_core.py``
holds the tables to the Vidur-backed reference's): arrivals made at the start
precede everything at their time; a global schedule assigns every waiting
request (round robin or least outstanding requests, after sorting by arrival);
at a step's end, events already due at that instant run before the replica
forms its next step; a closed-loop client's next request, released by a
completion, arrives after the replica has formed that next step.
"""

from __future__ import annotations

import heapq
from typing import Callable, List



class Replica:
    """One replica (a vLLM instance): its scheduler (one rank or a data-parallel group), its pricer and stages.

    ``num_stages`` > 1: pipeline stages, each with its queue of micro-batches and a busy flag (Vidur's
    replica stage scheduler); a new step forms only while the first stage is free and fewer steps than
    stages are in flight.
    """

    __slots__ = ("rid", "sched", "pricer", "num_stages", "running_batches", "running_stages", "stage_queue",
                 "stage_busy", "role")

    def __init__(self, rid: int, sched, pricer, num_stages: int = 1, role: str = "mixed") -> None:
        self.rid = rid
        self.sched = sched
        self.pricer = pricer
        self.num_stages = num_stages
        self.running_batches = 0
        self.running_stages = 0
        self.stage_queue = [[] for _ in range(num_stages)]
        self.stage_busy = [False] * num_stages
        self.role = role

    def is_empty(self) -> bool:
        return self.sched.is_empty() and not any(self.stage_queue)


class Loop:
    """The event loop over a set of replicas (module docstring).

    ``assign(queue) -> [(replica id, request)]``: the global scheduler (the requests it hands out);
    ``recorder``: the step recorder (:mod:`vidur_specdec.engine.metrics`); ``on_complete(time)``: a closed-loop
    client's release (None: open loop); ``end_hooks``: per replica id, an extra call after a step's end
    (prefill/decode pools).
    """

    def __init__(self, replicas: List[Replica], assign: Callable, recorder, on_complete=None) -> None:
        self.replicas = replicas
        self.assign = assign
        self.recorder = recorder
        self.on_complete = on_complete
        self.heap: list = []
        self.seq = 0
        self.time = 0.0  # seconds: the event being handled
        self.waiting: list = []  # the global scheduler's queue

    # ------------------------------------------------------------------ events
    def push(self, time: float, handler, payload) -> None:
        heapq.heappush(self.heap, (time, self.seq, handler, payload))
        self.seq += 1

    def due_now(self, time: float) -> bool:
        """Another event is due at ``time`` (it runs before what the current event makes)."""
        return bool(self.heap) and self.heap[0][0] <= time

    def run(self) -> None:
        heap = self.heap
        pop = heapq.heappop
        while heap:
            time, _, handler, payload = pop(heap)
            self.time = time  # the instant being handled (a pool's hand-off reads it)
            handler(time, payload)

    def arrive(self, time: float, request) -> None:
        """An arrival (Vidur's ``RequestArrivalEvent``): the global queue, then a global schedule."""
        self.waiting.append(request)
        self.push(time, self._global_schedule, None)

    def _global_schedule(self, time: float, _) -> None:
        mapping = self.assign(self.waiting)
        if not mapping:
            return
        chosen = set()
        for rid, request in mapping:
            request.replica = rid
            self.replicas[rid].sched.add(request)
            chosen.add((rid,))  # Vidur's set of ReplicaIds: same hashes, same iteration order
        for (rid,) in chosen:
            self.push(time, self._schedule, self.replicas[rid])

    def schedule_now(self, time: float, replica: Replica) -> None:
        """A replica schedule (Vidur's ``ReplicaScheduleEvent``) made now."""
        self.push(time, self._schedule, replica)

    def _schedule(self, time: float, replica: Replica, done=None) -> None:
        """Vidur's ``ReplicaScheduleEvent``: form the replica's next step if it may; a one-stage replica's step is
        priced, recorded and its end made at once (Vidur's stage arrival and stage schedule at the same instant).

        Steps run back to back: when no other event is due before a one-stage step ends (every event on the heap
        comes strictly later), its end is handled here without going through the heap, exactly as
        :meth:`_step_end` and :meth:`_after_end` would handle it when popped (nothing can run in between), and
        the next step is formed at once. ``done``: a closed-loop client's completions of the step that just
        ended on this replica, released once the next step has formed (:meth:`_after_end`)."""
        if not (replica.running_batches < replica.num_stages and replica.running_stages == 0):
            if done:
                self._release(time, done)
            return
        sched = replica.sched
        heap = self.heap
        next_step, price_of, record, rid = sched.next_step, replica.pricer.price, self.recorder.record, replica.rid
        while True:
            step = next_step()
            if step is None:
                if done:
                    self._release(time, done)
                return
            plan = step.plan
            if plan.prefill_tokens:  # some prefill chunk (never empty): only its request can be new here
                for r in step.requests:
                    if not r.scheduled:
                        r.on_schedule(time)
            if replica.num_stages != 1:
                replica.running_batches += 1
                replica.running_stages += 1
                self.push(time, self._stage_arrival, (replica, 0, step))
                return
            price = price_of(plan)
            record(time, rid, 0, step, price)
            end = time + price.total_time
            if done or (heap and heap[0][0] <= end):
                replica.running_batches += 1
                replica.running_stages += 1
                heapq.heappush(heap, (end, self.seq, self._step_end, (replica, step)))
                self.seq += 1
                if done:  # after the next step formed, as _after_end releases them
                    self._release(time, done)
                return
            # the step's end, now (Vidur's BatchStageEndEvent, batch end and replica schedule at ``end``)
            self.time = time = end
            requests = sched.end_step(step, time)
            if self.on_complete is not None:
                done = [r for r in requests if r.completed]

    # ------------------------------------------------------------------ one stage (pipeline parallel 1)
    def _step_end(self, time: float, payload) -> None:
        """A one-stage step ends (Vidur's ``BatchStageEndEvent``): events already due now run before the batch
        end and the next step (they were made first); else both run at once."""
        payload[0].running_stages -= 1
        if self.heap and self.heap[0][0] <= time:
            self.push(time, self._after_end, payload)
        else:
            self._after_end(time, payload)

    def _after_end(self, time: float, payload) -> None:
        """Vidur's batch end and replica schedule made at a step's end: nothing due now comes between them (what
        is due now was made later); a closed-loop client's next request arrives after the next step formed."""
        replica, step = payload
        replica.running_batches -= 1
        requests = replica.sched.end_step(step, time)
        self._schedule(time, replica, [r for r in requests if r.completed] if self.on_complete is not None else None)

    def _release(self, time: float, done: list) -> None:
        """A closed-loop client's next request for each request that completed (not a prefill pool's hand-off)."""
        if self.on_complete is None:
            return
        for r in done:
            if not r.prefill_only:
                self.on_complete(time)

    # ------------------------------------------------------------------ pipeline stages (Vidur's stage events)
    def _stage_arrival(self, time: float, payload) -> None:
        replica, stage, step = payload
        replica.stage_queue[stage].append(step)
        self.push(time, self._stage_schedule, (replica, stage))

    def _stage_schedule(self, time: float, payload) -> None:
        replica, stage = payload
        queue = replica.stage_queue[stage]
        if replica.stage_busy[stage] or not queue:
            return
        replica.stage_busy[stage] = True
        step = queue.pop(0)
        price = replica.pricer.price(step.plan, stage)
        self.recorder.record(time, replica.rid, stage, step, price)
        self.push(time + price.total_time, self._stage_end, (replica, stage, step))

    def _stage_end(self, time: float, payload) -> None:
        replica, stage, step = payload
        replica.stage_busy[stage] = False
        if stage == 0:
            replica.running_stages -= 1
        self.recorder.stage_end(time, replica.rid, stage, step)
        self.push(time, self._stage_schedule, (replica, stage))
        if stage == replica.num_stages - 1:
            self.push(time, self._pipeline_batch_end, (replica, step))
        else:
            self.push(time, self._stage_arrival, (replica, stage + 1, step))
        if stage == 0:
            self.push(time, self._schedule, replica)

    def _pipeline_batch_end(self, time: float, payload) -> None:
        replica, step = payload
        replica.running_batches -= 1
        requests = replica.sched.end_step(step, time)
        self._release(time, [r for r in requests if r.completed])
        self.push(time, self._schedule, replica)

    # ------------------------------------------------------------------ the end
    def finished(self, requests) -> bool:
        """Every request completed and nothing left waiting or holding KV (Vidur's end-of-run check)."""
        return all(r.completed for r in requests) and not self.waiting and all(r.is_empty() for r in self.replicas)


def round_robin(num_replicas: int):
    """Vidur's round-robin global scheduler: waiting requests (by arrival) to replicas in turn."""
    counter = [0]

    def assign(waiting: list) -> list:
        waiting.sort(key=_arrived)
        out = []
        for r in waiting:
            out.append((counter[0] % num_replicas, r))
            counter[0] += 1
        waiting.clear()
        return out

    return assign


def least_outstanding(replicas: List[Replica]):
    """Vidur's least-outstanding-requests global scheduler: the replica with the fewest waiting requests
    (counted once per schedule, each assignment adding one), ties to the lowest id."""

    def assign(waiting: list) -> list:
        waiting.sort(key=_arrived)
        pending = {rep.rid: rep.sched.num_pending for rep in replicas}
        out = []
        for r in waiting:
            rid = min(pending.items(), key=lambda x: x[1])[0]
            pending[rid] += 1
            out.append((rid, r))
        waiting.clear()
        return out

    return assign


GLOBAL_SCHEDULERS = {"round_robin": lambda replicas: round_robin(len(replicas)), "lor": least_outstanding}


def _arrived(r) -> float:
    return r.arrived_at
