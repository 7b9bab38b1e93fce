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
import signal
import threading
import time
from typing import Callable, List, Optional

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from vidur_specdec.validate.fake_engine import FakeEngine, FakeEngineConfig, _Req

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
