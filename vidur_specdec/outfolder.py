"""The one output-folder rule every folder-writing command follows (run, sweep, tune, validate, profiles).

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
  writes (a user's ``notes.txt``) is still refused; otherwise the whole
  folder's earlier results are removed before the first new file is written
  (:func:`clear`), so one folder never mixes two runs.

No marker file is written: the folder's file names are the record.

Paths are checked with ``os.stat`` first, so a symlink loop or a file where a
folder is needed is one line naming the user's path, before any simulation.
"""

from __future__ import annotations

import errno
import fnmatch
import os
import shutil
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Tuple, Union

from vidur_specdec.config.errors import ConfigError

LOCK_NAME = ".vidur_specdec.lock"  # the sweep/tune folder lock (vidur_specdec.sweep.lock)

# command -> the file names (fnmatch patterns) it writes into its output folder
OUTPUTS: Dict[str, Tuple[str, ...]] = {
    "run": ("requests.csv", "steps.csv", "summary.json", "config.yaml"),
    "sweep": ("*.csv", ".*.journal.jsonl"),
    "tune": ("tune.csv", "summary.json", "speculative_config.json", "engine_args.json", "tune.html",
             ".tune.journal.jsonl"),
    "validate run": ("trace.csv", "measured.csv", "chunks.jsonl", "replay.json", "metrics_before.prom",
                     "metrics_after.prom", "calibration.json", "calibration.yaml", "simulated.csv",
                     "comparison.csv", "comparison.json", "report.html"),
    "validate steps": ("*.csv", "steps_summary.json"),
    "profiles build": ("mlp.csv", "attention.csv"),
}
# the step-by-step validation commands fill one folder together (docs/validation.md): each may
# write beside the others' files, and the loop's own `validate run` reads them all as one run
for _step in ("validate replay", "validate calibrate", "validate compare"):
    OUTPUTS[_step] = OUTPUTS["validate run"]


def _matches(name: str, patterns: Iterable[str]) -> bool:
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)


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
    even the command's own earlier results without ``overwrite``. Writes nothing.
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
        return False
    if not os.path.isdir(p):
        raise ConfigError(f"{option}: {p} exists and is not a folder")
    names = entries(p, option)
    if not names:
        return False
    own = OUTPUTS[command]
    mine = all(_matches(n, own) for n in names)
    if mine and resumes:
        return False
    if not overwrite:
        if mine:
            raise ConfigError(f"{option}: {p} is not empty; choose another folder, or pass --overwrite "
                              f"to replace the {command} results in it")
        foreign = [n for n in names if not _matches(n, own)]
        raise ConfigError(f"{option}: {p} is not empty: it holds {_short(foreign)}, which `{command}` did not "
                          "write; choose another folder, or pass --overwrite to replace everything in it")
    every = tuple(x for pats in OUTPUTS.values() for x in pats)
    users = [n for n in names if not _matches(n, every)]
    if users:
        raise ConfigError(f"{option}: {p} holds files that are not this tool's output ({_short(users)}); "
                          "choose another folder (--overwrite replaces only results)")
    return True


def clear(path: Union[str, Path]) -> None:
    """Remove every entry of ``path`` but the folder lock (after :func:`check` said so)."""
    p = Path(path)
    for name in entries(p, "--output-dir"):
        q = p / name
        if q.is_dir() and not q.is_symlink():
            shutil.rmtree(q)
        else:
            q.unlink()


def check_file(path: Union[str, Path], option: str) -> None:
    """An output *file* path: not a folder, not a symlink loop, its folder exists or can be made."""
    p = Path(path)
    st = stat_path(p, option)
    if st is not None and os.path.isdir(p):
        raise ConfigError(f"{option}: {p} is a folder; give a file name (e.g. {p / 'page.html'})")
    parent = p.parent if str(p.parent) else Path(".")
    pst = stat_path(parent, option)
    if pst is not None and not os.path.isdir(parent):
        raise ConfigError(f"{option}: {p} is under {parent}, which is a file, not a folder")
