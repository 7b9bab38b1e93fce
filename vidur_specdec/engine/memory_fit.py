"""Whether a deployment fits its GPUs' memory: KV blocks per GPU, and the remedy when a request cannot finish.

:func:`plan_memory` plans the memory of a resolved deployment
(:func:`vidur_specdec.costs.memory.plan`: weights, activations, the drafter's
weights and KV, what is left for KV blocks) and refuses a model that does not
fit, or whose longest request could not run to completion alone, in one line
naming ``parallel.tensor_parallel_size`` (or ``scheduler.num_blocks``) and the
smallest tensor-parallel size, expert-parallel choice or larger device that
would fit (:func:`_remedy`). Counts are KV blocks per GPU and tokens.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

from vidur_specdec.config import ConfigError, RunConfig
from vidur_specdec.costs import memory
from vidur_specdec.costs.memory import TP_SIZES, NoRoomError, tp_fits
from vidur_specdec.engine.deployment import Deployment, check_formats
from vidur_specdec.hardware.devices import BUILTIN, DeviceSpec
from vidur_specdec.speculation import proposers


def plan_at(cfg: RunConfig, dep: Deployment, tp: int, dtp: int, head: tuple = (0, 0),
            ep: Optional[int] = None, device: Optional[DeviceSpec] = None) -> memory.MemoryPlan:
    """The memory plan (:func:`vidur_specdec.costs.memory.plan`: weights, KV blocks) of ``dep`` at target tensor
    parallel size ``tp`` and drafter tensor parallel size ``dtp``; ``head``: a draft head's (weight bytes, KV bytes
    per token) per GPU on the target's GPUs; ``ep`` (default the deployment's) and ``device`` (default its GPU)
    for a trial of another size."""
    ep = dep.ep if ep is None else ep
    k = cfg.speculative.num_speculative_tokens if cfg.speculative.enabled else 0  # a state layer's extra slots
    return memory.plan(dep.model, device or dep.device, cfg.scheduler.block_size,
                       cfg.scheduler.memory_margin_fraction, draft=dep.draft, tp=tp, draft_tp=dtp, head=head, ep=ep,
                       num_spec=k, pp=dep.pp, redundant=dep.redundant_experts if ep == dep.ep else 0)


def _need(cfg: RunConfig, mem: memory.MemoryPlan, tokens: int) -> int:
    """Blocks with which a request of ``tokens`` (its lookahead slots included) finishes alone in ``mem``'s pool
    (its block size and state pages: a hybrid model's differ with the tensor-parallel size)."""
    return memory.min_blocks_to_finish(tokens, mem.block_size, cfg.scheduler.watermark_blocks_fraction,
                                       mem.state_pages)


def _smallest_fit(cfg: RunConfig, dep: Deployment, tokens: int, head: tuple = (0, 0),
                  device: Optional[DeviceSpec] = None, above: int = 0) -> Optional[tuple]:
    """Smallest (TP, EP) above TP ``above`` at which the weights leave room for a request of ``tokens`` per GPU.

    At each TP the run's own expert-parallel choice is tried first, then (an MoE
    model) the other one. None when no TP of :data:`TP_SIZES` fits.
    """
    explicit_one = cfg.speculative.draft_tensor_parallel_size == 1  # stays 1 at any target TP (vLLM)
    for t in TP_SIZES:
        if t <= above or not tp_fits(dep.model, t):
            continue
        dtp = 1 if explicit_one else t
        if dep.draft is not None and not tp_fits(dep.draft, dtp):
            continue
        dp = cfg.parallel.data_parallel_size  # > 1 only with expert parallel over dp x t GPUs (refused otherwise)
        eps = [t * dp if cfg.parallel.enable_expert_parallel else 1]
        if dp > 1 and (dep.model.num_experts + dep.redundant_experts) % (t * dp):
            continue
        if dp == 1 and dep.model.is_moe and t > 1 and not dep.model.num_experts % t:
            eps.append(1 if eps[0] > 1 else t)
        for e in eps if t * dp > 1 else [1]:
            try:
                mem = plan_at(cfg, dep, t, dtp, head, ep=e, device=device)
            except NoRoomError:
                continue
            if mem.num_blocks >= _need(cfg, mem, tokens):
                return t, e
    return None


def _smallest_tp_that_fits(cfg: RunConfig, dep: Deployment, tokens: int, head: tuple = (0, 0)) -> Optional[int]:
    """Smallest TP above ``dep.tp`` at which the weights leave room for a request of ``tokens``, or None."""
    fit = _smallest_fit(cfg, dep, tokens, head, above=dep.tp)
    return fit[0] if fit else None


def _remedy(cfg: RunConfig, dep: Deployment, tokens: int, head: tuple) -> str:
    """What to change so the model fits: the smallest TP (with EP when that is what fits), or a larger device."""
    fit = _smallest_fit(cfg, dep, tokens, head, above=dep.tp)
    ep_on = "parallel.enable_expert_parallel=true"
    if fit:
        t, e = fit
        with_ep = f" with {ep_on}" if e > 1 and not cfg.parallel.enable_expert_parallel else ""
        return f"needs parallel.tensor_parallel_size >= {t}{with_ep}"

    for d in sorted(BUILTIN.values(), key=lambda d: d.memory_bytes):
        if d.memory_bytes <= dep.device.memory_bytes or d.name == dep.device.name:
            continue
        try:
            check_formats(dep.model, d)
        except ConfigError:
            continue
        fit = _smallest_fit(cfg, dep, tokens, head, device=d)
        if fit:
            t, e = fit
            return (f"does not fit on {dep.device.name} at any parallel.tensor_parallel_size "
                    f"({', '.join(map(str, TP_SIZES))}); fits with device={d.name} and "
                    f"parallel.tensor_parallel_size={t}" + (f" and {ep_on}" if e > 1 else ""))
    return (f"does not fit at any parallel.tensor_parallel_size ({', '.join(map(str, TP_SIZES))}); "
            "lower scheduler.memory_margin_fraction or use a larger device")


def plan_memory(cfg: RunConfig, dep: Deployment, longest_total: int, longest_index: int,
                head: tuple = (0, 0)) -> memory.MemoryPlan:
    """KV blocks per GPU; a model that does not fit names ``parallel.tensor_parallel_size`` and the smallest TP that does.

    ``longest_total`` is the longest request's prompt + output tokens (request
    ``longest_index``); with ``scheduler.num_blocks`` null the plan must hold it.
    ``head`` is a draft head's (weight bytes, KV bytes per token) per GPU (see
    :func:`vidur_specdec.speculation.proposers.head_memory`).
    """
    sch = cfg.scheduler
    # a GPU drafter's lookahead slots (vLLM's num_lookahead_tokens) are held on top of the request's own tokens
    tokens = longest_total + proposers.lookahead_tokens(cfg)
    try:
        mem = plan_at(cfg, dep, dep.tp, dep.draft_tp, head)
    except NoRoomError as e:
        raise ConfigError(f"parallel.tensor_parallel_size: {e}; {_remedy(cfg, dep, tokens, head)}") from None
    need = _need(cfg, mem, tokens)
    if sch.num_blocks is not None:
        mem = dataclasses.replace(mem, num_blocks=sch.num_blocks)
    elif mem.num_blocks < need:
        t = _smallest_tp_that_fits(cfg, dep, tokens, head)
        if t is not None:
            raise ConfigError(f"parallel.tensor_parallel_size: at {dep.tp}, {mem.num_blocks} KV blocks per GPU cannot "
                              f"run request {longest_index} ({longest_total} tokens) to completion; "
                              f"needs parallel.tensor_parallel_size >= {t}")
    if mem.num_blocks < need:
        raise ConfigError(f"scheduler.num_blocks: {mem.num_blocks} blocks cannot run request {longest_index} "
                          f"({longest_total} tokens) to completion; allowed: >= {need}")
    return mem


def gpu_blocks(cfg: RunConfig, dep: Deployment, head: tuple = (0, 0)) -> Optional[int]:
    """KV blocks per GPU the weights leave room for (ignoring ``scheduler.num_blocks``); None if none."""
    try:
        return plan_at(cfg, dep, dep.tp, dep.draft_tp, head).num_blocks
    except NoRoomError:
        return None
