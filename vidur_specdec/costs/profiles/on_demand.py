"""Profiles on demand: the shipped profile, a measured one, or one built now by the analytical builder.

With ``profiles: shipped`` a (model, device, tensor-parallel size) listed in
:data:`vidur_specdec.profiles.SHIPPED` uses the file shipped under ``profiles/``;
any other is built by :func:`vidur_specdec.profiles.build_profile` at run time
and cached as ``mlp.csv`` + ``attention.csv`` under
``<predictor.cache_dir>/profiles/<key>/``. The key hashes everything the files
depend on: the builder's code and parameters (``builder.py``, ``vidur_tables.py``,
``csv_text.py``, ``params.py``, ``__init__.py``, this module), the
:class:`~vidur_specdec.architectures.models.ModelSpec`, the
:class:`~vidur_specdec.hardware.devices.DeviceSpec`, the tensor-parallel size and the
grid (context and chunk cover). Files are written to temporary siblings and
renamed into place, so a crashed or concurrent build never leaves half a file;
each file's SHA-256 is stored beside it (``mlp.csv.sha256``), and a cached
profile is used only when both files match theirs (else rebuilt, with one
``warning:`` line; :mod:`vidur_specdec.costs.cache_entries`).

A built profile covers only what the run can reach, not a model's whole
context (131,072 tokens for Llama-3.x would be millions of rows):

* context: the run's longest request (prompt + output + k guesses) rounded up
  to a power of two, at least :data:`MIN_CONTEXT`, at most the model's
  ``max_model_len`` and :data:`MAX_CONTEXT`. Lookups beyond it extrapolate
  linearly in the context (:class:`~vidur_specdec.engine.reference.predictor.Grid2D`), which is
  what the builder's attention model itself does (K/V bytes and the
  context-key FLOPs are linear in the context);
* prefill chunks: up to the scheduler's ``chunk_size`` rounded up to a power
  of two (Sarathi never schedules a larger chunk).

Any other ``profiles:`` value is a folder of measured profiles in Vidur's layout.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Tuple

from vidur_specdec.costs import cache_entries as CE
from vidur_specdec.costs import sparse_attention as SA
from vidur_specdec.hardware.devices import BUILTIN, DeviceSpec
from vidur_specdec.architectures.models import KNOWN_MODELS, ModelSpec
from vidur_specdec.costs.profiles import SHIPPED
from vidur_specdec.costs.profiles import build_profile
from vidur_specdec.costs.profiles.csv_text import to_csv_text
from vidur_specdec.config import ConfigError
from vidur_specdec.costs.operator_model import read_profile

MIN_CONTEXT = 4096  # tokens: smallest context a built profile covers (the shipped profiles' grid)
MAX_CONTEXT = 32768  # tokens: largest; beyond, attention extrapolates linearly in the context
MIN_CHUNK = 512  # tokens: smallest prefill-chunk cover (the default chunk_size)

SOURCES = ("shipped", "built", "tables", "measured")
BUILT = "built"  # profiles: built -- the analytical roofline throughout (the shipped file where one ships)

_HERE = Path(__file__).resolve().parent
_CODE_DIGEST = hashlib.sha256(b"".join(
    (_HERE / name).read_bytes() for name in ("builder.py", "vidur_tables.py", "csv_text.py", "params.py", "__init__.py",
                                             "on_demand.py")
)).hexdigest()


@dataclass(frozen=True)
class ProfileChoice:
    """Where a run's operator profile comes from.

    ``source`` is ``shipped``, ``built`` or ``measured``; ``label`` names it
    machine-independently (``shipped:<path>``, ``built:<device>/<model>/tp<k>/ctx<n>/chunk<c>``
    or the measured file's path) for ``summary.json``.
    """

    mlp: Path
    attention: Path
    source: str
    label: str


def _pow2_at_least(n: int) -> int:
    p = 1
    while p < n:
        p *= 2
    return p


def built_context(model: ModelSpec, longest_tokens: int) -> int:
    """Context (tokens) a built profile covers for a run whose longest request holds ``longest_tokens``."""
    return max(1, min(max(_pow2_at_least(int(longest_tokens)), MIN_CONTEXT), MAX_CONTEXT, model.max_model_len))


def built_chunk(chunk_size: int, context: int) -> int:
    """Largest prefill chunk (tokens) a built profile covers for ``scheduler.chunk_size``."""
    return min(max(_pow2_at_least(int(chunk_size)), MIN_CHUNK), context)


def _priced_by(kernels):
    """``kernels`` when it is a source other than the builder's roofline, else None (the builder itself)."""
    return None if kernels is None or kernels.name == BUILT else kernels


def build_key(model: ModelSpec, device: DeviceSpec, tp: int, context: int, chunk: int, kernels=None) -> str:
    """Content key of a built profile: builder code + parameters, model, device, tp, grid and the kernel
    source when it is not the builder's roofline."""
    data = {"code": _CODE_DIGEST, "model": model.to_dict(), "device": device.builder_fields(),
            "tp": int(tp), "context": int(context), "chunk": int(chunk)}
    if _priced_by(kernels) is not None:
        data["kernels"] = dict(kernels.identity())
    if SA.applies(model):  # DeepSeek sparse attention is priced by its own module (its code joins the key)
        data["sparse_attention"] = SA.CODE_DIGEST
    text = json.dumps(data, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def is_shipped(model: ModelSpec, device: DeviceSpec, tp: int) -> bool:
    """True when ``profiles/`` ships this exact (model, device, tp) (same dimensions and figures)."""
    return ((device.name, model.name, int(tp)) in SHIPPED and KNOWN_MODELS.get(model.name) == model
            and BUILTIN.get(device.name) == device)


def ensure_built(model: ModelSpec, device: DeviceSpec, tp: int, context: int, chunk: int,
                 cache_dir: Path, kernels=None) -> Tuple[Path, Path]:
    """The cached built profile's (mlp.csv, attention.csv), building and writing it if absent.

    ``kernels`` None or the roofline: the builder's own profile; another
    :class:`~vidur_specdec.costs.kernels.KernelSource`: one priced by it (its identity joins the key).
    """
    key = build_key(model, device, tp, context, chunk, kernels)
    folder = Path(cache_dir) / "profiles" / key[:32]
    mlp, att = folder / "mlp.csv", folder / "attention.csv"
    ok, why = CE.check_files((mlp, att))  # why: a file there that does not verify (absent: a plain cold cache)
    if ok:
        return mlp, att
    if why is not None:
        CE.warn_rebuilt(folder, f"holds a profile that does not verify: {why}")

    spec = ModelSpec(**{**model.to_dict(), "max_model_len": int(context)})
    try:
        priced = _priced_by(kernels)
        if priced is None and SA.applies(spec):  # the roofline through the kernel seam, which routes DSA layers
            from vidur_specdec.costs.kernels.roofline import RooflineKernels

            priced = kernels if kernels is not None else RooflineKernels(device)
        tables = build_profile(spec, device, tp, max_chunk=chunk, kernels=priced)
        for path, table in zip((mlp, att), tables):  # each with its digest, the digest first (cache_entries)
            CE.write_entry(path, to_csv_text(table).encode("utf-8"))
        return mlp, att
    except OSError as e:
        raise ConfigError(f"predictor.cache_dir: cannot write a built profile to {folder}: "
                          f"{e.strerror or type(e).__name__}") from None


def _check_tp_rows(mlp: Path, att: Path, tp: int, tp_key: str) -> None:
    """A measured profile must have rows for ``tp``; else one line naming ``tp_key`` and the file."""
    for path, table in ((mlp, "mlp"), (att, "attention")):
        frame = read_profile(path, table)  # empty, non-UTF-8, wrong columns, bad key values: one line
        try:
            col = frame["num_tensor_parallel_workers"]
        except KeyError:
            if tp == 1:
                continue  # a profile without the column is a TP-1 profile
            raise ConfigError(f"{tp_key}: {path} has no num_tensor_parallel_workers column, "
                              f"so no rows for tensor parallel size {tp}") from None
        if not (col == tp).any():
            have = ", ".join(str(int(t)) for t in sorted(col.dropna().unique()))
            raise ConfigError(f"{tp_key}: {path} has no rows for tensor parallel size {tp} (it has {have})")


def choose_profile(root: str, model: ModelSpec, device: DeviceSpec, tp: int, *, longest_tokens: int,
                   chunk_size: int, cache_dir: Optional[Path] = None, key: str = "profiles",
                   tp_key: str = "parallel.tensor_parallel_size", kernels=None) -> ProfileChoice:
    """The profile for ``model`` on ``device`` at ``tp``: shipped, built now (cached) or measured.

    ``key`` names the profile-root config key and ``tp_key`` the TP key in error
    messages. ``longest_tokens`` and ``chunk_size`` set a built profile's grid.
    ``kernels`` (the run's :class:`~vidur_specdec.costs.kernels.KernelSource`) prices a profile built now;
    one other than the roofline makes it a ``tables`` profile (the shipped file is used only under the roofline).
    """
    # lazy: name SHIPPED is bound otherwise at module level
    from vidur_specdec.costs.cache_entries import default_cache_dir
    from vidur_specdec.costs.profile_files import SHIPPED, locate_profile, shipped_profiles_root

    if root in (SHIPPED, BUILT):
        priced = _priced_by(kernels)
        if priced is None and is_shipped(model, device, tp):
            mlp, att = locate_profile(SHIPPED, device.name, model.name, key=key)
            rel = Path(mlp).parent.relative_to(shipped_profiles_root()).as_posix()
            return ProfileChoice(mlp, att, "shipped", f"shipped:{rel}")
        context = built_context(model, longest_tokens)
        chunk = built_chunk(chunk_size, context)
        mlp, att = ensure_built(model, device, tp, context, chunk, Path(cache_dir or default_cache_dir()), kernels)
        grid = f"{device.name}/{model.name}/tp{tp}/ctx{context}/chunk{chunk}"
        if priced is not None:
            return ProfileChoice(mlp, att, "tables", f"tables:{priced.label()}:{grid}")
        return ProfileChoice(mlp, att, "built", f"built:{grid}")
    mlp, att = locate_profile(root, device.name, model.name, key=key)
    _check_tp_rows(mlp, att, tp, tp_key)
    return ProfileChoice(mlp, att, "measured", str(mlp.parent))


def describe(choice: ProfileChoice, path: Path) -> str:
    """One profile file as ``<label>/<file name> sha256:<12 hex>`` (machine independent)."""
    # lazy: start-up cost of scipy, sklearn
    from vidur_specdec.costs.fit_cache import file_digest

    return f"{choice.label}/{Path(path).name} sha256:{file_digest(path)[:12]}"
