"""Running a sweep: check the output folder, prepare every row, run the pending ones, write the CSV."""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional, Union

from vidur_specdec.config import ConfigError
from vidur_specdec.sweep.definition import JOURNAL_FORMAT, Sweep, SweepRow, canonical_json
from vidur_specdec.sweep.digest import code_digest, profile_digests
from vidur_specdec.sweep.executors import run_local, run_ray, check_executor, default_jobs
from vidur_specdec.sweep.journal import Journal
from vidur_specdec.sweep.lock import FolderLock
from vidur_specdec.sweep.table import atomic_write, _csv_sweep_hash, csv_text
from vidur_specdec import outfolder
from vidur_specdec.outfolder import clear as clear_folder


def _spans(idx: List[int]) -> str:
    """Row indices as ``0-11, 14``."""
    out, start = [], None
    for i, x in enumerate(idx):
        if start is None:
            start = x
        if i + 1 == len(idx) or idx[i + 1] != x + 1:
            out.append(str(start) if start == x else f"{start}-{x}")
            start = None
    return ", ".join(out)


def provenance_groups(sweep: Sweep) -> List[Dict]:
    """Rows grouped by where their numbers come from (kernels, acceptance, pairing; :mod:`vidur_specdec.provenance`),
    in row order: what ``<name>.provenance.json`` holds and the command prints, one line a group."""
    from vidur_specdec import provenance

    groups: Dict[str, Dict] = {}
    for r in sweep.rows:
        facts = provenance.for_config(r.config)
        facts["line"] = provenance.line(facts, r.config.speculative)
        key = canonical_json(facts)
        groups.setdefault(key, {**facts, "rows": []})["rows"].append(r.index)
    return list(groups.values())


def provenance_text(sweep: Sweep, groups: List[Dict]) -> str:
    """``<name>.provenance.json``: one line, deterministic (the rows' configs alone decide it)."""
    body = {"provenance": "sweep", "sweep": sweep.name, "sweep_hash": sweep.sweep_hash,
            "groups": [{k: g[k] for k in sorted(g)} for g in groups]}
    return json.dumps(body, separators=(",", ":")) + "\n"


@dataclass
class SweepRun:
    csv_path: Path
    rows: int
    ran: int
    skipped: int
    wall_s: float
    row_wall_s: Dict[int, float]


def run_sweep(sweep: Sweep, out_dir: Union[str, Path], jobs: Optional[int] = None, executor: str = "local",
              address: Optional[str] = None, overwrite: bool = False, progress: bool = True,
              log: Optional[Callable[[str], None]] = None) -> SweepRun:
    """Run the rows not yet in the output folder's journal, then write ``<name>.csv`` atomically.

    Every check (the executor is reachable, the folder belongs to this sweep and
    no other run holds it, each row prepares) happens before anything in
    ``out_dir`` is written; ``log`` gets one line when the work starts.
    """
    out_dir = Path(out_dir)

    clear = outfolder.check(out_dir, "sweep", overwrite)  # the one output-folder rule; writes nothing
    if executor not in ("local", "ray"):
        raise ConfigError(f"--executor: must be one of local, ray, got {executor!r}")
    jobs = default_jobs() if jobs is None else jobs
    if jobs < 1:
        raise ConfigError(f"--jobs: must be >= 1, got {jobs}")
    check_executor(executor, address)
    lock = FolderLock(out_dir)
    if out_dir.is_dir():
        lock.acquire()  # before the journal is read: another run may be appending to it
    try:
        return _run_sweep(sweep, out_dir, jobs, executor, address, overwrite, progress, log, lock, clear)
    finally:
        lock.release()


def _run_sweep(sweep: Sweep, out_dir: Path, jobs: int, executor: str, address: Optional[str], overwrite: bool,
               progress: bool, log: Optional[Callable[[str], None]], lock: FolderLock,
               clear: bool = False) -> SweepRun:
    csv_path = out_dir / sweep.csv_name
    header = {"journal": JOURNAL_FORMAT, "sweep": sweep.name, "sweep_hash": sweep.sweep_hash,
              "code": code_digest(), "rows": len(sweep.rows)}
    journal = Journal(out_dir / sweep.journal_name, header)

    # refuse, before touching anything, an output folder that belongs to another sweep
    if csv_path.exists() and not overwrite:
        h = _csv_sweep_hash(csv_path)
        if h != sweep.sweep_hash:
            what = f"sweep hash {h}" if h else "not a sweep CSV"
            raise ConfigError(f"--output-dir: {csv_path} belongs to a different sweep ({what}, this sweep "
                              f"{sweep.sweep_hash}); use another --output-dir, or --overwrite to replace it")
    journal.read(overwrite, out_dir)
    for i, obj in journal.done.items():
        if i >= len(sweep.rows) or obj.get("row_id") != sweep.rows[i].row_id:
            raise ConfigError(f"--output-dir: {journal.path} does not match this sweep at row {i}; "
                              "rerun with --overwrite to start over")
    pending = [r for r in sweep.rows if r.index not in journal.done]

    # every pending row must prepare (profiles found, memory fits) before any work starts;
    # this also fits the predictors once here, which forked workers inherit
    warm: List[Dict] = []
    seen_inputs = set()
    for r in pending:
        key = canonical_json([r.config.profiles, r.config.device, r.config.model, r.config.speculative.method,
                      r.config.speculative.draft_model, r.config.speculative.draft_profiles])
        try:
            # lazy: optional dependency (ImportError handled)
            from vidur_specdec.engine.simulation import prepare

            prepare(r.config)
        except ConfigError as e:
            raise ConfigError(f"sweep row {r.index} ({r.describe()}): {e}") from None
        if key not in seen_inputs:
            seen_inputs.add(key)
            warm.append(r.config_dict)

    out_dir.mkdir(parents=True, exist_ok=True)
    if not lock.held:
        lock.acquire()  # a new folder: taken before the first write
    if clear:  # --overwrite of another command's results: none of them stays beside this sweep's

        clear_folder(out_dir)
    if overwrite or not journal.path.exists() or journal.path.stat().st_size == 0:
        journal._append(header, "wb")  # a new journal (read() empties one without a valid header)

    groups = provenance_groups(sweep)
    if log is not None:
        where = f"{jobs} {executor} worker{'s' if jobs > 1 else ''}" if executor == "local" else \
            f"Ray ({address or 'local'})"
        log(f"sweep {sweep.name}: {len(sweep.rows)} rows, {len(pending)} to run"
            f"{f' ({len(journal.done)} already done)' if journal.done else ''} on {where} -> {csv_path}")
        for g in groups:  # where the numbers come from, and a head on another target than it was trained for
            log(f"sweep rows {_spans(g['rows'])}: {g['line']}")
            if g.get("proposer_pairing_warning"):
                log(f"{g['proposer_pairing_warning']} (rows {_spans(g['rows'])})")
    bar = None
    if progress and pending:
        # lazy: start-up cost of tqdm
        from tqdm import tqdm

        tqdm.monitor_interval = 0  # no monitor thread (the local pool forks)
        bar = tqdm(total=len(sweep.rows), initial=len(sweep.rows) - len(pending), desc=sweep.name,
                   unit="row", file=sys.stderr, dynamic_ncols=True)
    walls: Dict[int, float] = {}
    my_code = header["code"]

    def on_done(row: SweepRow, result: Dict) -> None:
        if result.get("code") != my_code:
            raise ConfigError(f"--executor {executor}: a worker runs different simulator code "
                              f"(code {result.get('code')}, here {my_code}); install the same version everywhere")
        if result.get("profiles") != profile_digests(row.config):
            raise ConfigError(f"--executor {executor}: a worker read different profile files for sweep row "
                              f"{row.index}; use the same profiles everywhere (profiles: shipped or a shared path)")
        journal.add(row, result)
        walls[row.index] = result["wall_s"]
        if bar is not None:
            bar.update(1)

    t0 = time.perf_counter()
    try:
        if executor == "ray":
            run_ray(pending, jobs, address, on_done)
        else:
            run_local(pending, jobs, warm, on_done)
    finally:
        if bar is not None:
            bar.close()
    wall = time.perf_counter() - t0
    text = csv_text(sweep, {i: obj["metrics"] for i, obj in journal.done.items()})
    atomic_write(out_dir / f"{sweep.name}.provenance.json", provenance_text(sweep, groups))
    atomic_write(csv_path, text)
    return SweepRun(csv_path, len(sweep.rows), len(pending), len(sweep.rows) - len(pending), wall, walls)
