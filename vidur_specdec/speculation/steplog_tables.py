"""Readers of step-log tables, shared by acceptance traces and the validation harness.

The measured vLLM step logs this project reads (``steps``, ``tokens``,
``requests``, ``runs``, ``outputs`` tables; CSV, JSON lines or Parquet) key
every row by its run (:data:`RUN_KEY`) and write truth values in several
spellings. :mod:`vidur_specdec.speculation.acceptance_trace` turns a ``tokens``
table into an acceptance trace; :mod:`vidur_specdec.validate.steplogs` analyses
whole runs. Both read through this module, which sits below both.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pandas as pd

from vidur_specdec.config import ConfigError

RUN_KEY = ["gpu", "target", "split", "drafter", "k", "c", "start"]  # the columns that name one measured run


def read_table_file(path: Path, key: str = "--root") -> pd.DataFrame:
    """One table file (``.parquet``, ``.jsonl``, else CSV) as a DataFrame; ``key`` names the input in errors."""
    path = Path(path)
    if path.name.endswith(".parquet"):
        if importlib.util.find_spec("pyarrow") is None:
            raise ConfigError(f"{key}: {path} is Parquet and pyarrow is not installed")
        return pd.read_parquet(path)
    if path.name.endswith(".jsonl"):
        return pd.read_json(path, lines=True)
    from vidur_specdec.config.files import read_csv_table

    return read_csv_table(path, key, rows=False)  # empty, non-UTF-8, too large: one line naming the file


def truth_values(col: pd.Series) -> pd.Series:
    """A column of truth values (bool, 1/0, "true"/"yes") as booleans."""
    if col.dtype == bool:
        return col
    return col.map(lambda v: str(v).strip().lower() in ("true", "1", "1.0", "yes"))
