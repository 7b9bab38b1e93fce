"""Simulated points of a tune: the load axis, each point's config, its metrics, and the journal-backed runner.

A *point* is the base config at one load with one speculation setting: no
speculation (k = 0), a static k, or a per-batch-size schedule. Points run on
the sweep package's executors (local pool or Ray) and are recorded in its
journal (``DIR/.tune.journal.jsonl``), so a rerun of the same tune reuses them
and an interrupted one resumes. Results never depend on ``--jobs`` or the
executor: a point's numbers come from its config alone.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from vidur_specdec.config import ConfigError, RunConfig, SpeculativeConfig, WorkloadConfig, unused
from vidur_specdec.config.overlay import overlay
from vidur_specdec.engine.resolve import from_dict
from vidur_specdec.sweep.definition import SweepRow, identity
from vidur_specdec.sweep.digest import canonical_json, short_sha, code_digest, profile_digests
from vidur_specdec.sweep.executors import run_local, run_ray
from vidur_specdec.sweep.journal import Journal
from vidur_specdec.sweep.worker import METRIC_COLUMNS, metrics_problem, row_metrics
from vidur_specdec.tune.acceptance_carry import carried
from vidur_specdec.tune.loads import overloaded
from vidur_specdec import __version__
from vidur_specdec.tune.loads import workload_overrides
from vidur_specdec.tune.pools import k0_overrides

TUNE_FORMAT = 1
BURST = "start burst"  # options["warmup"]: each closed-loop point leaves out its first C requests (tune.loads)
# Metrics a tune records beyond a sweep row's: requests per second meeting both SLOs, k changes, the
# overload flag, the requests measured, and the median and largest batch size of a step (requests scheduled
# in it, prefills included: what vLLM looks a schedule's k up by, ``len(num_scheduled_tokens)``).
EXTRA_METRICS = ["goodput_req_s", "k_flips", "overloaded", "measured_requests", "batch_size_p50", "batch_size_max"]
TUNE_METRICS = METRIC_COLUMNS + EXTRA_METRICS
PERCENTILES = (50, 90, 99)


# --------------------------------------------------------------------------- the load axis


@dataclass(frozen=True)
class LoadAxis:
    """How a load value becomes config overrides; ``integer`` axes bisect on integers."""

    name: str                 # summary.json load_unit
    key: str                  # the config key that carries the load
    integer: bool
    default_start: float      # first load tried when searching capacity

    def available(self) -> bool:
        return self.key.split(".")[-1] in {f.name for f in dataclasses.fields(WorkloadConfig)}

    def overrides(self, load: float) -> Dict[str, Any]:
        if self.name == "concurrency":
            return {"workload.arrival": "closed", "workload.concurrency": int(load)}
        return {self.key: float(load)}

    def norm(self, load: float) -> float:
        """A load as the search uses it: 4 significant digits (qps) or a whole number >= 1 (concurrency)."""
        if self.integer:
            return float(max(1, int(round(load))))
        return float(f"{load:.4g}")

    def mid(self, lo: float, hi: float) -> Optional[float]:
        """The geometric midpoint strictly inside (lo, hi), or None when nothing is left between them."""
        m = self.norm(math.sqrt(lo * hi))
        return m if lo < m < hi else None

    def converged(self, lo: float, hi: float, tol: float) -> bool:
        return self.mid(lo, hi) is None or hi <= lo * (1.0 + tol)

    def fmt(self, load: float) -> str:
        return str(int(load)) if self.integer else f"{load:g}"


AXES = {
    "qps": LoadAxis("qps", "workload.qps", False, 1.0),
    "concurrency": LoadAxis("concurrency", "workload.concurrency", True, 4.0),
}


def get_axis(name: str) -> LoadAxis:
    if name not in AXES:
        raise ConfigError(f"--load-axis: must be one of {', '.join(AXES)}, got {name!r}")
    axis = AXES[name]
    if not axis.available():
        raise ConfigError(f"--load-axis {name}: this build has no {axis.key} (closed-loop load, "
                          "workload.arrival: closed); use --load-axis qps")
    return axis


# --------------------------------------------------------------------------- one point


@dataclass(frozen=True)
class Setting:
    """Speculation of a point: ``k`` static guesses (0 = none), or a schedule ``((lo, hi, k), ...)``.

    ``drafter`` (with ``spec``, its ``speculative.*`` overrides: method, weights, acceptance) names another
    drafter than the config's, for the drafter comparison (:mod:`.drafters`).
    """

    k: int
    schedule: Optional[Tuple[Tuple[int, int, int], ...]] = None
    drafter: Optional[str] = None
    spec: Tuple[Tuple[str, Any], ...] = ()

    @property
    def label(self) -> str:
        if self.drafter is not None:
            return f"{self.drafter} k={self.k}"
        return "schedule" if self.schedule is not None else f"k={self.k}"


def truncated_acceptance(spec: SpeculativeConfig, k: int) -> Dict[str, Any]:
    """Acceptance keys for ``k`` guesses from an input given for a larger k (rule: :mod:`.acceptance_carry`)."""
    return carried(spec, k)


def setting_overrides(base: RunConfig, s: Setting) -> Dict[str, Any]:
    """The dotted-key overrides that turn the base config's speculation into ``s``."""
    if s.k == 0 and s.schedule is None:
        return {"speculative.method": "none", "speculative.num_speculative_tokens": 0, **k0_overrides(base)}
    if s.drafter is not None:
        ov = {"speculative.num_speculative_tokens": s.k, "speculative.num_speculative_tokens_per_batch_size": None}
        ov.update({key: list(v) if isinstance(v, tuple) else v for key, v in s.spec})
        return ov
    ov: Dict[str, Any] = {"speculative.num_speculative_tokens": s.k,
                          "speculative.num_speculative_tokens_per_batch_size":
                              [list(r) for r in s.schedule] if s.schedule is not None else None}
    ov.update(truncated_acceptance(base.speculative, s.k))
    return ov


def build_config(base: RunConfig, overrides: Dict[str, Any]) -> RunConfig:
    """A point's config: the base config with the point's overrides, resolved by the rule every command uses
    (:func:`vidur_specdec.config.overlay.overlay`: an override replaces what it makes meaningless)."""
    d = overlay(base.to_input(), list(overrides.items()))
    # the base was checked when loaded and is a template here; a point's own keys must change its run
    kept = [k for k in unused.leaves(d) if not any(unused.overlaps(k, o) for o in overrides)]
    cfg = from_dict(d, shared=kept)
    unused.check_given([k for k, v in overrides.items() if v is not None], cfg)  # null unsets a key
    if not cfg.speculative.enabled:
        cfg.speculative = SpeculativeConfig(method="none", num_speculative_tokens=0)
    return cfg


def run_point(config_dict: Dict, slo_ttft_ms: float, slo_tpot_ms: float) -> Dict:
    """Run one point (in a worker): a sweep row's metrics plus goodput (requests/s meeting both SLOs).

    A request meets the SLOs when its TTFT <= ``slo_ttft_ms`` and its TPOT <=
    ``slo_tpot_ms`` (a one-token request has no TPOT and meets that part).
    """
    # lazy: start-up cost of scipy, sklearn, vidur
    from vidur_specdec.engine.simulation import simulate

    t0 = time.perf_counter()
    result = simulate(from_dict(config_dict, shared=[unused.CHECKED]))  # a point build_config checked
    wall = time.perf_counter() - t0
    m = row_metrics(result)

    warm = result.config.workload.warmup_requests
    req = result.requests.sort_values(["arrived_at_s", "request_id"]).iloc[warm:]
    ok = (req["ttft_ms"] <= slo_ttft_ms) & ~(req["tpot_ms"] > slo_tpot_ms)
    span = result.summary["makespan_s"]
    m["goodput_req_s"] = float(ok.sum() / span) if span > 0 else None
    m["k_flips"] = int(result.summary["k_flips"])
    m["overloaded"] = int(overloaded(result.requests, warm))
    m["measured_requests"] = int(len(req))
    steps = result.steps
    if "pool" in steps:  # prefill and decode pools: the schedule's batch is a decode instance's
        steps = steps[steps["pool"] == "decode"]
    m["batch_size_p50"] = float(steps["num_reqs"].median()) if len(steps) else None
    m["batch_size_max"] = int(steps["num_reqs"].max()) if len(steps) else None
    return {"metrics": m, "wall_s": wall, "code": code_digest(),
            "profiles": profile_digests(result.config, fresh=True)}


def tune_metrics_problem(metrics) -> Optional[str]:
    """A journal line's metrics: a sweep row's, plus :data:`EXTRA_METRICS`."""
    if not isinstance(metrics, dict):
        return f"metrics is {type(metrics).__name__}, not a mapping"
    missing = [c for c in EXTRA_METRICS if c not in metrics]
    if missing:
        return f"metric {missing[0]} is missing"
    extra = {c: metrics[c] for c in EXTRA_METRICS}
    why = metrics_problem({k: v for k, v in metrics.items() if k not in extra})
    if why is not None:
        return why
    for c, v in extra.items():
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v)):
            return f"metric {c} is {v!r}, not a finite number"
    return None


@dataclass
class Point:
    index: int
    phase: str                 # capacity, grid, crossover, check
    load: float
    setting: Setting
    overrides: Dict[str, Any]
    config: RunConfig
    row_id: str
    metrics: Optional[Dict] = None

    @property
    def done(self) -> bool:
        return self.metrics is not None


# --------------------------------------------------------------------------- the runner


def _tune_code() -> str:
    """The simulator's code digest plus this module's (it computes goodput)."""
    return short_sha(code_digest() + Path(__file__).read_text())


class JournalRunner:
    """What ``tune`` and ``plan`` share: points created once each (by their config's identity, in a fixed order),
    read back from the command's journal when recorded, else simulated on the sweep executors (a local process
    pool or Ray), each result checked to come from this simulator code. ``label`` names the command in errors;
    a point has ``index``, ``overrides``, ``config``, ``row_id``, ``metrics`` and ``done``."""

    label = "tune"

    def _start(self, out_dir: Path, journal_name: str, header: Dict, jobs: int, executor: str,
               address: Optional[str], overwrite: bool, fn: Callable) -> None:
        self.out_dir = Path(out_dir)
        self.jobs, self.executor, self.address, self.overwrite = jobs, executor, address, overwrite
        self.header = header
        self.journal = Journal(self.out_dir / journal_name, header, check=tune_metrics_problem)
        self.points: List = []
        self._by_id: Dict[str, Any] = {}
        self._fn = fn
        self.simulated = 0  # points simulated by this process
        self.reused = 0  # points read back from the journal

    def open(self) -> None:
        """Read the journal (after the folder lock is held); start a new one when absent or overwritten."""
        self.journal.read(self.overwrite, self.out_dir)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        if self.overwrite or not self.journal.path.exists() or self.journal.path.stat().st_size == 0:
            self.journal._append(self.header, "wb")
            self.journal.done.clear()

    def _intern(self, row_id: str, make: Callable[[int], Any]):
        """The point whose config has identity ``row_id``; ``make(index)`` creates it on first use."""
        p = self._by_id.get(row_id)
        if p is None:
            p = make(len(self.points))
            self.points.append(p)
            self._by_id[row_id] = p
        return p

    def _pending(self, points: Sequence) -> List:
        """The points still to simulate, in order; those the journal holds get their metrics from it."""
        todo: List = []
        for p in points:
            if p.done or p in todo:
                continue
            done = self.journal.done.get(p.index)
            if done is not None:
                if done.get("row_id") != p.row_id:
                    raise ConfigError(f"--output-dir: {self.journal.path} does not match this {self.label} at point "
                                      f"{p.index}; rerun with --overwrite to start over")
                p.metrics = done["metrics"]
                self.reused += 1
            else:
                todo.append(p)
        return todo

    def _simulate(self, todo: Sequence, on_result: Callable[[Any, SweepRow, Dict], None],
                  ahead: Sequence[SweepRow] = (), on_ahead: Optional[Callable[[SweepRow, Dict], None]] = None) -> None:
        """Simulate ``todo`` on the executor; ``on_result(point, row, result)`` for each, in the order they end;
        ``ahead``: rows of no point yet (negative indices) simulated beside them on workers, ``on_ahead(row,
        result)`` each, while the local executor runs ``todo`` in this process."""
        rows = [SweepRow(p.index, p.overrides, p.config, p.row_id, "") for p in todo] + list(ahead)
        by_index = {p.index: p for p in todo}

        def on_done(row: SweepRow, result: Dict) -> None:
            if result.get("code") != code_digest():
                raise ConfigError(f"--executor {self.executor}: a worker runs different simulator code "
                                  f"(code {result.get('code')}, here {code_digest()}); install the same version "
                                  "everywhere")
            if row.index < 0:
                on_ahead(row, result)
                return
            on_result(by_index[row.index], row, result)

        if self.executor == "ray":
            run_ray(rows, self.jobs, self.address, on_done, fn=self._fn)
        else:
            run_local(rows, self.jobs, [rows[0].config_dict], on_done, fn=self._fn,
                      inline=len(todo) if ahead else 0)

    def _record(self, p, row: SweepRow, result: Dict) -> None:
        """A simulated point's result: journalled, its metrics kept."""
        self.journal.add(row, result)
        p.metrics = result["metrics"]


class Evaluator(JournalRunner):
    """Runs points once each (journal-backed), in parallel, in a deterministic order."""

    def __init__(self, base: RunConfig, axis: LoadAxis, out_dir: Path, slo: Dict[str, float], options: Dict,
                 jobs: int, executor: str, address: Optional[str], overwrite: bool,
                 log: Optional[Callable[[str], None]] = None) -> None:
        self.base, self.axis, self.slo = base, axis, slo
        self.tune_hash = short_sha(canonical_json({"format": TUNE_FORMAT, "base": identity(base), "axis": axis.name,
                                      "slo": slo, "options": options, "version": __version__,
                                      "profiles": profile_digests(base)}))
        self.code = _tune_code()
        header = {"journal": 1, "sweep": "tune", "sweep_hash": self.tune_hash, "code": self.code, "rows": None}
        self._start(out_dir, ".tune.journal.jsonl", header, jobs, executor, address, overwrite,
                    functools.partial(run_point, slo_ttft_ms=slo["ttft_ms"], slo_tpot_ms=slo["tpot_ms"]))
        self.log = log
        self.burst = options.get("warmup") == BURST  # closed loop: leave out each point's start burst
        self._ahead: Dict[str, Dict] = {}  # row id -> result of a point simulated ahead of its asking (:meth:`run`)

    def _config(self, load: float, setting: Setting) -> Tuple[Dict[str, Any], RunConfig, str]:
        """(overrides, config, its identity) of the point (load, setting)."""
        ov = workload_overrides(self.base, self.axis, load, self.burst)
        ov.update(setting_overrides(self.base, setting))
        try:
            cfg = build_config(self.base, ov)
        except ConfigError as e:
            raise ConfigError(f"tune point ({self.axis.name} {self.axis.fmt(load)}, {setting.label}): {e}") from None
        return ov, cfg, short_sha(canonical_json(identity(cfg)))

    def point(self, phase: str, load: float, setting: Setting) -> Point:
        """The point for (load, setting), created (not run) on first use; the first phase names it."""
        ov, cfg, rid = self._config(load, setting)
        return self._intern(rid, lambda i: Point(i, phase, load, setting, ov, cfg, rid))

    def run(self, points: Sequence[Point], ahead: Sequence[Tuple[float, Setting]] = ()) -> None:
        """Give every point its metrics: from the journal when recorded, else simulated now.

        ``ahead``: (load, setting) pairs a search may ask for next (a bisection's next midpoint). When this call
        simulates fewer points than there are ``--jobs`` local workers, they are simulated on the idle workers
        (one after another when there are more of them) while this call's points run in this process, and this
        call waits for them too, so a search passes only what it expects to end by then; their results are kept
        aside: a later call that asks for one takes it from there (journalled then, under the index it gets then);
        one never asked for, or one that failed, leaves no trace. Points are created and journalled in the same order
        either way, so every output is the same whatever ``--jobs``."""
        todo = [p for p in self._pending(points) if not self._from_ahead(p)]
        if not todo:
            return
        self.simulated += len(todo)
        rows = []
        for load, setting in (ahead if self.executor == "local" and len(todo) < self.jobs else ()):
            try:
                ov, cfg, rid = self._config(load, setting)
            except ConfigError:  # asked for, it fails then, as it would have
                continue
            if rid in self._by_id or rid in self._ahead or any(r.row_id == rid for r in rows):
                continue
            rows.append(SweepRow(-1 - len(rows), ov, cfg, rid, ""))
        self._simulate(todo, self._record, rows, lambda row, result: self._ahead.__setitem__(row.row_id, result))

    def _from_ahead(self, p: Point) -> bool:
        """Whether ``p`` was simulated ahead of its asking; if so it takes that result (and is journalled now)."""
        result = self._ahead.pop(p.row_id, None)
        if result is None:
            return False
        self._record(p, SweepRow(p.index, p.overrides, p.config, p.row_id, ""), result)
        self.simulated += 1
        return True

    def metrics(self, phase: str, load: float, setting: Setting) -> Dict:
        p = self.point(phase, load, setting)
        self.run([p])
        return p.metrics
