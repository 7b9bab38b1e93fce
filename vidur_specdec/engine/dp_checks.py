"""Refusals of data-parallel and EPLB settings, one line each, before any work (used by ``deployment.check``)."""

from __future__ import annotations

from vidur_specdec.architectures.models import ModelSpec
from vidur_specdec.config import ConfigError, RunConfig

DBO_MICRO_BATCHES = 2  # vLLM 0.33 vllm/config/parallel.py num_ubatches: 2 with enable_dbo


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
      (``vllm/config/parallel.py`` and ``vllm/distributed/eplb/policy/default.py``);
    * dual-batch overlap (:func:`check_dual_batch_overlap`).
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
        if not p.enable_expert_parallel:
            raise ConfigError("parallel.data_parallel_size: > 1 without parallel.enable_expert_parallel splits every "
                              "expert over all ranks with all-gather/reduce-scatter, which is not modelled; set "
                              "parallel.enable_expert_parallel=true")
    check_dual_batch_overlap(cfg)
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


def check_dual_batch_overlap(cfg: RunConfig) -> None:
    """Refuse, one line each, the ``parallel.enable_dbo`` settings vLLM 0.33.0 refuses or that do nothing here.

    * ``enable_dbo`` on one rank: vLLM builds its micro-batch runner only with
      ``data_parallel_size`` > 1 (the ranks agree on each split; ``vllm/v1/worker/gpu/ubatch_utils.py``
      ``maybe_build_ubatch_runner``, docs/design/dbo.md "must be run in conjunction with
      --data-parallel-size N where N is greater than 1 and --enable-expert-parallel"): it does nothing;
    * a threshold below the two micro-batches (``vllm/config/parallel.py``: "must be at least the number of
      microbatches");
    * a threshold set while ``enable_dbo`` is off (a pool's keys skip the run's own key check);
    * a per-batch-size k schedule: on vLLM's V1 model runner (the one that runs DBO) it turns the target's
      CUDA graphs piecewise, and DBO captures full graphs only; not modelled.
    """
    p = cfg.parallel
    if not p.enable_dbo:
        defaults = type(p)()
        for name in ("dbo_decode_token_threshold", "dbo_prefill_token_threshold"):
            if getattr(p, name) != getattr(defaults, name):
                raise ConfigError(f"parallel.{name}: does nothing with parallel.enable_dbo false; set "
                                  "parallel.enable_dbo=true or remove the key")
        return
    if p.data_parallel_size <= 1:
        raise ConfigError("parallel.enable_dbo: does nothing without parallel.data_parallel_size > 1 (vLLM "
                          "micro-batches only a data-parallel + expert-parallel deployment); set "
                          "parallel.data_parallel_size or remove the key")
    for name in ("dbo_decode_token_threshold", "dbo_prefill_token_threshold"):
        if getattr(p, name) < DBO_MICRO_BATCHES:
            raise ConfigError(f"parallel.{name}: must be at least the {DBO_MICRO_BATCHES} micro-batches with "
                              f"parallel.enable_dbo (as vLLM requires), got {getattr(p, name)}")
    s = cfg.speculative
    if s.enabled and s.num_speculative_tokens_per_batch_size:
        raise ConfigError("parallel.enable_dbo: with speculative.num_speculative_tokens_per_batch_size is not "
                          "modelled (vLLM's V1 model runner, which runs DBO, captures piecewise CUDA graphs "
                          "for a k schedule and DBO full ones); remove one of them")
