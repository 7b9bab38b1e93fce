"""Sweeps: many runs of one base config, in parallel, resumable, into one CSV.

A sweep file is a YAML mapping with these top-level keys (a config file with a
top-level ``sweep:``, ``grid:`` or ``rows:`` key is a sweep; anything else is a
single run)::

    sweep: {name: specdec_39, description: "..."}   # optional; name defaults to the file name
    base: {...}                 # a run config (configs/default.yaml's shape), or a path to one
    grid:                       # Cartesian product, first key outermost, last key fastest
      workload.qps: [2.0, 5.0, 12.0]
      speculative.num_speculative_tokens: [2, 4, 8]
    rows:                       # explicit rows, appended after the grid's rows
      - {speculative.method: none}

``grid`` may also be a list of such mappings (their rows are concatenated, in
order). Keys are dotted config keys, exactly as for ``--set``.

Rows and identity. Each row is the base config with the row's overrides,
validated like any run config. A row whose speculation is off (method ``none``
or ``k = 0``) is normalised to ``method: none, num_speculative_tokens: 0``
with the other ``speculative.*`` keys at their defaults (they have no effect
on such a run). The row id is a hash of that resolved config (less
``predictor.cache_dir``, which cannot change results); two rows with the same
id are an error. The sweep hash covers all row ids in order, the CSV
columns, the content of the profile files the rows use and the package
version: it decides whether an output folder belongs to this sweep.

Baselines. A row's baseline is the row with speculation off whose resolved
config equals the row's on every key outside ``speculative.*`` (same model,
profiles, workload, seed, scheduler: "the same load").
``tpot_speedup = baseline TPOT p50 / row TPOT p50``; baseline rows get 1.0,
rows without a baseline in the sweep get an empty cell.
``speedup_above_acceptance`` is 1 where ``tpot_speedup`` exceeds the row's
``mean_acceptance_length`` (0 where not; empty for baselines and rows without
one): a lighter load than the baseline's, not a faster step (docs/sweep.md).

Output, in ``--output-dir`` (default ``runs/<sweep name>``):

* ``<name>.csv``: one row per sweep row, in sweep order, fixed column order,
  floats as ``%.6f`` (see :data:`METRIC_COLUMNS`). Written at the end, atomically.
* ``.<name>.journal.jsonl``: a header line, then one JSON line per finished row,
  appended (write, flush, fsync) as rows finish. Rerunning the same command
  skips the rows already in the journal, so an interrupted sweep resumes and
  ends with the same CSV as an uninterrupted one. A journal or CSV of a
  different sweep, or a journal written by different simulator code, is an
  error: nothing is overwritten unless ``--overwrite`` is given.

Executors: ``local`` (default; a process pool of ``--jobs`` workers, default
all cores) and ``ray`` (``pip install .[ray]``; ``--address`` of a running
cluster, or a local Ray instance when omitted). Results do not depend on the
executor or the number of jobs.

The package, by job: :mod:`.definition` (sweep files, row identity),
:mod:`.digest` (code and profile digests), :mod:`.worker` (one row and its
metrics), :mod:`.executors` (local pool, Ray), :mod:`.journal`,
:mod:`.table` (the CSV), :mod:`.runner` (:func:`run_sweep`) and :mod:`.cli`.
"""

from vidur_specdec.sweep.cli import add_arguments, main
from vidur_specdec.sweep.definition import (
    JOURNAL_FORMAT,
    NOT_IDENTITY,
    STANDARD_PARAMS,
    SWEEP_KEYS,
    Sweep,
    SweepRow,
    identity,
    is_sweep,
    load_sweep,
)
from vidur_specdec.sweep.digest import code_digest, profile_digests
from vidur_specdec.sweep.executors import default_jobs
from vidur_specdec.sweep.journal import Journal
from vidur_specdec.sweep.runner import SweepRun, run_sweep
from vidur_specdec.sweep.table import FLOAT_FORMAT, csv_text
from vidur_specdec.sweep.lock import FolderLock
from vidur_specdec.sweep.worker import INT_METRICS, METRIC_COLUMNS, metrics_problem, row_metrics, run_row

__all__ = [
    "FLOAT_FORMAT", "INT_METRICS", "JOURNAL_FORMAT", "METRIC_COLUMNS", "NOT_IDENTITY", "STANDARD_PARAMS",
    "SWEEP_KEYS", "FolderLock", "Journal", "Sweep", "SweepRow", "SweepRun", "add_arguments", "code_digest", "csv_text",
    "default_jobs", "identity", "is_sweep", "load_sweep", "main", "metrics_problem", "profile_digests", "row_metrics", "run_row",
    "run_sweep",
]

from vidur_specdec.console import make_callable as _make_callable  # noqa: E402

_make_callable(__name__, "vidur_specdec.sweep.api", "sweep")  # vidur_specdec.sweep(...) runs a sweep
