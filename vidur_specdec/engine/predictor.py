"""The Vidur execution-time predictor of this project, over fitted operator times.

:class:`SpecDecExecutionTimePredictor` — registered with Vidur under
:data:`SPECDEC_PREDICTOR`. It prices a step from the target's fitted
:class:`~vidur_specdec.costs.operator_model.OperatorTimeModel` (per-layer ops ×
layers, the tensor-parallel all-reduces from :mod:`~vidur_specdec.hardware.collectives`),
reads the step from its :class:`~vidur_specdec.engine.step_plan.StepPlan` (a verify
request told from a prefill chunk by the request's prefill state when the step was
formed, not by ``num_q_tokens == 1``; Vidur's per-layer hooks receive the plan),
prices verify attention with the configured :mod:`~vidur_specdec.costs.verify_cost`
policy, and adds the proposer's time and what
a step costs beyond the layers (:mod:`~vidur_specdec.costs.step_overheads`).

The operator-time model, its fit cache and profile lookup live in
:mod:`vidur_specdec.costs.operator_model` and are re-exported here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from vidur.config import BaseExecutionTimePredictorConfig
from vidur.execution_time_predictor import (
    BaseExecutionTimePredictor,
    ExecutionTimePredictorRegistry,
)
from vidur.types import BaseIntEnum

from vidur_specdec.config import DEFAULT_ALL_REDUCE
from vidur_specdec.hardware.collectives import all_reduce_model
from vidur_specdec.hardware.devices import DeviceSpec
from vidur_specdec.architectures.models import ModelSpec
from vidur_specdec.costs.operator_model import (  # noqa: F401 (re-exported: the fitting side of the predictor)
    CHUNK_STEP,
    KV_STEP,
    LAYER_OPS,
    LINEAR_TABLE_TOKENS,
    SHIPPED,
    Grid2D,
    OperatorTimeModel,
    clear_memory_cache,
    default_cache_dir,
    file_digest,
    fit_key,
    load_time_model,
    locate_profile,
    shipped_profiles_root,
)
from vidur_specdec.speculation.proposers.base import ProposerContext
from vidur_specdec.costs.kernels import unbound
from vidur_specdec.costs import pipeline
from vidur_specdec.costs.step_overheads import StepCost
# StepComposition moved to step_plan; re-exported here, where proposers, scripts and tests import it from
from vidur_specdec.engine.step_plan import StepComposition, StepPlan, plan_of  # noqa: F401

# --------------------------------------------------------------------------- the Vidur predictor


class SpecDecPredictorType(BaseIntEnum):
    """Registry keys of this project (values >= 100 never collide with Vidur's)."""

    SPECDEC_PROFILE = 100


SPECDEC_PREDICTOR = SpecDecPredictorType.SPECDEC_PROFILE


class StepTime:
    """A step's time: the target's pass plus the proposer plus the engine's overheads.

    ``verify_ms`` is the target's forward through its layers (Vidur's
    ExecutionTime, all-reduces included; a step log's ``t_fwd_end - t_fwd``);
    ``comm_ms`` the tensor-parallel all-reduces inside it (part of
    ``verify_ms``); ``lm_head_ms`` the target's LM head and logits gather
    (the rest of the target's pass, kept apart as step logs keep it);
    ``draft_ms`` the proposer; ``sampling_ms`` the sampler; ``overhead_ms``
    the engine's CPU work. The step's duration is the sum of all but
    ``comm_ms``. ``total_time`` / ``model_time`` are seconds, as Vidur expects; other
    attributes are read through to the target's ExecutionTime. ``plan`` is the
    :class:`~vidur_specdec.engine.step_plan.StepPlan` priced (how the step recorders,
    which Vidur hands no batch, read the step); ``k`` its k.
    """

    __slots__ = ("target", "verify_ms", "draft_ms", "comm_ms", "lm_head_ms", "sampling_ms", "overhead_ms",
                 "total_time", "model_time", "k", "moe_ms", "experts_touched", "send_ms", "plan")

    def __init__(self, target, draft_ms: float, comm_ms: float = 0.0, extra=None, plan: Optional[StepPlan] = None,
                 moe_ms: float = 0.0, experts_touched: float = 0.0) -> None:
        self.target = target
        self.plan = plan
        # mixture-of-experts targets: the MoE layers' time (ms, whole model, part of verify_ms)
        # and the mean distinct routed experts woken per MoE layer (0 on a dense target)
        self.moe_ms = moe_ms
        self.experts_touched = experts_touched
        self.k = plan.k if plan is not None else 0  # the k the step's guesses were drawn with (0: none)
        self.send_ms = 0.0  # pipeline parallel: this stage's send to the next stage (part of verify_ms)
        self.comm_ms = comm_ms
        self.lm_head_ms = extra.lm_head_ms if extra is not None else 0.0
        self.sampling_ms = extra.sampling_ms if extra is not None else 0.0
        self.overhead_ms = extra.overhead_ms if extra is not None else 0.0
        self.verify_ms = target.total_time * 1e3
        self.draft_ms = draft_ms
        beyond = draft_ms + (extra.total_ms if extra is not None else 0.0)
        self.total_time = target.total_time + beyond * 1e-3
        self.model_time = target.model_time + beyond * 1e-3

    def __getattr__(self, name):
        return getattr(self.target, name)


@dataclass
class SpecDecPredictorConfig(BaseExecutionTimePredictorConfig):
    """Predictor settings; ``target`` is the fitted model, ``verify_cost``/``proposer`` the policies.

    ``model_spec``/``device_spec``/``tensor_parallel_size`` describe the
    target's deployment (set by ``simulation.prepare``): the target's
    :class:`~vidur_specdec.architectures.models.ModelSpec`, the GPU's
    :class:`~vidur_specdec.hardware.devices.DeviceSpec` and the GPUs per replica.
    ``target`` was fitted from that TP's profile rows, so its op times are per GPU.
    ``step_overheads`` (a :class:`~vidur_specdec.costs.step_overheads.StepOverheads`)
    adds the LM head, sampling and engine overhead; None leaves them out.
    """

    target: Optional[OperatorTimeModel] = None
    verify_cost: object = None
    proposer: object = None
    model_spec: Optional[ModelSpec] = None
    device_spec: Optional[DeviceSpec] = None
    tensor_parallel_size: int = 1
    step_overheads: object = None
    all_reduce: str = DEFAULT_ALL_REDUCE  # engine.all_reduce: a key of collectives.ALL_REDUCE_MODELS
    expert_parallel_size: int = 1  # MoE layers expert-parallel over this many of the replica's GPUs (1: TP-split)
    kernels: object = None  # the deployment's KernelSource (vidur_specdec.costs.kernels); None: roofline on the device
    pipeline_parallel_size: int = 1  # stages per replica (vLLM's layer split, vidur_specdec.costs.pipeline)
    eagle3_aux: bool = False  # EAGLE-3: stages also send the auxiliary hidden states the drafter reads

    @staticmethod
    def get_type():
        return SPECDEC_PREDICTOR


class SpecDecExecutionTimePredictor(BaseExecutionTimePredictor):
    """Vidur predictor over a fitted :class:`OperatorTimeModel` (times in ms per layer)."""

    def __init__(self, predictor_config: SpecDecPredictorConfig, replica_config, cache_config) -> None:
        super().__init__(predictor_config=predictor_config, replica_config=replica_config,
                         cache_config=cache_config)
        if predictor_config.use_native_execution_time_predictor:
            raise ValueError("the native predictor cannot see request state; keep it off")
        self._m: OperatorTimeModel = predictor_config.target
        self._verify_cost = predictor_config.verify_cost
        self._proposer = predictor_config.proposer
        self._tp = int(predictor_config.tensor_parallel_size or 1)
        self._device = predictor_config.device_spec
        self._hidden = predictor_config.model_spec.hidden_size if predictor_config.model_spec is not None else 0
        self._overheads = predictor_config.step_overheads
        self._all_reduce = all_reduce_model(predictor_config.all_reduce)
        # the one kernel source of the run (the deployment's); without one, the roofline on the device
        # (the replica's Vidur SKU when no DeviceSpec was given) with the configured collective model
        self._kernels = predictor_config.kernels
        if self._kernels is None:
            self._kernels = unbound(self._device or getattr(replica_config, "device", None), self._all_reduce)
        spec = predictor_config.model_spec
        self._moe = spec if spec is not None and spec.is_moe else None
        if self._moe is not None:
            self._dense_share = spec.dense_layers / spec.num_layers  # layers whose MLP is the profile's
            self._ep = int(predictor_config.expert_parallel_size or 1)
        # hybrid linear attention (architectures/layer_plan.py): per-layer ops are the layer plan's mean
        self._hybrid = spec if spec is not None and getattr(spec, "linear_layers", 0) else None
        if self._hybrid is not None:
            self._full_share = (spec.num_layers - spec.linear_layers) / spec.num_layers
        # sliding layers beside global layers of their own head shape (Gemma 4): engine/global_layers.py
        self._global = None
        if spec is not None and getattr(spec, "global_head_dim", 0):
            from vidur_specdec.engine.global_layers import GlobalLayerMix

            self._global = GlobalLayerMix(spec, self._tp, self._kernels)
        if self._tp > 1 and (self._device is None or not self._hidden):
            raise ValueError("tensor_parallel_size > 1 needs model_spec and device_spec to price the all-reduces")
        if self._proposer is not None:
            # the target's device, TP, collective model and kernel source
            self._proposer.bind(ProposerContext(self._kernels.device, self._tp, self._all_reduce, self._kernels))
        self._pp = int(predictor_config.pipeline_parallel_size or 1)
        if self._pp > 1:
            layers = spec.num_layers
            self._ranges = [pipeline.stage_range(layers, self._pp, s) for s in range(self._pp)]
            self._aux = [pipeline.aux_states_sent(layers, self._pp, s) if predictor_config.eagle3_aux else 0
                         for s in range(self._pp)]
            self._stage = 0
        self._moe_for = self._gdn_for = None  # the last plan whose MoE / gated-delta-net layer was priced
        self._moe_value = self._gdn_value = None  # and that layer's price (see _moe_layer, _linear_attention_ms)

    def get_execution_time(self, batch, pipeline_stage: int) -> StepTime:
        """The step's time; ``batch`` is Vidur's batch (its :mod:`~vidur_specdec.engine.step_plan` plan is
        what is priced) or a :class:`~vidur_specdec.engine.step_plan.StepPlan`. The per-layer hooks Vidur's
        base class calls receive the plan."""
        if self._pp > 1:
            return self._stage_time(batch, pipeline_stage)
        return self._whole_time(plan_of(batch), pipeline_stage)

    def _stage_time(self, batch, stage: int) -> StepTime:
        """One pipeline stage of a step: its layers (vLLM's split), its send to the next stage (all but the
        last), the engine's CPU work on the first, and the LM head, sampling and drafter on the last
        (vLLM 0.33 puts the drafter on the last rank, ``gpu_model_runner.py``)."""
        plan = plan_of(batch)
        start, end = self._ranges[stage]
        n = end - start
        self._stage = stage
        self._num_layers_per_pipeline_stage = n  # what the base class multiplies the per-layer ops by
        moe_layers = 0
        if self._moe is not None:
            dense = max(0, min(end, self._moe.dense_layers) - start)
            self._dense_share = dense / n
            moe_layers = n - dense
        target = super().get_execution_time(plan, stage)
        last = stage == self._pp - 1
        draft_ms = self._proposer.step_time_ms(plan.composition) if (self._proposer and last) else 0.0
        comm_ms = 2 * target.num_layers * target.tensor_parallel_communication_time
        extra = self._extra(plan)
        if extra is not None:
            extra = StepCost(extra.lm_head_ms if last else 0.0, extra.sampling_ms if last else 0.0,
                             extra.overhead_ms if stage == 0 else 0.0)
        if self._moe is None:
            out = StepTime(target, draft_ms, comm_ms, extra, plan)
        else:
            layer_ms, distinct = self._moe_layer(plan)
            out = StepTime(target, draft_ms, comm_ms, extra, plan, moe_ms=layer_ms * moe_layers,
                           experts_touched=distinct)
        out.send_ms = target.pipeline_parallel_communication_time
        return out

    def _whole_time(self, plan: StepPlan, pipeline_stage: int) -> StepTime:
        """Target forward (base class, per-layer ops × layers, all-reduces included) plus proposer
        time plus what the step costs beyond the layers (:mod:`~vidur_specdec.costs.step_overheads`)."""
        target = super().get_execution_time(plan, pipeline_stage)
        draft_ms = self._proposer.step_time_ms(plan.composition) if self._proposer else 0.0
        # what Vidur added: the TP all-reduce twice per layer (after attention and after the MLP);
        # it calls _get_tensor_parallel_communication_time only when the replica's TP > 1
        comm_ms = 2 * target.num_layers * target.tensor_parallel_communication_time
        extra = self._extra(plan)
        if self._moe is None:
            return StepTime(target, draft_ms, comm_ms, extra, plan)
        layer_ms, distinct = self._moe_layer(plan)
        return StepTime(target, draft_ms, comm_ms, extra, plan,
                        moe_ms=layer_ms * self._moe.num_moe_layers, experts_touched=distinct)

    def _extra(self, plan: StepPlan):
        """The step's LM head, sampling and engine overhead (:mod:`~vidur_specdec.costs.step_overheads`), or None."""
        if self._overheads is None:
            return None
        return self._overheads.cost_rows(plan.logit_rows, len(plan), plan.verifying)

    def _moe_layer(self, plan: StepPlan):
        """(ms of one MoE layer, distinct experts it wakes) for this step, priced once per plan (the last
        plan priced is remembered: the MoE share is read by ``up_proj`` and by the step's totals)."""
        if self._moe_for is plan:
            return self._moe_value
        comp = plan.composition
        groups = list(comp.decode_q) + [c for _, c in comp.prefill]
        key = tuple(sorted(groups))  # the cost depends on the multiset of group sizes only
        memo = self.__dict__.setdefault("_moe_memo", {})
        cached = memo.get(key)
        if cached is None:
            if len(memo) >= 65536:  # bounded: steady decode steps repeat, prefill mixes rarely do
                memo.clear()
            cached = memo[key] = self._kernels.fused_moe_ms(self._moe, self._tp, groups, ep=self._ep)
        self._price_moe_as(plan, cached)
        return cached

    def _price_moe_as(self, plan: StepPlan, value) -> None:
        """Price ``plan``'s MoE layer as ``value`` = (ms, distinct experts) (the data-parallel group's
        predictor sets a rank's share of the group's experts this way before pricing the rank)."""
        self._moe_for, self._moe_value = plan, value

    def _tok(self, plan: StepPlan) -> int:
        return plan.num_tokens

    def _get_attention_layer_pre_proj_execution_time(self, plan) -> float:
        if self._hybrid is not None:
            return self._hybrid_proj(self._tok(plan))[0]
        if self._global is not None:
            return self._global.proj_ms(self._tok(plan))[0]
        return self._m.linear_ms("attn_pre_proj", self._tok(plan))

    def _get_attention_layer_post_proj_execution_time(self, plan) -> float:
        if self._hybrid is not None:
            return self._hybrid_proj(self._tok(plan))[1]
        if self._global is not None:
            return self._global.proj_ms(self._tok(plan))[1]
        return self._m.linear_ms("attn_post_proj", self._tok(plan))

    def _hybrid_proj(self, tokens: int):
        """(input, output) projections of the mean layer of a hybrid model (ms), from the kernel source's GEMMs:
        full-attention layers q (with its output gate), k, v / o; gated-delta-net layers in_proj_qkvz + in_proj_ba /
        out_proj (vLLM 0.33 ``qwen_gdn_linear_attn.py``; the two input projections priced as one GEMM)."""
        memo = self.__dict__.setdefault("_proj_memo", {})
        got = memo.get(tokens)
        if got is None:
            from vidur_specdec.architectures.layer_plan import gdn_conv_dim

            s, tp, g = self._hybrid, self._tp, self._kernels.gemm_ms
            dt = "fp8" if s.quantization == "fp8" else "bf16"
            q = s.num_heads // tp * s.head_dim * (2 if s.attn_output_gate else 1)
            kv = 2 * -(-s.num_kv_heads // tp) * s.head_dim
            hv = s.linear_num_value_heads * s.linear_value_head_dim
            full = (float(g(tokens, s.hidden_size, q + kv, dt)), float(g(tokens, s.num_heads // tp * s.head_dim,
                                                                          s.hidden_size, dt)))
            lin = (float(g(tokens, s.hidden_size, (gdn_conv_dim(s) + hv + 2 * s.linear_num_value_heads) // tp, dt)),
                   float(g(tokens, hv // tp, s.hidden_size, dt)))
            f = self._full_share
            got = (f * full[0] + (1 - f) * lin[0], f * full[1] + (1 - f) * lin[1])
            if len(memo) >= 65536:
                memo.clear()
            memo[tokens] = got
        return got

    def _linear_attention_ms(self, plan: StepPlan) -> float:
        """One gated-delta-net layer of the step (ms), priced once per plan by the kernel source."""
        if self._gdn_for is plan:
            return self._gdn_value
        comp = plan.composition
        chunks = [c for _, c in comp.prefill]
        # the cost depends on the decoding requests, their summed tokens and the prefill tokens only
        key = (len(comp.decode_q), sum(comp.decode_q), len(chunks), sum(chunks))
        memo = self.__dict__.setdefault("_gdn_memo", {})
        cached = memo.get(key)
        if cached is None:
            if len(memo) >= 65536:
                memo.clear()
            cached = memo[key] = self._kernels.linear_attention_ms(self._hybrid, self._tp, comp.decode_q, chunks)
        self._gdn_for, self._gdn_value = plan, cached
        return cached

    def _get_attention_rope_execution_time(self, plan) -> float:
        return self._m.linear_ms("attn_rope", self._tok(plan))

    def _get_attention_kv_cache_save_execution_time(self, plan) -> float:
        return 0.0  # Vidur leaves KV-cache save out of the layer time

    def _get_attention_decode_execution_time(self, plan) -> float:
        comp = plan.composition
        if self._hybrid is not None:  # the gated-delta-net layers' whole step rides on the decode op
            full = self._verify_cost.attention_ms(self._m, comp.decode_q, comp.decode_ctx) if comp.decode_q else 0.0
            return self._full_share * full + (1.0 - self._full_share) * self._linear_attention_ms(plan)
        if not comp.decode_q:
            return 0.0
        if self._global is not None:
            return self._global.decode_ms(lambda q, c: self._verify_cost.attention_ms(self._m, q, c),
                                          comp.decode_q, comp.decode_ctx)
        return self._verify_cost.attention_ms(self._m, comp.decode_q, comp.decode_ctx)

    def _get_attention_prefill_execution_time(self, plan) -> float:
        m = self._m
        if self._global is not None:
            return self._global.prefill_ms(m.prefill_attention_ms, plan.composition.prefill)
        full = sum(m.prefill_attention_ms(kv, c) for kv, c in plan.composition.prefill)
        return full if self._hybrid is None else self._full_share * full

    # On a mixture-of-experts target the MLP ops are the per-layer mean of the dense
    # leading layers (the profile's MLP ops) and the MoE layers (costs/moe_layer.py,
    # priced from the step's composition): the MoE share rides on up_proj.
    def _get_mlp_layer_up_proj_execution_time(self, plan) -> float:
        dense = self._m.linear_ms("mlp_up_proj", self._tok(plan))
        if self._moe is None:
            return dense
        return self._dense_share * dense + (1.0 - self._dense_share) * self._moe_layer(plan)[0]

    def _get_mlp_layer_down_proj_execution_time(self, plan) -> float:
        dense = self._m.linear_ms("mlp_down_proj", self._tok(plan))
        return dense if self._moe is None else self._dense_share * dense

    def _get_mlp_layer_act_execution_time(self, plan) -> float:
        dense = self._m.linear_ms("mlp_act", self._tok(plan))
        return dense if self._moe is None else self._dense_share * dense

    def _get_attn_norm_layer_act_execution_time(self, plan) -> float:
        return self._m.linear_ms("input_layernorm", self._tok(plan))

    def _get_mlp_norm_layer_act_execution_time(self, plan) -> float:
        return self._m.linear_ms("post_attention_layernorm", self._tok(plan))

    def _get_add_layer_act_execution_time(self, plan) -> float:
        return self._m.linear_ms("add", self._tok(plan))

    def _get_tensor_parallel_communication_time(self, plan) -> float:
        """One all-reduce (ms) of the step's hidden states: tokens × hidden × 2 bytes (bf16) at the TP degree.

        Vidur's ExecutionTime charges it twice per layer (after the attention
        output projection and after the MLP down projection); 0 at TP 1.
        Priced by the collective model ``engine.all_reduce`` names.
        """
        if self._tp <= 1:
            return 0.0
        return self._kernels.all_reduce_ms(self._tp, self._tok(plan) * self._hidden * 2)

    def _get_pipeline_parallel_communication_time(self, plan) -> float:
        """The current stage's send of the step's activations to the next stage (ms; Vidur skips the last)."""
        if self._pp <= 1:
            return 0.0
        nbytes = pipeline.send_bytes(self._tok(plan), self._hidden, self._aux[self._stage])
        return pipeline.send_ms(self._kernels.device, nbytes, self._tp, self._stage)

    def _get_kv_parallel_communication_time(self, plan) -> float:
        return 0.0


ExecutionTimePredictorRegistry.register(SPECDEC_PREDICTOR, SpecDecExecutionTimePredictor)
