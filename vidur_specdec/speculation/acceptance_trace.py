"""Acceptance traces: measured acceptance replayed per request and output position.

A trace is a JSON-lines file, one request per line::

    {"prompt_tokens": 812, "output_tokens": 6, "accept_run": [0, 2, 1, 0, 1, 0]}

``accept_run[p]`` is how many consecutive guesses a draft whose first guess is
output token p gets accepted; p = 0 is the token the prefill samples (never
drafted; any value). One trace serves every k: a decode step that starts at
output position p with g guesses keeps ``min(accept_run[p], g)`` and the next
step starts at p + kept + 1. Workloads are drawn from the trace — request i
takes line ``i mod lines`` for its prompt and output lengths (arrival times
from ``workload``) — so lengths and acceptance stay paired.

:func:`from_tokens_table` converts the validation harness's ``tokens`` table
(``step, req, draft_pos, accepted``, one row per guess; see
:mod:`vidur_specdec.validate.steplogs`): a step whose draft kept a of its g
guesses sets ``accept_run[p + i] = a − i`` for i = 0..a (a draft starting
inside an accepted run would have kept the rest of it and stopped at the same
rejection; when a = g the run is a lower bound: under-states acceptance at
larger k). Command line::

    python -m vidur_specdec.speculation.acceptance_trace TOKENS.csv OUT.jsonl [--prompt-tokens N]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import List, Optional

from vidur_specdec.config import ConfigError
from vidur_specdec.speculation.steplog_tables import RUN_KEY, read_table_file, truth_values

KEY = "speculative.acceptance_trace"


class TraceLine:
    """One request of a trace."""

    __slots__ = ("prompt_tokens", "output_tokens", "accept_run")

    def __init__(self, prompt_tokens: int, output_tokens: int, accept_run: List[int]) -> None:
        self.prompt_tokens, self.output_tokens, self.accept_run = prompt_tokens, output_tokens, accept_run


def read_trace(path) -> List[TraceLine]:
    """Read and check a trace; ConfigError naming the file and line on the first bad one."""
    p = Path(path).expanduser()
    if not p.is_file():
        raise ConfigError(f"{KEY}: file not found: {p}")
    out = []
    for n, text in enumerate(p.read_text().splitlines(), start=1):
        if not text.strip():
            continue
        where = f"{KEY}: {p} line {n}"
        try:
            d = json.loads(text)
        except json.JSONDecodeError:
            raise ConfigError(f"{where}: not valid JSON") from None
        if not isinstance(d, dict):
            raise ConfigError(f"{where}: must be an object with prompt_tokens, output_tokens, accept_run")
        for k in ("prompt_tokens", "output_tokens"):
            v = d.get(k)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ConfigError(f"{where}: {k} must be an integer >= 1, got {v!r}")
        run = d.get("accept_run")
        if not isinstance(run, list) or any(not isinstance(x, int) or isinstance(x, bool) or x < 0 for x in run):
            raise ConfigError(f"{where}: accept_run must be a list of integers >= 0")
        if len(run) != d["output_tokens"]:
            raise ConfigError(f"{where}: accept_run has {len(run)} entries; output_tokens is {d['output_tokens']}")
        out.append(TraceLine(d["prompt_tokens"], d["output_tokens"], run))
    if not out:
        raise ConfigError(f"{KEY}: {p} has no lines")
    return out


class _TraceRequest:
    def __init__(self, run: List[int], depth: int) -> None:
        self.run, self.depth = run, depth

    def next(self, guesses: int, position: int) -> int:
        p = min(max(position, 0), len(self.run) - 1)
        return min(self.run[p], guesses, self.depth)


class TraceAcceptance:
    """Replays a trace: request i follows line ``i mod len(lines)``."""

    def __init__(self, lines: List[TraceLine], depth: int) -> None:
        self.lines, self.k = lines, depth
        self.mean_accepted = None  # a replay has no pmf: nothing to expect per full step

    def line(self, index: int) -> TraceLine:
        return self.lines[index % len(self.lines)]

    def for_request(self, request) -> _TraceRequest:
        return _TraceRequest(self.line(request.index).accept_run, self.k)


def from_tokens_table(tokens, prompt_tokens: Optional[int] = None) -> List[dict]:
    """Trace lines from a ``tokens`` table (pandas): one line per ``req`` (and run key), in order of first step."""
    import pandas as pd


    t = tokens.copy()
    t["accepted"] = truth_values(t["accepted"])
    keys = [c for c in RUN_KEY if c in t] + ["req"]
    lines = []
    for _, d in t.sort_values(["step", "draft_pos"]).groupby(keys, sort=False, dropna=False):
        run = [0]
        for _, s in d.groupby("step", sort=True):
            acc = s.sort_values("draft_pos")["accepted"].tolist()
            a = 0
            while a < len(acc) and acc[a]:
                a += 1
            run += [a - i for i in range(a + 1)]
        pt = prompt_tokens
        if pt is None:
            pt = int(d["prompt_tokens"].iloc[0]) if "prompt_tokens" in d and pd.notna(d["prompt_tokens"].iloc[0]) else 1
        lines.append({"prompt_tokens": int(pt), "output_tokens": len(run), "accept_run": run})
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m vidur_specdec.speculation.acceptance_trace",
                                 description="Convert a step-log tokens table to an acceptance trace (JSON lines).")
    ap.add_argument("tokens", help="tokens table (CSV, JSONL or Parquet): step, req, draft_pos, accepted[, prompt_tokens]")
    ap.add_argument("out", help="trace file to write (JSON lines)")
    ap.add_argument("--prompt-tokens", type=int, default=None, help="prompt length when the table has none")
    a = ap.parse_args(argv)
    src = Path(a.tokens)
    if not src.is_file():
        print(f"error: tokens: file not found: {src}", file=sys.stderr)
        return 2
    t = read_table_file(src, "tokens")  # CSV, JSON lines or Parquet, as the harness reads step logs
    missing = {"step", "req", "draft_pos", "accepted"} - set(t.columns)
    if missing:
        print(f"error: tokens: {src} lacks columns {sorted(missing)}", file=sys.stderr)
        return 2
    text = "".join(json.dumps(line) + "\n" for line in from_tokens_table(t, a.prompt_tokens))
    Path(a.out).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
