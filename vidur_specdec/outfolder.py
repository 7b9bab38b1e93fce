"""The one output-folder rule every folder-writing command follows (run, sweep, tune, plan, validate, profiles).

A folder *belongs* to a command when every entry in it is a name that command
writes (:data:`OUTPUTS`; the folder lock is ignored). Then:

* a missing or empty folder is always fine;
* a folder that belongs to the command is the command's own business: a sweep
  or a tune resumes from its journal, ``profiles build`` rewrites its tables;
  a command that does not resume (``run``, ``validate run``) refuses it
  unless ``--overwrite``;
* any other non-empty folder (another command's results, a user's files) is
  refused unless ``--overwrite``;
* with ``--overwrite``, a folder that holds files no command of this package
  writes (a user's ``notes.txt``, ``my_analysis.csv``) is still refused;
  otherwise the whole folder's earlier results are removed before the first
  new file is written (:func:`clear`), so one folder never mixes two runs.

No marker file is written: the folder's file names are the record. A name
pattern that a user's file could match by accident (a sweep's ``*.csv``) also
needs the file's first line to be what the command writes there
(:data:`HEADERS`): a user's ``my_analysis.csv`` is never taken for a sweep's
table. :func:`clear` removes only entries that are results by this rule, so a
file that appears between the check and the clear stays; a command that swaps
a whole folder in checks again at the swap (:func:`foreign`).

Every check runs before anything in the folder is touched: the rule, then
whether the folder (or its nearest existing parent) can be written in
(:func:`check_writable`, also part of :func:`check`).

Paths are checked with ``os.stat`` first, so a symlink loop or a file where a
folder is needed is one line naming the user's path, before any simulation.
"""

from __future__ import annotations

import errno
import fnmatch
import os
import tempfile
from pathlib import Path
from typing import Callable, Dict, Iterable, List, Optional, Tuple, Union

from vidur_specdec.config.errors import ConfigError

LOCK_NAME = ".vidur_specdec.lock"  # the sweep/tune folder lock (vidur_specdec.sweep.lock)

# command -> the file names (fnmatch patterns) it writes into its output folder
OUTPUTS: Dict[str, Tuple[str, ...]] = {
    "run": ("requests.csv", "steps.csv", "summary.json", "config.yaml"),
    "sweep": ("*.csv", ".*.journal.jsonl", "*.provenance.json"),
    "tune": ("tune.csv", "summary.json", "speculative_config.json", "engine_args.json", "tune.html",
             ".tune.journal.jsonl"),
    "plan": ("plan.csv", "screen.csv", "summary.json", "best.yaml", "plan.html", ".plan.journal.jsonl"),
    "validate run": ("trace.csv", "measured.csv", "chunks.jsonl", "replay.json", "metrics_before.prom",
                     "metrics_after.prom", "calibration.json", "calibration.yaml", "simulated.csv",
                     "comparison.csv", "comparison.json", "report.html"),
    "validate steps": ("step_times.csv", "step_check.csv", "step_check_summary.csv", "acceptance.csv",
                       "acceptance_summary.csv", "request_latency.csv", "runs.csv", "steps_summary.json"),
    "profiles build": ("mlp.csv", "attention.csv"),
}
# the step-by-step validation commands fill one folder together (docs/validation.md): each may
# write beside the others' files, and the loop's own `validate run` reads them all as one run
for _step in ("validate replay", "validate calibrate", "validate compare"):
    OUTPUTS[_step] = OUTPUTS["validate run"]


# a wildcard pattern -> the bytes every file it names starts with, and a text its first line holds
# (a sweep's table: ``row,row_id,...,sweep_hash``, vidur_specdec/sweep/table.py)
HEADERS: Dict[str, Tuple[bytes, bytes]] = {"*.csv": (b"row,row_id,", b"sweep_hash"),
                                           # a sweep's provenance (vidur_specdec/sweep/runner.py)
                                           "*.provenance.json": (b'{"provenance":"sweep"', b"sweep_hash")}
HEADER_BYTES = 1 << 16  # a header line is read from at most the first 64 KiB of a file


def _first_line(path: Path) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read(HEADER_BYTES).split(b"\n", 1)[0]
    except OSError:
        return b""


def _matches(name: str, patterns: Iterable[str], folder: Optional[Path] = None) -> bool:
    """``name`` is one of ``patterns``; a wildcard match also needs its header (:data:`HEADERS`) when ``folder`` is given."""
    for p in patterns:
        if not fnmatch.fnmatchcase(name, p):
            continue
        if p == name or p not in HEADERS or folder is None:
            return True
        if (folder / name).is_dir():
            continue
        start, holds = HEADERS[p]
        line = _first_line(folder / name)
        if line.startswith(start) and holds in line:
            return True
    return False


def _every() -> Tuple[str, ...]:
    return tuple(dict.fromkeys(x for pats in OUTPUTS.values() for x in pats))


def foreign(path: Union[str, Path], option: str = "--output-dir") -> List[str]:
    """The entries of ``path`` that no command of this package writes (a user's files), sorted."""
    p = Path(path)
    every = _every()
    return [n for n in entries(p, option) if (p / n).is_dir() or not _matches(n, every, p)]


def _short(names: List[str]) -> str:
    shown = ", ".join(n if len(n) <= 60 else n[:57] + "..." for n in names[:3])
    return shown + (f", ... ({len(names)} in all)" if len(names) > 3 else "")


def stat_path(path: Union[str, Path], option: str) -> Optional[os.stat_result]:
    """``os.stat(path)``, None when it does not exist; a symlink loop or an unreadable path is a ConfigError."""
    try:
        return os.stat(path)
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        up = Path(path).parent
        while str(up) not in ("", ".", "/") and not os.path.isfile(up):
            up = up.parent
        raise ConfigError(f"{option}: {path} is under {up}, which is a file, not a folder") from None
    except OSError as e:
        why = "a symbolic link loop" if e.errno == errno.ELOOP else (e.strerror or str(e))
        raise ConfigError(f"{option}: {path}: {why}") from None
    except ValueError as e:  # an embedded NUL byte
        raise ConfigError(f"{option}: {str(path)[:80]!r}: {e}") from None


def entries(path: Path, option: str) -> List[str]:
    """The names in an existing folder, the folder lock left out, sorted."""
    try:
        return sorted(n for n in os.listdir(path) if n != LOCK_NAME)
    except OSError as e:
        raise ConfigError(f"{option}: cannot read {path}: {e.strerror or e}") from None


def check(path: Union[str, Path, None], command: str, overwrite: bool, option: str = "--output-dir",
          resumes: bool = True) -> bool:
    """Apply the rule (module doc) to ``path`` before any work; returns True when :func:`clear` must run.

    ``command`` is a key of :data:`OUTPUTS`; ``resumes`` False (``run``, ``validate run``) refuses
    even the command's own earlier results without ``overwrite``. Writes nothing (the writability
    probe, :func:`check_writable`, creates and removes one empty folder).
    """
    if path is None:
        return False
    p = Path(path)
    st = stat_path(p, option)
    if st is None:
        parent = p.parent if str(p.parent) else Path(".")
        pst = stat_path(parent, option)
        if pst is not None and not os.path.isdir(parent):
            raise ConfigError(f"{option}: {p} is under {parent}, which is a file, not a folder")
        check_writable(p, option)
        return False
    if not os.path.isdir(p):
        raise ConfigError(f"{option}: {p} exists and is not a folder")
    names = entries(p, option)
    if not names:
        check_writable(p, option)
        return False
    own = OUTPUTS[command]
    mine = all(not (p / n).is_dir() and _matches(n, own, p) for n in names)
    if mine and resumes:
        check_writable(p, option)
        return False
    if not overwrite:
        if mine:
            raise ConfigError(f"{option}: {p} is not empty; choose another folder, or pass --overwrite "
                              f"to replace the {command} results in it")
        others = [n for n in names if (p / n).is_dir() or not _matches(n, own, p)]
        raise ConfigError(f"{option}: {p} is not empty: it holds {_short(others)}, which `{command}` did not "
                          "write; choose another folder (--overwrite replaces only results, never your files)")
    users = foreign(p, option)
    if users:  # never removed, with or without --overwrite
        raise ConfigError(f"{option}: {p} holds files that are not this tool's output ({_short(users)}); "
                          "choose another folder (--overwrite replaces only results, never your files)")
    check_writable(p, option)
    return True


def check_writable(folder: Union[str, Path], option: str) -> None:
    """The nearest existing folder at or above ``folder`` must be a folder we can create files in.

    Probed by creating and removing an empty hidden folder there, so a read-only target fails before
    any work rather than after it.
    """
    stat_path(folder, option)
    probe = Path(os.path.abspath(folder))
    while not probe.exists():
        if probe.parent == probe:
            break
        probe = probe.parent
    if not probe.is_dir():
        raise ConfigError(f"{option}: {folder} is under {probe}, which is a file, not a folder")
    try:
        tmp = tempfile.mkdtemp(prefix=".vidur-specdec-probe.", dir=probe)
        os.rmdir(tmp)
    except OSError as e:
        raise ConfigError(f"{option}: cannot write in {probe}: {e.strerror or e}") from None


def clear(path: Union[str, Path]) -> List[str]:
    """Remove the earlier results in ``path`` (after :func:`check` said so); returns the names removed.

    Only files that are results by the rule (module doc) go; anything else, such as a file a user put
    there after the check, stays.
    """
    p = Path(path)
    every = _every()
    removed = []
    for name in entries(p, "--output-dir"):
        q = p / name
        if q.is_dir() or not _matches(name, every, p):
            continue
        q.unlink()
        removed.append(name)
    return removed


def _output_file(p: Path, option: str, inputs: Iterable[Union[str, Path]], example: str):
    """What every output file's checks start with: ``(its stat or None, its folder)``. Refused: a folder at ``p``
    (``example`` suggests a name), a file where its folder should be, a path that is one of ``inputs`` (the same
    file by any name). A missing path returns None once its folder is known to be writable."""
    st = stat_path(p, option)
    if st is not None and os.path.isdir(p):
        raise ConfigError(f"{option}: {p} is a folder; give a file name{example}")
    parent = p.parent if str(p.parent) else Path(".")
    pst = stat_path(parent, option)
    if pst is not None and not os.path.isdir(parent):
        raise ConfigError(f"{option}: {p} is under {parent}, which is a file, not a folder")
    if st is None:
        check_writable(parent, option)
        return None, parent
    for src in inputs:
        s = stat_path(src, "input")
        if s is not None and (s.st_dev, s.st_ino) == (st.st_dev, st.st_ino):
            raise ConfigError(f"{option}: {p} is also an input of this command ({src}); give another file name")
    return st, parent


def check_file(path: Union[str, Path], option: str, inputs: Iterable[Union[str, Path]] = (),
               marker: Optional[bytes] = None) -> None:
    """An output *file* path: not a folder, not a symlink loop, its folder exists or can be written in.

    The path may not be one of the command's ``inputs`` (the same file by any name). With ``marker``
    an existing file is replaced only when it holds those bytes (a file the same command wrote);
    anything else there (another command's results, a user's file) is refused.
    """
    p = Path(path)
    st, parent = _output_file(p, option, inputs, f" (e.g. {p / 'page.html'})")
    if st is None:
        return
    if marker is not None and not _holds(p, marker):
        raise ConfigError(f"{option}: {p} exists and was not written by this command (it would be replaced); "
                          "give another file name, or move that file away")
    check_writable(parent, option)


def check_result_file(path: Union[str, Path], option: str, command: str, overwrite: bool,
                      inputs: Iterable[Union[str, Path]] = (), own: Optional[Callable[[Path], bool]] = None) -> None:
    """The one output rule for a command that writes one *file* (``validate generate --out``), before any work.

    A missing path is fine (its folder must be writable). An existing one is replaced only with
    ``overwrite``, and then only when it is not an input of the command (the same file by any name),
    ``own(path)`` says it is what ``command`` writes (a trace with the trace's header), and it is not
    another command's result (a name another command writes, beside more of that command's files).
    """
    p = Path(path)
    st, parent = _output_file(p, option, inputs, "")
    if st is None:
        return
    if not overwrite:
        raise ConfigError(f"{option}: {p} exists; give another file name, or pass --overwrite to replace a "
                          f"file `{command}` wrote")
    names = entries(parent, option)
    for other, patterns in OUTPUTS.items():
        if other == command or not _matches(p.name, patterns, parent):
            continue
        mates = [n for n in names if n != p.name and not (parent / n).is_dir() and _matches(n, patterns, parent)]
        if mates:
            raise ConfigError(f"{option}: {p} is a result of `{other}` (beside its {_short(mates)}); "
                              "--overwrite replaces only this command's own files; give another file name")
    if own is not None and not own(p):
        raise ConfigError(f"{option}: {p} exists and was not written by `{command}` (--overwrite replaces only "
                          "this command's own files, never yours); give another file name, or move that file away")
    check_writable(parent, option)


def _holds(path: Path, marker: bytes, limit: int = 1 << 28) -> bool:
    """``marker`` occurs in the first ``limit`` bytes of ``path`` (read in 1 MiB blocks)."""
    tail = b""
    seen = 0
    try:
        with open(path, "rb") as f:
            while seen < limit:
                block = f.read(1 << 20)
                if not block:
                    return False
                if marker in tail + block:
                    return True
                tail = block[-len(marker):]
                seen += len(block)
    except OSError:
        return False
    return False
