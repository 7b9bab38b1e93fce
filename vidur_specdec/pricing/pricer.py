"""The one step pricer: a step plan in, its time in parts out.

:class:`StepPricer` is built once from a resolved run (:func:`vidur_specdec.pricing.build.for_prepared`)
and prices any :class:`~vidur_specdec.pricing.plan.StepPlan` — a step the engine
formed, ``tune``'s uniform decode steps, a step log's sums rebuilt by
``validate`` — into a :class:`~vidur_specdec.pricing.price.StepPrice`. It is the
only pricing path of the project: the engine core, the Vidur-backed engine's
execution-time predictor, ``tune``, ``validate`` and the scripts all call it.

A step's time is

* the target's forward: the mean decoder layer (:mod:`~vidur_specdec.pricing.layers`:
  per-layer linear and elementwise ops over the step's tokens from the fitted
  operator model, decode/verify attention under ``speculative.verify_attention``,
  prefill attention per chunk, a hybrid model's linear-attention layers, a
  sliding/global mix, the MoE layers from the kernel source, the two
  tensor-parallel all-reduces per layer) times the layers priced, plus a
  pipeline stage's send (Vidur's ``ExecutionTime`` arithmetic, bit for bit);
* the proposer (:meth:`~vidur_specdec.speculation.proposers.base.Proposer.step_time_ms`),
  plus a decode instance's drafter pass over prompts whose draft KV it
  recomputes (the plan's ``draft_recompute``);
* what the step costs beyond the layers (:mod:`~vidur_specdec.costs.step_overheads`):
  LM head, sampling, the engine's CPU work;
* a data-parallel group (:mod:`~vidur_specdec.pricing.data_parallel`): the
  slowest rank's own work plus the routed experts on the busiest GPU and the
  all-to-all, or with dual-batch overlap (:mod:`~vidur_specdec.pricing.dbo`) two
  micro-batches whose all-to-all runs under each other's compute.

Under pipeline parallelism :meth:`StepPricer.price` prices one stage (its
layers, its send; the engine's CPU work on the first stage, LM head, sampling
and drafter on the last, as vLLM 0.33 places them); a hybrid model's stage is
priced at its own full-attention and linear-attention layers by position. Times in ms per step (one
GPU of the replica's), ``StepPrice.total_time`` in seconds.
"""

from __future__ import annotations

from typing import Optional

from vidur_specdec.config.memo import BoundedMemo
from vidur_specdec.architectures import layer_plan
from vidur_specdec.costs import pipeline
from vidur_specdec.costs.step_overheads import StepCost
from vidur_specdec.pricing.layers import MEMO_LIMIT, MeanLayer
from vidur_specdec.pricing.plan import StepComposition, StepPlan
from vidur_specdec.pricing.price import StepPrice
from vidur_specdec.speculation.proposers.base import ProposerContext


class StepPricer:
    """Prices step plans for one deployment (one pool of a disaggregated one); see the module docstring.

    ``target``: the target's fitted :class:`~vidur_specdec.costs.operator_model.OperatorTimeModel` (per-GPU
    times at ``tp``); ``model``/``device``: its ModelSpec and DeviceSpec; ``kernels``: the run's KernelSource;
    ``verify_cost``: the ``speculative.verify_attention`` policy; ``proposer``: the bound-to-be proposer (None:
    no speculation); ``overheads``: a :class:`~vidur_specdec.costs.step_overheads.StepOverheads` (None: none);
    ``all_reduce``: the ``engine.all_reduce`` collective model; ``tp``/``pp``/``ep``/``dp``: the replica's
    tensor-parallel, pipeline, expert-parallel and data-parallel sizes; ``redundant_experts``: EPLB's spare
    copies; ``eagle3_aux``: stages also send the auxiliary hidden states an EAGLE-3-family drafter reads;
    ``dbo``: a data-parallel group's dual-batch overlap (:class:`~vidur_specdec.pricing.dbo.DualBatchOverlap`;
    None: off).
    """

    def __init__(self, target, model, device, kernels, verify_cost, proposer=None, overheads=None,
                 all_reduce=None, tp: int = 1, pp: int = 1, ep: int = 1, dp: int = 1, redundant_experts: int = 0,
                 eagle3_aux: bool = False, dbo=None) -> None:
        if model is None or kernels is None:
            raise ValueError("a step pricer needs the target's ModelSpec and the run's kernel source")
        self.target = target
        self.model = model
        self.kernels = kernels
        self.device = device if device is not None else kernels.device
        self.verify_cost = verify_cost
        self.proposer = proposer
        self.overheads = overheads
        self.tp, self.pp, self.ep, self.dp = int(tp), int(pp), int(ep), int(dp)
        self.redundant_experts = int(redundant_experts)
        if proposer is not None:  # the target's device, TP, collective model and kernel source
            proposer.bind(ProposerContext(kernels.device, self.tp, all_reduce, kernels, data_parallel=self.dp > 1))
        self.layer = MeanLayer(target, model, self.tp, kernels, verify_cost, ep=self.ep)
        self.num_layers = model.num_layers
        self._extra = BoundedMemo(MEMO_LIMIT)  # (logit rows, requests, verifying) -> StepCost
        self._logits = BoundedMemo(MEMO_LIMIT)  # logit rows -> (LM head ms, sampling ms)
        # plan -> {part: value} that every pipeline stage of the step shares (at most pp steps in flight)
        self._stages = BoundedMemo(4 * self.pp)
        if self.pp > 1:
            self.stage_ranges = [pipeline.stage_range(model.num_layers, self.pp, s) for s in range(self.pp)]
            self.stage_layer = [self._stage_layer(*r) for r in self.stage_ranges]
            self.aux = [pipeline.aux_states_sent(model.num_layers, self.pp, s) if eagle3_aux else 0
                        for s in range(self.pp)]
        if self.dp > 1:
            from vidur_specdec.pricing.data_parallel import GroupPricer  # lazy: only data-parallel runs use it

            self.group = GroupPricer(self, dbo)

    def _stage_layer(self, start: int, end: int) -> MeanLayer:
        """The mean layer of decoder layers ``[start, end)``: a hybrid model's stage with its own share of
        full-attention and linear-attention layers by position (``layer_types``), else the model's mean layer."""
        if not getattr(self.model, "linear_layers", 0):
            return self.layer
        linear = layer_plan.linear_layers_in(self.model, start, end)
        share = (end - start - linear) / (end - start)
        return MeanLayer(self.target, self.model, self.tp, self.kernels, self.verify_cost, ep=self.ep,
                         full_share=share)

    # ------------------------------------------------------------------ the one entry point
    def price(self, plan: StepPlan, stage: int = 0) -> StepPrice:
        """The step's time in parts (one pipeline ``stage`` of it under pipeline parallelism)."""
        if plan.dp_parts is not None:
            return self.group.price(plan)
        if self.pp > 1:
            return self._stage(plan, stage)
        out = self._whole(plan)
        if plan.draft_recompute and self.proposer is not None:
            out.add_draft(self.recompute_draft_ms(plan.draft_recompute))
        return out

    def duration_ms(self, plan: StepPlan) -> float:
        """The step's wall time (ms); under pipeline parallelism its slowest stage (one micro-batch leaves the
        full pipeline per slowest stage)."""
        if self.pp > 1:
            return max(self.price(plan, s).total_time for s in range(self.pp)) * 1e3
        return self.price(plan).total_time * 1e3

    # ------------------------------------------------------------------ parts
    def extra(self, plan: StepPlan) -> Optional[StepCost]:
        """The step's LM head, sampling and engine overhead, or None without overheads (memoised: they depend on
        the rows that need logits, the requests and the requests verifying only)."""
        if self.overheads is None:
            return None
        key = (plan.logit_rows, len(plan.request_ids), plan.verifying)
        got = self._extra.get(key)
        if got is None:
            rows = key[0]  # the LM head and sampling depend on the rows only: a large batch's steps share them
            logits = self._logits.get(rows)
            if logits is None:
                logits = self._logits.put(rows, self.overheads.logits_ms(rows))
            got = self._extra.put(key, self.overheads.cost_rows(*key, logits=logits))
        return got

    def draft_ms(self, comp: StepComposition) -> float:
        """The proposer's time (ms) for a step of composition ``comp``."""
        return self.proposer.step_time_ms(comp) if self.proposer is not None else 0.0

    def recompute_draft_ms(self, prompts) -> float:
        """The drafter's pass (ms) over loaded prompts of ``prompts`` tokens each (its KV was not moved)."""
        chunks = [(0, n) for n in prompts]
        return self.proposer.step_time_ms(StepComposition(sum(prompts), [], [], chunks))

    def moe_layer(self, plan: StepPlan):
        """(ms of one MoE layer, distinct routed experts it wakes) for this step (None on a dense target)."""
        return self.layer.moe(plan) if self.layer.moe_spec is not None else None

    def _whole(self, plan: StepPlan, moe=None) -> StepPrice:
        """Target forward (the mean layer × layers, all-reduces included) plus proposer plus what the step costs
        beyond the layers; ``moe`` the MoE layer's (ms, experts) when the caller sets it (a data-parallel rank)."""
        layer = self.layer
        if layer.moe_spec is not None and moe is None:
            moe = layer.moe(plan)
        ops = layer.ops(plan, moe, layer.dense_share)
        proposer = self.proposer  # draft_ms, inline (every step's path): a step plan is its own composition
        draft = proposer.step_time_ms(plan) if proposer is not None else 0.0
        comm = 2 * self.num_layers * ops[12]
        extra = self.extra(plan)
        lm, sampling, overhead = (extra.lm_head_ms, extra.sampling_ms, extra.overhead_ms) if extra else (0.0, 0.0, 0.0)
        if moe is None:
            return StepPrice(plan, self.num_layers, ops, draft, comm, lm, sampling, overhead)
        return StepPrice(plan, self.num_layers, ops, draft, comm, lm, sampling, overhead,
                         moe_ms=moe[0] * self.model.num_moe_layers, experts_touched=moe[1])

    def _stage(self, plan: StepPlan, stage: int) -> StepPrice:
        """One pipeline stage of a step: its layers (vLLM's split), its send to the next stage (all but the
        last), the engine's CPU work on the first, and the LM head, sampling and drafter on the last
        (vLLM 0.33 puts the drafter on the last rank, ``gpu_model_runner.py``)."""
        start, end = self.stage_ranges[stage]
        n = end - start
        layer = self.stage_layer[stage]  # a hybrid model's stage: its own full/linear mix
        # the step's stages share its MoE layer's price and, stage layers alike, its attention: priced once per
        # step (a step's stages are priced as its micro-batch reaches them, between other steps' stages)
        parts = self._stages.of(plan, dict)
        attention = parts.get(id(layer))
        if attention is None:
            attention = parts[id(layer)] = layer.attention(plan)
        moe, moe_layers, share = None, 0, layer.dense_share
        if layer.moe_spec is not None:
            dense = max(0, min(end, layer.moe_spec.dense_layers) - start)
            share = dense / n
            moe_layers = n - dense
            moe = parts.get("moe")
            if moe is None:
                moe = parts["moe"] = self.layer.moe(plan)  # one MoE price per step, whatever the stage
        last = stage == self.pp - 1
        send = 0.0
        if not last:
            nbytes = pipeline.send_bytes(plan.num_tokens, self.model.hidden_size, self.aux[stage])
            send = pipeline.send_ms(self.kernels.device, nbytes, self.tp, stage)
        ops = layer.ops(plan, moe, share, send, attention)
        draft = self.draft_ms(plan.composition) if last else 0.0
        comm = 2 * n * ops[12]
        extra = self.extra(plan)
        lm = sampling = overhead = 0.0
        if extra is not None:
            lm, sampling = (extra.lm_head_ms, extra.sampling_ms) if last else (0.0, 0.0)
            overhead = extra.overhead_ms if stage == 0 else 0.0
        if moe is None:
            return StepPrice(plan, n, ops, draft, comm, lm, sampling, overhead)
        return StepPrice(plan, n, ops, draft, comm, lm, sampling, overhead, moe_ms=moe[0] * moe_layers,
                         experts_touched=moe[1])
