"""``validate replay``: replay a trace against a server; writes measured.csv (and the /metrics scrapes)."""

from __future__ import annotations

from vidur_specdec.console import SEED
from vidur_specdec.validate.commands.options import add_overwrite, add_replay, out_folder
from vidur_specdec.validate.commands.stages import replay_trace


def add_arguments(p) -> None:
    p.add_argument("--url", required=True, help="server root, e.g. http://127.0.0.1:8000")
    p.add_argument("--trace", required=True, help="trace file (CSV or JSONL)")
    p.add_argument("--out", required=True, help="output folder")
    add_overwrite(p)
    p.add_argument("--no-scrape", action="store_true", help="do not scrape /metrics before and after")
    p.add_argument("--seed", type=SEED, default=0,
                   help="seeds the prompt token ids of trace rows that have none (as `validate run`; default 0)")
    add_replay(p)


def run(args) -> int:
    # lazy: start-up cost of pandas
    from vidur_specdec.validate.common import base_url
    from vidur_specdec.validate.workload import load_trace

    # lazy: start-up cost of pandas
    from vidur_specdec.validate.workload import with_token_ids

    url = base_url(args.url)
    trace = with_token_ids(load_trace(args.trace), args.seed)  # as `validate run --trace` draws missing ids
    out = out_folder(args, "validate replay")
    replay_trace(args, url, trace, out, scrape=not args.no_scrape)
    print(f"wrote {out}/measured.csv, chunks.jsonl, replay.json"
          + ("" if args.no_scrape else ", metrics_before.prom, metrics_after.prom"))
    return 0
