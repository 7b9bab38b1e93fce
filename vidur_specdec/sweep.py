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
"""

from __future__ import annotations

import argparse
import copy
import csv
import hashlib
import io
import itertools
import json
import math
import os
import re
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from vidur_specdec.config import (
    ConfigError,
    RunConfig,
    SpeculativeConfig,
    apply_overrides,
    from_dict,
    read_yaml,
    set_dotted,
)

SWEEP_KEYS = ("sweep", "base", "grid", "rows")
JOURNAL_FORMAT = 1
FLOAT_FORMAT = "%.6f"

# Parameter columns every sweep CSV has: (column, dotted config key).
STANDARD_PARAMS = [
    ("model", "model"),
    ("device", "device"),
    ("profiles", "profiles"),
    ("num_requests", "workload.num_requests"),
    ("qps", "workload.qps"),
    ("method", "speculative.method"),
    ("k", "speculative.num_speculative_tokens"),
    ("acceptance_rate", "speculative.acceptance_rate"),
    ("verify_attention", "speculative.verify_attention"),
]
# Measured per row (floats, ms / tokens per s / tokens), in this order.
METRIC_COLUMNS = [
    "tpot_ms_p50", "tpot_ms_p90", "tpot_ms_p99",
    "ttft_ms_p50", "ttft_ms_p90", "ttft_ms_p99",
    "e2e_ms_p50", "e2e_ms_p90", "e2e_ms_p99",
    "throughput_tok_s", "mean_acceptance_length", "accepted_per_guess",
    "ttft_ms_mean_first50", "ttft_ms_mean_last50",
    "makespan_s", "mean_step_ms", "num_steps", "restarts",
]
INT_METRICS = {"num_steps", "restarts"}


# --------------------------------------------------------------------------- hashing helpers


def _canon(obj) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), allow_nan=True)


def _sha(text: Union[str, bytes], n: int = 16) -> str:
    if isinstance(text, str):
        text = text.encode()
    return hashlib.sha256(text).hexdigest()[:n]


# Modules whose code cannot change a row's numbers (CLI, sweep runner, report page).
_NOT_MODEL_CODE = {"main.py", "sweep.py", "report.py", "__main__.py"}
_CODE_DIGEST: Optional[str] = None


def code_digest() -> str:
    """Hash of the simulator's source (the package's top-level modules minus CLI/sweep/report) and Vidur's version."""
    global _CODE_DIGEST
    if _CODE_DIGEST is None:
        from importlib.metadata import PackageNotFoundError, version

        root = Path(__file__).resolve().parent
        h = hashlib.sha256()
        for p in sorted(root.glob("*.py")):  # subpackages (profiles builder, validation) are not the simulator
            if p.name in _NOT_MODEL_CODE:
                continue
            h.update(p.name.encode() + b"\0" + p.read_bytes() + b"\0")
        try:
            h.update(("vidur==" + version("vidur")).encode())
        except PackageNotFoundError:  # pragma: no cover
            pass
        _CODE_DIGEST = h.hexdigest()[:16]
    return _CODE_DIGEST


def profile_digests(cfg: RunConfig, fresh: bool = False) -> Dict[str, str]:
    """``{file name: content digest}`` of the profile files a run reads (target, and drafter if used).

    Digests are cached per path, size and mtime in this process; ``fresh`` re-reads the files.
    """
    from vidur_specdec.deployment import profile_files
    from vidur_specdec.predictor import file_digest

    return {name: file_digest(f, fresh)[:16] for name, f in profile_files(cfg).items()}


# --------------------------------------------------------------------------- sweep definition


@dataclass
class SweepRow:
    index: int
    overrides: Dict[str, Any]      # dotted key -> value, as written in the sweep file
    config: RunConfig              # resolved and normalised
    row_id: str
    load_id: str                   # hash of the resolved config without its speculative section

    @property
    def config_dict(self) -> Dict:
        return self.config.to_dict()

    @property
    def is_baseline(self) -> bool:
        return not self.config.speculative.enabled

    def describe(self) -> str:
        return ", ".join(f"{k}={_fmt_value(v)}" for k, v in self.overrides.items()) or "base config"


@dataclass
class Sweep:
    name: str
    description: str
    rows: List[SweepRow]
    columns: List[str]
    param_columns: List[Tuple[str, str]]     # (column, dotted key)
    sweep_hash: str
    source: Optional[str] = None
    baseline_of: Dict[int, Optional[int]] = field(default_factory=dict)

    @property
    def csv_name(self) -> str:
        return f"{self.name}.csv"

    @property
    def journal_name(self) -> str:
        return f".{self.name}.journal.jsonl"


def is_sweep(data: Mapping) -> bool:
    """True when a loaded YAML mapping describes a sweep (a top-level ``sweep``, ``grid`` or ``rows`` key)."""
    return isinstance(data, Mapping) and any(k in data for k in ("sweep", "grid", "rows"))


_KEY_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def _fmt_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return "null"
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, (list, dict)):
        return json.dumps(v, separators=(",", ":"))
    return str(v)


def _get_dotted(data: Mapping, key: str):
    node = data
    for part in key.split("."):
        node = node[part]
    return node


def _check_key(where: str, key) -> str:
    if not isinstance(key, str) or not _KEY_RE.match(key):
        raise ConfigError(f"{where}: {key!r} is not a dotted config key (e.g. speculative.acceptance_rate)")
    return key


def _expand_grid(where: str, grid) -> List[Dict[str, Any]]:
    if not isinstance(grid, Mapping):
        raise ConfigError(f"{where}: must be a mapping of dotted.key: [values], got {grid!r}")
    if not grid:
        raise ConfigError(f"{where}: is empty; give at least one key with a list of values")
    keys, values = [], []
    for key, vals in grid.items():
        _check_key(where, key)
        if not isinstance(vals, list):
            raise ConfigError(f"{where}.{key}: must be a list of values, got {vals!r}")
        if not vals:
            raise ConfigError(f"{where}.{key}: empty list of values, so the grid has no rows")
        keys.append(key)
        values.append(vals)
    return [dict(zip(keys, combo)) for combo in itertools.product(*values)]


def _normalise(cfg: RunConfig) -> RunConfig:
    if not cfg.speculative.enabled:
        cfg.speculative = SpeculativeConfig(method="none", num_speculative_tokens=0)
    return cfg


# Keys that cannot change a run's numbers, left out of row identity.
NOT_IDENTITY = ("predictor.cache_dir",)


def identity(cfg: RunConfig) -> Dict:
    """The resolved config a row id is the hash of: ``cfg`` without :data:`NOT_IDENTITY` keys."""
    d = cfg.to_dict()
    for key in NOT_IDENTITY:
        *path, last = key.split(".")
        node = d
        for part in path:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict):
            node.pop(last, None)
            if not node and path:
                parent = d
                for part in path[:-1]:
                    parent = parent[part]
                parent.pop(path[-1])
    return d


def load_sweep(source: Union[str, Path, Mapping], overrides: Optional[List[str]] = None,
               name: Optional[str] = None) -> Sweep:
    """Parse, expand and validate a sweep (a YAML path or a mapping); ``overrides`` apply to ``base``.

    Raises :class:`ConfigError` (one line) on an unknown top-level key, an empty
    grid, a bad or unknown config key in any row, or two rows that are the same run.
    """
    src = None
    base_dir = Path.cwd()
    if isinstance(source, (str, Path)):
        src = str(source)
        data = read_yaml(source)
        base_dir = Path(source).resolve().parent
        default_name = Path(source).stem
    else:
        data = dict(source or {})
        default_name = "sweep"
    unknown = [k for k in data if k not in SWEEP_KEYS]
    if unknown:
        raise ConfigError(f"{unknown[0]}: unknown top-level key in a sweep file; allowed: {', '.join(SWEEP_KEYS)} "
                          "(run config keys go under base:)")
    meta = data.get("sweep") or {}
    if not isinstance(meta, Mapping):
        raise ConfigError(f"sweep: must be a mapping with name/description, got {meta!r}")
    bad = [k for k in meta if k not in ("name", "description")]
    if bad:
        raise ConfigError(f"sweep.{bad[0]}: unknown key; allowed under sweep: name, description")
    sweep_name = name or meta.get("name") or default_name
    if not isinstance(sweep_name, str) or not _NAME_RE.match(sweep_name):
        raise ConfigError(f"sweep.name: must be letters, digits, '_', '-', '.', got {sweep_name!r}")
    description = meta.get("description") or ""
    if not isinstance(description, str):
        raise ConfigError("sweep.description: must be a string")

    base = data.get("base") or {}
    if isinstance(base, str):
        p = Path(base) if Path(base).is_absolute() else base_dir / base
        if not p.is_file():
            raise ConfigError(f"base: file not found: {base}")
        base = read_yaml(p)
    if not isinstance(base, Mapping):
        raise ConfigError(f"base: must be a run config mapping or a path to one, got {base!r}")
    try:
        base = apply_overrides(dict(base), overrides or [])
        from_dict(base)
    except ConfigError as e:
        raise ConfigError(f"base: {e}") from None

    grid = data.get("grid")
    rows = data.get("rows")
    if grid is None and rows is None:
        raise ConfigError("grid: a sweep needs a grid: or rows:")
    expanded: List[Tuple[str, Dict[str, Any]]] = []
    if grid is not None:
        grids = grid if isinstance(grid, list) else [grid]
        if not grids:
            raise ConfigError("grid: is empty; give at least one key with a list of values")
        for gi, g in enumerate(grids):
            where = "grid" if not isinstance(grid, list) else f"grid[{gi}]"
            expanded += [(where, r) for r in _expand_grid(where, g)]
    if rows is not None:
        if not isinstance(rows, list):
            raise ConfigError(f"rows: must be a list of {{dotted.key: value}} mappings, got {rows!r}")
        if not rows:
            raise ConfigError("rows: is empty; give at least one row")
        for ri, r in enumerate(rows):
            if not isinstance(r, Mapping):
                raise ConfigError(f"rows[{ri}]: must be a mapping of dotted.key: value, got {r!r}")
            for k in r:
                _check_key(f"rows[{ri}]", k)
            expanded.append((f"rows[{ri}]", dict(r)))

    out: List[SweepRow] = []
    seen: Dict[str, int] = {}
    for i, (where, ov) in enumerate(expanded):
        data_i = copy.deepcopy(dict(base))
        try:
            for k, v in ov.items():
                set_dotted(data_i, k, v)
            cfg = _normalise(from_dict(data_i))
        except ConfigError as e:
            raise ConfigError(f"{where} (sweep row {i}: {', '.join(f'{k}={_fmt_value(v)}' for k, v in ov.items())}): "
                              f"{e}") from None
        d = identity(cfg)
        rid = _sha(_canon(d))
        if rid in seen:
            j = seen[rid]
            why = " (speculation is off in both, so their speculative.* keys have no effect)" \
                if not cfg.speculative.enabled else ""
            raise ConfigError(f"{where}: sweep rows {j} and {i} are the same run{why}: "
                              f"{out[j].describe()} | {', '.join(f'{k}={_fmt_value(v)}' for k, v in ov.items())}")
        seen[rid] = i
        d.pop("speculative")
        out.append(SweepRow(i, ov, cfg, rid, _sha(_canon(d))))

    # parameter columns: the standard ones, then any other varied key in order of first appearance
    std_keys = {k for _, k in STANDARD_PARAMS}
    params = list(STANDARD_PARAMS)
    if any(r.config.speculative.method == "draft_model" for r in out):
        params.append(("draft_model", "speculative.draft_model"))
    std_keys |= {k for _, k in params}
    for r in out:
        for k in r.overrides:
            if k not in std_keys and all(k != c for c, _ in params):
                params.append((k, k))
                std_keys.add(k)
    columns = ["row", "row_id"] + [c for c, _ in params] + METRIC_COLUMNS + ["tpot_speedup", "baseline_row",
                                                                             "sweep_hash"]
    baselines = {r.load_id: r.index for r in out if r.is_baseline}
    baseline_of = {r.index: baselines.get(r.load_id) for r in out}

    profiles: Dict[str, str] = {}
    for r in out:
        profiles.update(profile_digests(r.config))
    from vidur_specdec import __version__

    sweep_hash = _sha(_canon({"format": JOURNAL_FORMAT, "rows": [r.row_id for r in out], "columns": columns,
                              "profiles": profiles, "version": __version__}))
    return Sweep(sweep_name, description, out, columns, params, sweep_hash, src, baseline_of)


# --------------------------------------------------------------------------- one row


def row_metrics(result) -> Dict[str, float]:
    """The per-row numbers recorded in the journal and the CSV, from a :class:`SimulationResult`."""
    s = result.summary
    req = result.requests.sort_values(["arrived_at_s", "request_id"])
    m = {}
    for metric in ("tpot_ms", "ttft_ms", "e2e_ms"):
        for p in ("p50", "p90", "p99"):
            m[f"{metric}_{p}"] = s[metric][p]
    m["throughput_tok_s"] = s["throughput_tok_s"]
    m["mean_acceptance_length"] = s["mean_acceptance_length"]
    m["accepted_per_guess"] = s["accepted_per_guess"]
    m["ttft_ms_mean_first50"] = float(req["ttft_ms"].iloc[:50].mean())
    m["ttft_ms_mean_last50"] = float(req["ttft_ms"].iloc[-50:].mean())
    m["makespan_s"] = s["makespan_s"]
    m["mean_step_ms"] = s["mean_step_ms"]
    m["num_steps"] = s["num_steps"]
    m["restarts"] = s["restarts"]
    return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in m.items()}


def run_row(config_dict: Dict) -> Dict:
    """Run one sweep row (in a worker): ``{"metrics", "wall_s", "code", "profiles"}``."""
    from vidur_specdec.simulation import simulate

    t0 = time.perf_counter()
    result = simulate(config_dict)
    wall = time.perf_counter() - t0
    return {"metrics": row_metrics(result), "wall_s": wall, "code": code_digest(),
            "profiles": profile_digests(result.config, fresh=True)}


def _warm(config_dicts: Sequence[Dict]) -> None:
    """Fit (and cache, in this process) the predictors the rows need; check each row prepares."""
    from vidur_specdec.simulation import prepare

    for d in config_dicts:
        prepare(from_dict(d))


# --------------------------------------------------------------------------- executors


def _set_parent_death_signal() -> None:
    """Linux: die with the parent, so a killed sweep leaves no orphan workers."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        except Exception:  # pragma: no cover
            pass


def _local_worker_init(warm: Sequence[Dict]) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C
    _set_parent_death_signal()
    _warm(warm)  # a no-op after fork (the parent's cache is inherited)


def _note(e: BaseException, row: SweepRow) -> None:
    if hasattr(e, "add_note"):  # Python 3.11+
        e.add_note(f"while running sweep row {row.index} ({row.describe()})")


def default_jobs() -> int:
    """The cores this process may use."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def _run_local(rows: List[SweepRow], jobs: int, warm: Sequence[Dict], on_done: Callable) -> None:
    """Run rows on ``jobs`` local processes (inline when 1); ``on_done(row, result)`` in the parent."""
    if jobs <= 1 or len(rows) <= 1:
        for r in rows:
            try:
                result = run_row(r.config_dict)
            except Exception as e:
                _note(e, r)
                raise
            on_done(r, result)
        return
    import concurrent.futures as cf
    import multiprocessing as mp

    methods = mp.get_all_start_methods()
    ctx = mp.get_context("fork" if "fork" in methods else "spawn")
    pool = cf.ProcessPoolExecutor(max_workers=min(jobs, len(rows)), mp_context=ctx,
                                  initializer=_local_worker_init, initargs=(list(warm),))
    futures = {}
    try:
        futures = {pool.submit(run_row, r.config_dict): r for r in rows}
        for fut in cf.as_completed(futures):
            row = futures[fut]
            try:
                result = fut.result()
            except Exception as e:
                _note(e, row)
                raise
            on_done(row, result)
    except BaseException:
        for f in futures:
            f.cancel()
        for p in list(getattr(pool, "_processes", {}).values()):
            try:
                p.terminate()
            except Exception:  # pragma: no cover
                pass
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown(wait=True)


def _run_ray(rows: List[SweepRow], jobs: int, address: Optional[str], on_done: Callable) -> None:
    try:
        import ray
    except ImportError:
        raise ConfigError("--executor ray: Ray is not installed; pip install 'vidur_specdec[ray]' "
                          "(or use --executor local)") from None
    started = False
    if not ray.is_initialized():
        kwargs = dict(include_dashboard=False, logging_level="WARNING", log_to_driver=True)
        if address:
            ray.init(address=address, **kwargs)
        else:
            ray.init(num_cpus=jobs, **kwargs)
        started = True
    try:
        remote = ray.remote(num_cpus=1, max_retries=0)(run_row)
        refs = {remote.remote(r.config_dict): r for r in rows}
        pending = list(refs)
        try:
            while pending:
                done, pending = ray.wait(pending, num_returns=1)
                for ref in done:
                    try:
                        result = ray.get(ref)
                    except Exception as e:
                        _note(e, refs[ref])
                        raise
                    on_done(refs[ref], result)
        except BaseException:
            for ref in pending:
                ray.cancel(ref, force=True)
            raise
    finally:
        if started:
            ray.shutdown()


# --------------------------------------------------------------------------- journal and CSV


class Journal:
    """``.<name>.journal.jsonl``: a header line, then one line per finished row (appended, fsynced)."""

    def __init__(self, path: Path, header: Dict):
        self.path = path
        self.header = header
        self.done: Dict[int, Dict] = {}

    def read(self, overwrite: bool, out_dir: Path) -> None:
        if not self.path.exists() or overwrite:
            return
        raw = self.path.read_bytes()
        lines = raw.split(b"\n")
        good_end = 0
        pos = 0
        header = None
        for n, line in enumerate(lines):
            end = pos + len(line) + 1
            complete = end <= len(raw)  # the line ends with a newline
            if not complete:
                break  # a half-written last line: ignored, truncated below
            try:
                obj = json.loads(line)
            except ValueError:
                if end == len(raw):
                    break  # garbled last line
                raise ConfigError(f"--output-dir: {self.path} is corrupt at line {n + 1}; "
                                  "remove it or rerun with --overwrite") from None
            if header is None:
                header = obj if isinstance(obj, dict) else {}
                self._check_header(header, out_dir)
            elif isinstance(obj, dict) and isinstance(obj.get("row"), int) and isinstance(obj.get("metrics"), dict):
                self.done[obj["row"]] = obj
            else:
                raise ConfigError(f"--output-dir: {self.path} is corrupt at line {n + 1}; "
                                  "remove it or rerun with --overwrite")
            good_end = end
            pos = end
        if header is None:
            self.done.clear()
            good_end = 0
        if good_end != len(raw):
            with open(self.path, "r+b") as f:
                f.truncate(good_end)
                f.flush()
                os.fsync(f.fileno())

    def _check_header(self, obj: Dict, out_dir: Path) -> None:
        h = self.header
        if obj.get("sweep_hash") != h["sweep_hash"]:
            raise ConfigError(f"--output-dir: {out_dir} holds results of a different sweep "
                              f"({self.path.name}: sweep hash {obj.get('sweep_hash')}, this sweep {h['sweep_hash']}); "
                              "use another --output-dir, or --overwrite to discard them")
        if obj.get("code") != h["code"]:
            raise ConfigError(f"--output-dir: {self.path} was written by different simulator code "
                              f"(code {obj.get('code')}, now {h['code']}); rerun with --overwrite to start over")

    def _append(self, obj: Dict, mode: str = "ab") -> None:
        with open(self.path, mode) as f:
            f.write((json.dumps(obj, sort_keys=True) + "\n").encode())
            f.flush()
            os.fsync(f.fileno())

    def add(self, row: SweepRow, result: Dict) -> None:
        obj = {"row": row.index, "row_id": row.row_id, "metrics": result["metrics"],
               "wall_s": round(result["wall_s"], 4)}
        self._append(obj)
        self.done[row.index] = obj


def _fmt_cell(v, is_metric: bool = False, is_int: bool = False) -> str:
    if v is None:
        return ""
    if is_metric:
        if is_int:
            return str(int(v))
        return FLOAT_FORMAT % v
    return _fmt_value(v)


def csv_text(sweep: Sweep, results: Mapping[int, Dict], only: Optional[Iterable[int]] = None) -> str:
    """The sweep's CSV text: header, then one line per row in sweep order.

    ``results`` maps row index -> metrics dict and must hold every row written
    and its baseline; ``only`` limits the lines to those rows (a partial check).
    """
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(sweep.columns)
    wanted = None if only is None else set(only)
    for r in sweep.rows:
        if wanted is not None and r.index not in wanted:
            continue
        m = results[r.index]
        cfg = r.config_dict
        cells = [str(r.index), r.row_id]
        for col, key in sweep.param_columns:
            v = _get_dotted(cfg, key)
            if key.startswith("speculative.") and key not in ("speculative.method",
                                                              "speculative.num_speculative_tokens"):
                if r.is_baseline:
                    v = None
                elif key == "speculative.acceptance_rate" and r.config.speculative.acceptance_input() != \
                        "acceptance_rate":
                    v = None
            cells.append(_fmt_cell(v))
        for c in METRIC_COLUMNS:
            cells.append(_fmt_cell(m.get(c), True, c in INT_METRICS))
        b = sweep.baseline_of.get(r.index)
        speedup = None
        if b is not None:
            base_tpot, tpot = results[b].get("tpot_ms_p50"), m.get("tpot_ms_p50")
            if b == r.index:
                speedup = 1.0
            elif base_tpot is not None and tpot:
                speedup = base_tpot / tpot
        cells.append(_fmt_cell(speedup, True))
        cells.append("" if b is None else str(b))
        cells.append(sweep.sweep_hash)
        w.writerow(cells)
    return buf.getvalue()


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        with open(tmp, "w", newline="") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def _csv_sweep_hash(path: Path) -> Optional[str]:
    """The ``sweep_hash`` recorded in an existing CSV; '' when the file is not a sweep CSV."""
    try:
        with open(path, newline="") as f:
            rd = csv.DictReader(f)
            if not rd.fieldnames or "sweep_hash" not in rd.fieldnames:
                return ""
            for rec in rd:
                return rec["sweep_hash"]
    except (OSError, UnicodeDecodeError, csv.Error):
        return ""
    return ""


# --------------------------------------------------------------------------- running


@dataclass
class SweepRun:
    csv_path: Path
    rows: int
    ran: int
    skipped: int
    wall_s: float
    row_wall_s: Dict[int, float]


def run_sweep(sweep: Sweep, out_dir: Union[str, Path], jobs: Optional[int] = None, executor: str = "local",
              address: Optional[str] = None, overwrite: bool = False, progress: bool = True,
              log: Optional[Callable[[str], None]] = None) -> SweepRun:
    """Run the rows not yet in the output folder's journal, then write ``<name>.csv`` atomically.

    Every check (the folder belongs to this sweep, each row prepares) happens
    before anything in ``out_dir`` is written; ``log`` gets one line when the work starts.
    """
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise ConfigError(f"--output-dir: {out_dir} exists and is not a folder")
    if executor not in ("local", "ray"):
        raise ConfigError(f"--executor: must be one of local, ray, got {executor!r}")
    jobs = default_jobs() if jobs is None else jobs
    if jobs < 1:
        raise ConfigError(f"--jobs: must be >= 1, got {jobs}")
    csv_path = out_dir / sweep.csv_name
    header = {"journal": JOURNAL_FORMAT, "sweep": sweep.name, "sweep_hash": sweep.sweep_hash,
              "code": code_digest(), "rows": len(sweep.rows)}
    journal = Journal(out_dir / sweep.journal_name, header)

    # refuse, before touching anything, an output folder that belongs to another sweep
    if csv_path.exists() and not overwrite:
        h = _csv_sweep_hash(csv_path)
        if h != sweep.sweep_hash:
            what = f"sweep hash {h}" if h else "not a sweep CSV"
            raise ConfigError(f"--output-dir: {csv_path} belongs to a different sweep ({what}, this sweep "
                              f"{sweep.sweep_hash}); use another --output-dir, or --overwrite to replace it")
    journal.read(overwrite, out_dir)
    for i, obj in journal.done.items():
        if i >= len(sweep.rows) or obj.get("row_id") != sweep.rows[i].row_id:
            raise ConfigError(f"--output-dir: {journal.path} does not match this sweep at row {i}; "
                              "rerun with --overwrite to start over")
    pending = [r for r in sweep.rows if r.index not in journal.done]

    # every pending row must prepare (profiles found, memory fits) before any work starts;
    # this also fits the predictors once here, which forked workers inherit
    warm: List[Dict] = []
    seen_inputs = set()
    for r in pending:
        key = _canon([r.config.profiles, r.config.device, r.config.model, r.config.speculative.method,
                      r.config.speculative.draft_model, r.config.speculative.draft_profiles])
        try:
            from vidur_specdec.simulation import prepare

            prepare(r.config)
        except ConfigError as e:
            raise ConfigError(f"sweep row {r.index} ({r.describe()}): {e}") from None
        if key not in seen_inputs:
            seen_inputs.add(key)
            warm.append(r.config_dict)

    out_dir.mkdir(parents=True, exist_ok=True)
    if overwrite or not journal.path.exists() or journal.path.stat().st_size == 0:
        journal._append(header, "wb")  # a new journal (read() empties one without a valid header)

    if log is not None:
        where = f"{jobs} {executor} worker{'s' if jobs > 1 else ''}" if executor == "local" else \
            f"Ray ({address or 'local'})"
        log(f"sweep {sweep.name}: {len(sweep.rows)} rows, {len(pending)} to run"
            f"{f' ({len(journal.done)} already done)' if journal.done else ''} on {where} -> {csv_path}")
    bar = None
    if progress and pending:
        from tqdm import tqdm

        tqdm.monitor_interval = 0  # no monitor thread (the local pool forks)
        bar = tqdm(total=len(sweep.rows), initial=len(sweep.rows) - len(pending), desc=sweep.name,
                   unit="row", file=sys.stderr, dynamic_ncols=True)
    walls: Dict[int, float] = {}
    my_code = header["code"]

    def on_done(row: SweepRow, result: Dict) -> None:
        if result.get("code") != my_code:
            raise ConfigError(f"--executor {executor}: a worker runs different simulator code "
                              f"(code {result.get('code')}, here {my_code}); install the same version everywhere")
        if result.get("profiles") != profile_digests(row.config):
            raise ConfigError(f"--executor {executor}: a worker read different profile files for sweep row "
                              f"{row.index}; use the same profiles everywhere (profiles: shipped or a shared path)")
        journal.add(row, result)
        walls[row.index] = result["wall_s"]
        if bar is not None:
            bar.update(1)

    t0 = time.perf_counter()
    try:
        if executor == "ray":
            _run_ray(pending, jobs, address, on_done)
        else:
            _run_local(pending, jobs, warm, on_done)
    finally:
        if bar is not None:
            bar.close()
    wall = time.perf_counter() - t0
    text = csv_text(sweep, {i: obj["metrics"] for i, obj in journal.done.items()})
    _atomic_write(csv_path, text)
    return SweepRun(csv_path, len(sweep.rows), len(pending), len(sweep.rows) - len(pending), wall, walls)


# --------------------------------------------------------------------------- command line


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """The sweep options (also added to ``vidur_specdec.main``'s parser)."""
    ap.add_argument("--jobs", type=int, default=None, help="sweep: parallel rows (default: all cores)")
    ap.add_argument("--executor", choices=("local", "ray"), default="local",
                    help="sweep: local process pool (default) or a Ray cluster")
    ap.add_argument("--address", default=None, help="sweep, --executor ray: cluster address (default: start Ray locally)")
    ap.add_argument("--overwrite", action="store_true",
                    help="sweep: discard the output folder's journal and CSV for this sweep and rerun every row")


def main(args: argparse.Namespace) -> int:
    """Run a sweep from parsed ``vidur_specdec.main`` arguments; returns the exit status."""
    out = sweep = None
    try:
        sweep = load_sweep(args.config, getattr(args, "overrides", []))
        out = Path(args.output_dir) if args.output_dir else Path("runs") / sweep.name
        jobs = getattr(args, "jobs", None)
        executor = getattr(args, "executor", "local") or "local"
        run = run_sweep(sweep, out, jobs=jobs, executor=executor, address=getattr(args, "address", None),
                        overwrite=getattr(args, "overwrite", False),
                        log=lambda msg: print(msg, file=sys.stderr, flush=True))
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        where = f" in {out / sweep.journal_name}" if out is not None and sweep is not None else ""
        print(f"\ninterrupted: finished rows are saved{where}; rerun the same command to resume", file=sys.stderr)
        return 130
    workers = min(jobs or default_jobs(), max(run.ran, 1))
    how = f"{workers} {executor} worker{'s' if workers > 1 else ''}"
    print(f"wrote {run.csv_path}: {run.rows} rows ({run.ran} run in {run.wall_s:.1f} s with {how}, "
          f"{run.skipped} already done)")
    return 0


def _parse(argv: Optional[List[str]]) -> argparse.Namespace:
    from vidur_specdec.main import parse_args  # the one parser: --config, --output-dir, --set + sweep flags

    return parse_args(argv)


if __name__ == "__main__":
    sys.exit(main(_parse(None)))
