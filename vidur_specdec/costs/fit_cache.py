"""Fitted operator models kept in this process and on disk, keyed by what they were fitted from.

:func:`load_time_model` returns the :class:`~vidur_specdec.costs.operator_model.OperatorTimeModel`
of a profile's exact bytes: from this process, from the disk cache, or a fresh fit.
The key (:func:`fit_key`) covers the profile files' bytes, the fit settings and the
fitting code (this module, :mod:`~vidur_specdec.costs.operator_model`, the op list
and the isotonic fit), so a stale entry is never reused. An entry is NumPy ``.npz``
data checked against its stored digest on every read
(:mod:`vidur_specdec.costs.cache_entries`: nothing read from a cache is executed).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Dict, Optional

import numpy as np

from vidur_specdec.costs import cache_entries as CE
from vidur_specdec.costs.cache_entries import default_cache_dir
from vidur_specdec.costs.operator_model import (CHUNK_STEP, KV_STEP, LINEAR_OPS, LINEAR_TABLE_TOKENS, Grid2D,
                                                OperatorTimeModel)

_FIT_CACHE: Dict[str, OperatorTimeModel] = {}
# a change to the fitting code: the model, the op list it fits, the isotonic fit and this module's arrays
_HERE = Path(__file__).resolve().parent
_CODE_DIGEST = hashlib.sha256(b"".join((_HERE / name).read_bytes() for name in (
    "operator_model.py", "ops.py", "isotonic.py", "fit_cache.py"))).hexdigest()

_FILE_DIGESTS: Dict[tuple, str] = {}


def file_digest(path: Path, fresh: bool = False) -> str:
    """SHA-256 (hex) of a file's bytes; reread only when its path, size or mtime changed (or ``fresh``)."""
    p = Path(path).resolve()
    st = p.stat()
    key = (str(p), st.st_size, st.st_mtime_ns, st.st_ino)
    if fresh or key not in _FILE_DIGESTS:
        _FILE_DIGESTS[key] = hashlib.sha256(p.read_bytes()).hexdigest()
    return _FILE_DIGESTS[key]


def fit_key(mlp_csv: Path, attention_csv: Path, tp: int = 1) -> str:
    """Cache key: the profile files' bytes, the fit settings and the fitting code itself."""
    text = f"tp={tp};kv={KV_STEP};chunk={CHUNK_STEP};code={_CODE_DIGEST}"
    for p in (mlp_csv, attention_csv):
        text += ";" + file_digest(p)
    return hashlib.sha256(text.encode()).hexdigest()


def load_time_model(mlp_csv: Path, attention_csv: Path, tp: int = 1,
                    cache_dir: Optional[Path] = None) -> OperatorTimeModel:
    """The fitted model for these exact profile bytes: from this process, the disk cache, or a fresh fit.

    ``cache_dir`` None uses :func:`default_cache_dir`. A changed profile file
    (or fitting code) has another key, so a stale entry is never reused. The
    entry is ``operator-model-<key>.npz`` (arrays only, read with
    ``allow_pickle=False``) with its SHA-256 beside it; one that does not verify
    or does not hold a well-formed model is refitted and rewritten, with one
    ``warning:`` line. Entries are written atomically; a read-only cache folder
    only costs a refit next time.
    """
    key = fit_key(mlp_csv, attention_csv, tp)
    model = _FIT_CACHE.get(key)
    if model is not None:
        return model
    path = Path(cache_dir or default_cache_dir()) / f"operator-model-{key[:32]}.npz"
    data, why = CE.read_verified(path)
    if data is not None:
        try:
            model = _from_arrays(CE.npz_arrays(data))
        except Exception as e:  # any malformed content: not a model (never trusted beyond its arrays)
            model, why = None, f"does not hold a fitted model ({type(e).__name__})"
    if model is None:
        if why:
            CE.warn_rebuilt(path, why)
        model = OperatorTimeModel.fit(Path(mlp_csv), Path(attention_csv), tp)
        try:
            CE.write_entry(path, CE.npz_bytes(_to_arrays(model)))
        except OSError:
            pass
    _FIT_CACHE[key] = model
    return model


def _to_arrays(m: OperatorTimeModel) -> Dict[str, np.ndarray]:
    """A fitted model as named arrays (the ``.npz`` cache entry)."""
    out = {"linear": np.array([m.linear[op] for op in LINEAR_OPS], dtype=float),
           "linear_sum": np.array(m.linear_sum, dtype=float),
           "max_decode_batch": np.array(int(m.max_decode_batch)), "source": np.array(str(m.source))}
    for name, g in (("decode", m.decode), ("prefill", m.prefill)):
        out[f"{name}_axes"] = np.array([g.x0, g.dx, g.y0, g.dy], dtype=float)
        out[f"{name}_values"] = np.array(g.v, dtype=float)
    return out


def _from_arrays(a: Dict[str, np.ndarray]) -> OperatorTimeModel:
    """The model of :func:`_to_arrays`' arrays; ValueError unless every array has its shape and finite values."""
    lin = np.asarray(a["linear"], dtype=float)
    if lin.shape != (len(LINEAR_OPS), LINEAR_TABLE_TOKENS + 1) or not np.isfinite(lin).all() or (lin < 0).any():
        raise ValueError("linear tables")
    grids = {}
    for name in ("decode", "prefill"):
        axes, vals = np.asarray(a[f"{name}_axes"], dtype=float), np.asarray(a[f"{name}_values"], dtype=float)
        if (axes.shape != (4,) or vals.ndim != 2 or 0 in vals.shape or not np.isfinite(axes).all()
                or not np.isfinite(vals).all() or (vals < 0).any() or axes[1] <= 0 or axes[3] <= 0):
            raise ValueError(f"{name} grid")
        grids[name] = Grid2D(*axes, vals)
    batch, total = int(a["max_decode_batch"]), np.asarray(a["linear_sum"], dtype=float)
    if batch < 1 or total.shape != lin.shape[1:] or not np.isfinite(total).all():
        raise ValueError("max_decode_batch or linear_sum")
    return OperatorTimeModel(linear={op: lin[i].tolist() for i, op in enumerate(LINEAR_OPS)},
                             decode=grids["decode"], prefill=grids["prefill"], max_decode_batch=batch,
                             source=str(a["source"]), linear_sum=total.tolist())


def clear_memory_cache() -> None:
    """Forget models fitted in this process (the disk cache is kept)."""
    _FIT_CACHE.clear()
