"""Per-run results behind a doc figure that needs many simulations, recorded beside the sweep results.

A script with many runs (scripts/dp_vs_tp.py, scripts/pp_vs_tp.py) records each run's
numbers in ``sweeps/results/figures/<name>.csv`` and writes its doc block from that
file, so a test can (a) re-render the block from the CSV, (b) check every recorded
run against the current configs, profiles and package version, and (c) re-run one cheap run and compare
its line byte for byte, without running them all. One line per run:

* ``run``: the script's label of the run (unique in the file);
* ``run_id``: the sweep's row identity of the run's resolved config
  (:func:`vidur_specdec.sweep.definition.identity`, the same hash as a sweep CSV's ``row_id``);
* ``version``: the package version when it ran (``vidur_specdec.__version__``, as a sweep's hash holds it;
  a change of code that moves numbers is caught by the one run the test re-runs, as for the sweeps);
* ``profiles``: a hash of the profile files the run read (:func:`vidur_specdec.sweep.digest.profile_digests`);
* the script's metrics, each written ``%.6f`` (an empty cell for None).
"""

import csv
import io
import sys
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scripts import docblock  # noqa: E402
from scripts.docblock import REPO  # noqa: E402

FIGURES = REPO / "sweeps" / "results" / "figures"
STAMP = ("run", "run_id", "version", "profiles")

Run = Tuple[str, str, List[str]]  # (label, config path, overrides)


def stamp(config: str, overrides: Sequence[str]) -> Dict[str, str]:
    """``run_id``, ``version`` and ``profiles`` of a run of ``config`` with ``overrides``, as they are now."""
    from vidur_specdec.engine.resolve import load
    from vidur_specdec.sweep.definition import _normalise, identity
    from vidur_specdec import __version__
    from vidur_specdec.sweep.digest import canonical_json, profile_digests, short_sha

    cfg = _normalise(load(config, list(overrides)))
    return {"run_id": short_sha(canonical_json(identity(cfg))), "version": __version__,
            "profiles": short_sha(canonical_json(profile_digests(cfg)))}


def _cell(v: Optional[float]) -> str:
    return "" if v is None else f"{v:.6f}"


def line(run: Run, metrics: Dict[str, Optional[float]], columns: Sequence[str]) -> str:
    """The CSV line (no newline) of ``run`` with its ``metrics`` (``columns`` in order)."""
    label, config, overrides = run
    s = stamp(config, overrides)
    buf = io.StringIO()
    csv.writer(buf, lineterminator="").writerow([label, s["run_id"], s["version"], s["profiles"]] +
                                                [_cell(metrics[c]) for c in columns])
    return buf.getvalue()


def record(name: str, runs: Sequence[Run], measure: Callable[[str, List[str]], Dict[str, Optional[float]]],
           columns: Sequence[str]) -> Path:
    """Run every run (``measure(config, overrides)`` gives its metrics) and write ``figures/<name>.csv``."""
    lines = [",".join(STAMP + tuple(columns))]
    for i, run in enumerate(runs):
        print(f"[{i + 1}/{len(runs)}] {run[0]}", file=sys.stderr)
        lines.append(line(run, measure(run[1], run[2]), columns))
    FIGURES.mkdir(parents=True, exist_ok=True)
    path = FIGURES / f"{name}.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


def read(name: str) -> Dict[str, Dict[str, Optional[float]]]:
    """``{run label: {metric: value or None}}`` of ``figures/<name>.csv``."""
    with open(FIGURES / f"{name}.csv", newline="") as f:
        return {r["run"]: {k: (float(v) if v != "" else None) for k, v in r.items() if k not in STAMP}
                for r in csv.DictReader(f)}


def recorded_lines(name: str) -> Dict[str, str]:
    """``{run label: its CSV line}`` of ``figures/<name>.csv``."""
    lines = (FIGURES / f"{name}.csv").read_text().splitlines()[1:]
    return {next(csv.reader([ln]))[0]: ln for ln in lines}


def stale(name: str, runs: Sequence[Run]) -> List[str]:
    """Why ``figures/<name>.csv`` is not the record of ``runs`` under the current configs, profiles and package version (empty: it is)."""
    with open(FIGURES / f"{name}.csv", newline="") as f:
        rows = {r["run"]: r for r in csv.DictReader(f)}
    out = []
    if list(rows) != [r[0] for r in runs]:
        out.append(f"runs {list(rows)} recorded, the script has {[r[0] for r in runs]}")
    for run in runs:
        if run[0] in rows:
            now = stamp(run[1], run[2])
            out += [f"{run[0]}: {k} {rows[run[0]][k]} recorded, {now[k]} now" for k in now if rows[run[0]][k] != now[k]]
    return out


def script_main(name: str, runs: Callable[[], Sequence[Run]], measure, columns: Sequence[str], doc: Path,
                text: Callable[[], str]) -> int:
    """A recorded-figures script's command line: ``--record`` runs ``runs()`` and records them in
    ``figures/<name>.csv``; the block is always rendered from that file (``text()``), printed, and with
    ``--write`` put in ``doc`` (:func:`scripts.docblock.main`)."""
    if "--record" in sys.argv:
        record(name, runs(), measure, columns)
    return docblock.main(doc, text())
