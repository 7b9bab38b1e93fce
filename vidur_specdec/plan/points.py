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
from typing import Any, Callable, Dict, Optional, Sequence

from vidur_specdec.config import ConfigError, RunConfig
from vidur_specdec.sweep.definition import SweepRow, identity
from vidur_specdec.sweep.digest import canonical_json, code_digest, short_sha
from vidur_specdec.tune.points import JournalRunner, build_config, run_point

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


class Runner(JournalRunner):
    """Creates points (once each, in a fixed order) and runs them: from the journal when recorded."""

    label = "plan"

    def __init__(self, out_dir: Path, plan_hash: str, jobs: int, executor: str, address: Optional[str],
                 overwrite: bool, slo: Dict, log: Optional[Callable[[str], None]] = None) -> None:
        self.log = log or (lambda line: None)
        self.code = _plan_code()
        header = {"journal": 1, "sweep": "plan", "sweep_hash": plan_hash, "code": self.code, "rows": None}
        self._start(out_dir, ".plan.journal.jsonl", header, jobs, executor, address, overwrite,
                    functools.partial(run_plan_point, slo_ttft_ms=slo["ttft_ms"], slo_tpot_ms=slo["tpot_ms"]))
        self.t0 = time.perf_counter()

    def point(self, key: str, phase: str, base: RunConfig, concurrency: int, label: str) -> Point:
        """The point of ``base`` at ``concurrency`` (created, not run, on first use)."""
        ov = load_overrides(concurrency)
        try:
            cfg = build_config(base, ov)
        except ConfigError as e:
            raise ConfigError(f"plan point ({label}, concurrency {concurrency}): {e}") from None
        rid = short_sha(canonical_json(identity(cfg)))
        return self._intern(rid, lambda i: Point(i, key, phase, int(concurrency), ov, cfg, rid))

    def run(self, points: Sequence[Point], what: str = "") -> None:
        """Give every point its metrics: from the journal when recorded, else simulated now (all at once)."""
        todo = self._pending(points)
        if not todo:
            return
        self.log(f"plan: simulating {len(todo)} point{'s' if len(todo) > 1 else ''}{' (' + what + ')' if what else ''}"
                 f"; {self.simulated + self.reused} done so far, {time.perf_counter() - self.t0:.0f} s")
        self._simulate(todo, self._result)

    def _result(self, p: Point, row: SweepRow, result: Dict) -> None:
        self.simulated += 1
        if "refused" in result:  # not journalled: a rerun runs it again and gets the same line
            p.refused = result["refused"]
            return
        self._record(p, row, result)
