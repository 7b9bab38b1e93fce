"""The resumable journal: a header line, then one JSON line per finished row, each with its checksum.

Every line carries ``"sum"``: the first 16 hex digits of the SHA-256 of the line's JSON without it
(``json.dumps(obj, sort_keys=True)``). A line whose checksum does not match (an edited metric, a
flipped byte) or that has none (a journal of an earlier version) is refused with one line naming
the file and line, never resumed into a CSV; ``--overwrite`` starts over. Only a last line cut
short by a crash (no newline, or not JSON) is dropped and its row run again. The checksum is not
part of any result: the CSV is built from the lines' ``metrics`` alone.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Callable, Dict, Optional

from vidur_specdec.config.files import naming
from vidur_specdec.config import ConfigError
from vidur_specdec.sweep.definition import SweepRow
from vidur_specdec.sweep.worker import metrics_problem


SUM_KEY = "sum"


def line_sum(obj: Dict) -> str:
    """The checksum of one journal line's object (without its ``sum``)."""
    body = json.dumps({k: v for k, v in obj.items() if k != SUM_KEY}, sort_keys=True)
    return hashlib.sha256(body.encode()).hexdigest()[:16]


class Journal:
    """``.<name>.journal.jsonl``: a header line, then one line per finished row (appended, fsynced)."""

    def __init__(self, path: Path, header: Dict, check: Callable[[object], Optional[str]] = metrics_problem):
        self.check = check  # why a line's metrics are bad, or None (tune records more metrics than a sweep)
        self.path = path
        self.header = header
        self.done: Dict[int, Dict] = {}

    def read(self, overwrite: bool, out_dir: Path) -> None:
        if not self.path.exists() or overwrite:
            return
        raw = self.path.read_bytes()
        lines = raw.split(b"\n")
        good_end = 0
        pos = 0
        header = None
        for n, line in enumerate(lines):
            end = pos + len(line) + 1
            complete = end <= len(raw)  # the line ends with a newline
            if not complete:
                break  # a half-written last line: ignored, truncated below
            try:
                obj = json.loads(line)
            except ValueError:
                if end == len(raw):
                    break  # garbled last line
                raise ConfigError(f"--output-dir: {self.path} is corrupt at line {n + 1}; "
                                  "remove it or rerun with --overwrite") from None
            if not isinstance(obj, dict) or obj.get(SUM_KEY) != line_sum(obj):
                what = "has no checksum (written by an earlier version)" if isinstance(obj, dict) and \
                    SUM_KEY not in obj else "does not match its checksum (edited or corrupted)"
                raise ConfigError(f"--output-dir: {self.path} line {n + 1} {what}; its results cannot be "
                                  "trusted: rerun with --overwrite to start over")
            if header is None:
                header = obj
                self._check_header(header, out_dir)
            elif isinstance(obj, dict) and isinstance(obj.get("row"), int) and isinstance(obj.get("metrics"), dict):
                why = self.check(obj["metrics"])
                if why is not None:
                    raise ConfigError(f"--output-dir: {self.path} line {n + 1} (sweep row {obj['row']}) holds bad "
                                      f"metrics: {why}; remove that line or rerun with --overwrite")
                self.done[obj["row"]] = obj
            else:
                raise ConfigError(f"--output-dir: {self.path} is corrupt at line {n + 1}; "
                                  "remove it or rerun with --overwrite")
            good_end = end
            pos = end
        if header is None:
            self.done.clear()
            good_end = 0
        if good_end != len(raw):
            with open(self.path, "r+b") as f:
                f.truncate(good_end)
                f.flush()
                os.fsync(f.fileno())

    def _check_header(self, obj: Dict, out_dir: Path) -> None:
        h = self.header
        if obj.get("sweep_hash") != h["sweep_hash"]:
            raise ConfigError(f"--output-dir: {out_dir} holds results of a different sweep "
                              f"({self.path.name}: sweep hash {obj.get('sweep_hash')}, this sweep {h['sweep_hash']}); "
                              "use another --output-dir, or --overwrite to discard them")
        if obj.get("code") != h["code"]:
            raise ConfigError(f"--output-dir: {self.path} was written by different simulator code "
                              f"(code {obj.get('code')}, now {h['code']}); rerun with --overwrite to start over")

    def _append(self, obj: Dict, mode: str = "ab") -> None:
        line = {**obj, SUM_KEY: line_sum(obj)}
        with naming(self.path), open(self.path, mode) as f:
            f.write((json.dumps(line, sort_keys=True) + "\n").encode())
            f.flush()
            os.fsync(f.fileno())

    def add(self, row: SweepRow, result: Dict) -> None:
        obj = {"row": row.index, "row_id": row.row_id, "metrics": result["metrics"],
               "wall_s": round(result["wall_s"], 4)}
        self._append(obj)
        self.done[row.index] = obj
