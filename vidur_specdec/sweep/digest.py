"""Hashes that decide whether results belong together: canonical JSON, the simulator code digest, profile digests."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Dict, List, Optional, Union

from vidur_specdec.config import RunConfig
from importlib.metadata import PackageNotFoundError, version
from vidur_specdec.engine.deployment import profile_files
from vidur_specdec.engine.topology import check as check_pools


def canonical_json(obj) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), allow_nan=True)


def short_sha(text: Union[str, bytes], n: int = 16) -> str:
    if isinstance(text, str):
        text = text.encode()
    return hashlib.sha256(text).hexdigest()[:n]


# Package code that cannot change a row's numbers: the command line, the pages, the sweep and tune
# engines and the validation harness ("dir/" is a whole subpackage) ...
_NOT_MODEL_CODE = ("cli.py", "console.py", "main.py", "__main__.py", "report/", "sweep/", "tune/", "plan/",
                   "validate/", "profiles/", "costs/profiles/calibrate.py",
                   "costs/profiles/calibration_report.py", "costs/profiles/params_block.py")
# ... except the code that turns a simulation into the row's recorded metrics (a change there must
# not mix old and new rows).
ROW_CODE = ("sweep/worker.py",)
_CODE_DIGEST: Optional[str] = None


def model_code_files() -> List[str]:
    """Package-relative paths of every module whose code can change a row's numbers (the simulator,
    its proposers and profile builder, and :data:`ROW_CODE`), sorted."""
    root = Path(__file__).resolve().parent.parent  # the vidur_specdec package
    out = []
    for p in sorted(root.rglob("*.py")):
        rel = p.relative_to(root).as_posix()
        excluded = any(rel == x or (x.endswith("/") and rel.startswith(x)) for x in _NOT_MODEL_CODE)
        if rel in ROW_CODE or not excluded:
            out.append(rel)
    return out


def code_digest() -> str:
    """Hash of the simulator's source (:func:`model_code_files`) and Vidur's version."""
    global _CODE_DIGEST
    if _CODE_DIGEST is None:
        root = Path(__file__).resolve().parent.parent
        h = hashlib.sha256()
        for rel in model_code_files():
            h.update(rel.encode() + b"\0" + (root / rel).read_bytes() + b"\0")
        try:
            h.update(("vidur==" + version("vidur")).encode())
        except PackageNotFoundError:  # pragma: no cover
            pass
        _CODE_DIGEST = h.hexdigest()[:16]
    return _CODE_DIGEST


def profile_digests(cfg: RunConfig, fresh: bool = False) -> Dict[str, str]:
    """``{file name: content digest}`` of the profile files a run reads (target, and drafter if used; every pool's).

    Digests are cached per path, size and mtime in this process; ``fresh`` re-reads the files.
    """
    from vidur_specdec.costs.fit_cache import file_digest

    cfgs = [cfg]
    if cfg.disaggregation.enabled:  # every pool's profiles (each pool may run its own TP or device)
        cfgs = list(check_pools(cfg).values())
    return {name: file_digest(f, fresh)[:16] for c in cfgs for name, f in profile_files(c).items()}
