"""Options and output-folder handling shared by the ``validate`` sub-subcommands."""

from __future__ import annotations

from pathlib import Path

from vidur_specdec import console
from vidur_specdec import outfolder
from vidur_specdec.console import SEED


def add_config(p, required=True) -> None:
    console.add_config(p, required=required, help="simulator run config (YAML)")
    console.add_set(p)


def add_overwrite(p) -> None:
    p.add_argument("--overwrite", action="store_true",
                   help="replace the results already in --out (files this tool did not write are never removed)")


def out_folder(args, command: str, resumes: bool = True) -> Path:
    """``--out`` checked by the one output-folder rule (:mod:`vidur_specdec.outfolder`); cleared when it says so."""
    out = Path(args.out)
    args._clear_out = outfolder.check(out, command, bool(getattr(args, "overwrite", False)), "--out", resumes)
    return out


def clear_out(args, out: Path) -> None:
    """Just before the first write: remove the earlier results ``--overwrite`` replaces."""
    if getattr(args, "_clear_out", False) and out.is_dir():
        outfolder.clear(out)
        args._clear_out = False


def add_workload(p) -> None:
    p.add_argument("--arrival", choices=("poisson", "gamma", "static"),
                   help="arrival process (default: the config's workload.arrival)")
    p.add_argument("--cv", type=float, default=1.0, help="gamma: coefficient of variation of the gaps (1 = Poisson)")
    p.add_argument("--seed", type=SEED, help="workload seed (default: the config's seed)")


def add_replay(p) -> None:
    p.add_argument("--model", help="model name sent to the server (default: the first of GET /v1/models)")
    p.add_argument("--timeout-s", type=float, default=600.0, help="per-request limit, send to last token (s)")
    p.add_argument("--api-key", help="sent as 'Authorization: Bearer KEY' (a server started with --api-key)")
    p.add_argument("--deadline-s", type=float, default=30.0,
                   help="whole-request limit of GET /metrics and /v1/models, however slowly the server answers (s)")
    p.add_argument("--settle-s", type=float, default=1.0,
                   help="wait this long after the last response before scraping /metrics again (s)")


def add_compare(p) -> None:
    p.add_argument("--acceptance", choices=("per_position", "alpha"), default="per_position",
                   help="which calibrated acceptance input the simulation uses")
    p.add_argument("--plotlyjs", choices=("inline", "cdn"), default="inline",
                   help="embed plotly.js in report.html (works offline) or link it from a CDN")


def load_cfg(args):
    # lazy: start-up cost of pandas
    from vidur_specdec.engine.resolve import load

    return load(args.config, args.overrides)
