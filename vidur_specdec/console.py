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
import contextlib
import os
import shutil
import sys
import tempfile
from pathlib import Path
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


def make_callable(module_name: str, api_module: str, func: str) -> None:
    """Make the package ``module_name`` callable: ``package(...)`` is ``api_module.func(...)``.

    ``from vidur_specdec import tune`` then gives one object that is both the package (``tune.cli``, ...)
    and the function, so importing a submodule (which binds the package in its parent) never hides it.
    """
    import importlib
    import types

    class CallablePackage(types.ModuleType):
        def __call__(self, *args, **kwargs):
            return getattr(importlib.import_module(api_module), func)(*args, **kwargs)

    CallablePackage.__call__.__doc__ = f"Call :func:`{api_module}.{func}`."
    sys.modules[module_name].__class__ = CallablePackage


# --------------------------------------------------------------------------- Python API arguments
# The Python API (``tune()``, ``sweep()``, ...) takes the command's options as keyword arguments and checks each
# as the command line does: a value the option's parser would accept from its text (``jobs="2"``, ``loads="1,2"``)
# is taken, anything else is one ConfigError naming the keyword. Never an int() or float() of a stranger type.


def _api_error(name: str, what: str, v) -> ConfigError:
    return ConfigError(f"{name}: must be {what}, got {str(repr(v))[:80]}")


def api_int(name: str, v, lo: int = None, hi: int = None, allow_none: bool = True):
    """An integer option (``--jobs``-style): an int, or its decimal text; bool and float refused."""
    import numbers

    if v is None and allow_none:
        return None
    what = "an integer" + (f" in [{lo}, {hi}]" if lo is not None and hi is not None
                           else f" >= {lo}" if lo is not None else "")
    if isinstance(v, str):
        try:
            n = int(v.strip())
        except ValueError:
            raise _api_error(name, what, v) from None
    elif isinstance(v, bool) or not isinstance(v, numbers.Integral):
        raise _api_error(name, what, v)
    else:
        n = int(v)
    if (lo is not None and n < lo) or (hi is not None and n > hi):
        raise _api_error(name, what, v)
    return n


def api_number(name: str, v, what: str, ok: Callable[[float], bool] = lambda x: True, allow_none: bool = True):
    """A number option (``--slo-ttft-ms``-style): an int or float, or its text; bool refused; ``ok`` must hold."""
    import math
    import numbers

    if v is None and allow_none:
        return None
    if isinstance(v, str):
        try:
            x = float(v.strip())
        except ValueError:
            raise _api_error(name, what, v) from None
    elif isinstance(v, bool) or not isinstance(v, numbers.Real):
        raise _api_error(name, what, v)
    else:
        x = float(v)
    if not math.isfinite(x) or not ok(x):
        raise _api_error(name, what, v)
    return x


def api_choice(name: str, v, choices, allow_none: bool = False):
    """One of ``choices`` (an option with ``choices=``); anything else refused, never a silent default."""
    if v is None and allow_none:
        return None
    if not isinstance(v, (str, int)) or isinstance(v, bool) or v not in choices:
        raise _api_error(name, "one of " + ", ".join(map(str, choices)), v)
    return v


def api_bool(name: str, v) -> bool:
    if not isinstance(v, bool):
        raise _api_error(name, "true or false", v)
    return v


def api_text(name: str, v, allow_none: bool = True):
    if v is None and allow_none:
        return None
    if not isinstance(v, str):
        raise _api_error(name, "a string", v)
    return v


def api_path(name: str, v, allow_none: bool = True):
    """A file or folder option: a str or os.PathLike (not bytes, not a number)."""
    if v is None and allow_none:
        return None
    if isinstance(v, (bytes, bytearray)) or not isinstance(v, (str, os.PathLike)) or not str(os.fspath(v)):
        raise _api_error(name, "a path (str or pathlib.Path)", v)
    return v


@contextlib.contextmanager
def api_output(output_dir, name: str):
    """The folder a Python-API command writes to, as ``(folder, kept)``: ``output_dir`` (kept), or with None a
    fresh temporary folder's ``name`` subfolder, removed with everything in it when the block ends."""
    if output_dir is not None:
        yield Path(output_dir), True
        return
    temp = Path(tempfile.mkdtemp(prefix=f"vidur-specdec-{name}-"))
    try:
        yield temp / name, False
    finally:
        shutil.rmtree(temp, ignore_errors=True)


def api_overrides(v) -> list:
    """``key.path=value`` overrides: one string (one override, never iterated by character) or a list of them."""
    from vidur_specdec.config.files import override_list

    return override_list(v)


def api_loads(name: str, v):
    """``--loads``: None, the command line's comma text (``"1,8,32"``), or a sequence of finite numbers."""
    import numbers

    if v is None or isinstance(v, str):
        return v
    if isinstance(v, (bytes, bytearray, dict)) or not hasattr(v, "__iter__"):
        raise _api_error(name, "a list of loads or their comma-separated text", v)
    import math

    out = []
    for x in v:
        if isinstance(x, bool) or not isinstance(x, numbers.Real) or not math.isfinite(float(x)):
            raise _api_error(name, "a list of finite numbers (loads)", v)
        out.append(repr(float(x)))
    if not out:
        raise _api_error(name, "a non-empty list of loads", v)
    return ",".join(out)


def api_message(message: str) -> str:
    """A command's one-line error as the Python API says it: a leading ``--some-option`` named by its keyword
    (``some_option``), so ``tune(loads="abc")`` is refused naming ``loads``, not ``--loads``."""
    if not message.startswith("--"):
        return message
    head, sep, rest = message.partition(":")
    word, space, tail = head.partition(" ")
    return word[2:].replace("-", "_") + space + tail + sep + rest
