"""``validate steps``: read engine step logs: acceptance, step times, cost-model check."""

from __future__ import annotations

import sys

from vidur_specdec.config import ConfigError
from vidur_specdec.validate.commands.options import add_config, add_overwrite, clear_out, load_cfg, out_folder
from vidur_specdec.validate.cost import pricer_for

FILTERS = ("gpu", "target", "split", "drafter", "k", "c", "start", "mode")


def add_arguments(p) -> None:
    p.add_argument("--root", required=True, help="dataset root (holding steps/, tokens/, requests/, runs/)")
    p.add_argument("--out", required=True, help="output folder")
    add_overwrite(p)
    add_config(p, required=False)
    for key in FILTERS:
        p.add_argument(f"--{key}", help=f"keep only runs with this {key} (any case; none matching is an error)")
    p.add_argument("--max-steps", type=int, help="cost-model check: at most this many steps per run (evenly spaced)")
    p.add_argument("--times-unit", choices=("s", "ms"), default="s", help="unit of requests.times")


def run(args) -> int:
    # lazy: start-up cost of pandas
    from vidur_specdec.validate.common import write_csv, write_json
    from vidur_specdec.validate.steplogs import analyze

    cost_model = cfg = None
    if args.config:
        cfg = load_cfg(args)
        cost_model = pricer_for(cfg)
    if args.max_steps is not None and args.max_steps < 1:
        raise ConfigError(f"--max-steps: must be >= 1, got {args.max_steps}")
    filters = {k: getattr(args, k) for k in FILTERS}
    out = out_folder(args, "validate steps")
    tables = analyze(args.root, cost_model, filters, args.max_steps, args.times_unit)
    warnings = []
    if args.config:  # flag runs whose GPU, model or method differ from the config
        # lazy: start-up cost of pandas, prometheus_client
        from vidur_specdec.validate.steplog_match import config_mismatches

        warnings = config_mismatches(cfg, tables)
    clear_out(args, out)
    for name, df in tables.items():
        write_csv(out / f"{name}.csv", df)
    notes = {"root": str(args.root), "filters": {k: v for k, v in filters.items() if v is not None},
             "outputs": {name: len(df) for name, df in tables.items()},
             "cost_model": cfg.model if cost_model is not None else None}
    if args.config:
        notes["warnings"] = warnings
        for w in warnings:
            print(f"warning: {w}", file=sys.stderr)
    write_json(out / "steps_summary.json", notes)
    for name, df in tables.items():
        print(f"  {name}.csv: {len(df)} rows")
    if "step_check_summary" in tables:
        s = tables["step_check_summary"]
        for r in s[s["kind"] == "all"].to_dict("records"):
            flag = f" [DIFFERS FROM CONFIG: {r['config_mismatch']}]" if r.get("config_mismatch") else ""
            print(f"  {r.get('gpu', '')} {r.get('target')} {r.get('drafter')} k={r.get('k')} c={r.get('c')}: "
                  f"target forward median |error| {r['target_median_abs_pct_error']:.1f} %, median ratio "
                  f"{r['target_median_ratio']:.3f} (predicted / measured, {r['steps']} steps){flag}")
    print(f"wrote {out}/")
    return 0
