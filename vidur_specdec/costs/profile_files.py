"""Where a profile's files are: the shipped ``profiles/`` folder, or a folder in Vidur's layout.

:func:`locate_profile` finds ``mlp.csv`` and ``attention.csv`` of a model on a
device under a root (``shipped``: :func:`shipped_profiles_root`).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Tuple

from vidur_specdec.config import ConfigError

SHIPPED = "shipped"


def shipped_profiles_root() -> Path:
    """The shipped ``profiles/`` folder: the checkout's (editable install) or ``<prefix>/share``'s."""
    checkout = Path(__file__).resolve().parents[2] / "profiles"
    if checkout.is_dir():
        return checkout
    return Path(sys.prefix) / "share" / "vidur_specdec" / "profiles"


def locate_profile(root: str, device: str, model: str, key: str = "profiles") -> Tuple[Path, Path]:
    """Find ``mlp.csv`` and ``attention.csv`` for ``model`` on ``device`` under ``root``.

    Looks in ``root/DEVICE/MODEL``, ``root/compute/DEVICE/MODEL`` (Vidur's
    ``data/profiling`` layout) and ``root`` itself; ``attention.sample.csv`` is
    accepted where ``attention.csv`` is absent. Raises :class:`ConfigError`
    naming ``key`` and the folders searched.
    """
    base = shipped_profiles_root() if root == SHIPPED else Path(root).expanduser()
    candidates = [base / device / model, base / "compute" / device / model, base]
    for d in candidates:
        mlp = d / "mlp.csv"
        if not mlp.is_file():
            continue
        for name in ("attention.csv", "attention.sample.csv"):
            if (d / name).is_file():
                return mlp, d / name
        raise ConfigError(f"{key}: {d} has mlp.csv but no attention.csv")
    raise ConfigError(f"{key}: no mlp.csv for {model} on {device}; looked in "
                      + ", ".join(str(c) for c in candidates))
