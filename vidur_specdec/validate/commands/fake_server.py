"""``validate fake-server``: serve a fake vLLM (simple speculative engine, vLLM counters)."""

from __future__ import annotations

import asyncio

from vidur_specdec.config import ConfigError
from vidur_specdec.config.schema import MAX_K
from vidur_specdec.console import SEED, ranged
from vidur_specdec.validate.cost import pricer_for


def add_arguments(p) -> None:
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000, help="0 picks a free port")
    p.add_argument("--port-file", help="write the chosen port here once listening")
    p.add_argument("--k", type=ranged(int, 0, MAX_K), default=4)
    p.add_argument("--alpha", type=ranged(float, 0, 1), default=0.7)
    p.add_argument("--per-position", type=ranged(float, 0, 1), nargs="+", help="conditional rates a_1..a_k (overrides --alpha)")
    p.add_argument("--base-ms", type=ranged(float, 0, 1e6), default=4.0)
    p.add_argument("--per-req-ms", type=ranged(float, 0, 1e6), default=0.02)
    p.add_argument("--per-token-ms", type=ranged(float, 0, 1e6), default=0.005)
    p.add_argument("--cost-config", help="price steps with the simulator's cost model of this run config instead")
    p.add_argument("--max-num-seqs", type=ranged(int, 1, 1 << 20), default=256)
    p.add_argument("--max-num-batched-tokens", type=ranged(int, 1, 1 << 24), default=2048)
    p.add_argument("--num-gpu-blocks", type=ranged(int, 1, 1 << 30), default=20000)
    p.add_argument("--block-size", type=ranged(int, 1, 1 << 12), default=16)
    p.add_argument("--seed", type=SEED, default=0)
    p.add_argument("--model", default="fake-model")
    p.add_argument("--metrics-fault", choices=("garbage", "trickle"),
                   help="GET /metrics answers garbage, or one byte every 2 s (to test a client's deadline)")
    for mode in ("fail", "abort", "hang"):
        p.add_argument(f"--{mode}", nargs="+", default=[], metavar="REQUEST_ID",
                       help=f"{mode} these requests (by X-Request-Id)")


def run(args) -> int:
    # lazy: start-up cost of aiohttp, prometheus_client
    from vidur_specdec.validate.fake_server import FakeEngineConfig, serve_forever

    if not 0 <= args.port <= 65535:
        raise ConfigError(f"--port: must be in [0, 65535] (0 picks a free port), got {args.port}")
    faults = {**{r: "fail" for r in args.fail}, **{r: "abort" for r in args.abort}, **{r: "hang" for r in args.hang}}
    step_fn = None
    if args.cost_config:
        # lazy: start-up cost of pandas
        from vidur_specdec.engine.resolve import load

        from vidur_specdec.pricing.plan import plan_from_lists

        pricer = pricer_for(load(args.cost_config))
        step_fn = lambda info: pricer.price(plan_from_lists(  # noqa: E731
            info.decode_q, info.decode_ctx, info.prefill, num_tokens=info.num_tokens)).duration_ms
    try:
        cfg = FakeEngineConfig(k=args.k, alpha=args.alpha, per_position=args.per_position, base_ms=args.base_ms,
                               per_req_ms=args.per_req_ms, per_token_ms=args.per_token_ms, step_time_fn=step_fn,
                               max_num_seqs=args.max_num_seqs, max_num_batched_tokens=args.max_num_batched_tokens,
                               num_gpu_blocks=args.num_gpu_blocks, block_size=args.block_size, seed=args.seed,
                               model=args.model, faults=faults, metrics_fault=args.metrics_fault)
    except ValueError as e:
        raise ConfigError(f"--per-position: {e}") from None

    def ready(url: str) -> None:
        if args.port_file:
            # lazy: start-up cost of pandas
            from vidur_specdec.validate.common import write_text

            write_text(args.port_file, url.rsplit(":", 1)[1] + "\n")
        print(f"fake vLLM server on {url} (k = {args.k}, alpha = {args.alpha}); Ctrl-C to stop", flush=True)

    # lazy: start-up cost of pandas
    from vidur_specdec.validate.common import raise_fd_limit

    raise_fd_limit()
    try:
        asyncio.run(serve_forever(cfg, args.host, args.port, ready))
    except KeyboardInterrupt:
        pass
    except OSError as e:
        raise ConfigError(f"--port: cannot listen on {args.host}:{args.port}: {e.strerror or e}") from None
    return 0
