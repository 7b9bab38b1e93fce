"""The sweep command line: options added to ``vidur_specdec.main``'s parser, and the entry point."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import List, Optional

from vidur_specdec.sweep.definition import load_sweep
from vidur_specdec.sweep.executors import default_jobs
from vidur_specdec.sweep.runner import run_sweep
from vidur_specdec import console
from vidur_specdec.console import EXIT_INTERRUPTED
from vidur_specdec.config import ConfigError, read_yaml
from vidur_specdec.console import guarded
from vidur_specdec.console import Parser


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """Options of ``python -m vidur_specdec sweep`` (shared definitions from :mod:`vidur_specdec.console`)."""
    console.add_config(ap, help="sweep YAML (see sweeps/ and docs/sweep.md)")
    console.add_set(ap)
    console.add_output_dir(ap, help="output folder (default: runs/<sweep name>)")
    console.add_overwrite(ap, help="discard the output folder's journal and CSV for this sweep and rerun every row")
    console.add_jobs(ap, help="parallel rows (default: all cores)")
    console.add_executor(ap)


def run(args: argparse.Namespace) -> int:
    """Run a sweep; bad input raises for the CLI's one error path, Ctrl-C keeps the finished rows (130)."""
    from vidur_specdec.sweep.definition import is_sweep

    if not is_sweep(read_yaml(args.config)):
        raise ConfigError(f"--config: {args.config} is a run config (no top-level sweep:, grid: or rows: key); "
                          f"run it with `python -m vidur_specdec run --config {args.config}`")
    out = sweep = None
    try:
        sweep = load_sweep(args.config, getattr(args, "overrides", []))
        out = Path(args.output_dir) if args.output_dir else Path("runs") / sweep.name
        jobs = getattr(args, "jobs", None)
        executor = getattr(args, "executor", "local") or "local"
        result = run_sweep(sweep, out, jobs=jobs, executor=executor, address=getattr(args, "address", None),
                           overwrite=getattr(args, "overwrite", False),
                           log=lambda msg: print(msg, file=sys.stderr, flush=True))
    except KeyboardInterrupt:
        where = f" in {out / sweep.journal_name}" if out is not None and sweep is not None else ""
        print(f"\ninterrupted: finished rows are saved{where}; rerun the same command to resume", file=sys.stderr)
        return EXIT_INTERRUPTED
    workers = min(jobs or default_jobs(), max(result.ran, 1))
    how = f"{workers} {executor} worker{'s' if workers > 1 else ''}"
    print(f"wrote {result.csv_path}: {result.rows} rows ({result.ran} run in {result.wall_s:.1f} s with {how}, "
          f"{result.skipped} already done); kernels and acceptance per row in "
          f"{result.csv_path.with_name(sweep.name + '.provenance.json')}")
    return 0


def main(args: argparse.Namespace) -> int:
    """Run a sweep from parsed arguments (``vidur_specdec.main``'s classic form); returns the exit status."""
    return guarded(lambda: run(args))


def _parse(argv: Optional[List[str]]) -> argparse.Namespace:
    ap = Parser(prog="python -m vidur_specdec sweep")
    add_arguments(ap)
    return ap.parse_args(argv)
