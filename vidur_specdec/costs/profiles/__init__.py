"""Analytical operator profiles in Vidur's CSV schema (``mlp.csv``, ``attention.csv``).

Times are milliseconds per layer on one GPU of a ``tp``-way tensor-parallel
group, from a roofline model whose every parameter lives in :mod:`.params`
(see ``docs/profiles.md``). Same inputs give byte-identical files.

>>> from vidur_specdec.architectures.models import get_model
>>> mlp_df, attention_df = build_profile(get_model("JackFram/llama-160m"), "a100", 1)
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np
import pandas as pd

from vidur_specdec.config.files import naming
from vidur_specdec.architectures.models import ModelError, ModelSpec, get_model, resolve_model
from vidur_specdec.costs.profiles import params
from vidur_specdec.costs.profiles.builder import (
    GEMM_OPS,
    ProfileError,
    attention_op_times,
    check_tp,
    device_fields,
    median_abs_pct_error,
    mlp_op_times,
)
from vidur_specdec.costs.profiles.vidur_tables import (
    ATTENTION_COLUMNS,
    MLP_COLUMNS,
    MLP_OPS,
    build_attention_df,
    build_mlp_df,
    mlp_token_grid,
)
from vidur_specdec.costs.profiles.csv_text import to_csv_text

DEVICES: Dict[str, Dict] = params.DEVICES

# (device, model name, tp) of the profiles shipped under profiles/.
SHIPPED: Tuple[Tuple[str, str, int], ...] = (
    ("a100", "meta-llama/Llama-2-7b-hf", 1),
    ("a100", "JackFram/llama-160m", 1),
)

__all__ = [
    "ATTENTION_COLUMNS",
    "DEVICES",
    "MLP_COLUMNS",
    "ProfileError",
    "SHIPPED",
    "attention_op_times",
    "build_profile",
    "build_shipped",
    "compare_profile",
    "load_model",
    "mlp_op_times",
    "profile_dir",
    "write_profile",
]

DeviceArg = Union[str, Mapping, "DeviceSpec"]  # a name, a device YAML, a DeviceSpec or builder figures
TpArg = Union[int, Sequence[int]]


def _device(device: DeviceArg) -> Dict:
    return device_fields(device)


def _tps(tp: TpArg) -> List[int]:
    tps = [tp] if isinstance(tp, (int, np.integer)) else list(tp)
    if not tps:
        raise ProfileError("no tensor parallel size given")
    return tps


def load_model(name_or_yaml: Union[str, os.PathLike]) -> ModelSpec:
    """A :class:`ModelSpec` from a ``KNOWN_MODELS`` key, a Hugging Face config.json or a YAML of its fields."""
    try:
        return resolve_model(str(name_or_yaml), "--model")
    except ModelError as exc:
        raise ProfileError(str(exc)) from None


def build_profile(
    model_spec: ModelSpec, device: DeviceArg, tp: TpArg, max_tokens: Optional[int] = None,
    max_chunk: Optional[int] = None, log: Optional[Callable[[str], None]] = None, kernels=None,
) -> Tuple[pd.DataFrame, pd.DataFrame]:
    """(mlp_df, attention_df) in Vidur's column order; ``tp`` may list several sizes.

    The size is checked before any work (:func:`build_rows`); ``log`` gets one line announcing a
    build past :data:`ANNOUNCE_BUILD_ROWS` rows with its memory and disk estimate.

    ``device`` is a key of :data:`DEVICES`, a :class:`~vidur_specdec.hardware.devices.DeviceSpec`
    or a mapping with ``peak_flops`` (FLOP/s) and ``mem_bw`` (bytes/s); ``max_tokens``
    caps mlp.csv's num_tokens grid; ``max_chunk`` caps the prefill chunks of
    attention.csv (and makes the prefill rows a full rectangle up to max_model_len); ``kernels`` (a
    :class:`~vidur_specdec.costs.kernels.KernelSource` on the same device) prices the ops instead of the roofline.
    """
    dev = _device(device)
    tps = _tps(tp)
    for t in tps:
        check_tp(model_spec, t)
    rows = build_rows(model_spec, tps, max_tokens, max_chunk)
    if log is not None and rows > ANNOUNCE_BUILD_ROWS:
        log(f"profiles: building {rows:,} rows (tensor parallel {', '.join(map(str, tps))}): about "
            f"{rows * BUILD_BYTES_PER_ROW / 1e9:.1f} GB of memory and {rows * CSV_BYTES_PER_ROW / 1e9:.1f} GB "
            "of CSV; this takes a while")
    mlp = pd.concat([build_mlp_df(model_spec, dev, t, max_tokens, kernels=kernels) for t in tps], ignore_index=True)
    att = pd.concat([build_attention_df(model_spec, dev, t, max_chunk=max_chunk, kernels=kernels) for t in tps],
                    ignore_index=True)
    return mlp, att


MAX_BUILD_TOKENS = 1 << 17  # mlp.csv's num_tokens grid ends here at most (16,384 rows a TP size; the
# fitted tables cover 0..16,384 tokens and scale linearly beyond, costs/operator_model.py)
MAX_BUILD_ROWS = 10_000_000  # rows of one build, every TP size together (about 3 GB of memory)
ANNOUNCE_BUILD_ROWS = 1_000_000  # a larger build is announced with its estimate before it starts
BUILD_BYTES_PER_ROW = 300  # in memory: about 35 float64 columns of attention.csv (measured with pandas)
CSV_BYTES_PER_ROW = 210  # on disk: the shipped Llama-2-7B attention.csv, 2,593,960 bytes for 12,352 rows


def build_rows(model_spec: ModelSpec, tps: Sequence[int], max_tokens: Optional[int] = None,
               max_chunk: Optional[int] = None) -> int:
    """Rows of mlp.csv plus attention.csv a build writes; past a bound a :class:`ProfileError` (one line)."""
    from vidur_specdec.costs.profiles.vidur_tables import attention_grid_rows

    tps = list(tps)
    if max_tokens is not None and not 1 <= max_tokens <= MAX_BUILD_TOKENS:
        raise ProfileError(f"--max-tokens: must be in [1, {MAX_BUILD_TOKENS:,}], got {max_tokens:,} (the fitted "
                           "tables cover 16,384 tokens and scale linearly beyond)")
    rows = len(tps) * (len(mlp_token_grid(max_tokens)) + attention_grid_rows(model_spec.max_model_len,
                                                                             max_chunk=max_chunk))
    if rows > MAX_BUILD_ROWS:
        raise ProfileError(f"a profile of {model_spec.name} (context {model_spec.max_model_len:,} tokens, tensor "
                           f"parallel {', '.join(map(str, tps))}) has {rows:,} rows, more than {MAX_BUILD_ROWS:,} "
                           f"(about {rows * BUILD_BYTES_PER_ROW / 1e9:.0f} GB); build fewer TP sizes at once")
    return rows


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _write_atomic(files: Mapping[Path, str]) -> None:
    """Write every file to a temp sibling first, then rename all into place."""
    tmp: Dict[Path, str] = {}
    try:
        for path, text in files.items():
            with naming(path, tmp.get(path)):
                path.parent.mkdir(parents=True, exist_ok=True)
                fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
                tmp[path] = name
                with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
                    fh.write(text)
                os.chmod(name, 0o666 & ~_umask())  # mkstemp makes 0600; use the usual mode
        for path, name in tmp.items():
            with naming(path, name):
                os.replace(name, path)
    finally:
        for name in tmp.values():
            if os.path.exists(name):
                os.unlink(name)


def write_profile(
    model_spec: ModelSpec,
    device: DeviceArg,
    tp: TpArg,
    out_dir: Union[str, os.PathLike],
    max_tokens: Optional[int] = None,
    max_chunk: Optional[int] = None,
    kernels=None,
) -> Tuple[Path, Path]:
    """Build and write ``out_dir/mlp.csv`` and ``out_dir/attention.csv``; returns both paths.

    Everything is computed before any file is touched, and files are renamed into
    place from temp files, so a failure leaves no partial CSV.
    """
    mlp, att = build_profile(model_spec, device, tp, max_tokens, max_chunk, kernels=kernels)
    return write_tables(mlp, att, out_dir)


def write_tables(mlp: pd.DataFrame, att: pd.DataFrame, out_dir: Union[str, os.PathLike]) -> Tuple[Path, Path]:
    """Write built tables as ``out_dir/mlp.csv`` and ``out_dir/attention.csv`` (temp files renamed into place)."""
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ProfileError(f"output path {out} exists and is not a directory")
    mlp_path, att_path = out / "mlp.csv", out / "attention.csv"
    _write_atomic({mlp_path: to_csv_text(mlp), att_path: to_csv_text(att)})
    return mlp_path, att_path


def profile_dir(root: Union[str, os.PathLike], device: str, model_name: str) -> Path:
    """``<root>/<device>/<model name>/``, the layout of Vidur's measured profiles."""
    return Path(root) / device / model_name


def build_shipped(root: Union[str, os.PathLike] = "profiles") -> List[Path]:
    """Regenerate every profile in :data:`SHIPPED` under ``root``; returns the files written."""
    written: List[Path] = []
    for device, name, tp in SHIPPED:
        written.extend(write_profile(get_model(name), device, tp, profile_dir(root, device, name)))
    return written


def _measured(path: Path, table: str) -> pd.DataFrame:
    """A measured profile table to compare against: empty, wrong columns, bad key values are one line."""
    from vidur_specdec.costs.operator_model import read_profile

    frame = read_profile(path, table)
    for col in ("num_tensor_parallel_workers", "n_embd"):
        if col not in frame:
            raise ProfileError(f"{path} lacks column {col}")
    return frame


def _measured_attention(measured_dir: Path) -> Optional[Path]:
    for name in ("attention.csv", "attention.sample.csv"):
        if (measured_dir / name).is_file():
            return measured_dir / name
    return None


def compare_profile(
    model_spec: ModelSpec,
    device: DeviceArg,
    tp: int,
    measured_dir: Union[str, os.PathLike],
) -> pd.DataFrame:
    """Median absolute % error of the model against a measured Vidur profile.

    Evaluates the model at the measured rows' own (num_tokens) and (batch, kv,
    chunk) points for tensor parallel size ``tp``; returns one row per op and per
    group (``gemm``, ``elementwise``, ``attn_decode``, ``attn_prefill``) with
    columns ``op``, ``rows``, ``median_abs_pct_error``.
    """
    dev = _device(device)
    check_tp(model_spec, tp)
    mdir = Path(measured_dir)
    if not (mdir / "mlp.csv").is_file():
        raise ProfileError(f"no mlp.csv in {mdir}")
    mlp = _measured(mdir / "mlp.csv", "mlp")
    mlp = mlp[(mlp["num_tensor_parallel_workers"] == tp) & (mlp["n_embd"] == model_spec.hidden_size)]
    if mlp.empty:
        raise ProfileError(f"{mdir / 'mlp.csv'} has no rows for tp={tp} and n_embd={model_spec.hidden_size}")
    pred = mlp_op_times(model_spec, dev, tp, mlp["num_tokens"].to_numpy())
    rows = []
    groups: Dict[str, List[Tuple[np.ndarray, np.ndarray]]] = {"gemm": [], "elementwise": []}
    for op in MLP_OPS:
        meas = mlp[f"time_stats.{op}.median"].to_numpy(dtype=float)
        rows.append((op, len(meas), median_abs_pct_error(pred[op], meas)))
        groups["gemm" if op in GEMM_OPS else "elementwise"].append((pred[op], meas))
    for g, pairs in groups.items():
        p = np.concatenate([a for a, _ in pairs])
        m = np.concatenate([b for _, b in pairs])
        rows.append((g, len(m), median_abs_pct_error(p, m)))
    apath = _measured_attention(mdir)
    if apath is not None:
        att = _measured(apath, "attention")
        att = att[(att["num_tensor_parallel_workers"] == tp) & (att["n_embd"] == model_spec.hidden_size)]
        if not att.empty:
            t = attention_op_times(
                model_spec,
                dev,
                tp,
                att["batch_size"].to_numpy(),
                att["kv_cache_size"].to_numpy(),
                att["prefill_chunk_size"].to_numpy(),
            )
            pre = att["is_prefill"].astype(str).str.lower().eq("true").to_numpy()
            for op, mask in (("attn_decode", ~pre), ("attn_prefill", pre)):
                meas = att[f"time_stats.{op}.median"].to_numpy(dtype=float)[mask]
                rows.append((op, int(mask.sum()), median_abs_pct_error(t[op][mask], meas)))
    return pd.DataFrame(rows, columns=["op", "rows", "median_abs_pct_error"])
