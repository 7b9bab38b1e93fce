"""The engine core against Vidur's own plain Sarathi, per simulated step, in one process.

Both sides run the same workload (``configs/default.yaml``, ``--requests`` each) with the
same step pricer (warm in-process caches), interleaved ``--repeat`` times; each side's
best CPU time (``time.process_time``: what the process itself spent, so another job on
the machine costs less of the figure than it would of wall time) is divided by the steps
it simulated:

* ``core, same work`` — ``simulate()`` on the engine core with ``method: none``: the very
  steps Vidur's plain Sarathi runs (tests/test_engine_core.py holds their times equal);
* ``core, speculative`` — ``simulate()`` on the default config (n-gram, k = 4, α = 0.7);
* ``vidur plain sarathi`` — :func:`vidur_specdec.run_vidur_sarathi`: Vidur's own
  ``SarathiReplicaScheduler``, ``Request`` and ``MetricsStore`` on Vidur's event loop.

Reported per side: µs per step of the event loop alone (the core's ``Loop.run``,
Vidur's ``Simulator.run``), µs per step of the whole call (preparing, the loop, the
tables and summary), and events per step (heap events handled, Vidur's event ids
used). The ratio is Vidur's loop µs/step over the core's, same work.

    python benchmarks/bench_core.py [--requests 300 1000] [--repeat 3] [--set KEY=VALUE ...]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


class _Timed:
    """Wraps a loop's ``run`` to time it (CPU seconds) and count what it handled."""

    def __init__(self, owner, attr: str, count) -> None:
        self.owner, self.attr, self.count = owner, attr, count
        self.orig = getattr(owner, attr)
        self.last = (0.0, 0)

    def __enter__(self):
        timed = self

        def run(obj, *a, **k):
            t = time.process_time()
            out = timed.orig(obj, *a, **k)
            timed.last = (time.process_time() - t, timed.count(obj))
            return out

        setattr(self.owner, self.attr, run)
        return self

    def __exit__(self, *exc):
        setattr(self.owner, self.attr, self.orig)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", default=str(REPO / "configs/default.yaml"))
    ap.add_argument("--requests", type=int, nargs="+", default=[300, 1000])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--set", dest="overrides", action="append", default=[])
    args = ap.parse_args()

    from vidur.events.base_event import BaseEvent
    from vidur.simulator import Simulator

    from vidur_specdec import run_vidur_sarathi, simulate
    from vidur_specdec.engine.core.loop import Loop

    def core_events(loop):
        return loop.seq  # events pushed onto the heap (each handled once)

    def vidur_events(_sim):
        return BaseEvent._id  # Vidur's event ids used by the run (reset at its start)

    for n in args.requests:
        over = args.overrides + [f"workload.num_requests={n}"]
        sides = {
            "core, same work": lambda: simulate(args.config, over + ["speculative.method=none"]),
            "core, speculative": lambda: simulate(args.config, over),
            "vidur plain sarathi": lambda: run_vidur_sarathi(args.config, over),
        }
        steps = {"core, same work": len(simulate(args.config, over + ["speculative.method=none"]).steps),
                 "core, speculative": len(simulate(args.config, over).steps)}
        steps["vidur plain sarathi"] = steps["core, same work"]  # the same steps (tests/test_engine_core.py)
        run_vidur_sarathi(args.config, over)  # warm: Vidur's imports and registries
        best = {name: (float("inf"), float("inf"), 0) for name in sides}
        for _ in range(args.repeat):  # interleaved, so a drift in machine load hits every side alike
            for name, fn in sides.items():
                owner, count = (Simulator, vidur_events) if name.startswith("vidur") else (Loop, core_events)
                with _Timed(owner, "run", count) as timed:
                    t = time.process_time()
                    fn()
                    whole = time.process_time() - t
                loop_s, events = timed.last
                b = best[name]
                best[name] = (min(b[0], loop_s), min(b[1], whole), events)
        print(f"{n} requests ({args.config}), best of {args.repeat}, CPU time:")
        for name, (loop_s, whole, events) in best.items():
            k = steps[name]
            print(f"  {name:20s} {k:6d} steps  loop {loop_s / k * 1e6:7.1f} µs/step  whole call "
                  f"{whole / k * 1e6:7.1f} µs/step  {events / k:4.1f} events/step")
        core, vidur = best["core, same work"][0], best["vidur plain sarathi"][0]
        print(f"  Vidur's plain Sarathi over the core, same work, per step: {vidur / core:.1f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
