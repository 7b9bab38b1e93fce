"""Reading and interpolating AIConfigurator's measured kernel tables (``aiconfigurator-core``, pinned).

The package ships, per GPU, Parquet tables of kernel latencies collected on a
framework release: ``systems/data/<system>/<op>/<framework>/<version>/<table>.parquet``.
This module locates them (:func:`table_path`; a missing package, version or
file is one :class:`~vidur_specdec.config.ConfigError` line naming it), loads
them once per process through one checked reader (:func:`load`, :data:`SCHEMAS`:
a file that does not parse, is empty, lacks a column the simulator reads, or
holds a latency that is not a finite positive number, or a key that is not a
finite number >= 0, is one :class:`TableFileError` line naming the file and what
is wrong), and interpolates along the tables' own axes (:func:`interp1`,
:func:`grid2`). Latencies are ms, as the tables store them.

The tables are read directly (pyarrow via pandas) rather than through the
package's query API: that API answers one point per call from its compiled
engine, with corrections (speed-of-light clamps, gap filling) the simulator
could not name; interpolating the raw rows keeps every figure traceable to a
row and lets a profile price a whole grid in one vectorised call.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Dict, Tuple

import numpy as np
import pandas as pd

from vidur_specdec.config import ConfigError

PACKAGE = "aiconfigurator-core"
PACKAGE_VERSION = "0.12.0"  # pinned in pyproject.toml; the tables are this release's
_CACHE: Dict[Tuple[str, ...], Any] = {}  # the tables read, and what is derived from them (:func:`derived`)


_ROOT: Dict[str, Path] = {}  # the located data folder, once found (reading the installed version scans sys.path)


def data_root() -> Path:
    """``<aiconfigurator_core>/systems/data``; :class:`ConfigError` when the pinned package is not installed."""
    got = _ROOT.get(PACKAGE)
    if got is None:
        got = _ROOT[PACKAGE] = _locate()
    return got


def _locate() -> Path:
    from importlib import metadata, util

    try:
        version = metadata.version(PACKAGE)
    except metadata.PackageNotFoundError:
        version = None
    spec = util.find_spec("aiconfigurator_core")
    if version is None or spec is None or spec.origin is None:
        raise ConfigError(f"profiles: the measured kernel tables need {PACKAGE}=={PACKAGE_VERSION}, which is not "
                          "installed; install it, or set profiles: built for the analytical roofline")
    if version != PACKAGE_VERSION:
        raise ConfigError(f"profiles: the measured kernel tables are read from {PACKAGE}=={PACKAGE_VERSION}, but "
                          f"{version} is installed; install {PACKAGE_VERSION}, or set profiles: built")
    return Path(spec.origin).parent / "systems" / "data"


class TableFileError(ConfigError):
    """A measured table file that is there but cannot be used (unreadable, empty, a column missing, a bad value);
    never taken for a table the package does not have."""


#: table -> (key columns the simulator reads, of which numeric ones must be finite numbers >= 0; latency columns,
#: finite numbers > 0). Strings among the keys need only be present.
SCHEMAS: Dict[str, Tuple[Tuple[str, ...], Tuple[str, ...]]] = {
    "gemm_perf": (("kernel_source", "gemm_dtype", "m", "n", "k"), ("latency",)),
    "generation_attention_perf": (("kernel_source", "batch_size", "num_heads", "num_key_value_heads", "head_dim",
                                   "kv_cache_dtype", "window_size", "step"), ("latency",)),
    "context_attention_perf": (("kernel_source", "batch_size", "isl", "num_heads", "num_key_value_heads",
                                "head_dim", "kv_cache_dtype", "window_size"), ("latency",)),
    "custom_allreduce_perf": (("kernel_source", "num_gpus", "message_size"), ("latency",)),
    "nccl_perf": (("op_name", "nccl_dtype", "num_gpus", "message_size"), ("latency",)),
    "gdn_perf": (("kernel_source", "phase", "batch_size", "seq_len", "d_model", "d_conv", "num_k_heads",
                  "head_k_dim", "num_v_heads", "head_v_dim"), ("latency",)),
    "mla_generation_module_perf": (("kernel_source", "model", "mla_dtype", "kv_cache_dtype", "gemm_type",
                                    "num_heads", "batch_size", "step"), ("latency",)),
    "mla_context_module_perf": (("kernel_source", "model", "mla_dtype", "kv_cache_dtype", "gemm_type",
                                 "num_heads", "batch_size", "isl"), ("latency",)),
    "dsa_generation_module_perf": (("model", "op_name", "gemm_type", "kv_cache_dtype", "num_heads", "batch_size",
                                    "step"), ("latency",)),
    "moe_a2a_perf": (("comm_backend", "phase", "node_num", "hidden_size", "topk", "num_experts", "num_tokens"),
                     ("latency",)),
    "wideep_deepep_ll_perf": (("node_num", "num_token"), ("dispatch_avg_t_us", "combine_avg_t_us")),
    "wideep_deepep_normal_perf": (("node_num", "num_token", "dispatch_sms"),
                                  ("dispatch_transmit_us", "combine_transmit_us")),
    "moe_perf": (("kernel_source", "moe_dtype", "num_tokens", "hidden_size", "inter_size", "topk", "num_experts",
                  "moe_tp_size", "moe_ep_size", "distribution"), ("latency",)),
}


#: the key columns of :data:`SCHEMAS` that hold text; every other key holds numbers
TEXT_KEYS = {"kernel_source", "gemm_dtype", "kv_cache_dtype", "op_name", "nccl_dtype", "phase", "model",
             "mla_dtype", "gemm_type", "comm_backend", "moe_dtype", "distribution"}


def check_table(df: pd.DataFrame, path: Path, table: str) -> pd.DataFrame:
    """``df`` (read from ``path``) against :data:`SCHEMAS`; :class:`TableFileError` naming the file and the fault."""
    keys, times = SCHEMAS.get(table, ((), ("latency",)))
    if df.empty:
        raise TableFileError(f"profiles: measured table {path} is empty (no rows); reinstall {PACKAGE}=="
                             f"{PACKAGE_VERSION}, or set profiles: built for the analytical roofline")
    missing = [c for c in keys + times if c not in df.columns]
    if missing:
        raise TableFileError(f"profiles: measured table {path} has no column {', '.join(missing)} (it has "
                             f"{', '.join(map(str, df.columns[:12]))}); reinstall {PACKAGE}=={PACKAGE_VERSION}, or "
                             "set profiles: built")
    for col, lowest, what in [(c, "positive", "latency") for c in times] + [(c, "nonneg", "key") for c in keys]:
        v = df[col]
        if what == "key" and col in TEXT_KEYS:
            # every value a str, none missing (pandas' own scans, in C)
            if not (pd.api.types.is_string_dtype(v) or pd.api.types.is_object_dtype(v)) or \
                    pd.api.types.infer_dtype(v, skipna=False) != "string" or v.isna().any():
                raise TableFileError(f"profiles: measured table {path}, column {col}: must hold text (a kernel, "
                                     f"dtype or model name), got {v.dtype} values")
            continue
        if not pd.api.types.is_numeric_dtype(v) or pd.api.types.is_bool_dtype(v):
            raise TableFileError(f"profiles: measured table {path}, column {col}: must hold numbers, got "
                                 f"{v.dtype} values such as {v.iloc[0]!r}")
        x = v.to_numpy(dtype=float)
        bad = ~np.isfinite(x) | ((x <= 0) if lowest == "positive" else (x < 0))
        if bad.any():
            i = int(bad.argmax())
            need = "a finite number of ms > 0" if what == "latency" and col == "latency" else \
                ("a finite time > 0" if what == "latency" else "a finite number >= 0")
            raise TableFileError(f"profiles: measured table {path}, row {i}, column {col}: {x[i]!r} is not {need} "
                                 f"({int(bad.sum())} such rows); reinstall {PACKAGE}=={PACKAGE_VERSION}, or set "
                                 "profiles: built")
    return df


def table_path(system: str, op: str, framework: str, version: str, table: str) -> Path:
    """The Parquet file of one table; :class:`ConfigError` naming it when the package lacks it."""
    path = data_root() / system / op / framework / version / f"{table}.parquet"
    if not path.is_file():
        raise ConfigError(f"profiles: {PACKAGE} {PACKAGE_VERSION} has no {table} table for {system} "
                          f"({op}, {framework} {version}); set profiles: built for the analytical roofline")
    return path


def read_table(path: Path, table: str) -> pd.DataFrame:
    """One table file, read and checked (:func:`check_table`); :class:`TableFileError` names a bad file."""
    try:
        if path.suffix == ".csv":
            df = pd.read_csv(path, encoding="utf-8", low_memory=False)
        else:
            df = pd.read_parquet(path)
    except Exception as e:  # pyarrow, OSError, a codec: any reader failure is the file's fault, named
        why = str(e).strip().splitlines()[0][:160] if str(e).strip() else type(e).__name__
        raise TableFileError(f"profiles: measured table {path} cannot be read ({why}); reinstall {PACKAGE}=="
                             f"{PACKAGE_VERSION}, or set profiles: built for the analytical roofline") from None
    return check_table(df, path, table)


def load(system: str, op: str, framework: str, version: str, table: str) -> pd.DataFrame:
    """The table's rows, checked (:func:`read_table`; cached per process). ConfigError: the package lacks the
    table; :class:`TableFileError` (a ConfigError): the file is there but bad."""
    key = (system, op, framework, version, table)
    df = _CACHE.get(key)
    if df is None:
        df = _CACHE[key] = read_table(table_path(system, op, framework, version, table), table)
    return df


def derived(key: Tuple, make: Callable[[], Any]) -> Any:
    """``make()``, kept per process beside the tables it is computed from (a grid, a curve): ``key`` names the
    tables and what is derived; dropped with them."""
    got = _CACHE.get(key)
    if got is None:
        got = _CACHE[key] = make()
    return got


def load_optional(system: str, op: str, framework: str, version: str, table: str):
    """:func:`load`, or None when the package has no such table (a bad file is still a :class:`TableFileError`)."""
    try:
        return load(system, op, framework, version, table)
    except TableFileError:
        raise
    except ConfigError:
        return None


def interp1(x, xs: np.ndarray, ys: np.ndarray, power: float = 1.0) -> np.ndarray:
    """``ys(x)`` piecewise-linear on the increasing grid ``xs``; below it the first value, above it the last
    scaled by ``(x / xs[-1]) ** power`` (1: proportional, as bytes and FLOPs grow; 2: causal attention)."""
    x = np.asarray(x, dtype=float)
    y = np.interp(x, xs, ys)
    above = x > xs[-1]
    if np.any(above):
        y = np.where(above, ys[-1] * (x / xs[-1]) ** power, y)
    return y


def bracket(x, xs: np.ndarray):
    """Bracketing grid indices and weight for each ``x`` (clamped below, the last cell's scale above)."""
    x = np.asarray(x, dtype=float)
    xc = np.clip(x, xs[0], xs[-1])
    i = np.clip(np.searchsorted(xs, xc, side="right") - 1, 0, len(xs) - 2) if len(xs) > 1 else np.zeros_like(xc, int)
    if len(xs) == 1:
        return i, i, np.zeros_like(xc), np.maximum(x / xs[0], 1.0)
    w = (xc - xs[i]) / (xs[i + 1] - xs[i])
    scale = np.where(x > xs[-1], x / xs[-1], 1.0)
    return i, i + 1, w, scale


def grid2(x, y, xs: np.ndarray, ys: np.ndarray, z: np.ndarray) -> np.ndarray:
    """Bilinear ``z[i, j]`` over the grids ``xs`` x ``ys`` at each (x, y); beyond a grid's last point the value
    at the edge scales proportionally in that coordinate, below its first it is clamped."""
    i0, i1, wx, sx = bracket(x, xs)
    j0, j1, wy, sy = bracket(y, ys)
    v = ((1 - wx) * ((1 - wy) * z[i0, j0] + wy * z[i0, j1]) + wx * ((1 - wy) * z[i1, j0] + wy * z[i1, j1]))
    return v * sx * sy


def dense_grid(df: pd.DataFrame, xcol: str, ycol: str, vcol: str = "latency"):
    """(xs, ys, z) from rows keyed by ``xcol`` x ``ycol``; holes are filled along ``ycol`` (linear inside,
    proportional beyond the last measured point), then along ``xcol`` the same way."""
    xs = np.sort(df[xcol].unique()).astype(float)
    ys = np.sort(df[ycol].unique()).astype(float)
    z = np.full((len(xs), len(ys)), np.nan)
    ix = np.searchsorted(xs, df[xcol].to_numpy(dtype=float))
    iy = np.searchsorted(ys, df[ycol].to_numpy(dtype=float))
    z[ix, iy] = df[vcol].to_numpy(dtype=float)
    fill_holes(z, ys)
    fill_holes(z.T, xs)
    return xs, ys, z


def fill_holes(z: np.ndarray, axis: np.ndarray) -> None:
    """Fill NaNs of each row of ``z`` (in place) along ``axis`` from the row's measured points."""
    for row in z:
        ok = np.isfinite(row)
        if ok.all() or not ok.any():
            continue
        row[~ok] = interp1(axis[~ok], axis[ok], row[ok])
