"""``validate generate``: write a seeded trace (CSV or JSONL) from a config's workload section."""

from __future__ import annotations

from pathlib import Path

from vidur_specdec.validate.commands.options import add_config, add_workload, load_cfg
from vidur_specdec.validate.commands.stages import generate


def add_arguments(p) -> None:
    add_config(p)
    add_workload(p)
    p.add_argument("--out", required=True, help="trace file, .csv or .jsonl")


def run(args) -> int:
    cfg = load_cfg(args)
    df = generate(args, cfg, Path(args.out))
    print(f"wrote {args.out}: {len(df)} requests over {df['arrival_offset_s'].max():.1f} s "
          f"({args.arrival or cfg.workload.arrival} arrivals)")
    return 0
