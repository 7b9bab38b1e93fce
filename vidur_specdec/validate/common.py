"""Shared pieces of the validation harness: errors, atomic writes, URLs, time.

Every file the harness writes goes to a temporary sibling first and is moved
in place with :func:`os.replace`, so a failure never leaves a half-written
file behind.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any, Optional, Union

import pandas as pd

from vidur_specdec.config.files import naming
from vidur_specdec.config import ConfigError

FLOAT_FORMAT = "%.6f"
_UMASK = os.umask(0o022)
os.umask(_UMASK)
FILE_MODE = 0o666 & ~_UMASK


class ValidateError(ConfigError):
    """Bad input to the harness (file, URL, counters); the message is one line."""


# The server under validation failed (unreachable, or too few requests answered): exit status 3.
from vidur_specdec.console import ServiceError  # noqa: E402,F401  (re-exported for the harness)
from urllib.parse import urlsplit
import threading
import urllib.request
from vidur_specdec.engine.workload import read_table

MIN_MEASURED_SHARE = 0.9  # a replay that measured fewer requests than this is a failed measurement


def check_measured(stats: dict, share: Optional[float] = None) -> None:
    """A replay that measured fewer than ``share`` (default 90 %) of its requests failed: :class:`ServiceError`.

    The message gives the breakdown by status and the most common error.
    """
    share = MIN_MEASURED_SHARE if share is None else share
    n = int(stats.get("num_requests", 0))
    counts = stats.get("status_counts", {})
    ok = int(counts.get("ok", 0))
    if n and ok >= share * n:
        return
    breakdown = ", ".join(f"{v} {k}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1]))
    common = stats.get("top_error")
    raise ServiceError(f"--url: the server answered {ok} of {n} requests ({breakdown}"
                       + (f"; most common error: {common}" if common else "")
                       + f"); at least {share:.0%} must be measured to compare")


def raise_fd_limit(want: int = 65536) -> int:
    """Raise this process's open-file soft limit towards ``want`` (never above the hard limit).

    Every in-flight request holds a socket; the common default of 1024 would
    cap a replay (or the fake server) well below that many streams.
    """
    try:
        # lazy: optional dependency (ImportError handled)
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        target = want if hard == resource.RLIM_INFINITY else min(want, hard)
        if soft != resource.RLIM_INFINITY and soft < target:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            return target
        return soft
    except (ImportError, ValueError, OSError):
        return -1


DEFAULT_DEADLINE_S = 30.0  # whole-request limit of GET /metrics and GET /v1/models (s)


def base_url(url: str) -> str:
    """The server root: ``http://host:port`` (a trailing ``/v1`` or ``/`` is dropped).

    A URL that cannot name a server (no host, a port outside 1..65535) is bad input (exit 2).
    """
    u = (url or "").strip().rstrip("/")
    if not (u.startswith("http://") or u.startswith("https://")):
        raise ValidateError(f"--url: expected http://HOST:PORT, got {url!r}"[:200])
    try:
        parts = urlsplit(u)
        port = parts.port
    except ValueError as e:
        raise ValidateError(f"--url: {u[:120]!r} is not a server address ({e}; a port is 1..65535)") from None
    if not parts.hostname or port == 0:
        raise ValidateError(f"--url: {u[:120]!r} is not a server address (expected http://HOST:PORT, "
                            "a port in 1..65535)")
    if u.endswith("/v1"):
        u = u[:-3]
    return u


def http_get(url: str, timeout_s: float = 10.0, deadline_s: float = DEFAULT_DEADLINE_S,
             headers: Optional[dict] = None) -> bytes:
    """GET ``url``'s body; ``timeout_s`` bounds each connect or read, ``deadline_s`` the whole request (s).

    A server that trickles its answer (a byte every few seconds) never trips a read timeout; the
    deadline ends the wait. Any failure raises :class:`ServiceError` (one line, exit status 3).
    """
    box: dict = {}

    def get() -> None:
        try:
            req = urllib.request.Request(url, headers=headers or {})
            with urllib.request.urlopen(req, timeout=timeout_s) as r:
                box["body"] = r.read()
        except BaseException as e:  # noqa: BLE001 - handed to the caller's thread
            box["error"] = e

    t = threading.Thread(target=get, daemon=True, name="http-get")
    t.start()
    t.join(deadline_s)
    if t.is_alive():
        raise ServiceError(f"--url: {url} did not answer completely within {deadline_s:g} s "
                           "(--deadline-s)")
    if "error" in box:
        e = box["error"]
        reason = getattr(e, "reason", None) or e
        raise ServiceError(f"--url: cannot get {url}: {reason}")
    return box["body"]


def _tmp_beside(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    os.close(fd)
    os.chmod(tmp, FILE_MODE)
    return Path(tmp)


def write_text(path: Union[str, Path], text: str) -> Path:
    """Write ``text`` to ``path`` atomically."""
    path = Path(path)
    with naming(path):
        tmp = _tmp_beside(path)
    try:
        with naming(path, tmp):
            tmp.write_text(text)
            os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    return path


def jsonable(x: Any) -> Any:
    """NaN → None and numpy scalars → Python, recursively (for JSON)."""
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if hasattr(x, "item") and not isinstance(x, (str, bytes)):
        try:
            x = x.item()
        except (ValueError, AttributeError):
            pass
    if isinstance(x, float) and (math.isnan(x) or math.isinf(x)):
        return None
    return x


def write_json(path: Union[str, Path], data: Any) -> Path:
    return write_text(path, json.dumps(jsonable(data), indent=2, sort_keys=False) + "\n")


def write_csv(path: Union[str, Path], df: pd.DataFrame) -> Path:
    """Write a DataFrame as CSV atomically (floats with 6 decimals, like the simulator's tables)."""
    path = Path(path)
    with naming(path):
        tmp = _tmp_beside(path)
    try:
        with naming(path, tmp):
            df.to_csv(tmp, index=False, float_format=FLOAT_FORMAT)
            os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    return path


def read_table_file(path: Union[str, Path], what: str = "--input") -> pd.DataFrame:
    """Read a CSV, JSONL or (with pyarrow) Parquet file; an error names ``what`` (one line)."""
    return read_table(path, what)
