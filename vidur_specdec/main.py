"""The classic entry ``python -m vidur_specdec.main --config FILE``.

``python -m vidur_specdec.main --config FILE ...`` works as it always has: a
run config simulates one run (the ``run`` subcommand, :mod:`vidur_specdec.run`), a sweep file (a top-level ``sweep:``, ``grid:``
or ``rows:`` key) runs the sweep (``--jobs``, ``--executor``, ``--address``,
``--overwrite``; docs/sweep.md); ``python -m vidur_specdec.main report ...``
writes the results page and ``python -m vidur_specdec.main tune ...`` runs the tuner. The full command line is :mod:`vidur_specdec.cli`.
"""

from __future__ import annotations

import argparse
import sys
from typing import List, Optional

from vidur_specdec import cli, console
from vidur_specdec.run import is_sweep_file, run_one


# --------------------------------------------------------------------------- python -m vidur_specdec.main


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    """The classic parser: a run's options plus the sweep options (used when ``--config`` is a sweep)."""
    ap = console.Parser(
        prog="python -m vidur_specdec.main",
        description="Simulate speculative decoding on Vidur (a run config) or run a sweep file; "
                    f"`{console.PROG} --help` lists every command.",
    )
    console.add_config(ap, help="run config or sweep YAML (see configs/default.yaml, sweeps/)")
    console.add_set(ap)
    console.add_output_dir(ap, help="output folder (default: runs/<timestamp> for a run, runs/<sweep name> for a sweep)")
    console.add_overwrite(ap, help="run: replace the run in --output-dir; sweep: discard its journal and CSV")
    console.add_jobs(ap, help="sweep: parallel rows (default: all cores)")
    console.add_executor(ap)
    return ap.parse_args(argv)


def _classic(args: argparse.Namespace) -> int:
    if is_sweep_file(args.config):
        # lazy: start-up of `python -m vidur_specdec.main --help` (would load vidur_specdec.sweep)
        from vidur_specdec.sweep.cli import run as run_sweep_command

        return run_sweep_command(args)
    return run_one(args)


def main(argv: Optional[List[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] in ("report", "tune", "plan"):  # python -m vidur_specdec.main report|tune|plan ... (docs/tune.md)
        return cli.main(argv)
    args = parse_args(argv)
    return console.guarded(lambda: _classic(args))


def _entry() -> None:
    """Console entry point of the classic form."""
    sys.exit(main())


if __name__ == "__main__":
    _entry()
