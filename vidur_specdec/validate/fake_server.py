"""A fake vLLM OpenAI-compatible server: a simple speculative engine, for tests without a GPU.

Endpoints: ``POST /v1/completions`` (streaming SSE in the OpenAI completions
format, or one JSON body without ``stream``), ``GET /v1/models``, ``GET /health``
and ``GET /metrics`` (Prometheus text with vLLM's counter names and semantics).

The engine is a loop of steps. Each step takes the running decodes first
(each charged ``1 + k`` tokens: the bonus token plus ``k`` guesses, fewer when
the step's token budget runs short), then prefill chunks of running and then
waiting requests under the token budget (``max_num_batched_tokens``), subject to
``max_num_seqs`` and the KV block budget (``num_gpu_blocks`` × ``block_size``;
a request holds blocks for prompt + max_tokens + k tokens while it runs).
A step lasts ``base_ms + per_req_ms·requests + per_token_ms·tokens`` or, when
``step_time_fn`` is given, whatever it returns for the step's exact composition
(see :mod:`vidur_specdec.validate.cost`). Steps are paced against absolute
deadlines (a step that starts up to 5 ms late is caught up by the next), so
event-loop wake-up jitter does not add to step times.

At the end of a step a request that finished its prompt emits its first token;
a decoding request drafts ``k`` guesses, accepts a prefix of them (i.i.d. α,
or conditional per-position rates, stop at the first rejection; draws from a
per-request seeded stream) and emits ``accepted + 1`` tokens, truncated at
``max_tokens``. Counters follow vLLM v1 (``vllm/v1/spec_decode/metrics.py``):
one draft per decoding request per step, its draft tokens, its accepted
tokens, and for each position ``p = 0..k-1`` a count of drafts that accepted
more than ``p`` guesses (label ``position``) — counted before truncation at
``max_tokens``, as vLLM does. ``vllm:cache_config_info`` is a gauge set to 1
whose labels carry the cache config, ``num_gpu_blocks`` among them.

Faults, chosen per request by its ``X-Request-Id`` header: ``fail`` (HTTP 500
before streaming), ``abort`` (the connection is cut after
``abort_after_chunks`` chunks) and ``hang`` (headers sent, then nothing).

Use :class:`FakeServer` (a background thread; ``with FakeServer(cfg) as srv:
srv.url``) or ``python -m vidur_specdec.validate fake-server``.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import zlib
from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Tuple

import numpy as np
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, generate_latest
import signal

FAULTS = ("fail", "abort", "hang")
CATCH_UP_S = 0.005  # a step that starts this late is not caught up: the clock restarts


@dataclass
class StepInfo:
    """Exact composition of one fake-engine step (what ``step_time_fn`` receives)."""

    num_tokens: int
    decode_q: List[int]  # 1 + guesses, per decoding request
    decode_ctx: List[int]  # tokens in KV before the step, per decoding request
    prefill: List[Tuple[int, int]]  # (tokens before the chunk, chunk tokens), per prefill chunk


@dataclass
class FakeEngineConfig:
    k: int = 4  # guesses per draft; 0 = no speculation (no spec-decode counters exposed)
    alpha: float = 0.7  # i.i.d. acceptance per guess
    per_position: Optional[List[float]] = None  # conditional rates alpha_1..alpha_k; overrides alpha
    base_ms: float = 4.0
    per_req_ms: float = 0.02
    per_token_ms: float = 0.005
    step_time_fn: Optional[Callable[[StepInfo], float]] = None
    max_num_seqs: int = 256
    max_num_batched_tokens: int = 2048
    num_gpu_blocks: int = 20000
    block_size: int = 16
    seed: int = 0
    model: str = "fake-model"
    faults: Dict[str, str] = field(default_factory=dict)  # X-Request-Id -> fail | abort | hang
    abort_after_chunks: int = 2
    metrics_fault: Optional[str] = None  # GET /metrics: "garbage" text, or "trickle" (one byte every 2 s)

    def __post_init__(self) -> None:
        import math
        from numbers import Integral, Real

        if isinstance(self.k, bool) or not isinstance(self.k, Integral) or not 0 <= self.k <= 64:
            raise ValueError(f"k must be an integer in [0, 64], got {self.k!r}")
        rates = [self.alpha] + list(self.per_position or [])
        if not all(isinstance(a, Real) and 0.0 <= a <= 1.0 for a in rates):
            raise ValueError(f"acceptance rates (alpha, per_position) must be numbers in [0, 1], got {rates!r}")
        for name in ("base_ms", "per_req_ms", "per_token_ms"):
            v = getattr(self, name)
            if not (isinstance(v, Real) and math.isfinite(v) and v >= 0):
                raise ValueError(f"{name} must be a finite number >= 0, got {v!r}")
        if self.per_position is not None and len(self.per_position) != self.k:
            raise ValueError(f"per_position needs k = {self.k} rates, got {len(self.per_position)}")
        bad = {m for m in self.faults.values() if m not in FAULTS}
        if bad:
            raise ValueError(f"unknown fault modes {sorted(bad)}; allowed: {FAULTS}")

    def rates(self) -> List[float]:
        return list(self.per_position) if self.per_position is not None else [self.alpha] * self.k


class _Req:
    __slots__ = ("rid", "prompt_tokens", "max_tokens", "computed", "generated", "queue", "rng", "blocks",
                 "aborted")

    def __init__(self, rid: str, prompt_tokens: int, max_tokens: int, seed: int, blocks: int) -> None:
        self.rid = rid
        self.prompt_tokens = prompt_tokens
        self.max_tokens = max_tokens
        self.computed = 0  # prompt tokens prefilled so far
        self.generated = 0
        self.queue: asyncio.Queue = asyncio.Queue()
        self.rng = np.random.default_rng([seed, zlib.crc32(rid.encode())])
        self.blocks = blocks
        self.aborted = False

    @property
    def decoding(self) -> bool:
        return self.computed >= self.prompt_tokens


class _Metrics:
    """vLLM's counters on a private registry (names and semantics of vLLM v1)."""

    def __init__(self, cfg: FakeEngineConfig) -> None:
        self.registry = reg = CollectorRegistry()
        lab, val = ["model_name", "engine"], [cfg.model, "0"]
        self.prompt_tokens = Counter("vllm:prompt_tokens", "Number of prefill tokens processed.", lab,
                                     registry=reg).labels(*val)
        self.generation_tokens = Counter("vllm:generation_tokens", "Number of generation tokens processed.", lab,
                                         registry=reg).labels(*val)
        self.running = Gauge("vllm:num_requests_running", "Number of requests in model execution batches.", lab,
                             registry=reg).labels(*val)
        self.waiting = Gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", lab,
                             registry=reg).labels(*val)
        info = {
            "block_size": str(cfg.block_size), "cache_dtype": "auto", "enable_prefix_caching": "False",
            "gpu_memory_utilization": "0.9", "num_cpu_blocks": "None", "num_gpu_blocks": str(cfg.num_gpu_blocks),
            "num_gpu_blocks_override": "None", "engine": "0",
        }
        Gauge("vllm:cache_config_info", "Information of the LLMEngine CacheConfig", list(info),
              registry=reg).labels(**info).set(1)
        self.spec = cfg.k > 0
        if self.spec:
            self.drafts = Counter("vllm:spec_decode_num_drafts", "Number of spec decoding drafts.", lab,
                                  registry=reg).labels(*val)
            self.draft_tokens = Counter("vllm:spec_decode_num_draft_tokens", "Number of draft tokens.", lab,
                                        registry=reg).labels(*val)
            self.accepted = Counter("vllm:spec_decode_num_accepted_tokens", "Number of accepted tokens.", lab,
                                    registry=reg).labels(*val)
            per_pos = Counter("vllm:spec_decode_num_accepted_tokens_per_pos", "Accepted tokens per draft position.",
                              lab + ["position"], registry=reg)
            self.per_pos = [per_pos.labels(*val, str(p)) for p in range(cfg.k)]

    def observe_draft(self, guesses: int, accepted: int) -> None:
        self.drafts.inc()
        self.draft_tokens.inc(guesses)
        self.accepted.inc(accepted)
        for p in range(accepted):
            self.per_pos[p].inc()


class FakeEngine:
    """The step loop; lives on the server's event loop."""

    def __init__(self, cfg: FakeEngineConfig) -> None:
        self.cfg = cfg
        self.metrics = _Metrics(cfg)
        self.waiting: deque = deque()
        self.running: List[_Req] = []
        self.free_blocks = cfg.num_gpu_blocks
        self._rates = cfg.rates()
        self._wake = asyncio.Event()
        self.steps = 0

    def add(self, rid: str, prompt_tokens: int, max_tokens: int) -> _Req:
        c = self.cfg
        blocks = -(-(prompt_tokens + max_tokens + c.k) // c.block_size)
        if blocks > c.num_gpu_blocks:
            raise ValueError(f"request needs {blocks} KV blocks, the server has {c.num_gpu_blocks}")
        r = _Req(rid, prompt_tokens, max_tokens, c.seed, blocks)
        self.waiting.append(r)
        self._wake.set()
        return r

    def _accepted(self, r: _Req, guesses: int) -> int:
        u = r.rng.random(len(self._rates))
        a = 0
        while a < guesses and u[a] < self._rates[a]:
            a += 1
        return a

    def _release(self, r: _Req) -> None:
        self.free_blocks += r.blocks
        r.blocks = 0

    def _compose(self):
        c = self.cfg
        for r in [r for r in self.running if r.aborted]:
            self._release(r)
        self.running = [r for r in self.running if not r.aborted]
        while self.waiting and self.waiting[0].aborted:
            self.waiting.popleft()
        budget = c.max_num_batched_tokens
        decodes, prefills = [], []
        for r in self.running:
            if r.decoding:
                g = max(0, min(c.k, budget - 1))
                decodes.append((r, g))
                budget -= 1 + g
        for r in self.running:
            if not r.decoding and budget > 0:
                chunk = min(r.prompt_tokens - r.computed, budget)
                prefills.append((r, chunk))
                budget -= chunk
        while (self.waiting and budget > 0 and len(self.running) < c.max_num_seqs
               and self.waiting[0].blocks <= self.free_blocks):
            r = self.waiting.popleft()
            if r.aborted:
                continue
            self.free_blocks -= r.blocks
            self.running.append(r)
            chunk = min(r.prompt_tokens, budget)
            prefills.append((r, chunk))
            budget -= chunk
        return decodes, prefills

    def _step_ms(self, decodes, prefills) -> float:
        c = self.cfg
        info = StepInfo(
            num_tokens=sum(1 + g for _, g in decodes) + sum(ch for _, ch in prefills),
            decode_q=[1 + g for _, g in decodes],
            decode_ctx=[r.prompt_tokens + r.generated - 1 for r, _ in decodes],
            prefill=[(r.computed, ch) for r, ch in prefills],
        )
        if c.step_time_fn is not None:
            return float(c.step_time_fn(info))
        return c.base_ms + c.per_req_ms * (len(decodes) + len(prefills)) + c.per_token_ms * info.num_tokens

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time()
        m = self.metrics
        while True:
            if not self.waiting and not self.running:
                self._wake.clear()
                await self._wake.wait()
                deadline = loop.time()
            decodes, prefills = self._compose()
            m.running.set(len(self.running))
            m.waiting.set(len(self.waiting))
            if not decodes and not prefills:
                self._wake.clear()
                await asyncio.sleep(0.001)  # KV budget full of aborted work: retry soon
                continue
            now = loop.time()
            if now - deadline > CATCH_UP_S:  # far behind (a stalled loop): restart the clock
                deadline = now
            deadline += self._step_ms(decodes, prefills) * 1e-3
            if deadline > now:
                await asyncio.sleep(deadline - now)
            self.steps += 1
            for r, g in decodes:
                if r.aborted:
                    continue
                acc = self._accepted(r, g) if g > 0 else 0
                if g > 0:
                    m.observe_draft(g, acc)
                n = min(acc + 1, r.max_tokens - r.generated)
                self._emit(r, n)
            for r, ch in prefills:
                if r.aborted:
                    continue
                r.computed += ch
                m.prompt_tokens.inc(ch)
                if r.decoding:
                    self._emit(r, 1)

    def _emit(self, r: _Req, n: int) -> None:
        r.generated += n
        self.metrics.generation_tokens.inc(n)
        done = r.generated >= r.max_tokens
        r.queue.put_nowait((n, done))
        if done:
            self._release(r)
            self.running.remove(r)


# --------------------------------------------------------------------------- HTTP


class FakeServer:
    """The fake server on ``host:port`` (port 0: an ephemeral port); ``start()`` runs it in a thread."""

    def __init__(self, cfg: Optional[FakeEngineConfig] = None, host: str = "127.0.0.1", port: int = 0) -> None:
        self.cfg = cfg or FakeEngineConfig()
        self.host, self.port = host, port
        self.engine: Optional[FakeEngine] = None
        self.requests_seen: List[str] = []
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._thread: Optional[threading.Thread] = None
        self._runner: Optional[web.AppRunner] = None
        self._engine_task = None
        self._stopping: Optional[asyncio.Event] = None
        self._n = 0

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    # ------------------------------------------------------------------ lifecycle
    async def start_async(self) -> None:
        self.engine = FakeEngine(self.cfg)
        self._stopping = asyncio.Event()
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/completions", self._completions)
        app.router.add_get("/v1/models", self._models)
        app.router.add_get("/health", self._health)
        app.router.add_get("/metrics", self._metrics)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0, handler_cancellation=True)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, backlog=4096)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]
        self._engine_task = asyncio.get_running_loop().create_task(self.engine.run())

    async def stop_async(self) -> None:
        self._stopping.set()
        if self._engine_task:
            self._engine_task.cancel()
        if self._runner:
            await self._runner.cleanup()

    def start(self) -> "FakeServer":
        ready = threading.Event()
        err: List[BaseException] = []

        def main() -> None:
            loop = self._loop = asyncio.new_event_loop()
            try:
                loop.run_until_complete(self.start_async())
            except BaseException as e:  # noqa: BLE001 - reported to the starting thread
                err.append(e)
                ready.set()
                return
            ready.set()
            loop.run_forever()
            loop.close()

        self._thread = threading.Thread(target=main, name="fake-vllm", daemon=True)
        self._thread.start()
        ready.wait(30)
        if err:
            raise err[0]
        return self

    def stop(self) -> None:
        if self._loop is None:
            return
        fut = asyncio.run_coroutine_threadsafe(self.stop_async(), self._loop)
        try:
            fut.result(10)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
            self._loop = None

    def __enter__(self) -> "FakeServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # ------------------------------------------------------------------ handlers
    async def _health(self, request: web.Request) -> web.Response:
        return web.Response(text="")

    async def _models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [
            {"id": self.cfg.model, "object": "model", "created": 0, "owned_by": "fake", "max_model_len": 1_000_000}]})

    async def _metrics(self, request: web.Request) -> web.Response:
        if self.cfg.metrics_fault == "garbage":
            return web.Response(text="<html><body>{{ not metrics }}</body></html>\n",
                                headers={"Content-Type": "text/plain"})
        if self.cfg.metrics_fault == "trickle":  # one byte every 2 s, for up to 10 minutes
            resp = web.StreamResponse(headers={"Content-Type": "text/plain"})
            await resp.prepare(request)
            for _ in range(300):
                await resp.write(b"#")
                await asyncio.sleep(2.0)
            return resp
        return web.Response(body=generate_latest(self.engine.metrics.registry),
                            headers={"Content-Type": CONTENT_TYPE_LATEST})

    @staticmethod
    def _error(status: int, message: str) -> web.Response:
        return web.json_response({"object": "error", "message": message, "type": "BadRequestError",
                                  "code": status}, status=status)

    async def _completions(self, request: web.Request) -> web.StreamResponse:
        try:
            body = await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            return self._error(400, "body is not JSON")
        self._n += 1
        rid = request.headers.get("X-Request-Id") or f"anon-{self._n}"
        self.requests_seen.append(rid)
        fault = self.cfg.faults.get(rid)
        if fault == "fail":
            return self._error(500, f"injected failure for request {rid}")
        prompt = body.get("prompt")
        if isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt):
            prompt_tokens = len(prompt)
        elif isinstance(prompt, str) and prompt:
            prompt_tokens = len(prompt.split())
        else:
            return self._error(400, "prompt must be a non-empty list of token ids or a string")
        max_tokens = body.get("max_tokens", 16)
        if not isinstance(max_tokens, int) or max_tokens < 1:
            return self._error(400, "max_tokens must be an integer >= 1")
        if body.get("model") not in (None, self.cfg.model):
            return self._error(404, f"The model `{body.get('model')}` does not exist.")
        opts = body.get("stream_options") or {}
        stream = bool(body.get("stream"))
        try:
            req = None if fault == "hang" else self.engine.add(rid, prompt_tokens, max_tokens)
        except ValueError as e:
            return self._error(400, str(e))
        if not stream:
            return await self._whole(req, rid, prompt_tokens)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await resp.prepare(request)
        if req is None:  # hang: headers out, then silence until the client gives up or the server stops
            await self._stopping.wait()
            return resp
        created = int(time.time())
        cum = chunks = 0
        try:
            while True:
                n, done = await req.queue.get()
                cum += n
                chunk = {"id": f"cmpl-{rid}", "object": "text_completion", "created": created,
                         "model": self.cfg.model,
                         "choices": [{"index": 0, "text": " tok" * n, "logprobs": None,
                                      "finish_reason": "length" if done else None, "stop_reason": None}]}
                if opts.get("include_usage") and opts.get("continuous_usage_stats"):
                    chunk["usage"] = {"prompt_tokens": prompt_tokens, "completion_tokens": cum,
                                      "total_tokens": prompt_tokens + cum}
                await resp.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
                chunks += 1
                if fault == "abort" and chunks >= self.cfg.abort_after_chunks and not done:
                    req.aborted = True
                    if request.transport is not None:
                        request.transport.abort()
                    return resp
                if done:
                    break
            if opts.get("include_usage"):
                usage = {"id": f"cmpl-{rid}", "object": "text_completion", "created": created,
                         "model": self.cfg.model, "choices": [],
                         "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": cum,
                                   "total_tokens": prompt_tokens + cum}}
                await resp.write(b"data: " + json.dumps(usage).encode() + b"\n\n")
            await resp.write(b"data: [DONE]\n\n")
            await resp.write_eof()
        except (ConnectionError, asyncio.CancelledError):
            req.aborted = True  # the client went away: vLLM aborts the request too
            raise
        return resp

    async def _whole(self, req: Optional[_Req], rid: str, prompt_tokens: int) -> web.Response:
        if req is None:
            await self._stopping.wait()
            return self._error(503, "server stopping")
        try:
            while True:
                n, done = await req.queue.get()
                if done:
                    break
        except asyncio.CancelledError:
            req.aborted = True
            raise
        return web.json_response({"id": f"cmpl-{rid}", "object": "text_completion", "model": self.cfg.model,
                                  "choices": [{"index": 0, "text": " tok" * req.generated, "finish_reason": "length"}],
                                  "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": req.generated,
                                            "total_tokens": prompt_tokens + req.generated}})


async def serve_forever(cfg: FakeEngineConfig, host: str, port: int, on_ready: Callable[[str], None]) -> None:
    """Run the server on the current event loop until cancelled, SIGINT or SIGTERM."""
    srv = FakeServer(cfg, host, port)
    await srv.start_async()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError, ValueError):  # not the main thread, or no signals here
            pass
    on_ready(srv.url)
    try:
        await stop.wait()
    finally:
        await srv.stop_async()
