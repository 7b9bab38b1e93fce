"""Reading and interpolating AIConfigurator's measured kernel tables (``aiconfigurator-core``, pinned).

The package ships, per GPU, Parquet tables of kernel latencies collected on a
framework release: ``systems/data/<system>/<op>/<framework>/<version>/<table>.parquet``.
This module locates them (:func:`table_path`; a missing package, version or
file is one :class:`~vidur_specdec.config.ConfigError` line naming it), loads
them once per process (:func:`load`), and interpolates along the tables' own
axes (:func:`interp1`, :func:`grid2`). Latencies are ms, as the tables store them.

The tables are read directly (pyarrow via pandas) rather than through the
package's query API: that API answers one point per call from its compiled
engine, with corrections (speed-of-light clamps, gap filling) the simulator
could not name; interpolating the raw rows keeps every figure traceable to a
row and lets a profile price a whole grid in one vectorised call.
"""

from __future__ import annotations

from pathlib import Path
from typing import Dict, Tuple

import numpy as np
import pandas as pd

from vidur_specdec.config import ConfigError

PACKAGE = "aiconfigurator-core"
PACKAGE_VERSION = "0.12.0"  # pinned in pyproject.toml; the tables are this release's
_CACHE: Dict[Tuple[str, ...], pd.DataFrame] = {}


def data_root() -> Path:
    """``<aiconfigurator_core>/systems/data``; :class:`ConfigError` when the pinned package is not installed."""
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


def table_path(system: str, op: str, framework: str, version: str, table: str) -> Path:
    """The Parquet file of one table; :class:`ConfigError` naming it when the package lacks it."""
    path = data_root() / system / op / framework / version / f"{table}.parquet"
    if not path.is_file():
        raise ConfigError(f"profiles: {PACKAGE} {PACKAGE_VERSION} has no {table} table for {system} "
                          f"({op}, {framework} {version}); set profiles: built for the analytical roofline")
    return path


def load(system: str, op: str, framework: str, version: str, table: str) -> pd.DataFrame:
    """The table's rows (cached per process)."""
    key = (system, op, framework, version, table)
    df = _CACHE.get(key)
    if df is None:
        df = _CACHE[key] = pd.read_parquet(table_path(system, op, framework, version, table))
    return df


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
