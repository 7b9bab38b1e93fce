"""The Vidur-backed reference: a prepared run on Vidur's own event loop, entities and Sarathi scheduler.

``simulator: vidur`` runs here: Vidur's :class:`~vidur.simulator.Simulator` with
this project's subclasses registered in Vidur's registries (the speculative
Sarathi scheduler, :mod:`.scheduler`; the speculative request, :mod:`.request`;
the predictor onto the step pricer, :mod:`.predictor`; a data-parallel group,
:mod:`.dp_group`; prefill and decode pools, :mod:`.disagg`; closed-loop
arrivals, :mod:`.closed_loop`) and the project's step recorder in place of
Vidur's ``MetricsStore``. It is the design's reference: the engine core
(:mod:`vidur_specdec.engine.core`) is held to its tables. :func:`run_plain_sarathi`
runs Vidur's own ``SarathiReplicaScheduler``, requests and metrics store on the
same workload and pricer (the plain-decoding reference, and the speed baseline).
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import sys
import tempfile
from dataclasses import dataclass, field
from typing import Dict, List, Optional

import pandas as pd
from vidur.config import (
    BaseRequestGeneratorConfig,
    CacheConfig,
    ClusterConfig,
    LORGlobalSchedulerConfig,
    MetricsConfig,
    ReplicaConfig,
    RoundRobinGlobalSchedulerConfig,
    SarathiSchedulerConfig,
    SimulationConfig,
)
from vidur.config.model_config import BaseModelConfig, Llama2ModelConfig
from vidur.entities import Request
from vidur.entities.base_entity import BaseEntity
from vidur.events.base_event import BaseEvent
from vidur.request_generator.base_request_generator import BaseRequestGenerator
from vidur.request_generator.request_generator_registry import RequestGeneratorRegistry
from vidur.simulator import Simulator
from vidur.types import BaseIntEnum

from vidur_specdec.architectures.models import ModelSpec
from vidur_specdec.config import GLOBAL_SCHEDULERS as GLOBAL_SCHEDULER_NAMES, ConfigError
from vidur_specdec.engine.metrics import StepRecorder, requests_frame
from vidur_specdec.engine.pipeline_metrics import PipelineStepRecorder
from vidur_specdec.engine.reference.closed_loop import ClosedLoopMixin
from vidur_specdec.engine.reference.disagg import run_topology
from vidur_specdec.engine.reference.dp_group import DPGroupSchedulerConfig
from vidur_specdec.engine.reference.predictor import SpecDecPredictorConfig
from vidur_specdec.engine.reference.request import SpecRequest
from vidur_specdec.engine.reference.scheduler import SpecSarathiSchedulerConfig

logging.getLogger("vidur").setLevel(logging.WARNING)


def reset_vidur_ids() -> None:
    """Reset Vidur's class-level id counters so another simulation can run in this process."""
    _reset_entity_counters(BaseEntity)
    BaseEvent._id = 0  # Vidur has no public reset for these class-level counters


def _reset_entity_counters(cls) -> None:
    if "_id" in cls.__dict__:
        cls._id = -1
    for sub in cls.__subclasses__():
        _reset_entity_counters(sub)


# Strong references to the Vidur model configs registered here. Vidur finds model
# configs through ``BaseModelConfig.__subclasses__()``, which holds only weak
# references: a class made by ``make_dataclass`` sits in reference cycles, so
# without this dict a ``gc.collect()`` would unregister it.
_VIDUR_MODELS: Dict[str, type] = {}


def _vidur_dims(spec: ModelSpec) -> tuple:
    return (spec.num_layers, spec.vidur_q_heads, spec.num_kv_heads, spec.hidden_size, spec.ffn_size,
            spec.max_model_len, spec.vocab_size)


def _vidur_config_dims(cfg) -> tuple:
    return (cfg.num_layers, cfg.num_q_heads, cfg.num_kv_heads, cfg.embedding_dim, cfg.mlp_hidden_dim,
            cfg.max_model_len, cfg.vocab_size)


def vidur_model_name(spec: ModelSpec) -> str:
    """Vidur's name for ``spec``, registering a Llama-2-style Vidur model config if Vidur lacks one.

    Vidur's base predictor reads the layer count from this config, so a spec
    whose dimensions differ from Vidur's model of the same name (a model file
    reusing a known name) is registered under ``<name>#<digest>``.
    """
    name = spec.name
    try:
        if _vidur_config_dims(BaseModelConfig.create_from_name(name)) == _vidur_dims(spec):
            return name
        name = f"{spec.name}#{hashlib.sha256(repr(_vidur_dims(spec)).encode()).hexdigest()[:8]}"
        if name in _VIDUR_MODELS:
            return name
    except ValueError:
        pass
    cls = dataclasses.make_dataclass(
        "SpecDec_" + "".join(c if c.isalnum() else "_" for c in name),
        [("num_layers", int, spec.num_layers), ("num_q_heads", int, spec.vidur_q_heads),
         ("num_kv_heads", int, spec.num_kv_heads), ("embedding_dim", int, spec.hidden_size),
         ("mlp_hidden_dim", int, spec.ffn_size), ("max_model_len", int, spec.max_model_len),
         ("vocab_size", int, spec.vocab_size)],
        bases=(Llama2ModelConfig,),
        namespace={"get_name": staticmethod(lambda n=name: n)},
    )
    _VIDUR_MODELS[name] = cls
    return name


class _NoFilesMetricsConfig(MetricsConfig):
    """Vidur's MetricsConfig without its side effect (it makes a timestamped folder)."""

    def __post_init__(self) -> None:
        pass


class _NoFilesSimulationConfig(SimulationConfig):
    """Vidur's SimulationConfig without writing config.json (our configs hold fitted models)."""

    def write_config_to_file(self) -> None:
        pass


@dataclass
class _StagesReplicaConfig(ReplicaConfig):
    """Vidur's ReplicaConfig, allowing vLLM's uneven layer split over pipeline stages.

    Vidur asserts that the stages divide the layers; vLLM does not require it
    (``get_pp_indices``), and the predictor prices each stage's own layers
    (:mod:`vidur_specdec.costs.pipeline`), so Vidur's even per-stage count is never read.
    """

    def __post_init__(self) -> None:
        stages, self.num_pipeline_stages = self.num_pipeline_stages, 1
        super().__post_init__()
        self.num_pipeline_stages = stages
        self.world_size = stages * self.tensor_parallel_size
        self._num_layers_per_pipeline_stage = self.model_config.num_layers // stages


class _RecorderHooks:
    """Vidur's ``MetricsStore`` hooks onto the project's step recorder: a step's stage starting and ending
    (Vidur's ``BatchStage`` has no public accessor for its batch id, which keys a pipelined step's stages)."""

    def __init__(self, recorder) -> None:
        self.recorder = recorder

    def on_replica_stage_schedule(self, time, replica_id, stage_id, batch_stage, execution_time) -> None:
        self.recorder.record(time, int(getattr(replica_id, "id", replica_id)), stage_id, batch_stage._batch_id,
                             execution_time)

    def on_batch_stage_end(self, time, batch_stage, replica_id, stage_id) -> None:
        self.recorder.stage_end(time, int(getattr(replica_id, "id", replica_id)), stage_id, batch_stage._batch_id)

    def on_request_arrival(self, time, request) -> None:
        pass

    def on_replica_schedule(self, time, replica_id, memory_usage_percent) -> None:
        pass

    def on_batch_end(self, time, batch, replica_id, memory_usage_percent) -> None:
        pass

    def plot(self) -> None:
        pass


class SpecDecSimulator(ClosedLoopMixin, Simulator):
    """Vidur's simulator with the project's step recorder in place of ``MetricsStore`` (closed loop optional)."""

    def __init__(self, config: SimulationConfig) -> None:
        super().__init__(config)
        stages = config.cluster_config.replica_config.num_pipeline_stages
        self.recorder = StepRecorder() if stages == 1 else PipelineStepRecorder(stages)
        self._metric_store = self.watch(_RecorderHooks(self.recorder))

    def _write_output(self) -> None:
        pass  # the caller writes the project's tables


class VidurSimulator(ClosedLoopMixin, Simulator):
    """Vidur's own simulator and ``MetricsStore``, with the same closed-loop arrivals (the k = 0 reference)."""


# --------------------------------------------------------------------------- the workload, as a Vidur request generator


class SpecDecGeneratorType(BaseIntEnum):
    """Registry keys of this project (values >= 100 never collide with Vidur's)."""

    PREBUILT = 100


SPECDEC_GENERATOR = SpecDecGeneratorType.PREBUILT


@dataclass
class PrebuiltRequestGeneratorConfig(BaseRequestGeneratorConfig):
    """A fixed list of :class:`RequestSpec`; ``request_class`` builds the Vidur requests.

    ``concurrency`` (requests in flight) makes the arrivals closed-loop
    (:mod:`vidur_specdec.engine.reference.closed_loop`); None keeps each spec's arrival time.
    """

    specs: list = field(default_factory=list)
    request_class: type = Request
    concurrency: Optional[int] = None

    @staticmethod
    def get_type():
        return SPECDEC_GENERATOR


class PrebuiltRequestGenerator(BaseRequestGenerator):
    """Turns the prebuilt specs into fresh Vidur requests (one list per simulation)."""

    def generate_requests(self) -> List[Request]:
        cls = self.config.request_class
        out = []
        for i, s in enumerate(self.config.specs):
            if cls is Request:
                out.append(Request(s.arrived_at_s, s.prompt_tokens, s.output_tokens))
            else:
                out.append(cls(s.arrived_at_s, s.prompt_tokens, s.output_tokens, index=i))
        self.requests = out
        return out


RequestGeneratorRegistry.register(SPECDEC_GENERATOR, PrebuiltRequestGenerator)


def scheduler_config(p, dp: int = 1):
    """Vidur's replica-scheduler config for a prepared run's ``SchedulerSettings`` (a data-parallel group's when
    ``dp`` > 1)."""
    s = p.scheduler
    fields = {f.name: getattr(s, f.name) for f in dataclasses.fields(s)}
    fields["k_schedule"] = [tuple(r) for r in s.k_schedule] if s.k_schedule else None
    if dp > 1:
        return DPGroupSchedulerConfig(data_parallel_size=dp, **fields)
    return SpecSarathiSchedulerConfig(**fields)


#: ``parallel.global_scheduler`` → Vidur's global scheduler config (Vidur's own schedulers, unchanged), keyed by
#: Vidur's own type name; ``lor`` is least outstanding requests: fewest queued, ties to the lowest replica id.
GLOBAL_SCHEDULERS = {str(c.get_type()): c for c in (RoundRobinGlobalSchedulerConfig, LORGlobalSchedulerConfig)}
assert tuple(GLOBAL_SCHEDULERS) == GLOBAL_SCHEDULER_NAMES, "parallel.global_scheduler's choices must be Vidur's"


def vidur_config(p, scheduler_config, request_class, metrics_config=None, predictor_config=None) -> SimulationConfig:
    """Vidur's SimulationConfig for a prepared run.

    ``parallel.num_replicas`` identical replicas (the run's TP and pipeline stages), each with
    its own ``num_blocks`` KV blocks (the memory plan is per replica), behind
    Vidur's ``parallel.global_scheduler``. Vidur's device SKU and network device
    are bookkeeping only (see :meth:`Deployment.vidur_device_sku`); the predictor
    and memory plan use the run's own :class:`~vidur_specdec.hardware.devices.DeviceSpec`.
    """
    dep = p.deployment
    sku = dep.vidur_device_sku()
    replica = (ReplicaConfig if dep.pp == 1 else _StagesReplicaConfig)(
        model_name=vidur_model_name(p.model), num_pipeline_stages=dep.pp, tensor_parallel_size=dep.tp,
        device=sku, network_device=f"{sku}_pairwise_nvlink" if dep.tp == 1 else f"{sku}_dgx",
    )
    cache = CacheConfig(
        block_size=p.memory.block_size, num_blocks=int(p.memory.num_blocks),
        watermark_blocks_fraction=p.cfg.scheduler.watermark_blocks_fraction,
        memory_margin_fraction=p.cfg.scheduler.memory_margin_fraction,
    )
    cluster = ClusterConfig(
        num_replicas=p.cfg.parallel.num_replicas, replica_config=replica, cache_config=cache,
        global_scheduler_config=GLOBAL_SCHEDULERS[p.cfg.parallel.global_scheduler](),
        replica_scheduler_config=scheduler_config,
    )
    w = p.cfg.workload
    generator = PrebuiltRequestGeneratorConfig(
        seed=p.cfg.seed, max_tokens=p.model.max_model_len, specs=p.specs, request_class=request_class,
        concurrency=w.concurrency if w.arrival == "closed" else None,
    )
    metrics = metrics_config or _NoFilesMetricsConfig(
        write_metrics=False, write_json_trace=False, enable_chrome_trace=False, store_plots=False,
    )
    return _NoFilesSimulationConfig(
        seed=p.cfg.seed, log_level="warning", cluster_config=cluster, request_generator_config=generator,
        execution_time_predictor_config=predictor_config or SpecDecPredictorConfig(pricer=p.pricer),
        metrics_config=metrics,
    )


def run_reference(p, sim_mod):
    """Run a prepared run (or topology of pools) on Vidur's event loop; ``sim_mod`` is
    :mod:`vidur_specdec.engine.simulation` (its ``finish`` builds the summary)."""
    if hasattr(p, "pools"):
        return run_topology(p, sys.modules[__name__], sim_mod)
    reset_vidur_ids()
    sim = SpecDecSimulator(vidur_config(p, scheduler_config(p, p.deployment.dp), SpecRequest))
    run_to_end(sim, lambda n: f"scheduler.num_blocks: {n} requests could not be scheduled with "
                              f"{p.memory.num_blocks} KV blocks; give more blocks")
    return sim_mod.finish(p, requests_frame(sim.requests, sim.recorder.replica_of), sim.recorder.steps_frame())


def run_to_end(sim, message) -> None:
    """Run Vidur's loop; requests left unscheduled (too few KV blocks) end it with ``message(count)`` as one
    :class:`ConfigError` line, whether or not Vidur's own end-of-run assertion is compiled in."""
    try:
        sim.run()
    except AssertionError:
        if all(r.completed for r in sim.requests):
            raise
    unfinished = sum(not r.completed for r in sim.requests)
    if unfinished:
        raise ConfigError(message(unfinished)) from None


def run_plain_sarathi(p) -> pd.DataFrame:
    """Vidur's own Sarathi scheduler, requests and MetricsStore on a prepared plain-decoding run (see
    :func:`vidur_specdec.engine.simulation.run_vidur_sarathi`)."""
    if p.scheduler.state_blocks:
        raise ConfigError(f"model: {p.model.name} keeps linear-attention state in the block pool, which Vidur's own "
                          "Sarathi does not hold; simulate it with the speculative scheduler (method none)")
    sched = SarathiSchedulerConfig(chunk_size=p.cfg.scheduler.chunk_size, batch_size_cap=p.cfg.scheduler.batch_size_cap)
    with tempfile.TemporaryDirectory() as tmp:
        metrics = MetricsConfig(write_metrics=True, write_json_trace=False, enable_chrome_trace=False,
                                store_plots=False, output_dir=tmp)
        reset_vidur_ids()
        sim = VidurSimulator(vidur_config(p, sched, Request, metrics,
                                          SpecDecPredictorConfig(pricer=p.pricer, vidur_metrics=True)))
        try:
            sim.run()
        except AssertionError:
            # Vidur's own Request.restart() keeps its stage counters, so the first preemption trips
            # Vidur's assertion (SpecRequest.restart fixes it; found by tests/test_properties.py)
            raise ConfigError(f"scheduler.num_blocks: Vidur's own Sarathi cannot preempt a request and "
                              f"{p.memory.num_blocks} KV blocks force preemption; give more blocks") from None
        reqs = sim.requests
    return pd.DataFrame({
        "arrived_at_s": [r.arrived_at for r in reqs],
        "first_token_s": [r.prefill_completed_at for r in reqs],
        "completed_at_s": [r.completed_at for r in reqs],
    })
