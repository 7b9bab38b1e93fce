"""Command line of the validation harness (``python -m vidur_specdec.validate SUBCOMMAND``).

Subcommands: ``generate``, ``pin``, ``replay``, ``calibrate``, ``compare``, ``steps``,
``run`` (the whole loop) and ``fake-server``, one module each under
:mod:`vidur_specdec.validate.commands` (``add_arguments(parser)``, ``run(args)``);
this module is their dispatcher. Bad input exits with status 2
and one line on stderr; every file is written to a temporary name and
renamed, so nothing is left half-written.
"""

from __future__ import annotations

import argparse
import sys
from typing import List, Optional

from vidur_specdec import console
from vidur_specdec.console import Parser
from vidur_specdec.validate.commands import calibrate, compare, fake_server, generate, pin, replay, steps
from vidur_specdec.validate.commands import run as whole_loop

PROG = "python -m vidur_specdec.validate"

# (name, module, one-line help): the sub-subcommands, in --help order.
COMMANDS = [
    ("generate", generate, "write a seeded trace (CSV or JSONL) from a config's workload section"),
    ("pin", pin, "write the vLLM launch arguments that pin the server's acceptance to the "
                 "config's (synthetic rejection sampler); a replay then measures timing alone"),
    ("replay", replay, "replay a trace against a server; writes measured.csv"),
    ("calibrate", calibrate, "acceptance and KV budget from two /metrics scrapes"),
    ("compare", compare, "matched simulation of a trace, joined with measured.csv; report"),
    ("steps", steps, "read engine step logs: acceptance, step times, cost-model check"),
    ("run", whole_loop, "the whole loop: generate, replay, scrape, calibrate, simulate, compare"),
    ("fake-server", fake_server, "serve a fake vLLM (simple speculative engine, vLLM counters)"),
]


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
    for name, module, help_text in COMMANDS:
        module.add_arguments(sub.add_parser(name, help=help_text))


def run(args: argparse.Namespace) -> int:
    """Run one validation sub-subcommand; failures go to the CLI's one error path (exit 2 or 3)."""
    return dict((name, module) for name, module, _ in COMMANDS)[args.cmd].run(args)


def main(argv: Optional[List[str]] = None) -> int:
    """``python -m vidur_specdec.validate ...`` = ``python -m vidur_specdec validate ...``."""
    return console.run_subcommand("validate", sys.modules[__name__], argv)
