"""Steps of the validation loop that several sub-subcommands share: generate a trace, replay it (with
``/metrics`` scraped before and after), print a calibration, simulate and compare, and the check made
before a replay. Bad input raises :class:`~vidur_specdec.config.ConfigError` (exit status 2)."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Optional

from vidur_specdec.config import ConfigError
from vidur_specdec.validate.commands.options import clear_out


def generate(args, cfg, out: Path):
    # lazy: start-up cost of pandas
    from vidur_specdec.validate.workload import generate_trace, write_trace

    df = generate_trace(cfg, args.arrival, args.cv, args.seed)
    write_trace(df, out)
    return df


def scrape_text(url: str, deadline_s: Optional[float] = None):
    # lazy: start-up cost of pandas, prometheus_client
    from vidur_specdec.validate.counters import scrape

    if deadline_s is not None and not deadline_s > 0:
        raise ConfigError(f"--deadline-s: must be > 0, got {deadline_s}")
    return scrape(url, deadline_s=deadline_s)


def replay_trace(args, url: str, trace, out: Path, scrape: bool, before=None, require_measured: bool = False):
    # lazy: start-up cost of pandas
    from vidur_specdec.validate.common import check_measured, write_csv, write_json, write_text
    from vidur_specdec.validate.replay import chunk_log_jsonl, fetch_model_name, replay

    if args.timeout_s <= 0:
        raise ConfigError(f"--timeout-s: must be > 0, got {args.timeout_s}")
    if scrape and before is None:
        before = scrape_text(url, args.deadline_s)
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
    clear_out(args, out)
    write_csv(out / "measured.csv", res.frame)
    write_text(out / "chunks.jsonl", chunk_log_jsonl(res.chunks))
    write_json(out / "replay.json", {"url": url, "model": model, **res.stats})
    after = None
    if scrape:
        time.sleep(max(0.0, args.settle_s))
        after = scrape_text(url, args.deadline_s)
        write_text(out / "metrics_before.prom", before.text)
        write_text(out / "metrics_after.prom", after.text)
    s = res.stats
    print(f"replayed {s['num_requests']} requests in {s['wall_s']:.1f} s: "
          + ", ".join(f"{v} {k}" for k, v in s["status_counts"].items())
          + f"; max {s['max_in_flight']} in flight; send lateness p50 {s['lateness_ms_p50']:.2f} ms, "
            f"p99 {s['lateness_ms_p99']:.2f} ms")
    return res, before, after


def print_calibration(cal) -> None:
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


def compare_and_report(args, config, trace_path: Path, trace, measured, cal, out: Path) -> None:
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
    clear_out(args, out)
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


def provisional_check(config, overrides, trace_path: Path, before) -> None:
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
