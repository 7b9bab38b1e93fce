"""The Vidur-backed engine's execution-time predictor: Vidur's seam onto the one step pricer.

:class:`SpecDecExecutionTimePredictor` — registered with Vidur under
:data:`SPECDEC_PREDICTOR` — prices each batch Vidur hands it by its step plan
(:func:`~vidur_specdec.engine.reference.step_plan.plan_of`) with the run's
:class:`~vidur_specdec.pricing.pricer.StepPricer`, the same object the engine
core, ``tune`` and ``validate`` price with; it computes nothing of its own. The
:class:`~vidur_specdec.pricing.price.StepPrice` it returns carries what Vidur
reads (``total_time`` and ``model_time``, seconds) and what the step recorders
read. For Vidur's own ``MetricsStore`` (the plain-Sarathi reference run,
``run_vidur_sarathi``) the price is wrapped so Vidur's per-op fields read
through to a Vidur ``ExecutionTime`` of the same mean layer.
"""

from __future__ import annotations

from dataclasses import dataclass

from vidur.entities.execution_time import ExecutionTime as VidurExecutionTime  # Vidur's own per-op record
from vidur.config import BaseExecutionTimePredictorConfig
from vidur.execution_time_predictor import (
    BaseExecutionTimePredictor,
    ExecutionTimePredictorRegistry,
)
from vidur.types import BaseIntEnum

from vidur_specdec.engine.reference.step_plan import plan_of
from vidur_specdec.pricing.price import StepPrice


class SpecDecPredictorType(BaseIntEnum):
    """Registry keys of this project (values >= 100 never collide with Vidur's)."""

    SPECDEC_PROFILE = 100


SPECDEC_PREDICTOR = SpecDecPredictorType.SPECDEC_PROFILE


@dataclass
class SpecDecPredictorConfig(BaseExecutionTimePredictorConfig):
    """The run's step pricer (``pricer``); ``vidur_metrics``: wrap prices for Vidur's own ``MetricsStore``."""

    pricer: object = None  # vidur_specdec.pricing.pricer.StepPricer
    vidur_metrics: bool = False

    @staticmethod
    def get_type():
        return SPECDEC_PREDICTOR


class _WithVidurFields:
    """A :class:`StepPrice` whose Vidur per-op fields (``mlp_layer_up_proj_execution_time``, ...) read through to a
    Vidur ``ExecutionTime`` of the same mean layer; ``total_time``/``model_time`` stay the whole step's."""

    __slots__ = ("price", "ops")

    def __init__(self, price: StepPrice) -> None:
        self.price = price
        self.ops = VidurExecutionTime(price.num_layers, *price.layer_ops)

    @property
    def total_time(self) -> float:
        return self.price.total_time

    @property
    def model_time(self) -> float:
        return self.price.model_time

    def __getattr__(self, name):
        return getattr(self.ops, name)


class SpecDecExecutionTimePredictor(BaseExecutionTimePredictor):
    """Vidur predictor: each batch's step plan priced by the run's :class:`StepPricer`."""

    def __init__(self, predictor_config: SpecDecPredictorConfig, replica_config, cache_config) -> None:
        super().__init__(predictor_config=predictor_config, replica_config=replica_config,
                         cache_config=cache_config)
        if predictor_config.use_native_execution_time_predictor:
            raise ValueError("the native predictor cannot see request state; keep it off")
        if predictor_config.pricer is None:
            raise ValueError("SpecDecPredictorConfig needs the run's step pricer")
        self.pricer = predictor_config.pricer
        self._wrap = bool(predictor_config.vidur_metrics)

    def get_execution_time(self, batch, pipeline_stage: int):
        """The step's :class:`StepPrice` (one pipeline stage of it); ``batch`` a Vidur batch or a StepPlan."""
        price = self.pricer.price(plan_of(batch), pipeline_stage)
        return _WithVidurFields(price) if self._wrap else price

    # Vidur's per-op hooks are never called (get_execution_time prices the whole step); they are abstract there.
    def _unused(self, batch) -> float:  # pragma: no cover
        raise AssertionError("priced by the step pricer")

    _get_attention_layer_pre_proj_execution_time = _unused
    _get_attention_layer_post_proj_execution_time = _unused
    _get_attention_rope_execution_time = _unused
    _get_attention_kv_cache_save_execution_time = _unused
    _get_attention_decode_execution_time = _unused
    _get_attention_prefill_execution_time = _unused
    _get_mlp_layer_up_proj_execution_time = _unused
    _get_mlp_layer_down_proj_execution_time = _unused
    _get_mlp_layer_act_execution_time = _unused
    _get_tensor_parallel_communication_time = _unused
    _get_pipeline_parallel_communication_time = _unused
    _get_attn_norm_layer_act_execution_time = _unused
    _get_mlp_norm_layer_act_execution_time = _unused
    _get_add_layer_act_execution_time = _unused
    _get_kv_parallel_communication_time = _unused


ExecutionTimePredictorRegistry.register(SPECDEC_PREDICTOR, SpecDecExecutionTimePredictor)
