"""The bounded memo every simulator memo uses: at most ``limit`` entries, emptied when full, reads a plain dict's."""

import pytest

from vidur_specdec.config.memo import BoundedMemo
from vidur_specdec.config import seeds
from vidur_specdec.costs import routing


def test_put_keeps_at_most_limit_entries_and_returns_the_value():
    m = BoundedMemo(3)
    for i in range(3):
        assert m.put(i, i * 10) == i * 10
    assert dict(m) == {0: 0, 1: 10, 2: 20} and m.get(1) == 10
    assert m.put(3, 30) == 30  # full: emptied first
    assert dict(m) == {3: 30}
    m.put(4, 40)
    m.put(5, 50)
    assert m.put(6, 60) == 60 and dict(m) == {6: 60}


def test_limit_must_be_positive():
    with pytest.raises(ValueError, match="limit must be >= 1"):
        BoundedMemo(0)


def test_module_memos_are_bounded():
    assert isinstance(seeds._STREAMS, BoundedMemo) and seeds._STREAMS.limit == seeds.STREAM_MEMO_LIMIT
    assert isinstance(routing._WOKEN, BoundedMemo) and isinstance(routing._VAR_FACTOR, BoundedMemo)


def test_of_keeps_a_value_per_object_itself():
    m = BoundedMemo(2)
    a, b = [1], [1]  # equal, not the same object
    made = []
    assert m.of(a, lambda: made.append("a") or "A") == "A" and m.of(a, lambda: "again") == "A"
    assert m.of(b, lambda: made.append("b") or "B") == "B" and made == ["a", "b"]
    assert m.of([2], lambda: "C") == "C" and len(m) == 1  # full: emptied first
