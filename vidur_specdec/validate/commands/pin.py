"""``validate pin``: write the vLLM launch arguments that pin the server's acceptance to the config's."""

from __future__ import annotations

import sys
from pathlib import Path

from vidur_specdec.config import ConfigError
from vidur_specdec.validate.commands.options import add_config, add_overwrite, load_cfg


def add_arguments(p) -> None:
    add_config(p)
    p.add_argument("--out", required=True, help="output folder for vllm_pinned.json")
    add_overwrite(p)


def run(args) -> int:
    from vidur_specdec.validate.pinned import PINNED_FILE, write_pinned

    cfg = load_cfg(args)
    target = Path(args.out) / PINNED_FILE
    if target.exists() and not args.overwrite:
        raise ConfigError(f"--out: {target} exists; give --overwrite to replace it")
    if Path(args.out).exists() and not Path(args.out).is_dir():
        raise ConfigError(f"--out: {args.out} exists and is not a folder")
    body = write_pinned(cfg, args.out)
    for w in body["warnings"]:
        print(f"warning: {w}", file=sys.stderr)
    rates = body["speculative_config"]["synthetic_acceptance_rates"]
    print(f"wrote {target}: synthetic_acceptance_rates {rates} (mean acceptance length "
          f"{body['mean_acceptance_length']:g}); launch with:\n{body['vllm_serve']}")
    return 0
