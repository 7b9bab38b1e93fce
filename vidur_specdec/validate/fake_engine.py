"""The engine behind the fake vLLM server (:mod:`vidur_specdec.validate.fake_server`): its config, its requests,
its step loop and its Prometheus counters; the server's docstring says what a step does and counts.
"""

from __future__ import annotations

import asyncio
import zlib
from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Tuple

import numpy as np
from prometheus_client import CollectorRegistry, Counter, Gauge


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

        def metric(kind, name: str, doc: str):  # one of vLLM's metrics, labelled with the model and engine 0
            return kind(name, doc, lab, registry=reg).labels(*val)

        self.prompt_tokens = metric(Counter, "vllm:prompt_tokens", "Number of prefill tokens processed.")
        self.generation_tokens = metric(Counter, "vllm:generation_tokens", "Number of generation tokens processed.")
        self.running = metric(Gauge, "vllm:num_requests_running", "Number of requests in model execution batches.")
        self.waiting = metric(Gauge, "vllm:num_requests_waiting", "Number of requests waiting to be processed.")
        info = {
            "block_size": str(cfg.block_size), "cache_dtype": "auto", "enable_prefix_caching": "False",
            "gpu_memory_utilization": "0.9", "num_cpu_blocks": "None", "num_gpu_blocks": str(cfg.num_gpu_blocks),
            "num_gpu_blocks_override": "None", "engine": "0",
        }
        Gauge("vllm:cache_config_info", "Information of the LLMEngine CacheConfig", list(info),
              registry=reg).labels(**info).set(1)
        self.spec = cfg.k > 0
        if self.spec:
            self.drafts = metric(Counter, "vllm:spec_decode_num_drafts", "Number of spec decoding drafts.")
            self.draft_tokens = metric(Counter, "vllm:spec_decode_num_draft_tokens", "Number of draft tokens.")
            self.accepted = metric(Counter, "vllm:spec_decode_num_accepted_tokens", "Number of accepted tokens.")
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
