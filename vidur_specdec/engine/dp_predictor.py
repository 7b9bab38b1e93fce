"""The step time of a data-parallel group: the slowest rank, the experts of all ranks, the all-to-all.

A group's step (:mod:`vidur_specdec.engine.dp_group`) is planned as one plan per rank
(:class:`~vidur_specdec.engine.step_plan.StepPlan` ``dp_parts``; None: the rank runs
vLLM's one-token dummy batch). Every rank runs
its own attention, dense layers, router, shared experts, LM head, sampler and
drafter on its own requests; the routed experts run expert-parallel over all
DP x TP GPUs on every rank's tokens, and no rank's layer ends before the busiest
GPU's experts and the all-to-all have. Per MoE layer this is priced as::

    step = max over ranks [rank's own work] + MoE layers x (routed experts on the busiest GPU
                                                             + dispatch + combine)

* the rank's own work: the target's layers on the rank's batch (Vidur's per-layer
  ops, :class:`~vidur_specdec.engine.predictor.SpecDecExecutionTimePredictor`), with
  the MoE layers' router and shared experts on its tokens (``scope="local"``), plus
  its drafter and what its step costs beyond the layers;
* routed experts: :meth:`~vidur_specdec.costs.kernels.base.KernelSource.fused_moe_ms`
  with ``scope="routed"`` on all ranks' token groups at EP = DP x TP (EPLB's spare
  copies when on): the busiest GPU's experts and rows;
* dispatch and combine: :meth:`~vidur_specdec.costs.kernels.base.KernelSource.all_to_all_ms`
  at the tokens the fullest rank sends (every rank waits for the last), DeepEP low
  latency when no rank holds a prefill chunk, normal otherwise; a verify block's
  k + 1 tokens all travel.

Summing the per-layer maximum over the step (max of sums, not sum of maxima) errs
low when different ranks are slowest in different layers; they are not here (every
layer of a rank sees the same batch). ``steps.csv`` gains ``a2a_ms`` (part of
``verify_ms``), ``dp_slowest_rank_ms`` and ``dp_mean_rank_ms`` (the rank's own work,
slowest and mean: their difference is the time ranks wait for the slowest) and
``dp_idle_ranks`` (ranks running the dummy batch).
"""

from __future__ import annotations

from dataclasses import dataclass

from vidur.execution_time_predictor import BaseExecutionTimePredictor, ExecutionTimePredictorRegistry

from vidur_specdec.engine.predictor import SpecDecExecutionTimePredictor, SpecDecPredictorConfig, SpecDecPredictorType
from vidur_specdec.engine.predictor import StepComposition, StepTime
from vidur_specdec.engine.step_plan import idle_rank_plan, plan_of

DP_PREDICTOR = SpecDecPredictorType.SPECDEC_PROFILE + 1  # registry key (>= 100: never collides with Vidur's)


@dataclass
class DPPredictorConfig(SpecDecPredictorConfig):
    """The per-rank predictor settings plus the group's ranks and EPLB's spare expert copies."""

    data_parallel_size: int = 1
    redundant_experts: int = 0

    @staticmethod
    def get_type():
        return DP_PREDICTOR


DUMMY_RANK = idle_rank_plan(1)  # vLLM's dummy batch of an idle rank (execute_dummy_batch -> _dummy_run(1)): one token


class DPStepTime(StepTime):
    """:class:`StepTime` plus the all-to-all (ms, inside ``verify_ms``) and the ranks' own work (ms)."""

    __slots__ = ("a2a_ms", "dp_slowest_rank_ms", "dp_mean_rank_ms", "dp_idle_ranks")

    def __init__(self, target, draft_ms, comm_ms, extra, plan, moe_ms, experts_touched, a2a_ms: float,
                 slowest_ms: float, mean_ms: float, idle: int) -> None:
        super().__init__(target, draft_ms, comm_ms, extra, plan, moe_ms=moe_ms, experts_touched=experts_touched)
        self.a2a_ms = a2a_ms
        self.verify_ms += a2a_ms
        self.total_time += a2a_ms * 1e-3
        self.model_time += a2a_ms * 1e-3
        self.dp_slowest_rank_ms = slowest_ms
        self.dp_mean_rank_ms = mean_ms
        self.dp_idle_ranks = idle

    def columns(self) -> tuple:
        """Values of :data:`~vidur_specdec.engine.metrics.DP_COLUMNS` for ``steps.csv``."""
        return self.a2a_ms, self.dp_slowest_rank_ms, self.dp_mean_rank_ms, self.dp_idle_ranks


def _groups(comp: StepComposition) -> list:
    """Token groups of a rank's step (:mod:`vidur_specdec.costs.routing`); the dummy batch's one token."""
    g = list(comp.decode_q) + [c for _, c in comp.prefill]
    return g or [1]


class DPExecutionTimePredictor(SpecDecExecutionTimePredictor):
    """Prices a data-parallel group's step (module docstring); per rank as the speculative predictor does."""

    def __init__(self, predictor_config: DPPredictorConfig, replica_config, cache_config) -> None:
        super().__init__(predictor_config, replica_config, cache_config)
        spec = predictor_config.model_spec
        if spec is None or not spec.is_moe:
            raise ValueError("data parallel > 1 needs a mixture-of-experts target")
        self._dp = int(predictor_config.data_parallel_size)
        self._redundant = int(predictor_config.redundant_experts)
        self._memo = {}

    def _cached(self, key, fn):
        v = self._memo.get(key)
        if v is None:
            if len(self._memo) >= 65536:
                self._memo.clear()
            v = self._memo[key] = fn()
        return v

    def _moe_part(self, groups, scope: str):
        return self._cached((scope, tuple(sorted(groups))), lambda: self._kernels.fused_moe_ms(
            self._moe, self._tp, groups, ep=self._ep, redundant=self._redundant, scope=scope, dispatched=True))

    def get_execution_time(self, batch, pipeline_stage: int) -> DPStepTime:
        plan = plan_of(batch)
        parts = [p if p is not None else DUMMY_RANK for p in plan.dp_parts]
        comps = [p.composition for p in parts]
        groups = [_groups(c) for c in comps]
        routed_ms, distinct = self._moe_part([g for gs in groups for g in gs], "routed")
        layers = self._moe.num_moe_layers
        ranks, seen = [], {}
        for part, comp, gs in zip(parts, comps, groups):
            if id(part) in seen:  # the same plan on several ranks (idle ranks, tune's balanced steps): priced once
                ranks.append(seen[id(part)])
                continue
            local_ms = self._moe_part(gs, "local")[0]
            self._price_moe_as(part, (local_ms + routed_ms, distinct))  # what the rank's MoE layer costs (up_proj)
            target = BaseExecutionTimePredictor.get_execution_time(self, part, pipeline_stage)
            draft = self._proposer.step_time_ms(comp) if self._proposer else 0.0
            extra = self._extra(part)
            total = target.total_time * 1e3 + draft + (extra.total_ms if extra is not None else 0.0)
            ranks.append((total - layers * routed_ms, target, draft, extra, local_ms))
            seen[id(part)] = ranks[-1]
        own = [r[0] for r in ranks]
        slowest = max(range(len(ranks)), key=lambda i: own[i])
        _, target, draft, extra, local_ms = ranks[slowest]
        mode = "prefill" if any(p.has_prefill for p in parts) else "decode"
        tokens = max(sum(gs) for gs in groups)
        dispatch, combine = self._cached(("a2a", mode, tokens),
                                         lambda: self._kernels.all_to_all_ms(self._moe, mode, tokens, self._ep))
        comm_ms = 2 * target.num_layers * target.tensor_parallel_communication_time
        idle = sum(p is None for p in plan.dp_parts)
        return DPStepTime(target, draft, comm_ms, extra, plan,
                          (local_ms + routed_ms) * layers, distinct, (dispatch + combine) * layers,
                          own[slowest], sum(own) / len(own), idle)


ExecutionTimePredictorRegistry.register(DP_PREDICTOR, DPExecutionTimePredictor)
