"""The command line: ``python -m vidur_specdec {run, sweep, report, tune, plan, profiles, validate} ...``.

One parser with argparse subcommands, built from :data:`SUBCOMMANDS`, a table
of (name, module, one-line help). Each subcommand lives in its own module,
imported only when that subcommand runs (``--help`` imports each once to build
its options), and exposes::

    add_arguments(parser: argparse.ArgumentParser) -> None
    run(args: argparse.Namespace) -> int

The exit statuses (0 ok, 2 bad input, 3 a failed external service, 130
interrupted), the one error path (:func:`guarded`) and the options several
subcommands share are :mod:`vidur_specdec.console`'s, re-exported here; the
subcommands import them from there, below this dispatcher.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import List, Optional

from vidur_specdec.console import (  # noqa: F401 (re-exported)
    EXIT_BAD_INPUT,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_SERVICE,
    PROG,
    Parser,
    ServiceError,
    add_config,
    add_executor,
    add_jobs,
    add_output_dir,
    add_overwrite,
    add_set,
    guarded,
    report_error,
)
from vidur_specdec import __version__

# (name, module, one-line help): the subcommands, in --help order.
SUBCOMMANDS = [
    ("run", "vidur_specdec.run", "simulate one run config; writes requests.csv, steps.csv, summary.json"),
    ("sweep", "vidur_specdec.sweep.cli", "run every row of a sweep file, in parallel and resumably, into one CSV"),
    ("report", "vidur_specdec.report", "write the results explorer page (HTML) for a sweep CSV"),
    ("tune", "vidur_specdec.tune.cli", "find where speculation stops paying, the best k per load and a per-batch-size k schedule; write a vLLM speculative_config"),
    ("plan", "vidur_specdec.plan.cli", "which deployment: search GPUs, parallelism, pools, drafter and k under SLOs; "
                                       "write the frontier, the best deployment and its vllm serve lines"),
    ("profiles", "vidur_specdec.profiles.cli", "build, compare and calibrate analytical operator profiles"),
    ("validate", "vidur_specdec.validate.cli", "replay a workload against a vLLM server and compare"),
    ("acceptance", "vidur_specdec.speculation.library_cli", "list and filter the cited library of published acceptance (mean acceptance length by drafter, dataset and k)"),
]


# --------------------------------------------------------------------------- the parser


def build_parser(only: Optional[str] = None) -> argparse.ArgumentParser:
    """The whole command line; with ``only``, just that subcommand's module is imported."""
    ap = Parser(prog=PROG, description="Simulate speculative decoding in LLM serving on Vidur. "
                                       "Exit status: 0 ok, 2 bad input, 3 failed external service, "
                                       "130 interrupted.")

    ap.add_argument("--version", action="version", version=f"vidur_specdec {__version__}")
    sub = ap.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=Parser)
    for name, module, help_text in SUBCOMMANDS:
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.set_defaults(_module=module)
        if only is not None and name != only:
            continue
        importlib.import_module(module).add_arguments(p)
    return ap


def main(argv: Optional[List[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    first = next((a for a in argv if not a.startswith("-")), None)
    names = [n for n, _, _ in SUBCOMMANDS]
    only = first if first in names and argv and argv[0] == first else None
    args = build_parser(only).parse_args(argv)
    module = importlib.import_module(args._module)
    return guarded(lambda: module.run(args))


def entry() -> None:
    """Console entry point (``vidur-specdec``)."""
    sys.exit(main())
