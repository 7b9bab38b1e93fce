"""Command-line plumbing shared by every subcommand: exit statuses, one-line errors, shared options.

One error path (:func:`guarded`): every expected failure ends with one line on
stderr and a documented exit status, nothing half-written:

====  ======================================================================
0     success
2     bad input: a config key, a file, a folder, a permission, an encoding
      (:class:`~vidur_specdec.config.ConfigError`, ``OSError``)
3     a failed external service: the server under validation did not answer,
      answered too few requests or sent garbage, or a sweep/tune worker process
      died (:class:`ServiceError`; a sweep or tune rerun resumes)
130   interrupted (Ctrl-C); a sweep keeps its finished rows and resumes
====  ======================================================================

Options several subcommands share (``--config``, ``--set``, ``--output-dir``,
``--overwrite``, ``--jobs``, ``--executor``, ``--address``) are defined once
here (:func:`add_config`, ...) and reused. The subcommands (sweep, tune,
report, profiles, validate, run) import this module; the dispatcher
(:mod:`vidur_specdec.cli`) sits above them all.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Callable

from vidur_specdec.config import ConfigError
import errno

EXIT_OK = 0
EXIT_BAD_INPUT = 2
EXIT_SERVICE = 3
EXIT_INTERRUPTED = 130

PROG = "python -m vidur_specdec"


class ServiceError(Exception):
    """An external service (the server under validation, a Ray cluster) failed; exit status 3."""


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors: ``error: PROG: message (see PROG --help)``, exit status 2."""

    def error(self, message: str) -> None:  # noqa: D401 - argparse API
        sys.stderr.write(f"error: {self.prog}: {message} (see {self.prog} --help)\n")
        sys.exit(EXIT_BAD_INPUT)


MAX_SEED = 2 ** 32 - 1  # numpy's seeds (and the config's `seed`) are in [0, 2**32 - 1]


def ranged(kind: type, low: float, high: float):
    """An argparse ``type=``: a ``kind`` (int or float) in [low, high]; anything else is one-line error, exit 2."""
    import math

    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {'an integer' if kind is int else 'a number'}, "
                                             f"got {text!r}") from None
        if not (math.isfinite(value) and low <= value <= high):
            bounds = f"[{low:,}, {high:,}]" if kind is int else f"[{low:g}, {high:g}]"
            raise argparse.ArgumentTypeError(f"must be in {bounds}, got {text}")
        return value

    parse.__name__ = "integer" if kind is int else "number"
    return parse


SEED = ranged(int, 0, MAX_SEED)


# --------------------------------------------------------------------------- shared options


def add_config(p: argparse.ArgumentParser, required: bool = True,
               help: str = "config YAML (a run config, see configs/default.yaml)") -> None:
    p.add_argument("--config", required=required, help=help)


def add_set(p: argparse.ArgumentParser) -> None:
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY.PATH=VALUE",
                   help="override any config key, e.g. --set speculative.num_speculative_tokens=2 (repeatable)")


def add_output_dir(p: argparse.ArgumentParser, help: str = "output folder", required: bool = False) -> None:
    p.add_argument("--output-dir", required=required, help=help)


def add_overwrite(p: argparse.ArgumentParser, help: str = "replace earlier results in --output-dir") -> None:
    p.add_argument("--overwrite", action="store_true", help=help)


def add_jobs(p: argparse.ArgumentParser, help: str = "parallel simulations (default: all cores)") -> None:
    p.add_argument("--jobs", type=int, default=None, help=help)


def add_executor(p: argparse.ArgumentParser) -> None:
    p.add_argument("--executor", choices=("local", "ray"), default="local",
                   help="local process pool (default) or a Ray cluster")
    p.add_argument("--address", default=None, help="--executor ray: cluster address (default: start Ray locally)")


# --------------------------------------------------------------------------- one error path


MAX_WORD_CHARS = 200  # a word (a value, a path) longer than this is cut in error messages


def _one_line(text: str) -> str:
    """``text`` on one line, each overlong word (a 10 MB value quoted back) cut to :data:`MAX_WORD_CHARS`."""
    words = str(text).split()
    words = [w if len(w) <= MAX_WORD_CHARS else f"{w[:MAX_WORD_CHARS - 40]}...({len(w):,} characters)"
             for w in words]
    return " ".join(words) or "(no message)"


def _os_error_text(e: OSError) -> str:
    where = e.filename if e.filename is not None else ""
    if where and e.errno in (errno.EEXIST, errno.ENOTDIR) and not getattr(e, "filename2", None):
        return f"{where}: a file is in the way where a folder is needed ({e.strerror})"
    if getattr(e, "filename2", None):
        where = f"{where} -> {e.filename2}"
    what = e.strerror or str(e) or type(e).__name__
    return f"{where}: {what}" if where else what


def report_error(message: str) -> None:
    """Print ``error: message`` as one line on stderr."""
    sys.stderr.write(f"error: {_one_line(message)}\n")
    sys.stderr.flush()


def guarded(fn: Callable[[], int]) -> int:
    """Run ``fn`` and map every expected failure to one stderr line and its exit status (module doc)."""
    try:
        code = fn()
        sys.stdout.flush()
        return EXIT_OK if code is None else int(code)
    except ConfigError as e:
        report_error(str(e))
        return EXIT_BAD_INPUT
    except ServiceError as e:
        report_error(str(e))
        return EXIT_SERVICE
    except KeyboardInterrupt:
        sys.stderr.write("\ninterrupted\n")
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # `... | head`: stdout went away; end quietly
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except OSError:  # pragma: no cover
            pass
        return 1
    except UnicodeDecodeError as e:
        report_error(f"a file is not UTF-8 text (byte {e.start}): {e.reason}")
        return EXIT_BAD_INPUT
    except OSError as e:
        report_error(_os_error_text(e))
        return EXIT_BAD_INPUT


def run_subcommand(name: str, module, argv=None) -> int:
    """``python -m vidur_specdec.<module> ...``: the same as ``python -m vidur_specdec NAME ...``.

    ``module`` exposes ``add_arguments(parser)`` and ``run(args)``; the parse
    and the error path are the dispatcher's (:mod:`vidur_specdec.cli`).
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    doc = (module.__doc__ or "").strip().splitlines()
    ap = Parser(prog=f"{PROG} {name}", description=doc[0] if doc else None)
    module.add_arguments(ap)
    args = ap.parse_args(argv)
    return guarded(lambda: module.run(args))
