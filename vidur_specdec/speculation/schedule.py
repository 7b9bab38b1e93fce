"""Per-batch-size k schedules: vLLM's ``num_speculative_tokens_per_batch_size``.

Semantics follow vLLM exactly (PR #32374, "Dynamic SD";
``vllm/v1/spec_decode/dynamic/utils.py``: ``validate_and_normalize_dynamic_sd_schedule``
and ``build_dynamic_sd_schedule_lookup``; ``tests/v1/spec_decode/test_dynamic_sd.py``):

* a schedule is a list of inclusive batch-size ranges ``[lo, hi, k]`` — or the
  dict form ``{"lo-hi": k}`` of the PR's description — with ``1 <= lo <= hi``
  and ``k >= 0``; ranges may be given in any order but must not overlap, and
  the first must start at 1;
* a batch size in a gap between ranges inherits the previous range's k, and one
  above the last range the last range's k;
* the k used is ``min(num_speculative_tokens, k)``: ``num_speculative_tokens``
  stays the static maximum (vLLM sizes buffers and reserves lookahead KV for it);
* the batch size is the number of requests the scheduler scheduled in a step,
  prefills included (vLLM's ``len(num_scheduled_tokens)``).

vLLM's 5-item form (batch range × context range, vLLM issue #48627) is not
modelled; such entries are refused.
"""

from __future__ import annotations

import re
from typing import Any, List, Optional, Sequence, Tuple
from vidur_specdec.config import ConfigError

KEY = "speculative.num_speculative_tokens_per_batch_size"
Range = Tuple[int, int, int]  # (lo, hi, k): batch sizes lo..hi inclusive use k

_RANGE_KEY = re.compile(r"^\s*(\d+)\s*-\s*(\d+)\s*$")


def _error(where: str, what: str):
    return ConfigError(f"{where}: {what}")


def _int(where: str, v: Any, what: str) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or (isinstance(v, float) and not v.is_integer()):
        raise _error(where, f"{what} must be an integer, got {v!r}")
    return int(v)


def parse(value: Any, key: str = KEY) -> List[Range]:
    """Validate a schedule (dict or list form) and return it as ``[(lo, hi, k), ...]`` sorted by ``lo``.

    Raises :class:`~vidur_specdec.config.ConfigError` with one line naming the
    offending entry (``KEY["17-64"]`` or ``KEY[1]``).
    """
    entries: List[Tuple[str, int, int, int]] = []  # (where, lo, hi, k)
    if isinstance(value, dict):
        if not value:
            raise _error(key, 'must not be empty; e.g. {"1-16": 3, "17-64": 2}')
        for rk, k in value.items():
            where = f'{key}["{rk}"]'
            m = _RANGE_KEY.match(str(rk)) if isinstance(rk, (str, int)) else None
            if m is None:
                raise _error(where, 'malformed range key; expected "lo-hi" with integers, e.g. "1-16"')
            entries.append((where, int(m.group(1)), int(m.group(2)), _int(where, k, "k")))
    elif isinstance(value, (list, tuple)):
        if not value:
            raise _error(key, "must not be empty; e.g. [[1, 16, 3], [17, 64, 2]]")
        for i, e in enumerate(value):
            where = f"{key}[{i}]"
            if not isinstance(e, (list, tuple)) or len(e) != 3:
                extra = " (vLLM's 5-item context-length form is not modelled)" \
                    if isinstance(e, (list, tuple)) and len(e) == 5 else ""
                raise _error(where, f"must be [lo, hi, k] (batch sizes lo..hi inclusive use k), got {e!r}{extra}")
            entries.append((where, _int(where, e[0], "lo"), _int(where, e[1], "hi"), _int(where, e[2], "k")))
    else:
        raise _error(key, 'must be a mapping {"lo-hi": k} or a list [[lo, hi, k], ...], '
                          f"got {value!r}")
    for where, lo, hi, k in entries:
        if lo <= 0 or hi <= 0:
            raise _error(where, f"batch-size range {lo}-{hi} must be positive")
        if lo > hi:
            raise _error(where, f"batch-size range start {lo} must be <= end {hi}")
        if k < 0:
            raise _error(where, f"k must be >= 0, got {k}")
    ordered = sorted(entries, key=lambda e: (e[1], e[2]))
    prev_hi, prev_where = 0, None
    for where, lo, hi, _ in ordered:
        if lo <= prev_hi:
            raise _error(where, f"range {lo}-{hi} overlaps {prev_where}; ranges must not overlap")
        prev_hi, prev_where = hi, where
    if ordered[0][1] != 1:
        raise _error(ordered[0][0], f"the first batch-size range must start at 1, got {ordered[0][1]} "
                                    "(every batch size needs a k)")
    return [(lo, hi, k) for _, lo, hi, k in ordered]


def to_config_value(ranges: Sequence[Range]) -> List[List[int]]:
    """The list form ``[[lo, hi, k], ...]`` (how a resolved config and vLLM's config store it)."""
    return [[int(lo), int(hi), int(k)] for lo, hi, k in ranges]


def clamp_warnings(ranges: Sequence[Range], k_max: int, key: str = KEY) -> List[str]:
    """One line per range whose k exceeds ``num_speculative_tokens`` (clamped, as vLLM does)."""
    return [f'{key}["{lo}-{hi}"]: k = {k} exceeds speculative.num_speculative_tokens = {k_max}; '
            f"clamped to {k_max} (as vLLM does)" for lo, hi, k in ranges if k > k_max]


class KSchedule:
    """Batch size -> k lookup (dense up to ``max_batch_size``; larger sizes use the last entry)."""

    def __init__(self, ranges: Sequence[Range], k_max: int, max_batch_size: int) -> None:
        self.ranges = list(ranges)
        self.k_max = int(k_max)
        n = max(1, int(max_batch_size))
        dense = [self.k_max] * (n + 1)  # index 0: no request scheduled -> the static k (vLLM)
        last: Optional[int] = None
        nxt = 1
        for lo, hi, k in self.ranges:
            for b in range(nxt, min(lo, n + 1)):  # a gap inherits the previous k
                if last is not None:
                    dense[b] = min(self.k_max, last)
            for b in range(max(lo, nxt), min(hi, n) + 1):
                dense[b] = min(self.k_max, k)
            nxt = max(nxt, hi + 1)
            last = k
        for b in range(nxt, n + 1):
            dense[b] = min(self.k_max, last)
        self.dense = dense

    def k_for(self, batch_size: int) -> int:
        """k for a step whose batch holds ``batch_size`` requests (0 -> the static k)."""
        if batch_size < len(self.dense):
            return self.dense[batch_size]
        return self.dense[-1]


def config_warnings(spec) -> List[str]:
    """Warnings for a validated ``SpeculativeConfig`` (k clamped to ``num_speculative_tokens``)."""
    value = getattr(spec, "num_speculative_tokens_per_batch_size", None)
    if not value or not spec.enabled:
        return []
    return clamp_warnings([tuple(r) for r in value], spec.num_speculative_tokens)
