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
  k + 1 tokens all travel;
* a drafter with its own MoE layer (DeepSeek's MTP module): each of its passes is
  an MoE layer over every rank's pass tokens, so beyond each rank's own share of it
  (router and shared experts, ``scope="local"``, inside the rank's drafter time)
  every pass adds its routed experts on the busiest GPU and its own dispatch and
  combine, priced as the target's (at the module's format).

With dual-batch overlap (``parallel.enable_dbo``, :mod:`~vidur_specdec.pricing.dbo`)
a step every rank splits runs as two micro-batches: each rank's dense layers on
both, then per MoE layer the overlap schedule, each slot the slowest rank's
compute against the all-to-all of the other micro-batch::

    step = max over ranks [dense layers on both micro-batches + drafter + beyond the layers]
           + MoE layers x (compute on the critical path + all-to-all left exposed)

Summing the per-layer maximum over the step (max of sums, not sum of maxima) errs
low when different ranks are slowest in different layers; they are not here (every
layer of a rank sees the same batch). ``steps.csv`` gains ``a2a_ms`` (the target's
dispatch and combine, both micro-batches'), ``a2a_exposed_ms`` (the part of it the
step waits for, part of ``verify_ms``: all of it without DBO), ``draft_a2a_ms`` (a
drafter's own dispatch and combine, part of ``draft_ms``), ``dbo`` (1: the step ran
as two micro-batches), ``dp_slowest_rank_ms`` and ``dp_mean_rank_ms`` (the rank's
own work, slowest and mean: their difference is the time ranks wait for the
slowest) and ``dp_idle_ranks`` (ranks running the dummy batch).
"""

from __future__ import annotations

from vidur_specdec.config.memo import BoundedMemo
from vidur_specdec.pricing import dbo as DBO
from vidur_specdec.pricing.layers import MEMO_LIMIT
from vidur_specdec.pricing.plan import StepComposition, idle_rank_plan
from vidur_specdec.pricing.price import StepPrice, layers_time_s

DUMMY_RANK = idle_rank_plan(1)  # vLLM's dummy batch of an idle rank (execute_dummy_batch -> _dummy_run(1)): one token


def _groups(comp: StepComposition) -> list:
    """Token groups of a rank's step (:mod:`vidur_specdec.costs.routing`); the dummy batch's one token."""
    g = list(comp.decode_q) + [c for _, c in comp.prefill]
    return g or [1]


def attention_block_ms(ops) -> float:
    """A layer's work outside its MLP (ms): attention with its projections and norms, the residual adds and the
    tensor-parallel all-reduces (the mean layer's ops, :data:`~vidur_specdec.pricing.price.EXECUTION_TIME_FIELDS`)."""
    (rope, _save, decode, prefill, pre, post, _up, _down, _act, attn_norm, mlp_norm, add, tp, _pp) = ops
    return rope + decode + prefill + pre + post + attn_norm + mlp_norm + add + 2 * tp


class GroupPricer:
    """Prices a data-parallel group's step (module docstring) with its replica's :class:`StepPricer`."""

    def __init__(self, pricer, dbo=None) -> None:
        if not pricer.model.is_moe:
            raise ValueError("data parallel > 1 needs a mixture-of-experts target")
        self.p = pricer
        self.dbo = dbo  # a pricing.dbo.DualBatchOverlap, or None: every step runs whole
        self._memo = BoundedMemo(MEMO_LIMIT)

    def _cached(self, key, fn):
        v = self._memo.get(key)
        if v is None:
            v = self._memo.put(key, fn())
        return v

    def _moe_part(self, groups, scope: str):
        p = self.p
        return self._cached((scope, tuple(sorted(groups))), lambda: p.kernels.fused_moe_ms(
            p.model, p.tp, groups, ep=p.ep, redundant=p.redundant_experts, scope=scope, dispatched=True))

    def _a2a(self, mode: str, tokens: int, spec=None):
        """(dispatch ms, combine ms) of one MoE layer: the target's, or (``spec``) the drafter's MoE layer."""
        p = self.p
        who = "target" if spec is None else "draft"
        spec = p.model if spec is None else spec
        return self._cached(("a2a", who, mode, tokens), lambda: p.kernels.all_to_all_ms(spec, mode, tokens, p.ep))

    def price(self, plan) -> StepPrice:
        parts = [q if q is not None else DUMMY_RANK for q in plan.dp_parts]
        comps = [q.composition for q in parts]
        mode = "prefill" if any(q.has_prefill for q in parts) else "decode"
        at = self.dbo.split_point(parts) if self.dbo is not None else None
        out = self._whole(plan, parts, comps, mode) if at is None else self._split(plan, parts, comps, mode, at)
        draft, a2a = self._draft_moe(comps, mode)
        if draft:
            out.add_draft(draft)
            out.draft_a2a_ms = a2a
        return out

    # ------------------------------------------------------------------ the step run whole
    def _whole(self, plan, parts, comps, mode) -> StepPrice:
        p = self.p
        layer = p.layer
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
        tokens = max(sum(gs) for gs in groups)
        dispatch, combine = self._a2a(mode, tokens)
        comm = 2 * p.num_layers * ops[12]
        lm, sampling, overhead = (extra.lm_head_ms, extra.sampling_ms, extra.overhead_ms) if extra else (0.0, 0.0, 0.0)
        out = StepPrice(plan, p.num_layers, ops, draft, comm, lm, sampling, overhead,
                        moe_ms=(local_ms + routed_ms) * layers, experts_touched=distinct)
        out.add_all_to_all((dispatch + combine) * layers)
        out.dp = (own[slowest], sum(own) / len(own), sum(q is None for q in plan.dp_parts))
        return out

    # ------------------------------------------------------------------ the step as two micro-batches
    def _micro(self, mb):
        """One rank's micro-batch, per layer (ms): (attention block, dense MLP, router, shared experts, all-reduce),
        and its token groups."""
        ops = self.p.layer.ops(mb, None, 1.0)
        gs = _groups(mb.composition)
        return (attention_block_ms(ops), ops[6] + ops[7] + ops[8], self._moe_part(gs, "router")[0],
                self._moe_part(gs, "shared")[0], ops[12]), gs

    def _split(self, plan, parts, comps, mode, at: int) -> StepPrice:
        p = self.p
        layers = p.model.num_moe_layers
        dense = p.num_layers - layers
        ranks, seen = [], {}
        for part, comp in zip(parts, comps):
            if id(part) in seen:
                ranks.append(seen[id(part)])
                continue
            (m0, g0), (m1, g1) = (self._micro(mb) for mb in DBO.cut(part, at))
            draft = p.draft_ms(comp)
            extra = p.extra(part)
            rest = dense * (m0[0] + m0[1] + m1[0] + m1[1]) + draft + (extra.total_ms if extra is not None else 0.0)
            own = rest + layers * (m0[0] + m0[2] + m0[3] + m1[0] + m1[2] + m1[3])
            ranks.append((rest, own, m0, m1, g0, g1, draft, extra, part))
            seen[id(part)] = ranks[-1]
        e0, _ = self._moe_part([g for r in ranks for g in r[4]], "routed")
        e1, _ = self._moe_part([g for r in ranks for g in r[5]], "routed")
        (d0, c0), (d1, c1) = (self._a2a(mode, max(sum(r[4 + m]) for r in ranks)) for m in (0, 1))
        lp = DBO.LayerParts(a0=max(r[2][0] + r[2][2] for r in ranks), a1=max(r[3][0] + r[3][2] for r in ranks),
                            s1=max(r[3][3] for r in ranks), s0a1=max(r[2][3] + r[3][0] + r[3][2] for r in ranks),
                            e0=e0, e1=e1, d0=d0, d1=d1, c0=c0, c1=c1)
        compute, exposed = DBO.moe_layer_ms(lp)
        slowest = max(range(len(ranks)), key=lambda i: ranks[i][0])
        rest, _, m0, m1, g0, g1, draft, extra, part = ranks[slowest]
        # the un-split step's mean layer, for the record (Vidur's per-op fields); the time is the schedule's
        groups = g0 + g1
        local_ms = self._moe_part(groups, "local")[0]
        routed_ms, distinct = self._moe_part([g for r in ranks for g in r[4] + r[5]], "routed")
        ops = p.layer.ops(part, (local_ms + routed_ms, distinct), p.layer.dense_share)
        lm, sampling, overhead = (extra.lm_head_ms, extra.sampling_ms, extra.overhead_ms) if extra else (0.0, 0.0, 0.0)
        out = StepPrice(plan, p.num_layers, ops, draft, 2 * p.num_layers * (m0[4] + m1[4]), lm, sampling, overhead,
                        moe_ms=layers * (m0[2] + m0[3] + m1[2] + m1[3] + e0 + e1), experts_touched=distinct)
        verify = dense * (m0[0] + m0[1] + m1[0] + m1[1]) + layers * (compute + exposed)
        out.overlapped(verify, layers * (d0 + c0 + d1 + c1), layers * exposed)
        own = [r[1] for r in ranks]
        out.dp = (max(own), sum(own) / len(own), sum(q is None for q in plan.dp_parts))
        return out

    # ------------------------------------------------------------------ a drafter's own MoE layer
    def _draft_moe(self, comps, mode):
        """(ms, of which all-to-all ms) a drafter's MoE passes add to the group's step: per pass, the routed
        experts over every rank's pass tokens on the busiest GPU, and its dispatch and combine (0, 0 when the
        drafter has no MoE layer)."""
        prop = self.p.proposer
        if prop is None:
            return 0.0, 0.0
        passes = [prop.moe_passes(c) for c in comps]
        if not any(passes):
            return 0.0, 0.0
        p = self.p
        spec = prop.moe_spec()
        routed = a2a = 0.0
        for j in range(max(len(ps) for ps in passes)):
            mine = [ps[j] for ps in passes if j < len(ps) and ps[j]]
            if not mine:
                continue
            gs = sorted(g for m in mine for g in m)
            routed += self._cached(("draft", tuple(gs)), lambda: p.kernels.fused_moe_ms(
                spec, p.tp, gs, ep=p.ep, redundant=p.redundant_experts, scope="routed", dispatched=True))[0]
            a2a += sum(self._a2a(mode, max(sum(m) for m in mine), spec))
        return routed + a2a, a2a
