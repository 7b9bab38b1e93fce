"""vidur_specdec: speculative decoding in LLM serving, simulated on Microsoft Vidur.

Library use::

    from vidur_specdec import simulate
    result = simulate("configs/default.yaml", overrides=["speculative.num_speculative_tokens=2"])
    result.requests, result.steps, result.summary
"""

from vidur_specdec.config import ConfigError, RunConfig, load
from vidur_specdec.simulation import SimulationResult, run_vidur_sarathi, simulate

__all__ = ["simulate", "run_vidur_sarathi", "SimulationResult", "RunConfig", "ConfigError", "load"]
__version__ = "0.1.0"
