"""Command line: ``python -m vidur_specdec.main --config FILE [--output-dir DIR] [--set key=value ...]``.

* A run config simulates one run (below).
* A sweep config (a top-level ``sweep:``, ``grid:`` or ``rows:`` key) runs every
  row, in parallel and resumably, into one CSV: see :mod:`vidur_specdec.sweep`
  and docs/sweep.md (``--jobs``, ``--executor local|ray``, ``--address``, ``--overwrite``).
* ``python -m vidur_specdec.main report RESULTS.csv -o page.html`` writes the
  results explorer page (:mod:`vidur_specdec.report`).

For a single run:
Writes ``requests.csv``, ``steps.csv``, ``summary.json`` and the resolved
``config.yaml`` into the output folder (default: a fresh ``runs/<timestamp>``).
Files are written into a temporary sibling folder and moved in place at the
end, so a failed run leaves nothing half-written. Bad input exits with status 2
and one line on stderr naming the key or file.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import List, Optional

import yaml

from vidur_specdec.config import ConfigError, load

FLOAT_FORMAT = "%.6f"


def _jsonable(x):
    if isinstance(x, dict):
        return {k: _jsonable(v) for k, v in x.items()}
    if isinstance(x, float) and math.isnan(x):
        return None
    return x


def write_result(result, out_dir: Path) -> None:
    """Write a :class:`SimulationResult` into ``out_dir`` atomically (temp folder, then move)."""
    out_dir = Path(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
    try:
        result.requests.to_csv(tmp / "requests.csv", index=False, float_format=FLOAT_FORMAT)
        result.steps.to_csv(tmp / "steps.csv", index=False, float_format=FLOAT_FORMAT)
        (tmp / "summary.json").write_text(json.dumps(_jsonable(result.summary), indent=2, sort_keys=True) + "\n")
        (tmp / "config.yaml").write_text(yaml.safe_dump(result.config.to_dict(), sort_keys=False))
        if out_dir.exists():
            for f in tmp.iterdir():
                os.replace(f, out_dir / f.name)
            tmp.rmdir()
        else:
            os.replace(tmp, out_dir)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def _fresh_run_dir() -> Path:
    """``runs/<timestamp>``, with a numeric suffix if that folder already exists."""
    base = Path("runs") / time.strftime("%Y%m%d-%H%M%S")
    out, i = base, 1
    while out.exists():
        out, i = base.with_name(f"{base.name}-{i}"), i + 1
    return out


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        prog="python -m vidur_specdec.main",
        description="Simulate speculative decoding on Vidur (Sarathi, PP 1) and write per-request and per-step tables.",
    )
    ap.add_argument("--config", required=True, help="run config YAML (see configs/default.yaml)")
    ap.add_argument("--output-dir", help="output folder (default: runs/<timestamp>)")
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY.PATH=VALUE",
                    help="override any config key, e.g. --set speculative.num_speculative_tokens=2 (repeatable)")
    from vidur_specdec.sweep import add_arguments  # --jobs, --executor, --address, --overwrite (sweeps only)

    add_arguments(ap)
    return ap.parse_args(argv)


def main(argv: Optional[List[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] == "report":  # python -m vidur_specdec.main report RESULTS.csv -o page.html
        from vidur_specdec import report

        return report.main(argv[1:])
    if argv and argv[0] == "tune":  # python -m vidur_specdec.main tune --config CFG --output-dir DIR (docs/tune.md)
        from vidur_specdec.tune import cli as tune_cli

        return tune_cli.main(argv[1:])
    args = parse_args(argv)
    try:
        from vidur_specdec.config import read_yaml
        from vidur_specdec.sweep import is_sweep

        if is_sweep(read_yaml(args.config)):  # a top-level sweep:, grid: or rows: key (docs/sweep.md)
            from vidur_specdec import sweep

            return sweep.main(args)
        cfg = load(args.config, args.overrides)
        from vidur_specdec.schedule import config_warnings
        from vidur_specdec.simulation import prepare, run_prepared

        for line in config_warnings(cfg.speculative):  # k above num_speculative_tokens: clamped, as vLLM
            print(f"warning: {line}", file=sys.stderr)

        prepared = prepare(cfg)
        out_dir = Path(args.output_dir) if args.output_dir else _fresh_run_dir()
        if out_dir.exists() and not out_dir.is_dir():
            raise ConfigError(f"--output-dir: {out_dir} exists and is not a folder")
        t0 = time.perf_counter()
        result = run_prepared(prepared)
        wall = time.perf_counter() - t0
        write_result(result, out_dir)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    s = result.summary
    print(f"{s['num_requests']} requests, {s['method']} k={s['num_speculative_tokens']}, "
          f"{s['verify_attention']}: TTFT p50 {s['ttft_ms']['p50']:.1f} ms, TPOT p50 {s['tpot_ms']['p50']:.2f} ms, "
          f"E2E p50 {s['e2e_ms']['p50']:.0f} ms, {s['throughput_tok_s']:.0f} tok/s "
          f"({s['mean_acceptance_length']:.2f} mean acceptance length: tokens per decode step; simulated in {wall:.1f} s)")
    from vidur_specdec.metrics import flip_warning

    if flip_warning(s):  # k flipping at a schedule boundary (vLLM issue #49548)
        print(flip_warning(s), file=sys.stderr)
    print(f"wrote {out_dir}/requests.csv, steps.csv, summary.json")
    return 0


def _entry() -> None:
    """Console entry point; a closed stdout pipe (``... | head``) ends quietly."""
    try:
        code = main()
        sys.stdout.flush()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 1
    sys.exit(code)


if __name__ == "__main__":
    _entry()
