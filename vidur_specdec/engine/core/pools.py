"""Prefill and decode pools in the engine core: instances of each role joined by a KV link.

As vLLM's disaggregated proxy runs them (the reference, with the sources it
follows: :mod:`vidur_specdec.engine.reference.disagg`):

1. at arrival the router picks a prefill instance (``disaggregation.router``) and
   sends it the prompt with one output token (a *shadow* request);
2. when that prefill completes its KV blocks stay held and the router picks a
   decode instance, which reserves the prompt's KV blocks as soon as it has room
   (above its watermark);
3. the KV moves (:class:`~vidur_specdec.engine.kv_transfer.KVLink`); then the
   prefill instance frees its blocks and the decode instance schedules the
   request with every prompt token but the last already computed: its first step
   computes that token and samples the first output token;
4. with ``disaggregation.draft_kv: recompute`` that first step also runs the
   drafter over the prompt (the step plan's ``draft_recompute``).

:class:`PoolRouter` is the loop's global scheduler; :class:`PrefillRank` and
:class:`DecodeRank` are the instances' schedulers, or each rank's of an instance
that is a data-parallel group (``disaggregation.<role>.data_parallel_size``:
a :class:`~vidur_specdec.engine.core.group.DataParallelGroup` whose own router picks
the rank at arrival and, on a decode instance, at hand-off). Times in seconds,
transfer times in ms.
"""

from __future__ import annotations

from collections import deque
from math import ceil
from typing import Dict, List

from vidur_specdec.engine.core.request import CoreRequest
from vidur_specdec.engine.core.sarathi import SarathiRank, Step
from vidur_specdec.engine.pool_routing import ROUTERS


class PrefillRank(SarathiRank):
    """A prefill instance (or one data-parallel rank of it): a request done with its prefill keeps its KV blocks
    until they have been read. ``unit``: its id among the router's schedulers."""

    router: "PoolRouter" = None
    unit: int = -1

    def release(self, step: Step, done=None) -> None:
        prefilled = []  # (``done`` unused: each request is looked at)
        for r in step.requests:
            if r.completed:
                prefilled.append(r)  # blocks held: freed by the router once the KV has moved
            else:
                self.running.append(r)
        for r in prefilled:
            self.router.on_prefill_done(r, self.router.loop.time, self.unit)


class DecodeRank(SarathiRank):
    """A decode instance (or one data-parallel rank of it): requests arrive with their prompt's KV blocks already
    held. ``unit``: its id among the router's schedulers."""

    router: "PoolRouter" = None
    unit: int = -1

    def can_allocate(self, r) -> bool:
        if r.kv_loaded and r.num_restarts == 0 and r.id in self.alloc and not r.prefill_complete \
                and r.processed == r.prompt_tokens - 1:
            return True  # its loaded prompt's blocks are held; the last prompt token fits in them
        return super().can_allocate(r)

    def release(self, step: Step, done=None) -> None:
        super().release(step, done)
        self.router.admit(self.unit, self.router.loop.time)


class PoolRouter:
    """The global scheduler of a prefill and a decode pool joined by a KV link (module docstring).

    ``scheds``: instance id -> its scheduler (one rank, or a :class:`~vidur_specdec.engine.core.group.DataParallelGroup`
    of ranks); ``ids``: role -> instance ids; ``link``: the KV link; ``policy``: the ``disaggregation.router``
    name; ``loop``: the event loop (transfers end as its events); ``first_id``: the id the first shadow request
    takes. Every rank (an instance's, or each data-parallel rank of it) is a *unit* (:attr:`ranks`): the
    scheduler a request's KV blocks are held on; the proxy picks an instance by its units' loads, and a
    data-parallel instance's own router (vLLM's least-loaded one) the rank in it.
    """

    def __init__(self, scheds: Dict[int, object], ids: Dict[str, List[int]], link, policy: str,
                 first_id: int) -> None:
        self.scheds = scheds
        self.ids = ids
        self.units = {rid: list(getattr(s, "ranks", [s])) for rid, s in scheds.items()}
        self.ranks: Dict[int, SarathiRank] = {}
        self.unit_ids: Dict[int, List[int]] = {}
        for rid in sorted(scheds):
            self.unit_ids[rid] = []
            for rank in self.units[rid]:
                rank.unit = len(self.ranks)
                rank.router = self
                self.ranks[rank.unit] = rank
                self.unit_ids[rid].append(rank.unit)
        self.link = link
        self.policy = ROUTERS[policy]()
        self.waiting: Dict[int, deque] = {u: deque() for rid in ids["decode"] for u in self.unit_ids[rid]}
        self.next_id = first_id
        self.loop = None

    def _pick(self, role: str, extra: Dict[int, int] = None) -> int:
        ids = self.ids[role]
        extra = extra or {}
        loads = [sum(len(self.ranks[u].queue) + len(self.ranks[u].alloc) + extra.get(u, 0) for u in self.unit_ids[rid])
                 for rid in ids]
        return self.policy.pick(role, ids, loads)

    def assign(self, waiting: list) -> list:
        """New arrivals, each as a one-output-token prefill request on a prefill instance."""
        waiting.sort(key=lambda r: r.arrived_at)
        out = []
        for r in waiting:
            pid = self._pick("prefill")
            shadow = CoreRequest(self.next_id, r.index, r.arrived_at, r.prompt_tokens, 1)
            self.next_id += 1
            shadow.prefill_only = True  # a closed loop does not count its completion
            shadow.parent = r
            r.shadow, r.prefill_replica = shadow, pid
            out.append((pid, shadow))
        waiting.clear()
        return out

    def on_prefill_done(self, shadow, time: float, unit: int) -> None:
        """A prefill finished on ``unit``: pick a decode instance (and its rank) and start the transfer when it has
        room."""
        r = shadow.parent
        r.prefill_unit = unit
        waiting = {u: len(q) for u, q in self.waiting.items()}
        did = self._pick("decode", waiting)
        units = self.unit_ids[did]
        group = self.scheds[did]
        du = units[group.pick([waiting[u] for u in units])] if len(units) > 1 else units[0]
        r.decode_replica, r.decode_unit = did, du
        r.handoff_at = time
        self.waiting[du].append(r)
        self.admit(du, time)

    def admit(self, unit: int, time: float) -> None:
        """Reserve decode KV blocks on ``unit`` for its waiting requests in arrival order, starting their
        transfers."""
        s = self.ranks[unit]
        q = self.waiting[unit]
        while q:
            r = q[0]
            need = ceil(r.prompt_tokens / s.block_size)  # its prompt's KV blocks (and a hybrid model's state pages)
            if s.num_blocks - s.allocated - need - s.state_blocks < s.watermark_blocks:
                break
            q.popleft()
            s.allocate(r.id, need)
            r.kv_start_at = time
            r.kv_transfer_ms = self.link.time_ms(r.prompt_tokens)
            r.kv_transfer_bytes = self.link.bytes(r.prompt_tokens)
            self.loop.push(time + r.kv_transfer_ms * 1e-3, self._kv_loaded, r)

    def _kv_loaded(self, time: float, r) -> None:
        """The KV has moved: free it on the prefill side, queue the request on its decode instance."""
        self.ranks[r.prefill_unit].free(r.shadow.id)
        r.kv_loaded_at = time
        r.kv_loaded = True
        r.processed = r.prompt_tokens - 1  # all but the last prompt token loaded
        r.replica = r.decode_replica
        self.ranks[r.decode_unit].add(r)  # on the rank chosen at hand-off
        loop = self.loop
        loop.schedule_now(time, loop.replicas[r.decode_replica])
        loop.schedule_now(time, loop.replicas[r.prefill_replica])

    def is_empty(self) -> bool:
        return not any(self.waiting.values())
