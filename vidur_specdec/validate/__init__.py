"""Validation harness: put the simulator next to a real serving engine, request by request.

The loop (``python -m vidur_specdec.validate run --url URL --config CONFIG --out DIR``):

1. :mod:`~vidur_specdec.validate.workload` — a seeded trace (Poisson, gamma or
   static arrivals; exact prompt/output lengths; prompt token ids) that both
   the replay client and the simulator's ``workload.arrival: trace`` read;
2. :mod:`~vidur_specdec.validate.replay` — an asyncio client that replays it
   against a vLLM OpenAI-compatible server and measures TTFT/TPOT/E2E;
3. :mod:`~vidur_specdec.validate.counters` and
   :mod:`~vidur_specdec.validate.calibrate` — ``/metrics`` scraped before and
   after; acceptance (α, mean acceptance length, per-position rates) and the
   KV block budget from the deltas;
4. :mod:`~vidur_specdec.validate.compare` and
   :mod:`~vidur_specdec.validate.report` — the matched simulation, the
   per-request join and the report;
5. :mod:`~vidur_specdec.validate.steplogs` — engine step-log tables: acceptance
   per position, step time split, and a step-level check of the simulator's
   cost model (:mod:`~vidur_specdec.validate.cost`).

:mod:`~vidur_specdec.validate.fake_server` is a fake vLLM server (a simple
speculative engine with vLLM's counters) for tests and demos without a GPU.
Walkthrough: ``docs/validation.md``.
"""

import importlib

# Functions re-exported here (lazily); ``replay`` and ``calibrate`` are also module
# names, so import those two functions from their modules.
_LAZY = {
    "generate_trace": "workload", "write_trace": "workload", "load_trace": "workload",
    "ReplayResult": "replay", "fetch_model_name": "replay",
    "scrape": "counters", "Snapshot": "counters",
    "Calibration": "calibrate", "write_calibration": "calibrate",
    "read_calibration": "calibrate", "alpha_from_mean_acceptance_length": "calibrate",
    "mean_acceptance_length": "calibrate",
    "matched_config": "compare", "simulate_matched": "compare", "join": "compare", "summarize": "compare",
    "write_report": "report",
    "analyze": "steplogs", "read_table": "steplogs",
    "pricer_for": "cost", "price_sums": "cost", "split_sums": "cost",
    "FakeServer": "fake_server", "FakeEngineConfig": "fake_server",
    "ValidateError": "common",
}

__all__ = sorted(_LAZY)


def __getattr__(name):
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module 'vidur_specdec.validate' has no attribute {name!r}")

    return getattr(importlib.import_module(f"vidur_specdec.validate.{mod}"), name)
