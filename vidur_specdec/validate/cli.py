"""Command line of the validation harness (``python -m vidur_specdec.validate SUBCOMMAND``).

Subcommands: ``generate``, ``replay``, ``calibrate``, ``compare``, ``steps``,
``run`` (the whole loop) and ``fake-server``. Bad input exits with status 2
and one line on stderr; every file is written to a temporary name and
renamed, so nothing is left half-written.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path
from typing import List, Optional

from vidur_specdec.config import ConfigError
from vidur_specdec import console
from vidur_specdec import outfolder
from vidur_specdec.console import Parser
from vidur_specdec.validate.cost import CostModel
import shutil
from vidur_specdec.config.schema import MAX_K
from vidur_specdec.console import SEED, ranged

PROG = "python -m vidur_specdec.validate"


def _add_config(p, required=True) -> None:
    console.add_config(p, required=required, help="simulator run config (YAML)")
    console.add_set(p)


def _add_overwrite(p) -> None:
    p.add_argument("--overwrite", action="store_true",
                   help="replace the results already in --out (files this tool did not write are never removed)")


def _out_folder(args, command: str, resumes: bool = True) -> Path:
    """``--out`` checked by the one output-folder rule (:mod:`vidur_specdec.outfolder`); cleared when it says so."""
    out = Path(args.out)
    args._clear_out = outfolder.check(out, command, bool(getattr(args, "overwrite", False)), "--out", resumes)
    return out


def _clear_out(args, out: Path) -> None:
    """Just before the first write: remove the earlier results ``--overwrite`` replaces."""
    if getattr(args, "_clear_out", False) and out.is_dir():
        outfolder.clear(out)
        args._clear_out = False


def _add_workload(p) -> None:
    p.add_argument("--arrival", choices=("poisson", "gamma", "static"),
                   help="arrival process (default: the config's workload.arrival)")
    p.add_argument("--cv", type=float, default=1.0, help="gamma: coefficient of variation of the gaps (1 = Poisson)")
    p.add_argument("--seed", type=SEED, help="workload seed (default: the config's seed)")


def _add_replay(p) -> None:
    p.add_argument("--model", help="model name sent to the server (default: the first of GET /v1/models)")
    p.add_argument("--timeout-s", type=float, default=600.0, help="per-request limit, send to last token (s)")
    p.add_argument("--api-key", help="sent as 'Authorization: Bearer KEY' (a server started with --api-key)")
    p.add_argument("--deadline-s", type=float, default=30.0,
                   help="whole-request limit of GET /metrics and /v1/models, however slowly the server answers (s)")
    p.add_argument("--settle-s", type=float, default=1.0,
                   help="wait this long after the last response before scraping /metrics again (s)")


def _add_compare(p) -> None:
    p.add_argument("--acceptance", choices=("per_position", "alpha"), default="per_position",
                   help="which calibrated acceptance input the simulation uses")
    p.add_argument("--plotlyjs", choices=("inline", "cdn"), default="inline",
                   help="embed plotly.js in report.html (works offline) or link it from a CDN")


def build_parser() -> argparse.ArgumentParser:
    """The parser of ``python -m vidur_specdec.validate`` (the same options as ``... vidur_specdec validate``)."""
    ap = Parser(prog=PROG)
    add_arguments(ap)
    return ap


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """Sub-subcommands of ``python -m vidur_specdec validate``."""
    ap.description = ("Replay a workload against a vLLM server, calibrate the simulator from its counters, "
                      "simulate the same requests and compare; read engine step logs.")
    sub = ap.add_subparsers(dest="cmd", required=True, metavar="COMMAND", parser_class=Parser)

    p = sub.add_parser("generate", help="write a seeded trace (CSV or JSONL) from a config's workload section")
    _add_config(p)
    _add_workload(p)
    p.add_argument("--out", required=True, help="trace file, .csv or .jsonl")

    p = sub.add_parser("replay", help="replay a trace against a server; writes measured.csv")
    p.add_argument("--url", required=True, help="server root, e.g. http://127.0.0.1:8000")
    p.add_argument("--trace", required=True, help="trace file (CSV or JSONL)")
    p.add_argument("--out", required=True, help="output folder")
    _add_overwrite(p)
    p.add_argument("--no-scrape", action="store_true", help="do not scrape /metrics before and after")
    p.add_argument("--seed", type=SEED, default=0,
                   help="seeds the prompt token ids of trace rows that have none (as `validate run`; default 0)")
    _add_replay(p)

    p = sub.add_parser("calibrate", help="acceptance and KV budget from two /metrics scrapes")
    p.add_argument("--dir", help="folder holding metrics_before.prom and metrics_after.prom (from replay)")
    p.add_argument("--before", help="scrape taken before the replay")
    p.add_argument("--after", help="scrape taken after the replay")
    p.add_argument("--k", type=int, help="guesses per draft (default: from the counters)")
    p.add_argument("--acceptance", choices=("per_position", "alpha"), default="per_position",
                   help="acceptance input written to calibration.yaml")
    p.add_argument("--out", required=True, help="output folder (calibration.json, calibration.yaml)")
    _add_overwrite(p)

    p = sub.add_parser("compare", help="matched simulation of a trace, joined with measured.csv; report")
    _add_config(p)
    p.add_argument("--trace", required=True, help="the replayed trace")
    p.add_argument("--measured", required=True, help="measured.csv from replay")
    p.add_argument("--calibration", help="calibration.json (or its folder); without it the config is used as is")
    p.add_argument("--out", required=True, help="output folder")
    _add_overwrite(p)
    _add_compare(p)

    p = sub.add_parser("steps", help="read engine step logs: acceptance, step times, cost-model check")
    p.add_argument("--root", required=True, help="dataset root (holding steps/, tokens/, requests/, runs/)")
    p.add_argument("--out", required=True, help="output folder")
    _add_overwrite(p)
    _add_config(p, required=False)
    for key in ("gpu", "target", "split", "drafter", "k", "c", "start", "mode"):
        p.add_argument(f"--{key}", help=f"keep only runs with this {key} (any case; none matching is an error)")
    p.add_argument("--max-steps", type=int, help="cost-model check: at most this many steps per run (evenly spaced)")
    p.add_argument("--times-unit", choices=("s", "ms"), default="s", help="unit of requests.times")

    p = sub.add_parser("run", help="the whole loop: generate, replay, scrape, calibrate, simulate, compare")
    p.add_argument("--url", required=True, help="server root, e.g. http://127.0.0.1:8000")
    _add_config(p)
    p.add_argument("--out", required=True, help="output folder; must be new or empty (see --overwrite)")
    _add_overwrite(p)
    p.add_argument("--trace", help="replay this trace instead of generating one")
    _add_workload(p)
    _add_replay(p)
    _add_compare(p)

    p = sub.add_parser("fake-server", help="serve a fake vLLM (simple speculative engine, vLLM counters)")
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


# --------------------------------------------------------------------------- steps of the loop


def _load_cfg(args):
    # lazy: start-up cost of pandas
    from vidur_specdec.engine.resolve import load

    return load(args.config, args.overrides)


def _generate(args, cfg, out: Path):
    # lazy: start-up cost of pandas
    from vidur_specdec.validate.workload import generate_trace, write_trace

    df = generate_trace(cfg, args.arrival, args.cv, args.seed)
    write_trace(df, out)
    return df


def _scrape_text(url: str, deadline_s: Optional[float] = None):
    # lazy: start-up cost of pandas, prometheus_client
    from vidur_specdec.validate.counters import scrape

    if deadline_s is not None and not deadline_s > 0:
        raise ConfigError(f"--deadline-s: must be > 0, got {deadline_s}")
    return scrape(url, deadline_s=deadline_s)


def _replay(args, url: str, trace, out: Path, scrape: bool, before=None, require_measured: bool = False):
    # lazy: start-up cost of pandas
    from vidur_specdec.validate.common import check_measured, write_csv, write_json, write_text
    from vidur_specdec.validate.replay import chunk_log_jsonl, fetch_model_name, replay

    if args.timeout_s <= 0:
        raise ConfigError(f"--timeout-s: must be > 0, got {args.timeout_s}")
    if scrape and before is None:
        before = _scrape_text(url, args.deadline_s)
    model = args.model or fetch_model_name(url, api_key=args.api_key, deadline_s=args.deadline_s)
    res = replay(url, trace, model, args.timeout_s, api_key=args.api_key)
    errors = res.frame.loc[res.frame["status"] != "ok", "error"].dropna().astype(str)
    if len(errors):
        res.stats["top_error"] = f"{errors.value_counts().index[0][:120]} ({errors.value_counts().iloc[0]}x)"
    if require_measured or not res.stats.get("status_counts", {}).get("ok", 0):
        check_measured(res.stats)  # before anything is written; a server that answered nothing failed (exit 3)
    else:
        try:
            check_measured(res.stats)
        except ConfigError:
            raise
        except Exception as e:  # a replay on its own keeps what it measured, with a warning
            print(f"warning: {str(e).split(': ', 1)[-1]}", file=sys.stderr)
    _clear_out(args, out)
    write_csv(out / "measured.csv", res.frame)
    write_text(out / "chunks.jsonl", chunk_log_jsonl(res.chunks))
    write_json(out / "replay.json", {"url": url, "model": model, **res.stats})
    after = None
    if scrape:
        time.sleep(max(0.0, args.settle_s))
        after = _scrape_text(url, args.deadline_s)
        write_text(out / "metrics_before.prom", before.text)
        write_text(out / "metrics_after.prom", after.text)
    s = res.stats
    print(f"replayed {s['num_requests']} requests in {s['wall_s']:.1f} s: "
          + ", ".join(f"{v} {k}" for k, v in s["status_counts"].items())
          + f"; max {s['max_in_flight']} in flight; send lateness p50 {s['lateness_ms_p50']:.2f} ms, "
            f"p99 {s['lateness_ms_p99']:.2f} ms")
    return res, before, after


def _print_calibration(cal) -> None:
    if cal.alpha is None:
        print("calibration: no drafts observed; simulating without speculation"
              + (f"; {cal.num_gpu_blocks} KV blocks" if cal.num_gpu_blocks else ""))
    else:
        print(f"calibration: k = {cal.num_speculative_tokens}, mean acceptance length "
              f"{cal.mean_acceptance_length:.3f}, alpha {cal.alpha:.4f}, per position "
              f"[{', '.join(f'{x:.3f}' for x in cal.per_position)}], "
              f"KV blocks {cal.num_gpu_blocks if cal.num_gpu_blocks else 'not reported'}")
    for w in cal.warnings:
        print(f"warning: {w}", file=sys.stderr)


def _compare(args, config, trace_path: Path, trace, measured, cal, out: Path) -> None:
    # lazy: start-up cost of pandas
    from vidur_specdec.validate.common import write_csv, write_json
    from vidur_specdec.validate.compare import join, matched_config, simulate_matched, summarize
    from vidur_specdec.validate.report import write_report

    cfg = matched_config(config, trace_path, cal, args.acceptance, args.overrides)
    if cal is not None and cal.alpha is not None and not cfg.speculative.enabled:
        print("warning: the server drafted but the config's speculative.method is none; the simulation "
              "does not speculate", file=sys.stderr)
    res, sim = simulate_matched(cfg, trace)
    comp = join(trace, measured, sim)
    summary = summarize(comp, cal, res.summary, cfg)
    _clear_out(args, out)
    write_csv(out / "simulated.csv", sim)
    write_csv(out / "comparison.csv", comp)
    write_json(out / "comparison.json", summary)
    write_report(out / "report.html", comp, summary, plotlyjs=True if args.plotlyjs == "inline" else "cdn")
    ex = summary["excluded"]
    print(f"compared {summary['compared']} of {summary['requests']} requests"
          + (" (excluded: " + ", ".join(f"{v} {k}" for k, v in ex.items()) + ")" if ex else ""))
    for m, s in summary["metrics"].items():
        print(f"  {m.upper():4s} median |error| {s['median_abs_pct_error']:.1f} %, p50 ratio {s['ratio_p50']:.3f}, "
              f"p90 ratio {s['ratio_p90']:.3f} (simulated / measured)")
    print(f"wrote {out}/simulated.csv, comparison.csv, comparison.json, report.html")


def _provisional_check(config, overrides, trace_path: Path, before) -> None:
    """Before replaying: the matched config must be valid for this trace and the server's KV budget."""
    # lazy: start-up cost of pandas, prometheus_client
    from vidur_specdec.validate.calibrate import Calibration
    from vidur_specdec.validate.compare import matched_config
    from vidur_specdec.validate.counters import cache_info, spec_counters

    sc, cache = spec_counters(before), cache_info(before)
    k = (max(sc.per_pos) + 1) if sc.per_pos else 0
    cal = Calibration(0.5 if k else None, None, [0.5] * k, cache["num_gpu_blocks"], cache["block_size"], k,
                      0, 0, 0, [], None, None, [])
    cfg = matched_config(config, trace_path, cal, "per_position", overrides)
    # lazy: start-up cost of pandas, scipy, sklearn, vidur
    from vidur_specdec.engine.simulation import prepare

    prepare(cfg)  # raises ConfigError naming the key (lengths vs max_model_len, KV blocks)


# --------------------------------------------------------------------------- commands


def cmd_generate(args) -> int:
    cfg = _load_cfg(args)
    df = _generate(args, cfg, Path(args.out))
    print(f"wrote {args.out}: {len(df)} requests over {df['arrival_offset_s'].max():.1f} s "
          f"({args.arrival or cfg.workload.arrival} arrivals)")
    return 0


def cmd_replay(args) -> int:
    # lazy: start-up cost of pandas
    from vidur_specdec.validate.common import base_url
    from vidur_specdec.validate.workload import load_trace

    # lazy: start-up cost of pandas
    from vidur_specdec.validate.workload import with_token_ids

    url = base_url(args.url)
    trace = with_token_ids(load_trace(args.trace), args.seed)  # as `validate run --trace` draws missing ids
    out = _out_folder(args, "validate replay")
    _replay(args, url, trace, out, scrape=not args.no_scrape)
    print(f"wrote {out}/measured.csv, chunks.jsonl, replay.json"
          + ("" if args.no_scrape else ", metrics_before.prom, metrics_after.prom"))
    return 0


def cmd_calibrate(args) -> int:
    # lazy: start-up cost of pandas, prometheus_client
    from vidur_specdec.validate.calibrate import calibrate, write_calibration
    from vidur_specdec.validate.counters import read_snapshot

    if args.dir:
        before_p, after_p = Path(args.dir) / "metrics_before.prom", Path(args.dir) / "metrics_after.prom"
    elif args.before and args.after:
        before_p, after_p = Path(args.before), Path(args.after)
    else:
        raise ConfigError("--dir: give --dir, or both --before and --after")
    if args.k is not None and args.k < 1:
        raise ConfigError(f"--k: must be >= 1, got {args.k}")
    out = _out_folder(args, "validate calibrate")
    cal = calibrate(read_snapshot(before_p, "--before"), read_snapshot(after_p, "--after"), args.k)
    _clear_out(args, out)
    write_calibration(cal, args.out, args.acceptance)
    _print_calibration(cal)
    print(f"wrote {args.out}/calibration.json, calibration.yaml")
    return 0


def cmd_compare(args) -> int:
    # lazy: start-up cost of pandas, prometheus_client
    from vidur_specdec.validate.calibrate import read_calibration
    from vidur_specdec.validate.common import read_table_file
    from vidur_specdec.validate.compare import checked_measured
    from vidur_specdec.validate.workload import load_trace

    _load_cfg(args)
    _out_folder(args, "validate compare")
    trace = load_trace(args.trace)
    measured = checked_measured(read_table_file(args.measured, "--measured"), args.measured)
    cal = read_calibration(args.calibration) if args.calibration else None
    _compare(args, args.config, Path(args.trace), trace, measured, cal, Path(args.out))
    return 0


def cmd_steps(args) -> int:
    # lazy: start-up cost of pandas
    from vidur_specdec.validate.common import write_csv, write_json
    from vidur_specdec.validate.steplogs import analyze

    cost_model = cfg = None
    if args.config:
        cfg = _load_cfg(args)
        cost_model = CostModel.from_config(cfg)
    if args.max_steps is not None and args.max_steps < 1:
        raise ConfigError(f"--max-steps: must be >= 1, got {args.max_steps}")
    filters = {k: getattr(args, k) for k in ("gpu", "target", "split", "drafter", "k", "c", "start", "mode")}
    out = _out_folder(args, "validate steps")
    tables = analyze(args.root, cost_model, filters, args.max_steps, args.times_unit)
    warnings = []
    if args.config:  # flag runs whose GPU, model or method differ from the config
        # lazy: start-up cost of pandas, prometheus_client
        from vidur_specdec.validate.steplogs import config_mismatches

        warnings = config_mismatches(cfg, tables)
    _clear_out(args, out)
    for name, df in tables.items():
        write_csv(out / f"{name}.csv", df)
    notes = {"root": str(args.root), "filters": {k: v for k, v in filters.items() if v is not None},
             "outputs": {name: len(df) for name, df in tables.items()},
             "cost_model": cost_model.model if cost_model else None}
    if args.config:
        notes["warnings"] = warnings
        for w in warnings:
            print(f"warning: {w}", file=sys.stderr)
    write_json(out / "steps_summary.json", notes)
    for name, df in tables.items():
        print(f"  {name}.csv: {len(df)} rows")
    if "step_check_summary" in tables:
        s = tables["step_check_summary"]
        for r in s[s["kind"] == "all"].to_dict("records"):
            flag = f" [DIFFERS FROM CONFIG: {r['config_mismatch']}]" if r.get("config_mismatch") else ""
            print(f"  {r.get('gpu', '')} {r.get('target')} {r.get('drafter')} k={r.get('k')} c={r.get('c')}: "
                  f"target forward median |error| {r['target_median_abs_pct_error']:.1f} %, median ratio "
                  f"{r['target_median_ratio']:.3f} (predicted / measured, {r['steps']} steps){flag}")
    print(f"wrote {out}/")
    return 0


def cmd_run(args) -> int:
    # lazy: start-up cost of pandas, prometheus_client
    from vidur_specdec.validate.calibrate import calibrate, write_calibration
    from vidur_specdec.validate.common import base_url
    from vidur_specdec.validate.workload import load_trace, write_trace

    url = base_url(args.url)
    cfg = _load_cfg(args)
    out = _out_folder(args, "validate run", resumes=False)  # an earlier run or a user's files: --overwrite
    if args.timeout_s <= 0:
        raise ConfigError(f"--timeout-s: must be > 0, got {args.timeout_s}")
    source = None
    if args.trace:  # any trace the simulator reads; token ids drawn where absent, as generate draws them
        # lazy: start-up cost of pandas
        from vidur_specdec.validate.workload import with_token_ids

        source = with_token_ids(load_trace(args.trace), cfg.seed if args.seed is None else args.seed)
    before = _scrape_text(url, args.deadline_s)  # the server must answer before anything is written
    _clear_out(args, out)
    created = not out.exists()
    found = {} if created else _stamps(out)
    trace_path = out / "trace.csv"
    try:
        if source is not None:
            write_trace(source, trace_path)
        else:
            _generate(args, cfg, trace_path)
        trace = load_trace(trace_path)
        _provisional_check(args.config, args.overrides, trace_path, before)
        print(f"trace: {len(trace)} requests over {trace['arrival_offset_s'].max():.1f} s -> {trace_path}")
        res, before, after = _replay(args, url, trace, out, scrape=True, before=before, require_measured=True)
        cal = calibrate(before, after)
        write_calibration(cal, out, args.acceptance)
        _print_calibration(cal)
        _compare(args, args.config, trace_path, trace, res.frame, cal, out)
    except KeyboardInterrupt:
        _remove_outputs(out, created, found)
        print("\ninterrupted: nothing was written", file=sys.stderr)
        return 130
    except BaseException:
        _remove_outputs(out, created, found)  # nothing half-written: a failed run leaves the folder as it found it
        raise
    return 0


RUN_OUTPUTS = ("trace.csv", "measured.csv", "chunks.jsonl", "replay.json", "metrics_before.prom",
               "metrics_after.prom", "calibration.json", "calibration.yaml", "simulated.csv", "comparison.csv",
               "comparison.json", "report.html")


def _stamps(out: Path) -> dict:
    """``{name: (mtime_ns, size)}`` of the run's output names already in ``out``."""
    stamps = {}
    for name in RUN_OUTPUTS:
        try:
            st = (out / name).stat()
            stamps[name] = (st.st_mtime_ns, st.st_size)
        except OSError:
            pass
    return stamps


def _remove_outputs(out: Path, created: bool, found: dict) -> None:
    """Remove what this ``validate run`` wrote into ``out`` (the folder too, when this run created it).

    Files that were there before and were not rewritten (same mtime and size) are kept.
    """
    if created:
        shutil.rmtree(out, ignore_errors=True)
        return
    for name, stamp in _stamps(out).items():
        if found.get(name) != stamp:
            try:
                (out / name).unlink()
            except OSError:
                pass


def cmd_fake_server(args) -> int:
    # lazy: start-up cost of aiohttp, prometheus_client
    from vidur_specdec.validate.fake_server import FakeEngineConfig, serve_forever

    if not 0 <= args.port <= 65535:
        raise ConfigError(f"--port: must be in [0, 65535] (0 picks a free port), got {args.port}")
    faults = {**{r: "fail" for r in args.fail}, **{r: "abort" for r in args.abort}, **{r: "hang" for r in args.hang}}
    step_fn = None
    if args.cost_config:
        # lazy: start-up cost of pandas
        from vidur_specdec.engine.resolve import load

        cm = CostModel.from_config(load(args.cost_config))
        step_fn = lambda info: cm.step_ms(info.decode_q, info.decode_ctx, info.prefill,  # noqa: E731
                                          info.num_tokens)
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


COMMANDS = {"generate": cmd_generate, "replay": cmd_replay, "calibrate": cmd_calibrate, "compare": cmd_compare,
            "steps": cmd_steps, "run": cmd_run, "fake-server": cmd_fake_server}


def run(args: argparse.Namespace) -> int:
    """Run one validation sub-subcommand; failures go to the CLI's one error path (exit 2 or 3)."""
    return COMMANDS[args.cmd](args)


def main(argv: Optional[List[str]] = None) -> int:
    """``python -m vidur_specdec.validate ...`` = ``python -m vidur_specdec validate ...``."""
    return console.run_subcommand("validate", sys.modules[__name__], argv)
