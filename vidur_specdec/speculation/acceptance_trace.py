"""Acceptance traces: measured acceptance replayed per request and output position.

A trace is a JSON-lines file, one request per line::

    {"prompt_tokens": 812, "output_tokens": 6, "accept_run": [0, 2, 1, 0, 1, 0]}
    {"prompt_tokens": 40, "output_tokens": 4, "accept_run": [0, 1, 0, 0], "proposed": [0, 3, 2, 0]}

``accept_run[p]`` is how many consecutive guesses a draft whose first guess is
output token p gets accepted; p = 0 is the token the prefill samples (never
drafted; any value). One trace serves every k: a decode step that starts at
output position p with g guesses keeps ``min(accept_run[p], g)`` and the next
step starts at p + kept + 1. Workloads are drawn from the trace — request i
takes line ``i mod lines`` for its prompt and output lengths (arrival times
from ``workload``) — so lengths and acceptance stay paired.

``proposed[p]`` (optional, same length) is how many guesses the proposer makes
for a draft starting at output position p: 0 = no draft (an n-gram step
without a match), so a replayed step there is charged one token and accepts
nothing; g > 0 caps that step's guesses at min(k, g). Absent: k everywhere.
Other keys (``run``: the measured run and request a line came from) are kept
for the reader and ignored by the simulator.

:func:`from_tokens_table` converts the validation harness's ``tokens`` table
(``step, req, draft_pos, accepted``, ``out_pos``, ``ctx``, one row per guess;
see :mod:`vidur_specdec.validate.steplogs`), one line per run and request: a
step whose draft kept a of its g guesses, starting at output position p, sets
``accept_run[p + i] = a − i`` for i = 0..a (a draft starting inside an
accepted run would have kept the rest of it and stopped at the same
rejection; when a = g the run is a lower bound: under-states acceptance at
larger k) and ``proposed`` from the guesses it carried. Command line::

    python -m vidur_specdec.speculation.acceptance_trace TOKENS OUT.jsonl [--outputs OUTPUTS]
        [--requests REQUESTS] [--prompt-tokens N]

``TOKENS`` is a file or a directory of table files (stacked); an ``outputs``
folder next to a ``tokens`` folder is read for output and prompt lengths.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import List, Optional

from vidur_specdec.config import ConfigError
from vidur_specdec.speculation.steplog_tables import RUN_KEY, read_table_file, truth_values
import pandas as pd

KEY = "speculative.acceptance_trace"


class TraceLine:
    """One request of a trace."""

    __slots__ = ("prompt_tokens", "output_tokens", "accept_run", "proposed")

    def __init__(self, prompt_tokens: int, output_tokens: int, accept_run: List[int],
                 proposed: Optional[List[int]] = None) -> None:
        self.prompt_tokens, self.output_tokens, self.accept_run = prompt_tokens, output_tokens, accept_run
        self.proposed = proposed


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
        proposed = d.get("proposed")
        if proposed is not None:
            if not isinstance(proposed, list) or any(not isinstance(x, int) or isinstance(x, bool) or x < 0
                                                     for x in proposed):
                raise ConfigError(f"{where}: proposed must be a list of integers >= 0")
            if len(proposed) != d["output_tokens"]:
                raise ConfigError(f"{where}: proposed has {len(proposed)} entries; "
                                  f"output_tokens is {d['output_tokens']}")
        out.append(TraceLine(d["prompt_tokens"], d["output_tokens"], run, proposed))
    if not out:
        raise ConfigError(f"{KEY}: {p} has no lines")
    return out


class _TraceRequest:
    def __init__(self, run: List[int], depth: int, proposed: Optional[List[int]] = None) -> None:
        self.run, self.depth, self.proposed = run, depth, proposed

    def proposed_at(self, position: int) -> Optional[int]:
        """Guesses the trace's proposer made for a draft starting at ``position`` (None: k)."""
        if self.proposed is None:
            return None
        return self.proposed[min(max(position, 0), len(self.proposed) - 1)]

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
        line = self.line(request.index)
        return _TraceRequest(line.accept_run, self.k, line.proposed)


def _cell_len(v) -> int:
    """Length of a list cell (a native Parquet list, a JSON text list or a separated string)."""
    if v is None or (isinstance(v, float) and v != v):
        return 0
    if hasattr(v, "__len__") and not isinstance(v, str):
        return len(v)
    text = str(v).strip()
    if text.startswith("["):
        return len(json.loads(text))
    return len(text.replace(",", " ").split())


def _lengths_by_key(table, keys, length_of) -> dict:
    """{run key + req: value} from an ``outputs`` or ``requests`` table (first row of each)."""
    out = {}
    if table is None or "req" not in table:
        return out
    have = [c for c in keys if c in table]
    for _, row in table.iterrows():
        v = length_of(row)
        if v is not None:
            out.setdefault(tuple(row[c] for c in have), v)
    return out


def from_tokens_table(tokens, prompt_tokens: Optional[int] = None, outputs=None, requests=None) -> List[dict]:
    """Trace lines from a step-log ``tokens`` table (pandas), one per run (:data:`RUN_KEY`) and ``req``.

    Each step is placed by the ``out_pos`` of its first guess p (the table's
    ``step`` order when ``out_pos`` is absent): a draft of g guesses that kept
    a sets ``accept_run[p + i] = a − i`` and ``proposed[p] = g``,
    ``proposed[p + i] = max(1, g − i)`` for i = 1..a (the draft still held
    guesses there). Output positions no step drafted at (n-gram steps without a
    match leave no rows) get ``accept_run`` 0 and ``proposed`` 0: a replay
    charges one token there.

    Output length: ``len(output_ids)`` from ``outputs`` when given, else the
    last step's end (p + a + 1); a draft crossing the end is cut there.
    Prompt length: ``prompt_tokens`` from ``outputs`` / ``requests``, else
    ``ctx − out_pos`` of the request's rows, else the ``prompt_tokens``
    argument; a request with none of these raises :class:`ConfigError`.
    Requests in ``outputs`` that never drafted get a line of zeros.
    """
    t = tokens.copy()
    t["accepted"] = truth_values(t["accepted"])
    run_cols = [c for c in RUN_KEY if c in t]
    keys = run_cols + ["req"]
    out_len = _lengths_by_key(outputs, keys, lambda r: _cell_len(r["output_ids"]) if "output_ids" in r else None)
    prompts = {}
    for table in (requests, outputs):
        for k, v in _lengths_by_key(table, keys, lambda r: int(r["prompt_tokens"]) if "prompt_tokens" in r
                                    and pd.notna(r["prompt_tokens"]) else None).items():
            prompts[k] = v
    has_pos = "out_pos" in t
    lines, seen = [], set()
    order = ["step", "draft_pos"]
    for key, d in t.sort_values(order, kind="stable").groupby(keys, sort=False, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        seen.add(key)
        steps = []  # (first output position, guesses, kept)
        pos = 1
        for _, s in d.groupby("step", sort=True):
            s = s.sort_values("draft_pos")
            acc = s["accepted"].tolist()
            a = 0
            while a < len(acc) and acc[a]:
                a += 1
            p = int(s["out_pos"].iloc[0]) if has_pos else pos
            steps.append((p, len(acc), a))
            pos = p + a + 1
        n = out_len.get(key, steps[-1][0] + steps[-1][2] + 1 if steps else 1)
        run, proposed = [0] * n, [0] * n
        for p, g, a in steps:
            for i in range(a + 1):
                if 0 <= p + i < n:
                    run[p + i] = a - i
                    proposed[p + i] = g if i == 0 else max(1, g - i)
        pt = prompts.get(key)
        if pt is None and has_pos and "ctx" in d:
            pt = int(d["ctx"].iloc[0]) - int(d["out_pos"].iloc[0])
        if pt is None:
            pt = prompt_tokens
        if pt is None or pt < 1:
            raise ConfigError(f"tokens: no prompt length for request {key[-1]} (give ctx and out_pos columns, "
                              f"an outputs or requests table with prompt_tokens, or --prompt-tokens)")
        lines.append({"run": dict(zip(keys, [_plain(v) for v in key])), "prompt_tokens": int(pt),
                      "output_tokens": n, "accept_run": run, "proposed": proposed})
    for key, n in out_len.items():  # requests that never drafted
        if key in seen:
            continue
        pt = prompts.get(key, prompt_tokens)
        if pt is None:
            raise ConfigError(f"tokens: no prompt length for request {key[-1]} (no rows in tokens; give "
                              f"prompt_tokens in outputs or requests, or --prompt-tokens)")
        lines.append({"run": dict(zip(keys, [_plain(v) for v in key])), "prompt_tokens": int(pt),
                      "output_tokens": n, "accept_run": [0] * n, "proposed": [0] * n})
    return lines


def _plain(v):
    """A key value as plain JSON (numpy scalars to Python)."""
    return v.item() if hasattr(v, "item") else v


def _read_tables(path: Path, name: str):
    """A table file, or every table file under a directory stacked; None when ``path`` is None."""
    if path is None:
        return None
    if path.is_dir():
        files = [p for p in sorted(path.rglob("*")) if p.is_file() and not p.name.startswith(".")
                 and p.name.endswith((".csv", ".csv.gz", ".jsonl", ".parquet"))]
        if not files:
            raise ConfigError(f"{name}: no table files (.csv, .jsonl, .parquet) under {path}")
        return pd.concat([read_table_file(p, name) for p in files], ignore_index=True)
    if not path.is_file():
        raise ConfigError(f"{name}: file not found: {path}")
    return read_table_file(path, name)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m vidur_specdec.speculation.acceptance_trace",
                                 description="Convert a step-log tokens table to an acceptance trace (JSON lines).")
    ap.add_argument("tokens", help="tokens table (CSV, JSONL or Parquet file, or a directory of them): "
                                   "step, req, draft_pos, accepted[, out_pos, ctx, run key columns]")
    ap.add_argument("out", help="trace file to write (JSON lines)")
    ap.add_argument("--outputs", default=None, help="outputs table (file or directory): output lengths and "
                                                     "prompt lengths; default: an 'outputs' folder next to a "
                                                     "'tokens' folder")
    ap.add_argument("--requests", default=None, help="requests table (file or directory): prompt lengths")
    ap.add_argument("--prompt-tokens", type=int, default=None,
                    help="prompt length for requests the tables give none for")
    a = ap.parse_args(argv)
    src = Path(a.tokens)
    try:
        t = _read_tables(src, "tokens")
        outputs_path = Path(a.outputs) if a.outputs else None
        if outputs_path is None and src.is_dir() and src.name == "tokens" and (src.parent / "outputs").is_dir():
            outputs_path = src.parent / "outputs"
        outputs = _read_tables(outputs_path, "--outputs")
        requests = _read_tables(Path(a.requests), "--requests") if a.requests else None
        missing = {"step", "req", "draft_pos", "accepted"} - set(t.columns)
        if missing:
            raise ConfigError(f"tokens: {src} lacks columns {sorted(missing)}")
        lines = from_tokens_table(t, a.prompt_tokens, outputs, requests)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    Path(a.out).write_text("".join(json.dumps(line) + "\n" for line in lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
