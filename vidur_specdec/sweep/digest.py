"""Hashes that decide whether results belong together: canonical JSON, the simulator code digest, profile digests."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Dict, Optional, Union

from vidur_specdec.config import RunConfig


def _canon(obj) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), allow_nan=True)


def _sha(text: Union[str, bytes], n: int = 16) -> str:
    if isinstance(text, str):
        text = text.encode()
    return hashlib.sha256(text).hexdigest()[:n]


# Modules whose code cannot change a row's numbers (CLI, sweep runner, report page).
_NOT_MODEL_CODE = {"main.py", "sweep.py", "report.py", "__main__.py", "cli.py"}
_CODE_DIGEST: Optional[str] = None


def code_digest() -> str:
    """Hash of the simulator's source (the package's top-level modules minus CLI/sweep/report) and Vidur's version."""
    global _CODE_DIGEST
    if _CODE_DIGEST is None:
        from importlib.metadata import PackageNotFoundError, version

        root = Path(__file__).resolve().parent.parent  # the vidur_specdec package
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
    from vidur_specdec.predictor import file_digest, locate_profile

    files = list(locate_profile(cfg.profiles, cfg.device, cfg.model))
    s = cfg.speculative
    if s.enabled and s.method == "draft_model":
        root = s.draft_profiles or cfg.profiles
        key = "speculative.draft_profiles" if s.draft_profiles else "profiles"
        files += list(locate_profile(root, cfg.device, s.draft_model, key=key))
    return {f"{cfg.device}/{m}/{Path(f).name}": file_digest(f, fresh)[:16]
            for m, f in zip([cfg.model] * 2 + [s.draft_model] * 2, files)}
