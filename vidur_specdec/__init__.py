"""vidur_specdec: speculative decoding in LLM serving, simulated on Microsoft Vidur.

Library use::

    from vidur_specdec import simulate
    result = simulate("configs/default.yaml", overrides=["speculative.num_speculative_tokens=2"])
    result.requests, result.steps, result.summary

    from vidur_specdec import tune, sweep, plan
    t = tune("configs/default.yaml", ["speculative.verify_attention=per_token"], jobs=2)
    t.points, t.summary, t.schedule, t.speculative_config   # tune.csv as a DataFrame, summary.json, ...
    s = sweep("sweeps/specdec_39.yaml", jobs=2)
    s.table, s.summary                                        # the sweep's CSV as a DataFrame, its counts
    p = plan(model="meta-llama/Llama-3.1-70B-Instruct", devices="h100", gpus=8, isl=2000, osl=200)
    p.points, p.frontier, p.best                              # plan.csv, its frontier, the best deployment

Vidur itself is imported on first use of the simulation API, so the config
and profile tools start quickly. The package is laid out by layer, bottom to
top: ``config`` (schema, files, errors), ``hardware``, ``architectures``,
``costs``, ``speculation``, ``engine``, ``console`` (command-line plumbing),
the applications ``sweep``, ``validate``, ``report``, ``profiles``, then
``tune`` and the ``run`` subcommand, ``plan``, and the dispatcher ``cli`` / ``main``; a lower layer never imports a
higher one (the import contract in ``pyproject.toml``).
"""

import importlib

from vidur_specdec.config import ConfigError, RunConfig

__all__ = ["simulate", "tune", "sweep", "plan", "run_vidur_sarathi", "SimulationResult", "RunConfig", "ConfigError", "load"]
__version__ = "0.1.0"

# name -> module that defines it, imported on first use
_LAZY = {"simulate": "vidur_specdec.engine.simulation", "run_vidur_sarathi": "vidur_specdec.engine.simulation",
         "SimulationResult": "vidur_specdec.engine.simulation", "load": "vidur_specdec.engine.resolve"}


def __getattr__(name):
    if name in ("tune", "sweep", "plan"):  # callable packages: vidur_specdec.tune(...) runs a tune (docs/tune.md)
        return importlib.import_module(f"vidur_specdec.{name}")
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'vidur_specdec' has no attribute {name!r}")
