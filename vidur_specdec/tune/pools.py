"""tune on a deployment of prefill and decode pools (``disaggregation.prefill_instances`` / ``decode_instances``).

Speculation runs where tokens are decoded: on the decode pool. A prefill
instance serves each prompt with ``max_tokens=1`` (vLLM's disaggregated proxy),
so it never verifies a guess. The per-batch-size schedule is therefore priced
and chosen on the decode pool's own config (its TP, device, ``max_num_seqs``):
its batch axis is the number of requests one *decode instance* schedules in a
step, the size vLLM 0.33 looks k up by on that instance
(``self.dynamic_sd_lookup[len(num_scheduled_tokens)]`` in
``vllm/v1/core/sched/scheduler.py``, the engine core of each ``vllm serve``).
Every simulated point still runs the whole deployment (both pools, the KV link),
so TTFT carries queue, prefill, transfer and first decode, and capacity is the
deployment's.

Both pools get the same ``speculative_config`` (vLLM's NIXL connector refuses to
pair instances whose EAGLE/MTP configs differ), so the config's pool-specific
``disaggregation.<pool>.speculative`` is refused here: tune sets the
speculative keys of the whole deployment. Units: batch sizes in requests.
"""

from __future__ import annotations

from typing import Any, Dict

from vidur_specdec.config import ConfigError, RunConfig
from vidur_specdec.config.disaggregation import KV_TRANSFER_CONFIG
from vidur_specdec.engine.topology import ROLES, pool_config


def disaggregated(cfg: RunConfig) -> bool:
    return bool(cfg.disaggregation.enabled)


def refuse_untunable(cfg: RunConfig) -> None:
    """One line for a pool setting tune cannot search: a pool's own speculative section."""
    if not disaggregated(cfg):
        return
    for role in ROLES:
        if getattr(cfg.disaggregation, role).speculative is not None:
            raise ConfigError(f"disaggregation.{role}.speculative: tune sets the speculative keys of both pools "
                              "together (vLLM's NIXL connector pairs only instances with the same EAGLE/MTP "
                              "config); put them in the run's speculative section")


def decode_view(cfg: RunConfig) -> RunConfig:
    """The config one decode instance runs (the run's own when colocated): what the schedule is priced on."""
    return pool_config(cfg, "decode") if disaggregated(cfg) else cfg


def max_batch(cfg: RunConfig) -> int:
    """Largest batch the schedule covers: one (decode) instance's ``max_num_seqs``."""
    return decode_view(cfg).scheduler.max_num_seqs


def k0_overrides(cfg: RunConfig) -> Dict[str, Any]:
    """Extra overrides of a no-speculation point: without a drafter no draft KV is left to recompute."""
    if disaggregated(cfg) and cfg.disaggregation.draft_kv == "recompute":
        return {"disaggregation.draft_kv": "transfer"}
    return {}


def summary_entry(cfg: RunConfig, spec_cfg: Dict[str, Any]) -> Dict[str, Any]:
    """summary.json ``disaggregation``: each pool's instances, engine arguments and ``vllm serve`` line."""
    # lazy: tune.vllm_config imports the proposers
    from vidur_specdec.tune.vllm_config import engine_args, serve_command

    d = cfg.disaggregation
    out: Dict[str, Any] = {"schedule_batch_axis": "requests per step on one decode instance",
                           "router": d.router, "kv_link": d.kv_link, "draft_kv": d.draft_kv}
    for role in ROLES:
        pc = pool_config(cfg, role)
        out[role] = {"instances": getattr(d, f"{role}_instances"), "device": str(pc.device),
                     "engine_args": engine_args(pc),
                     "vllm_serve": serve_command(pc, spec_cfg) + f" --kv-transfer-config '{KV_TRANSFER_CONFIG}'"}
    return out
