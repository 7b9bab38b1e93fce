"""``validate run``: the whole loop: generate, replay, scrape, calibrate, simulate, compare.

A failed or interrupted run leaves ``--out`` as it found it (:func:`remove_outputs`).
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from vidur_specdec.config import ConfigError
from vidur_specdec.validate.commands.options import (
    add_compare,
    add_config,
    add_overwrite,
    add_replay,
    add_workload,
    clear_out,
    load_cfg,
    out_folder,
)
from vidur_specdec.validate.commands.stages import (
    compare_and_report,
    generate,
    print_calibration,
    provisional_check,
    replay_trace,
    scrape_text,
)


def add_arguments(p) -> None:
    p.add_argument("--url", required=True, help="server root, e.g. http://127.0.0.1:8000")
    add_config(p)
    p.add_argument("--out", required=True, help="output folder; must be new or empty (see --overwrite)")
    add_overwrite(p)
    p.add_argument("--trace", help="replay this trace instead of generating one")
    add_workload(p)
    add_replay(p)
    add_compare(p)


def run(args) -> int:
    # lazy: start-up cost of pandas, prometheus_client
    from vidur_specdec.validate.calibrate import calibrate, write_calibration
    from vidur_specdec.validate.common import base_url
    from vidur_specdec.validate.workload import load_trace, write_trace

    url = base_url(args.url)
    cfg = load_cfg(args)
    out = out_folder(args, "validate run", resumes=False)  # an earlier run or a user's files: --overwrite
    if args.timeout_s <= 0:
        raise ConfigError(f"--timeout-s: must be > 0, got {args.timeout_s}")
    source = None
    if args.trace:  # any trace the simulator reads; token ids drawn where absent, as generate draws them
        # lazy: start-up cost of pandas
        from vidur_specdec.validate.workload import with_token_ids

        source = with_token_ids(load_trace(args.trace), cfg.seed if args.seed is None else args.seed)
    before = scrape_text(url, args.deadline_s)  # the server must answer before anything is written
    clear_out(args, out)
    created = not out.exists()
    found = {} if created else stamps(out)
    trace_path = out / "trace.csv"
    try:
        if source is not None:
            write_trace(source, trace_path)
        else:
            generate(args, cfg, trace_path)
        trace = load_trace(trace_path)
        provisional_check(args.config, args.overrides, trace_path, before)
        print(f"trace: {len(trace)} requests over {trace['arrival_offset_s'].max():.1f} s -> {trace_path}")
        res, before, after = replay_trace(args, url, trace, out, scrape=True, before=before, require_measured=True)
        cal = calibrate(before, after)
        write_calibration(cal, out, args.acceptance)
        print_calibration(cal)
        compare_and_report(args, args.config, trace_path, trace, res.frame, cal, out)
    except KeyboardInterrupt:
        remove_outputs(out, created, found)
        print("\ninterrupted: nothing was written", file=sys.stderr)
        return 130
    except BaseException:
        remove_outputs(out, created, found)  # nothing half-written: a failed run leaves the folder as it found it
        raise
    return 0


RUN_OUTPUTS = ("trace.csv", "measured.csv", "chunks.jsonl", "replay.json", "metrics_before.prom",
               "metrics_after.prom", "calibration.json", "calibration.yaml", "simulated.csv", "comparison.csv",
               "comparison.json", "report.html")


def stamps(out: Path) -> dict:
    """``{name: (mtime_ns, size)}`` of the run's output names already in ``out``."""
    found = {}
    for name in RUN_OUTPUTS:
        try:
            st = (out / name).stat()
            found[name] = (st.st_mtime_ns, st.st_size)
        except OSError:
            pass
    return found


def remove_outputs(out: Path, created: bool, found: dict) -> None:
    """Remove what this ``validate run`` wrote into ``out`` (the folder too, when this run created it).

    Files that were there before and were not rewritten (same mtime and size) are kept.
    """
    if created:
        shutil.rmtree(out, ignore_errors=True)
        return
    for name, stamp in stamps(out).items():
        if found.get(name) != stamp:
            try:
                (out / name).unlink()
            except OSError:
                pass
