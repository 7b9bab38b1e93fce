"""Closed-loop load: keep ``concurrency`` requests in flight inside Vidur's event loop.

This is what ``vllm bench serve --max-concurrency C --request-rate inf`` does
(vLLM ``vllm/benchmarks/serve.py``: ``get_request`` yields every request at
once when the rate is infinite, and ``benchmark`` wraps each send in
``limited_request_func``, which holds an ``asyncio.Semaphore(max_concurrency)``
for the request's lifetime; asyncio wakes waiters first-in first-out, so the
next request in list order is sent the moment one finishes). Here the first
``C`` requests arrive at t = 0 and each completion makes the next request (in
workload order) arrive at that instant. Client and network time are zero: the
next request reaches the global scheduler in the same simulated instant.

The request lengths are drawn up front as for any workload (same seed → same
requests); only the arrival times are set during the run, so ``requests.csv``
holds the dynamic ones.

:class:`ClosedLoopMixin` goes in front of a Vidur :class:`~vidur.simulator.Simulator`
subclass; it changes nothing when the request generator config has no
``concurrency`` (open-loop arrivals, Vidur's own behaviour).
"""

from __future__ import annotations

from collections import deque
from typing import Callable, Deque, List

from vidur.entities import Request
from vidur.events import RequestArrivalEvent


class _CompletionWatch:
    """Passes every hook to the wrapped metrics store; after a batch ends, reports each request that completed."""

    def __init__(self, store, on_complete: Callable[[float], None]) -> None:
        self._store = store
        self._on_complete = on_complete

    def __getattr__(self, name):
        return getattr(self._store, name)

    def on_batch_end(self, time, batch, replica_id, memory_usage_percent) -> None:
        self._store.on_batch_end(time, batch, replica_id, memory_usage_percent)
        for request in batch.requests:
            if request.completed and not getattr(request, "prefill_only", False):  # a prefill pool's hand-off
                self._on_complete(time)


class ClosedLoopMixin:
    """Vidur's simulator with closed-loop arrivals when ``request_generator_config.concurrency`` is set.

    Times are seconds of simulated time, as everywhere in Vidur.
    """

    _waiting: Deque[Request]

    @property
    def requests(self) -> List[Request]:
        """The run's requests in workload order (Vidur's Simulator has no public accessor for its generator)."""
        return self._request_generator.requests

    @property
    def concurrency(self):
        """Requests kept in flight (None: open loop, every request arrives at its own time)."""
        return getattr(self._config.request_generator_config, "concurrency", None)

    def __init__(self, config) -> None:
        super().__init__(config)
        self._metric_store = self.watch(self._metric_store)

    def watch(self, store):
        """``store`` as the simulator's metrics store: wrapped to report completions when closed-loop.

        A subclass that replaces the metrics store after ``__init__`` passes its own through this.
        """
        return _CompletionWatch(store, self._next_arrives) if self.concurrency is not None else store

    def _init_event_queue(self) -> None:
        if self.concurrency is None:
            return super()._init_event_queue()
        requests: List[Request] = self._request_generator.generate()
        c = self.concurrency
        self._waiting = deque(requests[c:])
        for request in requests[:c]:
            self._arrive(0.0, request)

    def _arrive(self, time: float, request: Request) -> None:
        request._arrived_at = time  # Vidur's Request has no setter for arrived_at; the arrival is dynamic
        self._add_event(RequestArrivalEvent(time, request))

    def _next_arrives(self, time: float) -> None:
        """A request completed at ``time`` (s): the next waiting request arrives at that instant."""
        if self._waiting:
            self._arrive(time, self._waiting.popleft())
