"""``validate compare``: the matched simulation of a trace, joined with measured.csv; report."""

from __future__ import annotations

from pathlib import Path

from vidur_specdec.validate.commands.options import add_compare, add_config, add_overwrite, load_cfg, out_folder
from vidur_specdec.validate.commands.stages import compare_and_report


def add_arguments(p) -> None:
    add_config(p)
    p.add_argument("--trace", required=True, help="the replayed trace")
    p.add_argument("--measured", required=True, help="measured.csv from replay")
    p.add_argument("--calibration", help="calibration.json (or its folder); without it the config is used as is")
    p.add_argument("--out", required=True, help="output folder")
    add_overwrite(p)
    add_compare(p)


def run(args) -> int:
    # lazy: start-up cost of pandas, prometheus_client
    from vidur_specdec.validate.calibrate import read_calibration
    from vidur_specdec.validate.common import read_table_file
    from vidur_specdec.validate.compare import checked_measured
    from vidur_specdec.validate.workload import load_trace

    load_cfg(args)
    out_folder(args, "validate compare")
    trace = load_trace(args.trace)
    measured = checked_measured(read_table_file(args.measured, "--measured"), args.measured)
    cal = read_calibration(args.calibration) if args.calibration else None
    compare_and_report(args, args.config, Path(args.trace), trace, measured, cal, Path(args.out))
    return 0
