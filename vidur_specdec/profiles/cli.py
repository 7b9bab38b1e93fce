"""``python -m vidur_specdec profiles {build,build-shipped,compare,calibrate} ...`` (also ``python -m vidur_specdec.profiles``).

Bad input (unknown model or device, tp that does not split the model, unreadable
files) prints one ``error: ...`` line to stderr and exits with status 2.
"""

from __future__ import annotations

import argparse
import sys

from vidur_specdec.config import ConfigError

from vidur_specdec.costs.profiles import (
    DEVICES,
    ProfileError,
    build_profile,
    build_shipped,
    compare_profile,
    load_model,
    write_tables,
)
from vidur_specdec.console import Parser
from vidur_specdec.hardware.devices import DeviceError, get_device
from vidur_specdec.outfolder import check, clear


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """Sub-subcommands of ``python -m vidur_specdec profiles``."""
    ap.description = "Analytical operator profiles in Vidur's CSV schema (times in ms per layer)."
    sub = ap.add_subparsers(dest="profiles_command", required=True, metavar="COMMAND", parser_class=Parser)

    b = sub.add_parser("build", help="write DIR/mlp.csv and DIR/attention.csv for one model and device")
    b.add_argument("--model", required=True, help="KNOWN_MODELS name or path to a YAML of ModelSpec fields")
    b.add_argument("--device", required=True, help=f"one of {', '.join(sorted(DEVICES))}, or a YAML file of device figures")
    b.add_argument("--tp", required=True, type=int, nargs="+", help="tensor parallel size(s); rows for each")
    b.add_argument("--out", required=True, help="output directory (created if missing)")
    b.add_argument("--max-tokens", type=int, default=None, help="largest num_tokens in mlp.csv (default 4096)")
    b.add_argument("--overwrite", action="store_true",
                   help="replace another command's results in --out (a profile folder is rebuilt in place anyway)")

    s = sub.add_parser("build-shipped", help="regenerate the profiles shipped under ROOT")
    s.add_argument("--root", default="profiles", help="profiles root (default: ./profiles)")

    c = sub.add_parser("compare", help="median |%% error| per op and group against a measured Vidur profile")
    c.add_argument("--model", required=True, help="KNOWN_MODELS name or path to a YAML of ModelSpec fields")
    c.add_argument("--device", required=True, help=f"one of {', '.join(sorted(DEVICES))}, or a YAML file of device figures")
    c.add_argument("--tp", required=True, type=int)
    c.add_argument("--measured", required=True, help="folder with measured mlp.csv and attention[.sample].csv")
    k = sub.add_parser(
        "calibrate",
        help="print the error table against Vidur's measured A100 profiles; with --write, refit costs/profiles/params.py first",
    )
    k.add_argument("--shared", default=None,
                   help="measured profiles root (default: ../shared/vidur-profiles beside the checkout)")
    k.add_argument("--write", action="store_true",
                   help="fit on Llama-2-7B and rewrite the calibrated block of vidur_specdec/costs/profiles/params.py")
    k.add_argument("--per-op", action="store_true", help="also print one row per op inside each group")


def _check_device(name: str):
    """A built-in device name or a YAML file of device figures (:func:`vidur_specdec.hardware.devices.get_device`)."""
    try:
        return get_device(name)
    except DeviceError as exc:
        raise ProfileError(str(exc).replace("device: ", "--device: ", 1)) from None


def _run(args: argparse.Namespace) -> None:
    if args.profiles_command == "build":
        device = _check_device(args.device)
        spec = load_model(args.model)
        replace = check(args.out, "profiles build", getattr(args, "overwrite", False), "--out")  # the one folder rule
        mlp, att = build_profile(spec, device, args.tp, args.max_tokens,  # every check before the folder is touched
                                 log=lambda line: print(line, file=sys.stderr, flush=True))
        if replace:
            clear(args.out)
        for path in write_tables(mlp, att, args.out):
            print(path)
    elif args.profiles_command == "build-shipped":
        for path in build_shipped(args.root):
            print(path)
    elif args.profiles_command == "compare":
        device = _check_device(args.device)
        spec = load_model(args.model)
        table = compare_profile(spec, device, args.tp, args.measured)
        print(f"# {spec.name} on {args.device}, tp={args.tp}, vs {args.measured}")
        print(table.to_string(index=False, float_format=lambda x: f"{x:.1f}"))
    elif args.profiles_command == "calibrate":
        from vidur_specdec.profiles import calibrate as calibration  # the fit and its report: this command only

        print(calibration.run(args.shared, write=args.write, per_op=args.per_op))


def run(args: argparse.Namespace) -> int:
    try:
        _run(args)
    except ProfileError as exc:
        msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ConfigError(msg) from None
    return 0
