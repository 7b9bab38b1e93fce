"""vidur_specdec: speculative decoding in LLM serving, simulated on Microsoft Vidur.

Library use::

    from vidur_specdec import simulate
    result = simulate("configs/default.yaml", overrides=["speculative.num_speculative_tokens=2"])
    result.requests, result.steps, result.summary

Vidur itself is imported on first use of the simulation API, so the config
and profile tools start quickly. The package is laid out by layer, bottom to
top: ``config`` (schema, files, errors), ``hardware``, ``architectures``,
``costs``, ``speculation``, ``engine``, ``console`` (command-line plumbing),
the applications ``sweep``, ``validate``, ``report``, ``profiles``, then
``tune`` and the ``run`` subcommand, and the dispatcher ``cli`` / ``main``; a lower layer never imports a
higher one (the import contract in ``pyproject.toml``).
"""

from vidur_specdec.config import ConfigError, RunConfig
import importlib

__all__ = ["simulate", "run_vidur_sarathi", "SimulationResult", "RunConfig", "ConfigError", "load"]
__version__ = "0.1.0"

# name -> module that defines it, imported on first use
_LAZY = {"simulate": "vidur_specdec.engine.simulation", "run_vidur_sarathi": "vidur_specdec.engine.simulation",
         "SimulationResult": "vidur_specdec.engine.simulation", "load": "vidur_specdec.engine.resolve"}


def __getattr__(name):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'vidur_specdec' has no attribute {name!r}")
