"""Resolve once: a run config checked across layers and turned into the objects the engine runs.

The config layer checks each field and the schema's own constraints
(:func:`vidur_specdec.config.read_config`). This module adds every check that
needs a layer above it — the model, device and tensor-parallel split
(:func:`vidur_specdec.engine.deployment.check`), trees, schedules and
acceptance inputs (:func:`vidur_specdec.speculation.checks.check_speculation`),
a proposer's own keys — and imports the modules that register the allowed
values of ``speculative.method``, ``speculative.verify_attention`` and
``engine.all_reduce`` (:mod:`vidur_specdec.config.registry`), so a config is
never validated against an empty registry.

:func:`load` (also ``vidur_specdec.load``) is what every command, the sweep,
tune and the notebooks call; :func:`resolve` gives the resolved objects.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Optional, Sequence, Union

from vidur_specdec.config import ConfigError, RunConfig, build_config, read_config, vllm_defaults
from vidur_specdec.costs import step_overheads, verify_cost  # verify_cost registers speculative.verify_attention
from vidur_specdec.costs.pipeline import AUX_METHODS
from vidur_specdec.engine import deployment
from vidur_specdec.engine.deployment import Deployment
from vidur_specdec.hardware.collectives import all_reduce_model  # the module registers engine.all_reduce
from vidur_specdec.hardware.devices import get_device
from vidur_specdec.pricing.dbo import DualBatchOverlap
from vidur_specdec.pricing.pricer import StepPricer
from vidur_specdec.speculation import proposers  # noqa: F401 (registers speculative.method)
from vidur_specdec.speculation.acceptance_source import resolve_acceptance
from vidur_specdec.speculation.checks import check_speculation

__all__ = ["ConfigError", "Resolved", "check", "from_dict", "load", "pricer", "resolve"]


def check(cfg: RunConfig) -> None:
    """Every constraint across layers; :class:`ConfigError` naming the key to change."""
    deployment.check(cfg)
    vllm_defaults.resolve(cfg.scheduler, get_device(cfg.device))  # vLLM's scheduler defaults for the device
    if cfg.speculative.enabled:
        resolve_acceptance(cfg)  # given, published (the cited library) or the default alpha (with a warning)
        check_speculation(cfg.speculative)


def from_dict(data: Optional[Mapping], shared: Sequence[str] = ()) -> RunConfig:
    """A full, checked :class:`RunConfig` from a (possibly partial) mapping; missing keys take their defaults.

    ``shared``: keys whose disuse the caller checks across several configs (a sweep's base).
    """
    cfg = build_config(data, shared)
    check(cfg)
    return cfg


def load(source: Union[str, Path, Mapping, RunConfig, None], overrides: Union[str, Sequence[str], None] = None,
         base_dir: Union[str, Path, None] = None) -> RunConfig:
    """Load a config from a path, a mapping or a :class:`RunConfig`, apply ``overrides`` and check it.

    Paths and overrides as :func:`vidur_specdec.config.read_config`; then every
    cross-layer check (:func:`check`). One :class:`ConfigError` line on bad input.
    """
    cfg = read_config(source, overrides, base_dir)
    check(cfg)
    return cfg


@dataclass(frozen=True)
class Resolved:
    """A checked run config and what it resolves to: the deployment (models, GPU, TP)."""

    config: RunConfig
    deployment: Deployment


def resolve(cfg: RunConfig) -> Resolved:
    """Resolve a loaded config once; the engine passes the result down instead of re-reading the config."""
    return Resolved(cfg, deployment.resolve(cfg))


def priced(cfg: RunConfig, dep: Deployment, longest_tokens: int):
    """The fitted target model and the bound-to-be proposer of a resolved run: ``(target, proposer, choices)``.

    Profiles chosen and fitted once (:func:`vidur_specdec.engine.deployment.time_models`), the drafter's
    model handed to the proposer; :func:`pricer` builds the run's one step pricer from them.
    """
    target, draft_time, choices = deployment.time_models(cfg, dep, longest_tokens)
    proposer = proposers.build(cfg, target, cfg.predictor.cache_dir, deployment=dep, draft_time=draft_time)
    return target, proposer, choices


def pricer(cfg: RunConfig, dep: Deployment, longest_tokens: int):
    """The run's one :class:`~vidur_specdec.pricing.pricer.StepPricer` and its profile choices: ``(pricer, choices)``.

    What the engine core, the Vidur-backed engine, ``tune`` and ``validate`` all price steps with: the
    fitted target, the verify-attention policy, the proposer (bound to the target's device and TP), what a
    step costs beyond the layers, the collective model, and the deployment's TP/PP/EP/DP.
    """
    target, proposer, choices = priced(cfg, dep, longest_tokens)
    spec = cfg.speculative
    overheads = step_overheads.build(cfg.engine, dep.model, dep.device, dep.tp, target,
                                     step_overheads.piecewise_graphs(cfg), kernels=dep.kernels)
    out = StepPricer(target, dep.model, dep.device, dep.kernels, verify_cost.build(spec),
                     proposer=proposer, overheads=overheads,
                     all_reduce=all_reduce_model(cfg.engine.all_reduce), tp=dep.tp, pp=dep.pp, ep=dep.ep,
                     dp=dep.dp, redundant_experts=dep.redundant_experts,
                     eagle3_aux=bool(spec.enabled and spec.method in AUX_METHODS), dbo=dual_batch_overlap(cfg, dep))
    return out, choices


def dual_batch_overlap(cfg: RunConfig, dep: Deployment):
    """The run's :class:`~vidur_specdec.pricing.dbo.DualBatchOverlap` (``parallel.enable_dbo`` on a data-parallel
    deployment), or None: vLLM's two thresholds and its uniform decode query length, ``1 +
    num_speculative_tokens`` (1 without speculation; V1 ``gpu_model_runner.py`` ``uniform_decode_query_len``)."""
    p, s = cfg.parallel, cfg.speculative
    if not (p.enable_dbo and dep.dp > 1):
        return None
    return DualBatchOverlap(p.dbo_decode_token_threshold, p.dbo_prefill_token_threshold,
                            1 + (s.num_speculative_tokens if s.enabled else 0))
