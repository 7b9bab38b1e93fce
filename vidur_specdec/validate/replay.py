"""Replay a trace against an OpenAI-compatible server (vLLM), request by request.

One asyncio event loop sends each request at its arrival offset to
``POST /v1/completions`` with the prompt as token ids, ``max_tokens`` = its
output length, ``ignore_eos``, temperature 0 and streaming with
``stream_options = {include_usage, continuous_usage_stats}`` (every chunk then
carries the cumulative ``usage.completion_tokens``, which gives each chunk's
exact token count; without it the client falls back to ``token_ids``, then
logprobs, then one token per chunk, and says so in ``token_counts``). It
records the send time, each chunk's arrival time and token count, and the
completion, and derives per request (one monotonic clock; offsets in seconds
from the replay's start):

* ``ttft_ms`` — first chunk carrying a token − send time;
* ``tpot_ms`` — (last token's chunk − first token's chunk) / (output_tokens − 1);
* ``e2e_ms`` — last token's chunk − send time.

vLLM streams one chunk per engine step per request (``accepted + 1`` tokens of
a verify step arrive together), so ``decode_steps`` is taken as
``chunks − 1`` and ``accepted_tokens`` as ``tokens − chunks``; both are
approximate if the server coalesced steps into one chunk. ``guesses``,
``restarts``, ``scheduled_at_s`` and ``replica`` are not visible to a client (NaN).

A request that fails (connection refused or cut, HTTP error, an error event in
the stream, fewer tokens than asked for) or runs past ``timeout_s`` keeps its
row with ``status`` = ``error`` or ``timeout``, the reason in ``error`` and
NaN latencies; it is never dropped. ``lateness_ms`` = actual send time −
scheduled send time.

The HTTP exchange is a small asyncio ``Protocol`` (HTTP/1.1, one connection
per request, ``Connection: close``; ``https`` URLs use TLS) rather than
aiohttp's client: a server answers every engine step with one chunk per
running request at once, and aiohttp wakes a task per chunk (about 50 µs
each), so a burst from 300 streams held the loop for ~15 ms and sends fell
behind schedule. Parsing each chunk inside ``data_received`` costs a few µs.
"""

from __future__ import annotations

import asyncio
import gc
import json
import math
import ssl
import time
from dataclasses import dataclass
from typing import Dict, List, Optional
from urllib.parse import urlsplit

import numpy as np
import pandas as pd

from vidur_specdec.engine.metrics import REQUEST_COLUMNS
from vidur_specdec.validate.common import DEFAULT_DEADLINE_S, ServiceError, base_url, http_get, raise_fd_limit
from vidur_specdec.validate.sse import _SSE, _Rec
from vidur_specdec.validate.workload import with_token_ids

MEASURED_EXTRA = ["status", "error", "chunks", "tokens_received", "sent_at_s", "scheduled_send_s", "lateness_ms",
                  "finish_reason", "token_counts"]
MEASURED_COLUMNS = REQUEST_COLUMNS + MEASURED_EXTRA
START_LEAD_S = 0.05  # the schedule starts this long after the request bodies are built
RECV_BUFFER = 64 * 1024  # bytes per read (below glibc's default mmap threshold of 128 KiB)


@dataclass
class ReplayResult:
    """Per-request table (``measured.csv``), per-chunk log and client-side stats."""

    frame: pd.DataFrame
    chunks: List[Dict]
    stats: Dict


class _Response(asyncio.BufferedProtocol):
    """One HTTP/1.1 exchange (``Connection: close``): writes the request, parses the streamed response.

    Handles ``Transfer-Encoding: chunked`` (what vLLM's server sends),
    ``Content-Length`` and close-delimited bodies. Every read is timestamped
    once and its complete SSE events are parsed there and then: no task wakes
    up per chunk, which keeps a burst of hundreds of streams (one chunk each
    per engine step) cheap for the event loop. Reads go into a 64 KiB buffer
    shared by the replay's connections (a buffered protocol): asyncio's
    default 256 KiB ``recv`` is above glibc's mmap threshold and cost ~30 µs
    per read in an mmap/munmap pair.
    """

    def __init__(self, request: bytes, rec: _Rec, done: asyncio.Future, buffer: Optional[memoryview] = None) -> None:
        self.buffer = buffer if buffer is not None else memoryview(bytearray(RECV_BUFFER))
        self.request = request
        self.rec = rec
        self.done = done
        self.transport = None
        self.head = True
        self.buf = b""
        self.status = 0
        self.mode = "close"  # chunked | length | close
        self.left = 0  # body bytes left (length mode)
        self.complete = False
        self.error_body = b""
        self.sse = _SSE(rec)

    def connection_made(self, transport) -> None:
        self.transport = transport
        transport.write(self.request)

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.buffer

    def buffer_updated(self, nbytes: int) -> None:
        self.data_received(bytes(self.buffer[:nbytes]))

    def data_received(self, data: bytes) -> None:
        t = time.monotonic()
        try:
            self._feed(data, t)
        except (ValueError, IndexError) as e:
            self._finish(f"bad response: {type(e).__name__}: {str(e)[:160]}")

    def _body(self, data: bytes, t: float) -> None:
        if self.status == 200:
            self.sse.feed(data, t)
        elif len(self.error_body) < 4096:
            self.error_body += data

    def _feed(self, data: bytes, t: float) -> None:
        if self.mode == "chunked" and not self.buf and not self.head:
            j = data.find(b"\r\n")  # fast path: exactly one whole, non-empty chunk
            if 0 < j < 9 and j + 4 < len(data) and data.endswith(b"\r\n"):
                try:
                    size = int(data[:j], 16)
                except ValueError:  # a chunk extension or garbage: the general path decides
                    size = -1
                if len(data) == j + 4 + size:
                    self._body(data[j + 2:-2], t)
                    return
        buf = self.buf + data if self.buf else data
        if self.head:
            i = buf.find(b"\r\n\r\n")
            if i < 0:
                if len(buf) > 65536:
                    raise ValueError("response headers larger than 64 KiB")
                self.buf = buf
                return
            lines = buf[:i].decode("latin-1").split("\r\n")
            self.status = int(lines[0].split(" ", 2)[1])
            headers = {}
            for ln in lines[1:]:
                k, _, v = ln.partition(":")
                headers[k.strip().lower()] = v.strip()
            buf = buf[i + 4:]
            self.head = False
            if "chunked" in headers.get("transfer-encoding", "").lower():
                self.mode = "chunked"
            elif "content-length" in headers:
                self.mode, self.left = "length", int(headers["content-length"])
        if self.mode == "chunked":
            pos, parts = 0, []
            while True:
                j = buf.find(b"\r\n", pos)
                if j < 0:
                    break
                size = int(buf[pos:j].split(b";", 1)[0], 16)
                if size == 0:
                    self.complete = True
                    pos = len(buf)
                    break
                end = j + 2 + size
                if len(buf) < end + 2:
                    break
                parts.append(buf[j + 2:end])
                pos = end + 2
            self.buf = buf[pos:]
            if parts:
                self._body(parts[0] if len(parts) == 1 else b"".join(parts), t)
        elif self.mode == "length":
            take = buf[:self.left]
            self.left -= len(take)
            self.buf = b""
            if take:
                self._body(take, t)
            self.complete = self.left <= 0
        else:
            self.buf = b""
            if buf:
                self._body(buf, t)
        if self.complete:
            self._finish(None)

    def connection_lost(self, exc) -> None:
        if self.mode == "close" and not self.head and exc is None:
            self.complete = True
        if self.complete:
            self._finish(None)
        else:
            self._finish("connection closed before the response ended"
                         + (f" ({type(exc).__name__}: {exc})" if exc else ""))

    def _finish(self, error: Optional[str]) -> None:
        if self.done.done():
            return
        if error is None and self.status == 200:
            self.sse.close()
        self.done.set_result(error)
        if self.transport is not None and not self.transport.is_closing():
            if error is None:
                self.transport.close()
            else:
                self.transport.abort()


class _Client:
    def __init__(self, url: str, model: str, timeout_s: float, extra_body: Optional[Dict] = None,
                 api_key: Optional[str] = None) -> None:
        u = urlsplit(base_url(url))
        self.host = u.hostname or "127.0.0.1"
        self.port = u.port or (443 if u.scheme == "https" else 80)
        self.ssl = ssl.create_default_context() if u.scheme == "https" else None
        self.path = (u.path or "") + "/v1/completions"
        self.host_header = u.netloc
        self.model = model
        self.timeout_s = timeout_s
        self.extra_body = extra_body or {}
        self.auth = f"Authorization: Bearer {api_key}\r\n" if api_key else ""
        self.in_flight = 0
        self.max_in_flight = 0
        self.buffer = memoryview(bytearray(RECV_BUFFER))  # one loop, one read at a time: shared

    def body(self, rec: _Rec, ids: List[int]) -> Dict:
        b = {"model": self.model, "prompt": ids, "max_tokens": rec.output_tokens, "ignore_eos": True,
             "temperature": 0.0, "stream": True,
             "stream_options": {"include_usage": True, "continuous_usage_stats": True}}
        b.update(self.extra_body)
        return b

    def request(self, rec: _Rec, ids: List[int]) -> bytes:
        body = json.dumps(self.body(rec, ids), separators=(",", ":")).encode()
        rid = "".join(c if "!" <= c <= "~" else "_" for c in str(rec.request_id))  # a safe header value
        head = (f"POST {self.path} HTTP/1.1\r\nHost: {self.host_header}\r\n"
                f"User-Agent: vidur-specdec-replay\r\nContent-Type: application/json\r\n"
                f"Accept: text/event-stream\r\nX-Request-Id: {rid}\r\n{self.auth}"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n")
        return head.encode("latin-1") + body

    async def one(self, rec: _Rec, request: bytes) -> None:
        loop = asyncio.get_running_loop()
        rec.sent = time.monotonic()
        self.in_flight += 1
        if self.in_flight > self.max_in_flight:
            self.max_in_flight = self.in_flight
        done = loop.create_future()
        proto = None
        try:
            async with asyncio.timeout(self.timeout_s):
                _, proto = await loop.create_connection(lambda: _Response(request, rec, done, self.buffer), self.host,
                                                        self.port, ssl=self.ssl)
                error = await done
            if proto.status != 200:
                text = proto.error_body.decode("utf-8", "replace")[:300].replace("\n", " ")
                rec.error = f"HTTP {proto.status}: {text}" if proto.status else (error or "no HTTP response")
            elif error:
                rec.error = error
            elif not rec.done:
                rec.error = "stream ended without [DONE]"
            elif rec.tokens != rec.output_tokens:
                rec.error = f"received {rec.tokens} of {rec.output_tokens} tokens"
            else:
                rec.status = "ok"
        except TimeoutError:
            rec.status = "timeout"
            rec.error = f"no complete response within {self.timeout_s:g} s"
        except (OSError, ValueError) as e:
            rec.status = "error"
            rec.error = f"{type(e).__name__}: {str(e)[:200]}".replace("\n", " ")
        finally:
            self.in_flight -= 1
            if proto is not None and proto.transport is not None and not proto.transport.is_closing():
                proto.transport.abort()


def fetch_model_name(url: str, timeout_s: float = 10.0, api_key: Optional[str] = None,
                     deadline_s: Optional[float] = None) -> str:
    """The first model id listed by ``GET /v1/models`` (``timeout_s`` per read, ``deadline_s`` in all, s)."""
    u = base_url(url) + "/v1/models"
    try:
        body = http_get(u, timeout_s, DEFAULT_DEADLINE_S if deadline_s is None else deadline_s,
                        {"Authorization": f"Bearer {api_key}"} if api_key else {})
        data = json.loads(body.decode())
        return str(data["data"][0]["id"])
    except ServiceError as e:
        raise ServiceError(f"{e}; pass --model") from None
    except (ValueError, KeyError, IndexError, TypeError) as e:
        raise ServiceError(f"--url: cannot list models at {u}: {str(e)[:120]}; pass --model") from None


async def replay_async(url: str, trace: pd.DataFrame, model: str, timeout_s: float = 600.0,
                       extra_body: Optional[Dict] = None, api_key: Optional[str] = None) -> ReplayResult:
    """Replay ``trace`` (from :func:`~vidur_specdec.validate.workload.load_trace`) against ``url``.

    Requests are serialised before the schedule starts; each one is started by
    a timer at its arrival offset (``loop.call_at``) on a fresh connection.
    """
    client = _Client(url, model, timeout_s, extra_body, api_key)
    trace = with_token_ids(trace, 0)  # rows without ids get generate's ids (seed 0), as `validate run` draws them
    rows = list(trace.itertuples(index=False))
    recs = [_Rec(r.request_id, float(r.arrival_offset_s), int(r.prompt_tokens), int(r.output_tokens)) for r in rows]
    requests = [client.request(rec, list(r.prompt_token_ids)) for rec, r in zip(recs, rows)]
    loop = asyncio.get_running_loop()
    tasks: List[asyncio.Task] = []
    all_started = loop.create_future()

    def start(i: int) -> None:
        tasks.append(loop.create_task(client.one(recs[i], requests[i])))
        if len(tasks) == len(recs) and not all_started.done():
            all_started.set_result(None)

    t0 = loop.time() + START_LEAD_S
    scheduled = [t0 + rec.arrival for rec in recs]
    for i, when in enumerate(scheduled):
        loop.call_at(when, start, i)
    await all_started
    await asyncio.gather(*tasks)
    wall = loop.time() - t0
    return _result(recs, scheduled, t0, client.max_in_flight, wall)


def replay(url: str, trace: pd.DataFrame, model: Optional[str] = None, timeout_s: float = 600.0,
           extra_body: Optional[Dict] = None, api_key: Optional[str] = None) -> ReplayResult:
    """Blocking wrapper around :func:`replay_async` (asks the server for the model if not given).

    Objects that exist before the replay are frozen out of the garbage
    collector, and full collections are put off, for its duration: a full
    collection over a large heap (pandas, Vidur) pauses the event loop for
    100 ms or more, which would show up as send lateness.
    """
    model = model or fetch_model_name(url, api_key=api_key)
    raise_fd_limit()
    thresholds = gc.get_threshold()
    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 50, 1_000_000)  # young collections only, while the replay runs
    try:
        return asyncio.run(replay_async(url, trace, model, timeout_s, extra_body, api_key))
    finally:
        gc.set_threshold(*thresholds)
        gc.unfreeze()


def _result(recs: List[_Rec], scheduled: List[float], t0: float, max_in_flight: int, wall: float) -> ReplayResult:
    rows, chunk_log = [], []
    nan = math.nan
    for rec, sched in zip(recs, scheduled):
        sent = rec.sent - t0
        ok = rec.status == "ok"
        first = rec.times[0] - t0 if rec.times else nan
        last = rec.times[-1] - t0 if rec.times else nan
        n = rec.output_tokens
        chunks = len(rec.times)
        rows.append({
            "request_id": rec.request_id,
            "arrived_at_s": sent,
            "prompt_tokens": rec.prompt_tokens,
            "output_tokens": n,
            "ttft_ms": (first - sent) * 1e3 if ok else nan,
            "tpot_ms": (last - first) / (n - 1) * 1e3 if ok and n > 1 else nan,
            "e2e_ms": (last - sent) * 1e3 if ok else nan,
            "decode_steps": chunks - 1 if ok else nan,
            "guesses": nan,
            "accepted_tokens": rec.tokens - chunks if ok else nan,
            "restarts": nan,
            "scheduled_at_s": nan,
            "first_token_s": first if ok else nan,
            "completed_at_s": last if ok else nan,
            "status": rec.status,
            "error": rec.error,
            "chunks": chunks,
            "tokens_received": rec.tokens,
            "sent_at_s": sent,
            "scheduled_send_s": sched - t0,
            "lateness_ms": (rec.sent - sched) * 1e3,
            "finish_reason": rec.finish_reason or "",
            "token_counts": rec.count_source,
        })
        chunk_log.append({"request_id": rec.request_id, "status": rec.status, "sent_s": sent,
                          "chunk_s": [t - t0 for t in rec.times], "tokens": rec.counts})
    frame = pd.DataFrame(rows, columns=MEASURED_COLUMNS)
    late = frame["lateness_ms"].to_numpy(float)
    stats = {
        "num_requests": len(frame),
        "status_counts": frame["status"].value_counts().to_dict(),
        "max_in_flight": int(max_in_flight),
        "lateness_ms_p50": float(np.percentile(late, 50)) if len(late) else nan,
        "lateness_ms_p99": float(np.percentile(late, 99)) if len(late) else nan,
        "lateness_ms_max": float(late.max()) if len(late) else nan,
        "wall_s": float(wall),
    }
    return ReplayResult(frame, chunk_log, stats)


def chunk_log_jsonl(chunks: List[Dict]) -> str:
    """The per-chunk log as JSON lines (times in s from the replay's start)."""
    out = []
    for c in chunks:
        rid = c["request_id"]
        out.append(json.dumps({**c, "request_id": rid.item() if hasattr(rid, "item") else rid,
                               "chunk_s": [round(t, 6) for t in c["chunk_s"]]}))
    return "\n".join(out) + "\n"
