"""Per-layer operator times fitted from a profile in Vidur's CSV schema.

:class:`OperatorTimeModel` — per-layer operator times (ms) of one model on one
device and tensor-parallel size, fitted from ``mlp.csv`` + ``attention.csv``.
Linear/elementwise ops are piecewise-linear in the step's token count (an
isotonic fit of the profile rows); decode attention is a 2-D table over
(decoding requests, mean context); prefill attention a 2-D table over (context
before the chunk, chunk tokens). Tables are made monotone (more tokens, bigger
batches or longer contexts are never cheaper). The target and the drafter each
get their own model, fitted separately. Fitted models are kept in memory and on
disk by :mod:`vidur_specdec.costs.fit_cache` (:func:`~vidur_specdec.costs.fit_cache.load_time_model`);
:mod:`vidur_specdec.costs.profile_files` finds profile files in Vidur's layout.
This module does not import Vidur.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Tuple

import numpy as np
import pandas as pd

from vidur_specdec.config import ConfigError
from vidur_specdec.costs import isotonic
from vidur_specdec.costs.ops import LINEAR_OPS

# Ops that make up Vidur's per-layer model time (kv_cache_save and emb are not counted by Vidur).
LAYER_OPS = LINEAR_OPS

LINEAR_TABLE_TOKENS = 16384  # linear-op tables cover 0..this many tokens; beyond, time scales linearly
KV_STEP = 32  # tokens between context grid points of the attention tables
CHUNK_STEP = 32  # tokens between chunk grid points of the prefill-attention table


class Grid2D:
    """Bilinear interpolation on a uniform grid; clamps below, extrapolates linearly above.

    ``values[i][j]`` is the value at ``(x0 + i*dx, y0 + j*dy)``.
    """

    __slots__ = ("x0", "dx", "nx", "y0", "dy", "ny", "v")

    def __init__(self, x0: float, dx: float, y0: float, dy: float, values: np.ndarray) -> None:
        self.x0, self.dx, self.y0, self.dy = float(x0), float(dx), float(y0), float(dy)
        self.nx, self.ny = values.shape
        self.v = values.tolist()

    @staticmethod
    def _cell(p: float, p0: float, dp: float, n: int) -> Tuple[int, float]:
        f = (p - p0) / dp
        if f <= 0.0 or n == 1:
            return 0, 0.0
        i = int(f)
        if i > n - 2:
            i = n - 2
        return i, f - i

    def __call__(self, x: float, y: float) -> float:
        # _cell inlined (this is on every simulated step's path)
        nx, ny = self.nx, self.ny
        f = (x - self.x0) / self.dx
        if f <= 0.0 or nx == 1:
            i, tx = 0, 0.0
        else:
            i = int(f)
            if i > nx - 2:
                i = nx - 2
            tx = f - i
        f = (y - self.y0) / self.dy
        if f <= 0.0 or ny == 1:
            j, ty = 0, 0.0
        else:
            j = int(f)
            if j > ny - 2:
                j = ny - 2
            ty = f - j
        v = self.v
        if nx == 1:
            row = v[0]
            return row[j] * (1 - ty) + row[j + 1] * ty if ny > 1 else row[0]
        if ny == 1:
            return v[i][0] * (1 - tx) + v[i + 1][0] * tx
        if tx == 0.0:  # on a grid row (a decode table's whole batch sizes): the same sum without its zero terms
            a = v[i]
            return a[j] * (1 - ty) + a[j + 1] * ty
        a, b = v[i], v[i + 1]
        return (a[j] * (1 - tx) * (1 - ty) + b[j] * tx * (1 - ty)
                + a[j + 1] * (1 - tx) * ty + b[j + 1] * tx * ty)


def _fill_along(v: np.ndarray, axis: int) -> np.ndarray:
    """Fill NaNs along ``axis`` by linear interpolation between known cells, flat beyond them."""
    v = np.moveaxis(v.copy(), axis, -1)
    idx = np.arange(v.shape[-1])
    for i in range(v.shape[0]):
        ok = ~np.isnan(v[i])
        if ok.any() and not ok.all():
            v[i] = np.interp(idx, idx[ok], v[i][ok])
    return np.moveaxis(v, -1, axis)


def _fit_grid(x: np.ndarray, y: np.ndarray, t: np.ndarray, xs: np.ndarray, ys: np.ndarray) -> np.ndarray:
    """Profile points (x, y) -> t resampled onto the grid xs × ys, then made monotone.

    A complete rectangular profile is interpolated bilinearly. Scattered data
    (e.g. a measured sample) is interpolated linearly inside the data's convex hull; outside it, values are
    carried flat along the second axis, then the first (the profile's own
    edge values, not a neighbour from another row); finally a running maximum
    along both axes (never cheaper with more of either).
    """
    from scipy.interpolate import RegularGridInterpolator, griddata  # only when fitting (a second's import)

    lattice = pd.DataFrame({"x": x, "y": y, "t": t}).groupby(["x", "y"])["t"].mean().unstack()
    if lattice.shape[0] > 1 and lattice.shape[1] > 1 and not lattice.isna().to_numpy().any():
        # A complete rectangular profile (e.g. the shipped ones): bilinear, flat beyond its edges.
        ux, uy = lattice.index.to_numpy(float), lattice.columns.to_numpy(float)
        f = RegularGridInterpolator((ux, uy), lattice.to_numpy(float))
        gx, gy = np.meshgrid(np.clip(xs, ux[0], ux[-1]), np.clip(ys, uy[0], uy[-1]), indexing="ij")
        vals = f(np.column_stack([gx.ravel(), gy.ravel()])).reshape(gx.shape)
        return np.maximum.accumulate(np.maximum.accumulate(vals, axis=0), axis=1)
    gx, gy = np.meshgrid(xs, ys, indexing="ij")
    # Scale axes to comparable ranges so the triangulation is well shaped.
    sx, sy = max(np.ptp(x), 1.0), max(np.ptp(y), 1.0)
    pts = np.column_stack([x / sx, y / sy])
    q = np.column_stack([gx.ravel() / sx, gy.ravel() / sy])
    if len(np.unique(x)) > 1 and len(np.unique(y)) > 1:
        vals = griddata(pts, t, q, method="linear").reshape(gx.shape)
        vals = _fill_along(_fill_along(vals, 1), 0)
    else:
        vals = griddata(pts, t, q, method="nearest").reshape(gx.shape)
    vals = np.maximum.accumulate(vals, axis=0)
    vals = np.maximum.accumulate(vals, axis=1)
    return vals


# the columns a profile table must have, and its key columns' bounds (whole numbers): a larger
# value is not a profiled shape, and it would size the fitted grids (cells <= MAX_GRID_CELLS)
PROFILE_COLUMNS = {
    "mlp": ("num_tokens",) + tuple(f"time_stats.{op}.median" for op in LINEAR_OPS),
    "attention": ("batch_size", "kv_cache_size", "prefill_chunk_size", "is_prefill",
                  "time_stats.attn_decode.median", "time_stats.attn_prefill.median"),
}
PROFILE_INTEGERS = {"num_tokens": (0, 1 << 24), "batch_size": (0, 1 << 16), "kv_cache_size": (0, 1 << 24),
                    "prefill_chunk_size": (0, 1 << 24), "num_tensor_parallel_workers": (1, 1 << 12)}
MAX_GRID_CELLS = 1 << 26  # one fitted attention grid: at most 67M cells (512 MiB of float64)


def read_profile(path: Path, table: str) -> pd.DataFrame:
    """One profile table (``table`` is ``mlp`` or ``attention``), checked (:data:`PROFILE_COLUMNS`)."""
    from vidur_specdec.config.files import read_csv_table

    df = read_csv_table(path, "profiles", PROFILE_COLUMNS[table], PROFILE_INTEGERS)
    if table == "attention" and df["is_prefill"].dtype != bool:
        flags = df["is_prefill"].astype(str).str.lower()
        bad = ~flags.isin(["true", "false", "1", "0"])
        if bad.any():
            i = int(bad.to_numpy().argmax())
            raise ConfigError(f"profiles: {path} line {i + 2}, column is_prefill: {df['is_prefill'].iloc[i]!r} "
                              "is not True or False")
        df = df.assign(is_prefill=flags.isin(["true", "1"]))
    _check_times(df, path, table)
    return df


def _check_times(df: pd.DataFrame, path: Path, table: str) -> None:
    """Every time the fit reads is a finite number of ms >= 0 (mlp: each op; attention: decode times on decode
    rows, prefill times on prefill rows); else one ConfigError naming the file, line and column."""
    if table == "mlp":
        parts = [(c, np.ones(len(df), dtype=bool)) for c in PROFILE_COLUMNS["mlp"][1:]]
    else:
        pre = df["is_prefill"].astype(bool).to_numpy()
        parts = [("time_stats.attn_decode.median", ~pre), ("time_stats.attn_prefill.median", pre)]
    for col, rows in parts:
        x = pd.to_numeric(df[col], errors="coerce").to_numpy(dtype=float)
        bad = rows & ~(np.isfinite(x) & (x >= 0))
        if bad.any():
            i = int(bad.argmax())
            raise ConfigError(f"profiles: {path} line {i + 2}, column {col}: {df[col].iloc[i]!r} is not a finite "
                              f"number of ms >= 0 ({int(bad.sum())} such rows)")


def _check_cells(rows: float, cols: float, path, what: str) -> None:
    if rows * cols > MAX_GRID_CELLS:
        raise ConfigError(f"profiles: {path}: the {what} grid would hold {rows * cols:,.0f} cells (at most "
                          f"{MAX_GRID_CELLS:,}); its batch sizes, contexts or chunks are larger than any profiled shape")


@dataclass
class OperatorTimeModel:
    """Per-layer operator times (ms) of one model on one device and TP degree."""

    linear: Dict[str, List[float]]  # op -> time at num_tokens 0..LINEAR_TABLE_TOKENS
    decode: Grid2D  # (batch size, mean context tokens) -> ms
    prefill: Grid2D  # (context before chunk, chunk tokens) -> ms
    max_decode_batch: int
    source: str = ""
    linear_sum: List[float] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.linear_sum:
            self.linear_sum = [sum(v) for v in zip(*(self.linear[op] for op in LAYER_OPS))]

    # ------------------------------------------------------------------ fitting
    @classmethod
    def fit(cls, mlp_csv: Path, attention_csv: Path, tp: int = 1) -> "OperatorTimeModel":
        """Fit from profile files; rows of other tensor-parallel sizes are ignored.

        Each file is read by :func:`read_profile` (an empty, non-UTF-8 or wrong-column file, or a
        key column that is not a whole number within bounds, is one line naming the file).
        """
        return cls.fit_frames(read_profile(mlp_csv, "mlp"), read_profile(attention_csv, "attention"), tp,
                              source=f"{mlp_csv} + {attention_csv}")

    @classmethod
    def fit_frames(cls, mlp: pd.DataFrame, att: pd.DataFrame, tp: int = 1, source: str = "") -> "OperatorTimeModel":
        """Fit from profile tables (Vidur's ``mlp.csv`` / ``attention.csv`` columns)."""
        if "num_tensor_parallel_workers" in mlp:
            mlp = mlp[mlp["num_tensor_parallel_workers"] == tp]
        if "num_tensor_parallel_workers" in att:
            att = att[att["num_tensor_parallel_workers"] == tp]
        if mlp.empty or att.empty:
            raise ConfigError(f"profiles: no rows for tensor parallel {tp} in {source or 'the profile'}")
        return cls(
            linear=cls._fit_linear(mlp, source),
            decode=cls._fit_decode(att, source),
            prefill=cls._fit_prefill(att, source),
            max_decode_batch=int(att.loc[~att["is_prefill"].astype(bool), "batch_size"].max()),
            source=source,
        )

    @staticmethod
    def _fit_linear(mlp: pd.DataFrame, path: Path) -> Dict[str, List[float]]:
        n = np.arange(LINEAR_TABLE_TOKENS + 1, dtype=float)
        out = {}
        for op in LINEAR_OPS:
            col = f"time_stats.{op}.median"
            if col not in mlp:
                raise ConfigError(f"profiles: {path} has no column {col}")
            g = mlp.groupby("num_tokens")[col].median().sort_index()
            x = g.index.to_numpy(float)
            # least-squares monotone fit: noise in one row does not lift every larger size
            y = isotonic.fit_predict(x, g.to_numpy(float))
            table = np.interp(n, x, y)
            above = n > x[-1]
            table[above] = y[-1] * n[above] / x[-1]  # beyond the profile: time ∝ tokens
            table[0] = 0.0  # no tokens, no kernel
            out[op] = table.tolist()
        return out

    @staticmethod
    def _fit_decode(att: pd.DataFrame, path: Path) -> Grid2D:
        d = att[~att["is_prefill"].astype(bool)]
        col = "time_stats.attn_decode.median"
        if d.empty or col not in d:
            raise ConfigError(f"profiles: {path} has no decode-attention rows")
        g = d.groupby(["batch_size", "kv_cache_size"])[col].median().reset_index()
        b_max = int(g["batch_size"].max())
        kv_max = int(math.ceil(g["kv_cache_size"].max() / KV_STEP) * KV_STEP)
        _check_cells(b_max, kv_max / KV_STEP + 1, path, "decode-attention")
        bs = np.arange(1, b_max + 1, dtype=float)
        kvs = np.arange(0, kv_max + 1, KV_STEP, dtype=float)
        vals = _fit_grid(g["batch_size"].to_numpy(float), g["kv_cache_size"].to_numpy(float),
                         g[col].to_numpy(float), bs, kvs)
        return Grid2D(1, 1, 0, KV_STEP, vals)

    @staticmethod
    def _fit_prefill(att: pd.DataFrame, path: Path) -> Grid2D:
        p = att[att["is_prefill"].astype(bool)]
        col = "time_stats.attn_prefill.median"
        if p.empty or col not in p:
            raise ConfigError(f"profiles: {path} has no prefill-attention rows")
        g = p.groupby(["kv_cache_size", "prefill_chunk_size"])[col].median().reset_index()
        kv_max = int(math.ceil(g["kv_cache_size"].max() / KV_STEP) * KV_STEP)
        c_max = int(math.ceil(g["prefill_chunk_size"].max() / CHUNK_STEP) * CHUNK_STEP)
        _check_cells(kv_max / KV_STEP + 1, c_max / CHUNK_STEP + 1, path, "prefill-attention")
        kvs = np.arange(0, kv_max + 1, KV_STEP, dtype=float)
        cs = np.arange(0, c_max + 1, CHUNK_STEP, dtype=float)
        vals = _fit_grid(g["kv_cache_size"].to_numpy(float), g["prefill_chunk_size"].to_numpy(float),
                         g[col].to_numpy(float), kvs, cs)
        return Grid2D(0, KV_STEP, 0, CHUNK_STEP, vals)

    # ------------------------------------------------------------------ queries (ms per layer)
    def linear_ms(self, op: str, num_tokens: int) -> float:
        """One linear/elementwise op over ``num_tokens`` query tokens."""
        table = self.linear[op]
        if num_tokens < len(table):
            return table[num_tokens]
        return table[-1] * num_tokens / (len(table) - 1)

    def linear_sum_ms(self, num_tokens: int) -> float:
        """All linear/elementwise ops of one layer over ``num_tokens`` tokens."""
        t = self.linear_sum
        if num_tokens < len(t):
            return t[num_tokens]
        return t[-1] * num_tokens / (len(t) - 1)

    def decode_attention_ms(self, batch_size: int, mean_kv: float) -> float:
        """FlashAttention decode for ``batch_size`` single-query reads at mean context ``mean_kv``.

        Batches above the profiled maximum are split into near-equal batches
        that run one after another.
        """
        if batch_size <= 0:
            return 0.0
        b_max = self.max_decode_batch
        if batch_size <= b_max:
            return self.decode(batch_size, mean_kv)
        pieces = -(-batch_size // b_max)
        base, rem = divmod(batch_size, pieces)
        t = (pieces - rem) * self.decode(base, mean_kv)
        if rem:
            t += rem * self.decode(base + 1, mean_kv)
        return t

    def prefill_attention_ms(self, kv_before: int, chunk: int) -> float:
        """Attention of one prefill chunk of ``chunk`` tokens after ``kv_before`` cached tokens."""
        return self.prefill(kv_before, chunk) if chunk > 0 else 0.0
