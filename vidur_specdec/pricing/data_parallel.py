"""The step time of a data-parallel group: the slowest rank, the experts of all ranks, the all-to-all.

A group's step is planned as one plan per rank (:class:`~vidur_specdec.pricing.plan.StepPlan`
``dp_parts``; None: the rank runs vLLM's one-token dummy batch). Every rank runs
its own attention, dense layers, router, shared experts, LM head, sampler and
drafter on its own requests; the routed experts run expert-parallel over all
DP x TP GPUs on every rank's tokens, and no rank's layer ends before the busiest
GPU's experts and the all-to-all have. Per MoE layer this is priced as::

    step = max over ranks [rank's own work] + MoE layers x (routed experts on the busiest GPU
                                                             + dispatch + combine)

* the rank's own work: the target's layers on the rank's batch (the mean layer of
  :mod:`~vidur_specdec.pricing.layers`), with the MoE layers' router and shared
  experts on its tokens (``scope="local"``), plus its drafter and what its step
  costs beyond the layers;
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

from vidur_specdec.pricing.layers import MEMO_LIMIT
from vidur_specdec.pricing.plan import StepComposition, idle_rank_plan
from vidur_specdec.pricing.price import StepPrice, layers_time_s

DUMMY_RANK = idle_rank_plan(1)  # vLLM's dummy batch of an idle rank (execute_dummy_batch -> _dummy_run(1)): one token


def _groups(comp: StepComposition) -> list:
    """Token groups of a rank's step (:mod:`vidur_specdec.costs.routing`); the dummy batch's one token."""
    g = list(comp.decode_q) + [c for _, c in comp.prefill]
    return g or [1]


class GroupPricer:
    """Prices a data-parallel group's step (module docstring) with its replica's :class:`StepPricer`."""

    def __init__(self, pricer) -> None:
        if not pricer.model.is_moe:
            raise ValueError("data parallel > 1 needs a mixture-of-experts target")
        self.p = pricer
        self._memo = {}

    def _cached(self, key, fn):
        v = self._memo.get(key)
        if v is None:
            if len(self._memo) >= MEMO_LIMIT:
                self._memo.clear()
            v = self._memo[key] = fn()
        return v

    def _moe_part(self, groups, scope: str):
        p = self.p
        return self._cached((scope, tuple(sorted(groups))), lambda: p.kernels.fused_moe_ms(
            p.model, p.tp, groups, ep=p.ep, redundant=p.redundant_experts, scope=scope, dispatched=True))

    def price(self, plan) -> StepPrice:
        p = self.p
        layer = p.layer
        parts = [q if q is not None else DUMMY_RANK for q in plan.dp_parts]
        comps = [q.composition for q in parts]
        groups = [_groups(c) for c in comps]
        routed_ms, distinct = self._moe_part([g for gs in groups for g in gs], "routed")
        layers = p.model.num_moe_layers
        ranks, seen = [], {}
        for part, comp, gs in zip(parts, comps, groups):
            if id(part) in seen:  # the same plan on several ranks (idle ranks, tune's balanced steps): priced once
                ranks.append(seen[id(part)])
                continue
            local_ms = self._moe_part(gs, "local")[0]
            ops = layer.ops(part, (local_ms + routed_ms, distinct), layer.dense_share)
            target_s = layers_time_s(p.num_layers, ops)
            draft = p.draft_ms(comp)
            extra = p.extra(part)
            total = target_s * 1e3 + draft + (extra.total_ms if extra is not None else 0.0)
            ranks.append((total - layers * routed_ms, ops, draft, extra, local_ms))
            seen[id(part)] = ranks[-1]
        own = [r[0] for r in ranks]
        slowest = max(range(len(ranks)), key=lambda i: own[i])
        _, ops, draft, extra, local_ms = ranks[slowest]
        mode = "prefill" if any(q.has_prefill for q in parts) else "decode"
        tokens = max(sum(gs) for gs in groups)
        dispatch, combine = self._cached(("a2a", mode, tokens),
                                         lambda: p.kernels.all_to_all_ms(p.model, mode, tokens, p.ep))
        comm = 2 * p.num_layers * ops[12]
        lm, sampling, overhead = (extra.lm_head_ms, extra.sampling_ms, extra.overhead_ms) if extra else (0.0, 0.0, 0.0)
        out = StepPrice(plan, p.num_layers, ops, draft, comm, lm, sampling, overhead,
                        moe_ms=(local_ms + routed_ms) * layers, experts_touched=distinct)
        out.add_all_to_all((dispatch + combine) * layers)
        out.dp = (own[slowest], sum(own) / len(own), sum(q is None for q in plan.dp_parts))
        return out
