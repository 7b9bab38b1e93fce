"""Refusals of data-parallel and EPLB settings, one line each, before any work (used by ``deployment.check``)."""

from __future__ import annotations

from vidur_specdec.architectures.models import ModelSpec
from vidur_specdec.config import ConfigError, RunConfig


def check_data_parallel(cfg: RunConfig, model: ModelSpec) -> None:
    """Refuse, one line each, the data-parallel and EPLB settings vLLM 0.33.0 refuses or this simulator cannot model.

    * a dense model: vLLM runs its data-parallel ranks as independent engines
      (``vllm/v1/engine/core.py``: "Non-MoE DP ranks are completely independent, so
      treat like DP=1"; offline DP is refused in ``vllm/config/parallel.py``): that is
      ``parallel.num_replicas``;
    * an MoE model without ``enable_expert_parallel``: vLLM then splits every expert
      tensor-parallel over DP x TP GPUs with all-gather / reduce-scatter, not modelled;
    * ``enable_eplb`` without expert parallel, or with one GPU, and
      ``num_redundant_experts`` whose physical experts do not split over the GPUs
      (``vllm/config/parallel.py`` and ``vllm/distributed/eplb/policy/default.py``).
    """
    p = cfg.parallel
    if p.data_parallel_size > 1:
        if not model.is_moe:
            raise ConfigError(f"parallel.data_parallel_size: {model.name} is dense; vLLM runs its data-parallel "
                              f"ranks as independent engines: set parallel.num_replicas={p.data_parallel_size} "
                              "instead")
        if p.pipeline_parallel_size > 1:
            raise ConfigError("parallel.data_parallel_size: > 1 with parallel.pipeline_parallel_size > 1 is not "
                              "modelled; set one of them to 1")
        if cfg.disaggregation.enabled:
            raise ConfigError("parallel.data_parallel_size: > 1 with disaggregated prefill and decode pools is not "
                              "modelled; set it to 1 or remove the disaggregation keys")
        if not p.enable_expert_parallel:
            raise ConfigError("parallel.data_parallel_size: > 1 without parallel.enable_expert_parallel splits every "
                              "expert over all ranks with all-gather/reduce-scatter, which is not modelled; set "
                              "parallel.enable_expert_parallel=true")
    if p.enable_eplb:
        if not p.enable_expert_parallel:
            # vLLM: "enable_expert_parallel must be True to use EPLB."
            raise ConfigError("parallel.enable_eplb: needs parallel.enable_expert_parallel=true (as in vLLM)")
        ep = p.data_parallel_size * p.tensor_parallel_size
        if ep <= 1:
            raise ConfigError("parallel.enable_eplb: needs data or tensor parallel > 1 (as in vLLM)")
        if model.is_moe and (model.num_experts + p.num_redundant_experts) % ep:
            raise ConfigError(f"parallel.num_redundant_experts: {model.num_experts} experts + "
                              f"{p.num_redundant_experts} redundant do not split over {ep} expert-parallel GPUs "
                              "evenly (vLLM's EPLB needs whole slots per GPU)")
