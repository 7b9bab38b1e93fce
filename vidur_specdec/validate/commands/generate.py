"""``validate generate``: write a seeded trace (CSV or JSONL) from a config's workload section.

``--out`` follows the one output rule for a file (:func:`vidur_specdec.outfolder.check_result_file`): an
existing file is replaced only with ``--overwrite``, and then only when it is a trace this command writes,
never an input of the command (the config, its trace, any file it names) and never another command's result.
A config with ``workload.arrival: trace`` writes its own trace (``workload.trace_file``) in this format.
"""

from __future__ import annotations

from pathlib import Path

from vidur_specdec import outfolder
from vidur_specdec.config import PATH_KEYS
from vidur_specdec.validate.commands.options import add_config, add_overwrite, add_workload, load_cfg
from vidur_specdec.validate.commands.stages import generate

COMMAND = "validate generate"


def add_arguments(p) -> None:
    add_config(p)
    add_workload(p)
    p.add_argument("--out", required=True, help="trace file, .csv or .jsonl")
    add_overwrite(p)


def is_trace(path: Path) -> bool:
    """True when ``path`` starts as this command's traces do (the CSV header, or a JSONL line of its fields)."""
    from vidur_specdec.validate.workload import TRACE_COLUMNS

    try:
        with open(path, "rb") as f:
            first = f.read(outfolder.HEADER_BYTES).split(b"\n", 1)[0].strip()
    except OSError:
        return False
    if first == ",".join(TRACE_COLUMNS).encode():
        return True
    # a JSONL line as write_trace writes it (its ids may run past the bytes read: the fields, in order)
    keys = [f'"{c}": '.encode() for c in TRACE_COLUMNS]
    at = [first.find(k) for k in keys]
    return first.startswith(b"{" + keys[0]) and all(a > 0 for a in at[1:]) and at == sorted(at)


def inputs(args, cfg) -> list:
    """The files this command reads: the config and every file it names (trace, model, device, ...)."""
    out = [args.config] if isinstance(args.config, (str, Path)) else []
    for key in PATH_KEYS:
        node = cfg
        for part in key.split("."):
            node = getattr(node, part, None)
        if isinstance(node, str) and node:
            out.append(node)
    return out


def run(args) -> int:
    cfg = load_cfg(args)
    out = Path(args.out)
    if out.suffix not in (".csv", ".jsonl", ".json"):
        from vidur_specdec.validate.common import ValidateError

        raise ValidateError(f"--out: trace must end in .csv or .jsonl, got {out.name}")
    outfolder.check_result_file(out, "--out", COMMAND, bool(getattr(args, "overwrite", False)), inputs(args, cfg),
                                own=is_trace)
    df = generate(args, cfg, out)
    arrival = args.arrival or cfg.workload.arrival
    print(f"wrote {args.out}: {len(df)} requests over {df['arrival_offset_s'].max():.1f} s ({arrival} arrivals"
          + (f" from {cfg.workload.trace_file}" if arrival == "trace" else "") + ")")
    return 0
