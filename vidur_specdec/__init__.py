"""vidur_specdec: speculative decoding in LLM serving, simulated on Microsoft Vidur.

Library use::

    from vidur_specdec import simulate
    result = simulate("configs/default.yaml", overrides=["speculative.num_speculative_tokens=2"])
    result.requests, result.steps, result.summary

Vidur itself is imported on first use of the simulation API, so the config
and profile tools start quickly.
"""

from vidur_specdec.config import ConfigError, RunConfig, load

__all__ = ["simulate", "run_vidur_sarathi", "SimulationResult", "RunConfig", "ConfigError", "load"]
__version__ = "0.1.0"

_LAZY = {"simulate", "run_vidur_sarathi", "SimulationResult"}


def __getattr__(name):
    if name in _LAZY:
        from vidur_specdec import simulation

        return getattr(simulation, name)
    raise AttributeError(f"module 'vidur_specdec' has no attribute {name!r}")
