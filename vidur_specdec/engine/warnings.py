"""Warnings: config values that run but are probably wrong.

Each check takes ``(cfg, facts)`` and returns a one-line warning naming the key,
or None; ``facts`` carries what only a prepared run knows (``gpu_blocks``: the
KV blocks the GPU holds). :func:`vidur_specdec.engine.simulation.prepare` collects
them; the CLI prints each as ``warning: ...`` on stderr and ``summary.json``
lists them under ``warnings``. Add a check with :func:`register_warning`.
"""

from __future__ import annotations

from typing import Any, List, Mapping, Optional

from vidur_specdec.config import RunConfig
from vidur_specdec.speculation.schedule import config_warnings as schedule_warnings


WARNING_CHECKS: List[Any] = []


def register_warning(check) -> Any:
    """Add a warning check (usable as a decorator)."""
    WARNING_CHECKS.append(check)
    return check


@register_warning
def _num_blocks_above_gpu(cfg: RunConfig, facts: Mapping) -> Optional[str]:
    held, asked = facts.get("gpu_blocks"), cfg.scheduler.num_blocks
    if held is not None and asked is not None and asked > held:
        return (f"scheduler.num_blocks: {asked} blocks is more than the GPU holds ({held} after weights and "
                f"memory_margin_fraction); the run simulates memory the GPU does not have")
    return None


@register_warning
def _chunk_below_verify(cfg: RunConfig, facts: Mapping) -> Optional[str]:
    s = cfg.speculative
    k = s.num_speculative_tokens
    if s.enabled and cfg.scheduler.chunk_size < k + 1:
        return (f"scheduler.chunk_size: {cfg.scheduler.chunk_size} tokens is below k + 1 = {k + 1} tokens charged "
                "per verify step; every verify step overruns the budget (Sarathi lets one decode through)")
    return None


@register_warning
def _schedule_clamped(cfg: RunConfig, facts: Mapping) -> Optional[str]:
    lines = schedule_warnings(cfg.speculative) if cfg.speculative.enabled else []
    return "; ".join(lines) or None


@register_warning
def _acceptance_default(cfg: RunConfig, facts: Mapping) -> Optional[str]:
    from vidur_specdec.speculation.acceptance_source import default_warning

    return default_warning(cfg)


def config_warnings(cfg: RunConfig, **facts) -> List[str]:
    """The warnings for ``cfg`` (one line each, in registration order)."""
    out = []
    for check in WARNING_CHECKS:
        w = check(cfg, facts)
        if w:
            out.append(w)
    return out
