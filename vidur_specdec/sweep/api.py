"""``sweep()`` from Python: run a sweep and get its table as a DataFrame and a summary (like ``simulate()``).

::

    from vidur_specdec import sweep
    s = sweep("sweeps/specdec_39.yaml", jobs=2)
    s.table         # <name>.csv as a DataFrame: one row per sweep row, the command's columns
    s.summary       # {"name", "rows", "ran", "skipped", "csv"}

``config`` is a sweep YAML path or a mapping of the same shape (docs/sweep.md);
``overrides`` apply to its ``base`` as ``--set`` does. Without ``output_dir``
the sweep runs in a temporary folder that is removed afterwards (``csv`` is
then None); with one, the folder is written exactly as the command writes it,
and a rerun resumes from its journal. Bad input raises
:class:`~vidur_specdec.config.ConfigError` (the command's one-line message).
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Mapping, Optional, Sequence, Union

import pandas as pd


@dataclass
class SweepOutcome:
    """A sweep's table (its CSV) and a summary of the run."""

    table: pd.DataFrame
    summary: Dict[str, Any]


def sweep(config: Union[str, Path, Mapping], overrides: Optional[Sequence[str]] = None, *,
          output_dir: Union[str, Path, None] = None, jobs: Optional[int] = None, executor: str = "local",
          address: Optional[str] = None, overwrite: bool = False) -> SweepOutcome:
    """Run (or resume) a sweep; returns its table and a summary.

    Every argument is checked as the command line checks its option; a bad one is a ConfigError naming the
    keyword, before any work (one override string is one override).
    """
    from vidur_specdec import console as C
    from vidur_specdec.config import ConfigError

    overrides = C.api_overrides(overrides)
    output_dir = C.api_path("output_dir", output_dir)
    jobs = C.api_int("jobs", jobs, 1)
    executor = C.api_choice("executor", executor, ("local", "ray"))
    address = C.api_text("address", address)
    overwrite = C.api_bool("overwrite", overwrite)
    if not isinstance(config, Mapping):
        C.api_path("config", config, allow_none=False)
    from vidur_specdec.sweep.definition import is_sweep, load_sweep
    from vidur_specdec.sweep.runner import run_sweep

    from vidur_specdec.config import read_yaml

    if not is_sweep(config if isinstance(config, Mapping) else read_yaml(config)):
        raise ConfigError(f"config: {config if not isinstance(config, Mapping) else 'the mapping'} is a run config "
                          "(no top-level sweep:, grid: or rows: key); use simulate() for one run")
    sw = load_sweep(config, overrides)
    temp = None
    if output_dir is None:
        temp = Path(tempfile.mkdtemp(prefix="vidur-specdec-sweep-"))
        out = temp / sw.name
    else:
        out = Path(output_dir)
    try:
        try:
            run = run_sweep(sw, out, jobs=jobs, executor=executor, address=address, overwrite=overwrite,
                            progress=False)
        except ConfigError as e:
            raise type(e)(C.api_message(str(e))) from None  # named by the keyword, not the command's option
        table = pd.read_csv(run.csv_path)
    finally:
        if temp is not None:
            shutil.rmtree(temp, ignore_errors=True)
    summary = {"name": sw.name, "rows": run.rows, "ran": run.ran, "skipped": run.skipped,
               "csv": None if temp is not None else str(run.csv_path)}
    return SweepOutcome(table=table, summary=summary)
