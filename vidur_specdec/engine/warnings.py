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
    from vidur_specdec.speculation.schedule import config_warnings as schedule_warnings

    lines = schedule_warnings(cfg.speculative) if cfg.speculative.enabled else []
    return "; ".join(lines) or None


A100_EXAMPLE_BUDGET = (512, 128)  # configs/default.yaml's scheduler values: (max_num_batched_tokens, max_num_seqs)


@register_warning
def _a100_example_budget(cfg: RunConfig, facts: Mapping) -> Optional[str]:
    """The A100 example's 512-token budget carried to another GPU (as ``tune`` warns of a carried budget)."""
    from vidur_specdec.config.vllm_defaults import VLLM_VERSION, serve_batch_defaults
    from vidur_specdec.hardware.devices import get_device

    sc = cfg.scheduler
    if (sc.max_num_batched_tokens, sc.max_num_seqs) != A100_EXAMPLE_BUDGET:
        return None
    dev = get_device(cfg.device)
    if "a100" in dev.name.lower():
        return None
    tok, seqs = serve_batch_defaults(dev)
    return (f"scheduler.max_num_batched_tokens {sc.max_num_batched_tokens} and max_num_seqs {sc.max_num_seqs} are "
            f"the A100 example's (configs/default.yaml), not vLLM {VLLM_VERSION}'s serve defaults on {dev.name} "
            f"({tok}, {seqs}); set both to null to use those")


def config_warnings(cfg: RunConfig, **facts) -> List[str]:
    """The warnings for ``cfg`` (one line each, in registration order)."""
    out = []
    for check in WARNING_CHECKS:
        w = check(cfg, facts)
        if w:
            out.append(w)
    return out
