"""The streamed answer of one replayed request: OpenAI completion chunks as server-sent events, parsed as they
arrive (:class:`_SSE`), into the request's record (:class:`_Rec`: each token-carrying chunk's arrival time and
token count, the finish reason, where the counts came from).

The hot path reads vLLM's cumulative ``usage.completion_tokens`` (``stream_options.continuous_usage_stats``) with
a byte search, as vLLM serialises ``usage`` last; any other event is parsed as JSON and counted from ``usage``,
then ``token_ids``, then ``logprobs``, then one token per chunk (``count_source`` says which). Used by
:mod:`vidur_specdec.validate.replay`, whose docstring gives the derived latencies.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Dict, List, Optional


@dataclass
class _Rec:
    request_id: object
    arrival: float
    prompt_tokens: int
    output_tokens: int
    status: str = "error"
    error: str = ""
    sent: float = math.nan
    times: List[float] = field(default_factory=list)  # arrival time of each chunk that carried tokens
    counts: List[int] = field(default_factory=list)  # tokens in that chunk
    tokens: int = 0
    finish_reason: Optional[str] = None
    count_source: str = ""
    done: bool = False


class _SSE:
    """Incremental SSE parser for OpenAI completion chunks; records token-carrying chunks on ``rec``.

    The hot path finds the cumulative ``usage.completion_tokens`` with a byte
    search (vLLM serialises ``usage`` last); any other event is parsed as JSON.
    """

    __slots__ = ("rec", "buf", "prev")

    def __init__(self, rec: _Rec) -> None:
        self.rec = rec
        self.buf = b""
        self.prev = 0

    def feed(self, data: bytes, t: float) -> None:
        rec = self.rec
        if not self.buf and data.startswith(b"data: {") and data.endswith(b"}\n\n") and data.count(b"\n") == 2:
            cum = _fast_count(data)  # fast path: exactly one vLLM chunk event
            if cum is not None:
                n, self.prev = cum - self.prev, cum
                rec.count_source = "usage"
                if b'"finish_reason":null' not in data and b'"finish_reason": null' not in data:
                    _finish_reason(data, rec)
                if n > 0:
                    rec.times.append(t)
                    rec.counts.append(n)
                    rec.tokens += n
                return
        buf = self.buf + data if self.buf else data
        if b"\r" in buf:
            buf = buf.replace(b"\r\n", b"\n")
        i = buf.find(b"\n\n")
        while i >= 0:
            event, buf = buf[:i], buf[i + 2:]
            i = buf.find(b"\n\n")
            if event.startswith(b"data: ") and b"\n" not in event:
                payloads = (event[6:],)
            else:
                payloads = [ln.strip()[5:].strip() for ln in event.split(b"\n") if ln.strip().startswith(b"data:")]
            for payload in payloads:
                if payload == b"[DONE]":
                    rec.done = True
                    continue
                cum = _fast_count(payload)
                if cum is not None:
                    n, self.prev = cum - self.prev, cum
                    rec.count_source = "usage"
                    if b'"finish_reason":null' not in payload and b'"finish_reason": null' not in payload:
                        _finish_reason(payload, rec)
                else:
                    n, self.prev = _slow_event(json.loads(payload.decode("utf-8", "replace")), rec, self.prev)
                if n > 0:
                    rec.times.append(t)
                    rec.counts.append(n)
                    rec.tokens += n
        if len(buf) > 16 * 1024 * 1024:
            raise ValueError("SSE event larger than 16 MiB")
        self.buf = buf

    def close(self) -> None:
        if self.buf.strip() in (b"data: [DONE]", b"data:[DONE]"):  # a last event without the blank line
            self.rec.done = True


_USAGE_KEY = b'"completion_tokens":'


def _fast_count(payload: bytes):
    """Cumulative completion tokens from a vLLM chunk without a JSON parse (None: take the JSON path)."""
    j = payload.rfind(_USAGE_KEY)
    if j < 0 or b'"error"' in payload:
        return None
    j += len(_USAGE_KEY)
    end = len(payload)
    while j < end and payload[j] == 32:  # spaces
        j += 1
    k = j
    while k < end and 48 <= payload[k] <= 57:
        k += 1
    return int(payload[j:k]) if k > j else None


def _finish_reason(payload: bytes, rec: _Rec) -> None:
    for key in (b'"finish_reason":"', b'"finish_reason": "'):
        f = payload.find(key)
        if f >= 0:
            f += len(key)
            rec.finish_reason = payload[f:payload.find(b'"', f)].decode(errors="replace")
            return


def _slow_event(obj: Dict, rec: _Rec, prev: int):
    """Tokens in one parsed chunk and the new cumulative count (JSON path: any server)."""
    if "error" in obj or obj.get("object") == "error":
        err = obj.get("error", obj)
        msg = err.get("message", err) if isinstance(err, dict) else err
        raise ValueError(f"server error in stream: {str(msg)[:200]}")
    choices = obj.get("choices") or []
    usage = obj.get("usage")
    if choices and choices[0].get("finish_reason"):
        rec.finish_reason = choices[0]["finish_reason"]
    if usage and usage.get("completion_tokens") is not None:
        rec.count_source = "usage"
        cum = int(usage["completion_tokens"])
        return cum - prev, cum
    if choices and choices[0].get("token_ids") is not None:
        rec.count_source = "token_ids"
        n = len(choices[0]["token_ids"])
    elif choices and (choices[0].get("logprobs") or {}).get("tokens") is not None:
        rec.count_source = "logprobs"
        n = len(choices[0]["logprobs"]["tokens"])
    elif choices and choices[0].get("text"):
        rec.count_source = "chunks"  # no count in the chunk: one token per chunk assumed
        n = 1
    else:
        n = 0
    return n, prev + n
