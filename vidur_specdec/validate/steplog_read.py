"""Reading engine step logs: every file of one table under a root, stacked, each row with its run key.

Layout (a published vLLM step-log dataset's): ``ROOT/TABLE/GPU/TARGET/SPLIT/DRAFTER-kK/...``
with tables ``steps``, ``tokens``, ``requests``, ``runs`` (and ``outputs``),
each file CSV (optionally gzipped), JSONL or, if pyarrow is importable,
Parquet. Every file carries the run key columns ``gpu, target, split,
drafter, k, c, start`` (and ``mode``: accuracy or load runs); a file without
them gets them from its path (:func:`_key_from_path`). What is derived from
the tables: :mod:`vidur_specdec.validate.steplogs`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import pandas as pd

from vidur_specdec.config import ConfigError
from vidur_specdec.speculation.steplog_tables import RUN_KEY, read_table_file
from vidur_specdec.validate.common import ValidateError

KEY = RUN_KEY + ["mode"]  # a run, and accuracy apart from load runs
TABLES = ("steps", "tokens", "requests", "runs", "outputs")
_DRAFTER_DIR = re.compile(r"^(.+)-k(\d+)$")
_SPLIT_DIR = re.compile(r"^(qualitative|throughput_\w+)$", re.IGNORECASE)
_C_PART = re.compile(r"(?:^|[/_.-])c[=_]?(\d+)(?=$|[/_.-])", re.IGNORECASE)
_START_PART = re.compile(r"(?:^|[/_.-])(?:s|start|rep|r)[=_]?(\d+)(?=$|[/_.-])", re.IGNORECASE)
_MODE_PART = re.compile(r"(?:^|[/_.-])(accuracy|load)(?=$|[/_.-])", re.IGNORECASE)
# tables only one kind of run has (the step-log card): tokens and outputs come from accuracy runs,
# requests from load runs; steps and runs need a mode column or a path part saying which
_TABLE_MODE = {"tokens": "accuracy", "outputs": "accuracy", "requests": "load"}


def _table_dir(root: Path, table: str) -> Optional[Path]:
    if (root / table).is_dir():
        return root / table
    if root.name == table and root.is_dir():
        return root
    return None


def _files(d: Path) -> List[Path]:
    out = []
    for p in sorted(d.rglob("*")):
        if not p.is_file() or p.name.startswith("."):
            continue
        if p.name.endswith((".csv", ".csv.gz", ".jsonl", ".parquet")):
            out.append(p)
    return out


def _key_from_path(rel: Sequence[str], stem: str = "") -> Dict[str, object]:
    """Run key from ``GPU/TARGET/SPLIT/DRAFTER-kK/...`` and the file name ``stem``.

    Target and drafter may hold slashes (``meta-llama/Llama-3.1-8B``, ``yuhuili/EAGLE3-...-k3``):
    the split folder (``qualitative``, ``throughput_*``) separates them; without one the drafter
    is one folder. ``c``, ``start`` and ``mode`` come from the parts after ``DRAFTER-kK`` and the
    file name (``c8-s1``, ``c8/start1``, ``.../accuracy/...``), where present.
    """
    out: Dict[str, object] = {}
    for i, part in enumerate(rel):
        m = _DRAFTER_DIR.match(part)
        if not (m and i >= 3):
            continue
        j = next((x for x in range(2, i) if _SPLIT_DIR.match(rel[x])), i - 1)
        out = {"gpu": rel[0], "target": "/".join(rel[1:j]), "split": rel[j],
               "drafter": "/".join(list(rel[j + 1:i]) + [m.group(1)]), "k": int(m.group(2))}
        rest = "/".join(list(rel[i + 1:]) + ([stem] if stem else []))
        break
    else:
        rest = "/".join(list(rel) + ([stem] if stem else []))
    for key, rx in (("c", _C_PART), ("start", _START_PART)):
        found = rx.search(rest)
        if found:
            out[key] = int(found.group(1))
    mode = _MODE_PART.search(rest)
    if mode:
        out["mode"] = mode.group(1).lower()
    return out


def _stem(name: str) -> str:
    for suffix in (".csv.gz", ".csv", ".jsonl", ".parquet"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def read_table(root, table: str, filters: Optional[Dict] = None) -> Optional[pd.DataFrame]:
    """All files of one table stacked (None when the table is absent), filtered on key columns."""
    root = Path(root).expanduser()
    d = _table_dir(root, table)
    if d is None:
        return None
    frames = []
    for p in _files(d):
        try:
            df = read_table_file(p)
        except ConfigError:
            raise
        except (ValueError, pd.errors.ParserError, UnicodeDecodeError, OSError) as e:
            raise ValidateError(f"--root: cannot read {p}: {str(e).splitlines()[0] if str(e) else e}") from None
        missing = [c for c in KEY if c not in df]
        if missing:
            guess = _key_from_path(p.relative_to(d).parts[:-1], _stem(p.name))
            if "mode" not in guess and table in _TABLE_MODE:
                guess["mode"] = _TABLE_MODE[table]
            for c in missing:
                df[c] = guess.get(c, 0 if c in ("c", "start") else "")
        frames.append(df)
    if not frames:
        return None
    df = pd.concat(frames, ignore_index=True)
    df["mode"] = df["mode"].fillna("").astype(str).str.lower()
    for col, val in (filters or {}).items():
        if val is not None:  # names match whatever their case (--gpu h100 finds H100)
            df = df[df[col].astype(str).str.strip().str.lower() == str(val).strip().lower()]
    return df.reset_index(drop=True)
