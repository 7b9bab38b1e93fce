"""Cache entries that are data only and checked on every read: the fitted predictors and built profiles.

An entry is a data file (NumPy ``.npz`` read with ``allow_pickle=False``, or CSV) and, beside it,
``<file>.sha256``: the SHA-256 of the entry's own bytes. :func:`read_verified` reads an entry back only
when its bytes match that digest; anything else (no digest, another digest, an unreadable file) is
reported so the caller rebuilds the entry, saying so in one ``warning:`` line (:func:`warn_rebuilt`).
Nothing read from a cache is ever executed: no pickle, no code.

A cache folder inside the folder of the config file that names it is not trusted: the run uses the
per-user cache instead, with one warning line (:func:`vidur_specdec.config.paths.resolve_paths`), so a
config folder cannot change a run's answers through its cache (docs/config.md, ``predictor.cache_dir``).
Entries are written atomically (a temp sibling renamed into
place), the digest before the data: a reader, or a crash, between the two finds no data, which is a plain
cold cache (built again, without a warning), never data without its digest. Entries of one key have
identical bytes whoever writes them (deterministic files), so concurrent writers of one entry agree and a
reader never sees one half-made (the screen of ``plan`` builds entries on several processes at once).
"""

from __future__ import annotations

import hashlib
import io
import os
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Dict, Mapping, Optional, Set, Tuple, Union

import numpy as np

DIGEST_SUFFIX = ".sha256"
_WARNED: Set[Tuple[str, str]] = set()  # (path, why) already said in this process


def digest_path(path: Union[str, Path]) -> Path:
    """``<path>.sha256``: where the digest of ``path``'s bytes is kept."""
    p = Path(path)
    return p.with_name(p.name + DIGEST_SUFFIX)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def read_verified(path: Union[str, Path]) -> Tuple[Optional[bytes], Optional[str]]:
    """``(bytes, None)`` when ``path`` holds bytes whose SHA-256 is the one stored beside it; ``(None, None)``
    when there is no entry; ``(None, why)`` when there is one that does not verify."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        return None, None
    except OSError as e:
        return None, f"cannot be read ({e.strerror or type(e).__name__})"
    try:
        stored = digest_path(p).read_text(encoding="ascii").strip()
    except FileNotFoundError:
        return None, f"has no stored digest ({digest_path(p).name})"
    except (OSError, UnicodeDecodeError):
        return None, f"has an unreadable digest ({digest_path(p).name})"
    if stored != sha256(data):
        return None, "does not match its stored digest"
    return data, None


def _stat_key(path: Path) -> Optional[tuple]:
    """(path, size, mtime, inode) of ``path`` and of its digest file, or None when either is missing."""
    try:
        s, d = path.stat(), digest_path(path).stat()
    except OSError:
        return None
    return str(path), s.st_size, s.st_mtime_ns, s.st_ino, d.st_size, d.st_mtime_ns, d.st_ino


_VERIFIED: Set[tuple] = set()  # files (and their digests) this process has verified, as they were then


def check_files(paths) -> Tuple[bool, Optional[str]]:
    """(whether every file of ``paths`` verifies, the first one that is there but does not verify as
    ``'<path> <why>'``: None when none is; an absent file is a cold cache, not damage). Each file is read at most
    once; a file this process verified is read again only when it (or its digest) changed on disk."""
    ok, damage = True, None
    for p in paths:
        key = _stat_key(Path(p))
        if key is not None and key in _VERIFIED:
            continue
        data, why = read_verified(p)
        if data is None:
            ok = False
            if why is not None and damage is None:
                damage = f"{p} {why}"
        elif key is not None:
            _VERIFIED.add(key)
    return ok, damage


def _write_atomic(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
        tmp = None
    finally:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)


def write_entry(path: Union[str, Path], data: bytes) -> None:
    """Write ``data`` to ``path`` and its digest beside it (both atomically; the digest first, module docstring).
    OSError passes."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    _write_atomic(digest_path(p), (sha256(data) + "\n").encode("ascii"))
    _write_atomic(p, data)


def warn_rebuilt(path: Union[str, Path], why: str) -> None:
    """One ``warning:`` line on stderr (once per entry and reason in a process): the entry is rebuilt."""
    key = (str(path), why)
    if key in _WARNED:
        return
    _WARNED.add(key)
    print(f"warning: predictor.cache_dir: cache entry {path} {why}; rebuilt from its inputs", file=sys.stderr)


# --------------------------------------------------------------------------- arrays as .npz bytes

_ZIP_TIME = (1980, 1, 1, 0, 0, 0)  # fixed member times: the same arrays give the same bytes


def npz_bytes(arrays: Mapping[str, np.ndarray]) -> bytes:
    """``arrays`` as an uncompressed ``.npz`` (NumPy's format, no pickled objects), byte-for-byte deterministic."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_STORED) as z:
        for name in sorted(arrays):
            a = np.asarray(arrays[name])
            if a.dtype == object:
                raise TypeError(f"{name}: object arrays are not data")
            member = io.BytesIO()
            np.lib.format.write_array(member, a, allow_pickle=False)
            z.writestr(zipfile.ZipInfo(f"{name}.npy", date_time=_ZIP_TIME), member.getvalue())
    return buf.getvalue()


def npz_arrays(data: bytes) -> Dict[str, np.ndarray]:
    """The arrays of ``.npz`` bytes (``allow_pickle=False``); ValueError (or OSError, zipfile.BadZipFile) when
    they are not a plain npz."""
    with np.load(io.BytesIO(data), allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


# --------------------------------------------------------------------------- where a run may cache

def default_cache_dir() -> Path:
    """Per-user cache folder: ``$XDG_CACHE_HOME/vidur_specdec`` or ``~/.cache/vidur_specdec``."""
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "vidur_specdec"
