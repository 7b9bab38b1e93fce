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


# Top-level modules whose code cannot change a row's numbers (CLI, report page, the command line).
_NOT_MODEL_CODE = {"main.py", "sweep.py", "report.py", "__main__.py", "cli.py"}
# Modules in subpackages whose code does change a row's numbers: the code that turns a
# simulation into the row's recorded metrics (a change there must not mix old and new rows).
ROW_CODE = ("sweep/worker.py",)
_CODE_DIGEST: Optional[str] = None


def code_digest() -> str:
    """Hash of the simulator's source and Vidur's version: the package's top-level modules minus CLI and report,
    plus :data:`ROW_CODE` (the row-metrics code)."""
    global _CODE_DIGEST
    if _CODE_DIGEST is None:
        from importlib.metadata import PackageNotFoundError, version

        root = Path(__file__).resolve().parent.parent  # the vidur_specdec package
        h = hashlib.sha256()
        for p in sorted(root.glob("*.py")):  # subpackages (profiles builder, validation) are not the simulator
            if p.name in _NOT_MODEL_CODE:
                continue
            h.update(p.name.encode() + b"\0" + p.read_bytes() + b"\0")
        for rel in ROW_CODE:
            h.update(rel.encode() + b"\0" + (root / rel).read_bytes() + b"\0")
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
