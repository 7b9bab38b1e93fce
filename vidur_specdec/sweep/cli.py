"""The sweep command line: options added to ``vidur_specdec.main``'s parser, and the entry point."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import List, Optional

from vidur_specdec.config import ConfigError
from vidur_specdec.sweep.definition import load_sweep
from vidur_specdec.sweep.executors import default_jobs
from vidur_specdec.sweep.runner import run_sweep


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """The sweep options (also added to ``vidur_specdec.main``'s parser)."""
    ap.add_argument("--jobs", type=int, default=None, help="sweep: parallel rows (default: all cores)")
    ap.add_argument("--executor", choices=("local", "ray"), default="local",
                    help="sweep: local process pool (default) or a Ray cluster")
    ap.add_argument("--address", default=None, help="sweep, --executor ray: cluster address (default: start Ray locally)")
    ap.add_argument("--overwrite", action="store_true",
                    help="sweep: discard the output folder's journal and CSV for this sweep and rerun every row")


def main(args: argparse.Namespace) -> int:
    """Run a sweep from parsed ``vidur_specdec.main`` arguments; returns the exit status."""
    out = sweep = None
    try:
        sweep = load_sweep(args.config, getattr(args, "overrides", []))
        out = Path(args.output_dir) if args.output_dir else Path("runs") / sweep.name
        jobs = getattr(args, "jobs", None)
        executor = getattr(args, "executor", "local") or "local"
        run = run_sweep(sweep, out, jobs=jobs, executor=executor, address=getattr(args, "address", None),
                        overwrite=getattr(args, "overwrite", False),
                        log=lambda msg: print(msg, file=sys.stderr, flush=True))
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        where = f" in {out / sweep.journal_name}" if out is not None and sweep is not None else ""
        print(f"\ninterrupted: finished rows are saved{where}; rerun the same command to resume", file=sys.stderr)
        return 130
    workers = min(jobs or default_jobs(), max(run.ran, 1))
    how = f"{workers} {executor} worker{'s' if workers > 1 else ''}"
    print(f"wrote {run.csv_path}: {run.rows} rows ({run.ran} run in {run.wall_s:.1f} s with {how}, "
          f"{run.skipped} already done)")
    return 0


def _parse(argv: Optional[List[str]]) -> argparse.Namespace:
    from vidur_specdec.main import parse_args  # the one parser: --config, --output-dir, --set + sweep flags

    return parse_args(argv)
