"""A bounded memo: the one way the simulator keeps what it computed for keys that may repeat.

Step prices, routing probabilities, kernel-table lookups and random streams are memoised by their
inputs; in a long run (a sweep's or ``tune``'s points in one process) the keys do not all repeat, so
every memo holds at most ``limit`` entries and empties itself when full (:meth:`BoundedMemo.put`).
Reads stay a plain ``dict.get``.
"""

from __future__ import annotations

from typing import Any, Callable, Hashable


class BoundedMemo(dict):
    """A dict of at most ``limit`` entries: :meth:`put` empties it first when full."""

    __slots__ = ("limit",)

    def __init__(self, limit: int) -> None:
        super().__init__()
        if limit < 1:
            raise ValueError(f"a memo's limit must be >= 1, got {limit}")
        self.limit = int(limit)

    def put(self, key: Hashable, value: Any) -> Any:
        """Keep ``value`` under ``key`` (emptying the memo first when it holds ``limit`` entries); returns it."""
        if len(self) >= self.limit:
            self.clear()
        self[key] = value
        return value

    def of(self, obj: Any, make: Callable[[], Any]) -> Any:
        """``make()``'s value kept for ``obj`` itself (an unhashable or costly-to-hash record, such as a step's plan):
        keyed by its id, with ``obj`` held beside the value so that id names no other object while it is kept."""
        got = self.get(id(obj))
        if got is None or got[0] is not obj:
            got = self.put(id(obj), (obj, make()))
        return got[1]
