"""``validate calibrate``: acceptance and KV budget from two /metrics scrapes."""

from __future__ import annotations

from pathlib import Path

from vidur_specdec.config import ConfigError
from vidur_specdec.validate.commands.options import add_overwrite, clear_out, out_folder
from vidur_specdec.validate.commands.stages import print_calibration


def add_arguments(p) -> None:
    p.add_argument("--dir", help="folder holding metrics_before.prom and metrics_after.prom (from replay)")
    p.add_argument("--before", help="scrape taken before the replay")
    p.add_argument("--after", help="scrape taken after the replay")
    p.add_argument("--k", type=int, help="guesses per draft (default: from the counters)")
    p.add_argument("--acceptance", choices=("per_position", "alpha"), default="per_position",
                   help="acceptance input written to calibration.yaml")
    p.add_argument("--out", required=True, help="output folder (calibration.json, calibration.yaml)")
    add_overwrite(p)


def run(args) -> int:
    # lazy: start-up cost of pandas, prometheus_client
    from vidur_specdec.validate.calibrate import calibrate, write_calibration
    from vidur_specdec.validate.counters import read_snapshot

    if args.dir:
        before_p, after_p = Path(args.dir) / "metrics_before.prom", Path(args.dir) / "metrics_after.prom"
    elif args.before and args.after:
        before_p, after_p = Path(args.before), Path(args.after)
    else:
        raise ConfigError("--dir: give --dir, or both --before and --after")
    if args.k is not None and args.k < 1:
        raise ConfigError(f"--k: must be >= 1, got {args.k}")
    out = out_folder(args, "validate calibrate")
    cal = calibrate(read_snapshot(before_p, "--before"), read_snapshot(after_p, "--after"), args.k)
    clear_out(args, out)
    write_calibration(cal, args.out, args.acceptance)
    print_calibration(cal)
    print(f"wrote {args.out}/calibration.json, calibration.yaml")
    return 0
