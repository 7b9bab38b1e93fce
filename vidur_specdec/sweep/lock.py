"""One writer per output folder: ``DIR/.vidur_specdec.lock`` holds the running process's pid.

Taken (``O_CREAT | O_EXCL``) before the folder's journal is read and released
when the run ends. A second sweep or ``tune`` on the same folder gets one line
naming the holder. A lock left by a process that no longer exists (killed with
SIGKILL, a crashed machine) is stale and taken over. Shortcut: a pid reused by
an unrelated live process keeps the lock until the file is removed by hand.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Optional

from vidur_specdec.config import ConfigError

LOCK_NAME = ".vidur_specdec.lock"


def _pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return True


def _holder(path: Path) -> Optional[int]:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    try:
        return int(text.split()[0])
    except (ValueError, IndexError):
        return None


class FolderLock:
    """``with FolderLock(out_dir):`` — raises :class:`ConfigError` when another live process holds it."""

    def __init__(self, out_dir: Path):
        self.path = Path(out_dir) / LOCK_NAME
        self.held = False

    def acquire(self) -> None:
        for _ in range(3):
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                pid = _holder(self.path)
                if pid is not None and pid != os.getpid() and _pid_alive(pid):
                    raise ConfigError(f"--output-dir: {self.path.parent} is in use by another run (pid {pid}, "
                                      f"{self.path.name}); wait for it, or use another --output-dir") from None
                try:  # stale (its process is gone) or unreadable: take it over
                    os.unlink(self.path)
                except FileNotFoundError:
                    pass
                continue
            except OSError as e:
                if e.errno in (errno.EACCES, errno.EROFS):
                    raise ConfigError(f"--output-dir: cannot write {self.path}: {e.strerror}") from None
                raise
            with os.fdopen(fd, "w") as f:
                f.write(f"{os.getpid()}\n")
            self.held = True
            return
        raise ConfigError(f"--output-dir: could not take {self.path}; another run keeps replacing it")

    def release(self) -> None:
        if self.held:
            self.held = False
            if _holder(self.path) == os.getpid():
                try:
                    os.unlink(self.path)
                except FileNotFoundError:
                    pass

    def __enter__(self) -> "FolderLock":
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()
