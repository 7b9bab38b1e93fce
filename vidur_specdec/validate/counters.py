"""Server counters: scrape ``/metrics`` and read vLLM's speculative-decoding and cache counters.

The exposition is parsed with ``prometheus_client.parser`` (never regexes).
Counters read, summed over every label set except ``position`` (engines,
model names), as vLLM v1 exposes them:

* ``vllm:spec_decode_num_drafts_total`` — drafts verified (one per decoding
  request per step that carried guesses);
* ``vllm:spec_decode_num_draft_tokens_total`` — guesses in those drafts;
* ``vllm:spec_decode_num_accepted_tokens_total`` — guesses accepted;
* ``vllm:spec_decode_num_accepted_tokens_per_pos_total{position="p"}`` — drafts
  that accepted more than ``p`` guesses, ``p = 0..k-1`` (0-based);
* ``vllm:cache_config_info`` — a gauge set to 1 whose labels carry the cache
  config; its ``num_gpu_blocks`` and ``block_size`` labels give the KV budget.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Optional, Tuple, Union

from prometheus_client.parser import text_string_to_metric_families

from vidur_specdec.validate.common import DEFAULT_DEADLINE_S, ServiceError, ValidateError, base_url, http_get

DRAFTS = "vllm:spec_decode_num_drafts"
DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens"
ACCEPTED = "vllm:spec_decode_num_accepted_tokens"
PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos"
CACHE_INFO = "vllm:cache_config_info"

Key = Tuple[str, Tuple[Tuple[str, str], ...]]
MAX_PROM_BYTES = 64 << 20  # a saved scrape is at most 64 MiB (a vLLM scrape is tens of KiB)


@dataclass
class Snapshot:
    """One scrape: the raw text and every sample keyed by (sample name, sorted labels)."""

    text: str
    samples: Dict[Key, float]
    source: str = "metrics"

    @classmethod
    def parse(cls, text: str, source: str = "metrics") -> "Snapshot":
        samples: Dict[Key, float] = {}
        try:
            for fam in text_string_to_metric_families(text):
                for s in fam.samples:
                    samples[(s.name, tuple(sorted(s.labels.items())))] = float(s.value)
        except (ValueError, TypeError, IndexError) as e:
            raise ValidateError(f"{source}: not Prometheus text exposition: {str(e)[:120]}") from None
        return cls(text, samples, source)

    def total(self, counter: str, label: Optional[str] = None) -> Union[Optional[float], Dict[str, float]]:
        """Sum of ``counter``'s ``_total`` samples over all label sets (None if absent).

        With ``label``, a dict ``label value -> sum`` instead.
        """
        names = {counter + "_total", counter}
        out: Dict[str, float] = {}
        found = False
        for (name, labels), v in self.samples.items():
            if name not in names:
                continue
            found = True
            if not (math.isfinite(v) and v >= 0):  # a counter only counts up from 0: NaN is no count, not 0
                shown = name + ("{" + ",".join(f'{k}="{x}"' for k, x in labels) + "}" if labels else "")
                raise ValidateError(f"{self.source}: {shown} is {v}; a counter is a finite number >= 0")
            key = dict(labels).get(label, "") if label else ""
            out[key] = out.get(key, 0.0) + v
        if label:
            return out
        return out.get("") if found else None

    def info_labels(self, gauge: str) -> list:
        """Label dicts of every sample of an info-style gauge."""
        return [dict(labels) for (name, labels), _ in self.samples.items() if name == gauge]


def scrape(url: str, timeout_s: float = 10.0, deadline_s: Optional[float] = None) -> Snapshot:
    """GET ``URL/metrics`` and parse it; ``timeout_s`` per read, ``deadline_s`` for the whole request (s).

    Every failure of the server (no answer, an answer past the deadline, text that is not
    Prometheus exposition) is a :class:`ServiceError` (exit status 3).
    """
    u = base_url(url) + "/metrics"
    try:
        text = http_get(u, timeout_s, DEFAULT_DEADLINE_S if deadline_s is None else deadline_s).decode(
            "utf-8", "replace")
    except ServiceError as e:
        raise ServiceError(str(e).replace("cannot get", "cannot scrape", 1)) from None
    try:
        return Snapshot.parse(text, u)
    except ValidateError as e:
        raise ServiceError(f"--url: the server's answer is not usable: {e}") from None


def read_snapshot(path: Union[str, Path], what: str) -> Snapshot:
    """A saved ``/metrics`` scrape: empty, non-UTF-8, larger than :data:`MAX_PROM_BYTES` or unparsable is one line."""
    p = Path(path).expanduser()
    if not p.is_file():
        raise ValidateError(f"{what}: file not found: {p}")
    from vidur_specdec.config.files import read_text

    text = read_text(p, what, MAX_PROM_BYTES)
    snap = Snapshot.parse(text, f"{what} {p}")
    if not snap.samples:
        raise ValidateError(f"{what}: {p} holds no metrics (empty or only comments); save a scrape of the "
                            "server's /metrics")
    return snap


@dataclass
class SpecCounters:
    """The speculative-decoding counters (one scrape, or the difference of two)."""

    drafts: float
    draft_tokens: float
    accepted: float
    per_pos: Dict[int, float]  # 0-based position -> drafts that accepted more than that many guesses
    present: bool  # the server exposes spec-decode counters at all

    def minus(self, before: "SpecCounters") -> "SpecCounters":
        pos = sorted(set(self.per_pos) | set(before.per_pos))
        d = SpecCounters(self.drafts - before.drafts, self.draft_tokens - before.draft_tokens,
                         self.accepted - before.accepted,
                         {p: self.per_pos.get(p, 0.0) - before.per_pos.get(p, 0.0) for p in pos},
                         self.present)
        if min([d.drafts, d.draft_tokens, d.accepted] + list(d.per_pos.values()), default=0.0) < 0:
            raise ValidateError("counters went down between the two scrapes: did the server restart?")
        return d


def spec_counters(snap: Snapshot) -> SpecCounters:
    drafts = snap.total(DRAFTS)
    per_pos_raw = snap.total(PER_POS, label="position")
    per_pos: Dict[int, float] = {}
    for k, v in per_pos_raw.items():
        try:
            per_pos[int(k)] = v
        except ValueError:
            raise ValidateError(f"metrics: {PER_POS} has a non-integer position label {k!r}") from None
    return SpecCounters(drafts or 0.0, snap.total(DRAFT_TOKENS) or 0.0, snap.total(ACCEPTED) or 0.0,
                        per_pos, drafts is not None)


def _int_label(v) -> Optional[int]:
    try:
        return int(float(v))
    except (TypeError, ValueError):
        return None


def cache_info(snap: Snapshot) -> Dict[str, Optional[int]]:
    """``num_gpu_blocks`` and ``block_size`` from ``vllm:cache_config_info`` (None where absent).

    Several engines (data parallel) each report their own budget; the
    simulator models one replica, so all must agree.
    """
    rows = snap.info_labels(CACHE_INFO)
    blocks = {_int_label(r.get("num_gpu_blocks")) for r in rows} - {None}
    sizes = {_int_label(r.get("block_size")) for r in rows} - {None}
    if len(blocks) > 1:
        raise ValidateError(f"metrics: engines report different num_gpu_blocks {sorted(blocks)}; "
                            "the simulator models one replica")
    return {"num_gpu_blocks": blocks.pop() if blocks else None, "block_size": sizes.pop() if len(sizes) == 1 else None}
