"""Simulated points of a plan and the journal-backed runner that runs them (docs/plan.md, "Scale").

A *point* is one candidate's config at one closed-loop concurrency (``vllm
bench serve --max-concurrency``: the whole deployment, all its replicas or both
pools, simulated together). Its requests: the first wave (``concurrency``
requests, all arriving at once) is warm-up and left out of the metrics, then
:func:`measured_requests` more. Each point runs tune's worker
(:func:`vidur_specdec.tune.points.run_point`: a sweep row's metrics plus
goodput, overload and the median batch) on the sweep package's executors (a
local process pool or Ray) and is recorded in the sweep journal
``DIR/.plan.journal.jsonl``; a rerun of the same plan reuses every recorded
point and an interrupted one resumes. A point's numbers depend on its config
alone, never on ``--jobs`` or the executor.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence

from vidur_specdec.config import ConfigError, RunConfig
from vidur_specdec.sweep.definition import SweepRow, identity
from vidur_specdec.sweep.digest import canonical_json, code_digest, short_sha
from vidur_specdec.sweep.executors import run_local, run_ray
from vidur_specdec.sweep.journal import Journal
from vidur_specdec.tune.points import build_config, run_point, tune_metrics_problem

PLAN_FORMAT = 1
MIN_MEASURED = 16  # requests measured at least per point (a p90 over fewer is one of its last two)
MEASURED_PER_CONCURRENCY = 1  # measured requests per request in flight: one more wave after the warm-up one


def measured_requests(concurrency: int) -> int:
    """Requests measured at a closed-loop concurrency: one wave, at least :data:`MIN_MEASURED`."""
    return max(MIN_MEASURED, MEASURED_PER_CONCURRENCY * int(concurrency))


def load_overrides(concurrency: int) -> Dict[str, Any]:
    """A point's workload: closed loop at ``concurrency``, the first wave warm-up."""
    c = int(concurrency)
    return {"workload.arrival": "closed", "workload.concurrency": c, "workload.warmup_requests": c,
            "workload.num_requests": c + measured_requests(c)}


def run_plan_point(config_dict: Dict, slo_ttft_ms: float, slo_tpot_ms: float) -> Dict:
    """tune's worker on one point; a load the simulator refuses while running it (its ConfigError: requests
    it cannot schedule) comes back as ``refused`` with the error's line instead of metrics."""
    try:
        return run_point(config_dict, slo_ttft_ms, slo_tpot_ms)
    except ConfigError as e:
        return {"refused": str(e).splitlines()[0], "code": code_digest()}


@dataclass
class Point:
    """One simulated point: ``key`` names its candidate variant; ``phase`` why it was run; ``refused``: the
    simulator's line when it refused to run this load (no metrics; the point misses the SLOs)."""

    index: int
    key: str
    phase: str  # search | curve | refine | check
    concurrency: int
    overrides: Dict[str, Any]
    config: RunConfig
    row_id: str
    metrics: Optional[Dict] = None
    refused: Optional[str] = None

    @property
    def done(self) -> bool:
        return self.metrics is not None or self.refused is not None


def _plan_code() -> str:
    """The simulator's code digest plus the worker's (tune.points computes goodput) and this module's."""
    from vidur_specdec.tune import points as tune_points

    return short_sha(code_digest() + Path(tune_points.__file__).read_text() + Path(__file__).read_text())


class Runner:
    """Creates points (once each, in a fixed order) and runs them: from the journal when recorded."""

    def __init__(self, out_dir: Path, plan_hash: str, jobs: int, executor: str, address: Optional[str],
                 overwrite: bool, slo: Dict, log: Optional[Callable[[str], None]] = None) -> None:
        self.out_dir = Path(out_dir)
        self.jobs, self.executor, self.address, self.overwrite = jobs, executor, address, overwrite
        self.log = log or (lambda line: None)
        self.code = _plan_code()
        self.header = {"journal": 1, "sweep": "plan", "sweep_hash": plan_hash, "code": self.code, "rows": None}
        self.journal = Journal(self.out_dir / ".plan.journal.jsonl", self.header, check=tune_metrics_problem)
        self.points: List[Point] = []
        self._by_id: Dict[str, Point] = {}
        self._fn = functools.partial(run_plan_point, slo_ttft_ms=slo["ttft_ms"], slo_tpot_ms=slo["tpot_ms"])
        self.simulated = 0
        self.reused = 0
        self.t0 = time.perf_counter()

    def open(self) -> None:
        """Read the journal (the folder lock held); start a new one when absent or overwritten."""
        self.journal.read(self.overwrite, self.out_dir)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        if self.overwrite or not self.journal.path.exists() or self.journal.path.stat().st_size == 0:
            self.journal._append(self.header, "wb")
            self.journal.done.clear()

    def point(self, key: str, phase: str, base: RunConfig, concurrency: int, label: str) -> Point:
        """The point of ``base`` at ``concurrency`` (created, not run, on first use)."""
        ov = load_overrides(concurrency)
        try:
            cfg = build_config(base, ov)
        except ConfigError as e:
            raise ConfigError(f"plan point ({label}, concurrency {concurrency}): {e}") from None
        rid = short_sha(canonical_json(identity(cfg)))
        p = self._by_id.get(rid)
        if p is None:
            p = Point(len(self.points), key, phase, int(concurrency), ov, cfg, rid)
            self.points.append(p)
            self._by_id[rid] = p
        return p

    def run(self, points: Sequence[Point], what: str = "") -> None:
        """Give every point its metrics: from the journal when recorded, else simulated now (all at once)."""
        todo: List[Point] = []
        for p in points:
            if p.done or p in todo:
                continue
            done = self.journal.done.get(p.index)
            if done is not None:
                if done.get("row_id") != p.row_id:
                    raise ConfigError(f"--output-dir: {self.journal.path} does not match this plan at point "
                                      f"{p.index}; rerun with --overwrite to start over")
                p.metrics = done["metrics"]
                self.reused += 1
            else:
                todo.append(p)
        if not todo:
            return
        rows = [SweepRow(p.index, p.overrides, p.config, p.row_id, "") for p in todo]
        by_index = {p.index: p for p in todo}

        def on_done(row: SweepRow, result: Dict) -> None:
            if result.get("code") != code_digest():
                raise ConfigError(f"--executor {self.executor}: a worker runs different simulator code "
                                  f"(code {result.get('code')}, here {code_digest()}); install the same version "
                                  "everywhere")
            self.simulated += 1
            if "refused" in result:  # not journalled: a rerun runs it again and gets the same line
                by_index[row.index].refused = result["refused"]
                return
            self.journal.add(row, result)
            by_index[row.index].metrics = result["metrics"]

        self.log(f"plan: simulating {len(rows)} point{'s' if len(rows) > 1 else ''}{' (' + what + ')' if what else ''}"
                 f"; {self.simulated + self.reused} done so far, {time.perf_counter() - self.t0:.0f} s")
        if self.executor == "ray":
            run_ray(rows, self.jobs, self.address, on_done, fn=self._fn)
        else:
            run_local(rows, self.jobs, [rows[0].config_dict], on_done, fn=self._fn)
