"""Run one simulation: config → Vidur objects → event loop → tables.

:func:`simulate` is the library entry point (notebooks, sweeps, tests)::

    from vidur_specdec import simulate
    res = simulate("configs/default.yaml", overrides=["speculative.num_speculative_tokens=2"])
    res.requests, res.steps, res.summary

:func:`run_vidur_sarathi` runs Vidur's own ``SarathiReplicaScheduler`` with
Vidur's own requests and metrics store on the same workload and predictor:
the reference that ``method: none`` must reproduce.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Union

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
from vidur.request_generator.base_request_generator import BaseRequestGenerator
from vidur.request_generator.request_generator_registry import RequestGeneratorRegistry
from vidur.events.base_event import BaseEvent
from vidur.simulator import Simulator
from vidur.types import BaseIntEnum

from vidur_specdec.speculation import acceptance as acceptance_mod
from vidur_specdec.engine.closed_loop import ClosedLoopMixin
from vidur_specdec.engine import deployment
from vidur_specdec.costs import memory
from vidur_specdec.speculation import proposers
from vidur_specdec.costs import step_overheads
from vidur_specdec.costs import verify_cost
from vidur_specdec.costs.pipeline import AUX_METHODS
from vidur_specdec.config import GLOBAL_SCHEDULERS as GLOBAL_SCHEDULER_NAMES, ConfigError, RunConfig
from vidur_specdec.engine.resolve import load, priced, resolve
from vidur_specdec.engine.warnings import config_warnings
from vidur_specdec.engine.metrics import StepRecorder, data_parallel_summary, requests_frame, summarize
from vidur_specdec.engine.pipeline_metrics import PipelineStepRecorder
from vidur_specdec.engine.deployment import Deployment
from vidur_specdec.architectures.models import ModelSpec
from vidur_specdec.engine.predictor import SpecDecPredictorConfig
from vidur_specdec.costs.profiles.on_demand import describe
from vidur_specdec.engine.request import SpecRequest
from vidur_specdec.speculation.proposals import ProposalModel
from vidur_specdec.speculation.tree import parse_tree
from vidur_specdec.engine.scheduler import SpecSarathiSchedulerConfig
from vidur_specdec.engine.dp_group import DPGroupSchedulerConfig
from vidur_specdec.engine.dp_predictor import DPPredictorConfig
from vidur_specdec.engine.workload import RequestSpec
from vidur_specdec.engine.topology import prepare_topology
from vidur_specdec.engine.disagg import run_topology
from vidur_specdec.speculation.proposers.pairing import describe_proposer
from vidur_specdec.speculation.acceptance_source import describe as describe_acceptance, row_category
from vidur_specdec.costs.kernels import versions as kernel_versions

logging.getLogger("vidur").setLevel(logging.WARNING)


@dataclass
class SimulationResult:
    """Per-request and per-step tables (pandas) plus the run summary (dict)."""

    requests: pd.DataFrame
    steps: pd.DataFrame
    summary: Dict
    config: RunConfig


# --------------------------------------------------------------------------- Vidur plumbing


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
    return (spec.num_layers, spec.num_heads, spec.num_kv_heads, spec.hidden_size, spec.ffn_size,
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
        [("num_layers", int, spec.num_layers), ("num_q_heads", int, spec.num_heads),
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


class SpecDecSimulator(ClosedLoopMixin, Simulator):
    """Vidur's simulator with the project's step recorder in place of ``MetricsStore`` (closed loop optional)."""

    def __init__(self, config: SimulationConfig) -> None:
        super().__init__(config)
        stages = config.cluster_config.replica_config.num_pipeline_stages
        self.recorder = StepRecorder() if stages == 1 else PipelineStepRecorder(stages)
        self._metric_store = self.watch(self.recorder)

    def _write_output(self) -> None:
        pass  # the caller writes the project's tables

    @property
    def requests(self) -> List[Request]:
        return self._request_generator.requests


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
    (:mod:`vidur_specdec.engine.closed_loop`); None keeps each spec's arrival time.
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


# --------------------------------------------------------------------------- building a run


@dataclass
class Prepared:
    """Everything a run needs, built and validated before the event loop starts."""

    cfg: RunConfig
    specs: List[RequestSpec]
    model: ModelSpec
    memory: memory.MemoryPlan
    predictor: SpecDecPredictorConfig
    scheduler: SpecSarathiSchedulerConfig
    profile_files: Dict[str, str]
    deployment: Optional[Deployment] = None
    profile_source: Dict[str, Optional[str]] = field(default_factory=dict)  # target/draft: shipped|built|measured
    warnings: List[str] = field(default_factory=list)  # config.config_warnings: one line each


def prepare(cfg: RunConfig, specs: Optional[List[RequestSpec]] = None):
    """Plan memory, draw the workload, fit the predictors; raises :class:`ConfigError` on bad input.

    Cheap checks (model, device, TP, memory per GPU, the longest request) come
    before the profiles are built or fitted. ``specs`` replaces the drawn
    workload (a prefill pool's requests). With ``disaggregation`` keys the
    result is a :class:`~vidur_specdec.engine.topology.Topology` of pools, each prepared here.
    """
    if cfg.disaggregation.enabled:
        return prepare_topology(cfg, prepare)
    spec = cfg.speculative
    dep = resolve(cfg).deployment
    model, draft_spec = dep.model, dep.draft
    if dep.dp > 1:  # refuse, in one line and before any work, a device or source without all-to-all tables
        for mode in ("decode", "prefill"):
            dep.kernels.all_to_all_ms(model, mode, 1, dep.ep)
    acceptance = acceptance_mod.build(spec, cfg.seed)  # reads and checks a trace before any work
    if specs is None:
        specs = deployment.run_requests(cfg, acceptance)  # a trace's lengths stay paired with its acceptance
    if acceptance is not None and spec.acceptance_source == "published" and "dataset" in spec.acceptance_factors:
        acceptance.set_categories([s.category for s in specs], row_category(cfg))  # a trace's per-request ones
    longest = max(range(len(specs)), key=lambda i: specs[i].prompt_tokens + specs[i].output_tokens)
    total = specs[longest].prompt_tokens + specs[longest].output_tokens
    if total > model.max_model_len:
        raise ConfigError(f"workload.trace_file: request {longest} has prompt + output = {total} tokens "
                          f"> max_model_len {model.max_model_len}")
    head = proposers.head_memory(cfg, dep)  # an EAGLE/MTP/Medusa head's weights and KV per GPU (cheap)
    mem = deployment.plan_memory(cfg, dep, total, longest, head=head)
    gpu_blocks = mem.num_blocks if cfg.scheduler.num_blocks is None else deployment.gpu_blocks(cfg, dep, head)
    warnings = config_warnings(cfg, gpu_blocks=gpu_blocks)
    warnings += dep.kernels.warnings(dep.tp, [model], dep.ep)  # what the kernel source could not measure
    target, proposer, choices = priced(cfg, dep, deployment.longest_request_tokens(cfg, specs))
    t = choices["target"]
    files = {"target_mlp": describe(t, t.mlp), "target_attention": describe(t, t.attention)}
    if draft_spec is not None:
        d = choices["draft"]
        files.update(draft_mlp=describe(d, d.mlp), draft_attention=describe(d, d.attention))
    dp = dep.dp > 1  # a data-parallel group per replica (vidur_specdec/engine/dp_group.py)
    predictor = (DPPredictorConfig if dp else SpecDecPredictorConfig)(
        **({"data_parallel_size": dep.dp, "redundant_experts": dep.redundant_experts} if dp else {}),
        target=target,
        verify_cost=verify_cost.build(spec),
        proposer=proposer,
        model_spec=model,
        device_spec=dep.device,
        tensor_parallel_size=dep.tp,
        step_overheads=step_overheads.build(cfg.engine, model, dep.device, dep.tp, target,
                                            step_overheads.piecewise_graphs(cfg), kernels=dep.kernels),
        all_reduce=cfg.engine.all_reduce,
        expert_parallel_size=dep.ep,
        kernels=dep.kernels,
        pipeline_parallel_size=dep.pp,
        eagle3_aux=bool(spec.enabled and spec.method in AUX_METHODS),
    )
    tree = parse_tree(spec.speculative_token_tree) if spec.enabled else None
    scheduler = (DPGroupSchedulerConfig if dp else SpecSarathiSchedulerConfig)(
        **({"data_parallel_size": dep.dp} if dp else {}),
        chunk_size=cfg.scheduler.chunk_size,
        batch_size_cap=cfg.scheduler.batch_size_cap,
        num_speculative_tokens=spec.num_speculative_tokens if spec.enabled else 0,
        acceptance=acceptance,
        tree_nodes=tree.num_nodes if tree else None,
        max_draft_context=proposer.max_context,
        k_schedule=[tuple(r) for r in spec.num_speculative_tokens_per_batch_size]
        if spec.enabled and spec.num_speculative_tokens_per_batch_size else None,
        proposals=ProposalModel.from_config(cfg),
        num_lookahead_tokens=proposers.lookahead_tokens(cfg),
        drafter_sync=bool(spec.enabled and proposer.drafter_forward),
    )
    sources = {"target": t.source, "draft": choices["draft"].source if draft_spec is not None else None}
    return Prepared(cfg, specs, model, mem, predictor, scheduler, files, dep, sources, warnings)


#: ``parallel.global_scheduler`` → Vidur's global scheduler config (Vidur's own schedulers, unchanged), keyed by
#: Vidur's own type name; ``lor`` is least outstanding requests: fewest queued, ties to the lowest replica id.
GLOBAL_SCHEDULERS = {str(c.get_type()): c for c in (RoundRobinGlobalSchedulerConfig, LORGlobalSchedulerConfig)}
assert tuple(GLOBAL_SCHEDULERS) == GLOBAL_SCHEDULER_NAMES, "parallel.global_scheduler's choices must be Vidur's"


def vidur_config(p: Prepared, scheduler_config, request_class, metrics_config=None) -> SimulationConfig:
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
        execution_time_predictor_config=p.predictor, metrics_config=metrics,
    )


def run_prepared(p: Prepared) -> SimulationResult:
    """Run the event loop for a prepared config (or topology of pools) and build the tables."""
    if not isinstance(p, Prepared):
        return run_topology(p, sys.modules[__name__])
    reset_vidur_ids()
    sim = SpecDecSimulator(vidur_config(p, p.scheduler, SpecRequest))
    try:
        sim.run()
    except AssertionError as e:  # Vidur's end-of-run check: requests that could never be scheduled
        if "pending requests" not in str(e):
            raise
        unfinished = sum(not r.completed for r in sim.requests)
        raise ConfigError(f"scheduler.num_blocks: {unfinished} requests could not be scheduled with "
                          f"{p.memory.num_blocks} KV blocks; give more blocks") from None
    return finish(p, requests_frame(sim.requests, sim.recorder.replica_of), sim.recorder.steps_frame())


def finish(p: Prepared, req: pd.DataFrame, steps: pd.DataFrame, more: Optional[Dict] = None,
           cfg: Optional[RunConfig] = None) -> SimulationResult:
    """The run's result from its tables: the summary of ``p``'s run, updated with ``more``; ``cfg`` the run's."""
    acc = p.scheduler.acceptance
    extra = {
        "model": p.model.name,
        "device": p.deployment.device.name if p.deployment else p.cfg.device,
        "tensor_parallel_size": int(p.predictor.tensor_parallel_size),
        "profiles": p.profile_files,
        "profile_source": dict(p.profile_source),
        **({"kernel_sources": p.deployment.kernels.sources(
            p.deployment.tp, [s for s in (p.model, p.deployment.draft) if s is not None], p.deployment.ep)}
           if p.deployment and p.deployment.kernels is not None else {}),
        "method": p.cfg.speculative.method if p.cfg.speculative.enabled else "none",
        "num_speculative_tokens": p.scheduler.num_speculative_tokens,
        "num_speculative_tokens_per_batch_size": [list(r) for r in p.scheduler.k_schedule]
        if p.scheduler.k_schedule else None,
        "verify_attention": p.cfg.speculative.verify_attention,
        "expected_accepted_per_full_step": acc.mean_accepted if acc else 0.0,  # None for a trace
        "acceptance_input": p.cfg.speculative.acceptance_input() if acc else None,
        "kv_blocks_target": int(p.memory.num_blocks),
        "kv_blocks_draft": int(p.memory.draft_blocks),
        "memory": p.memory.to_dict(),
        "num_replicas": p.cfg.parallel.num_replicas,
        "global_scheduler": p.cfg.parallel.global_scheduler,
        "num_gpus": p.cfg.parallel.num_replicas * p.cfg.parallel.tensor_parallel_size
        * p.cfg.parallel.pipeline_parallel_size * p.cfg.parallel.data_parallel_size,
        **({"pipeline_parallel_size": p.cfg.parallel.pipeline_parallel_size}
           if p.cfg.parallel.pipeline_parallel_size > 1 else {}),
        **({"expert_parallel_size": p.deployment.ep} if p.deployment and p.deployment.ep > 1 else {}),
        **(data_parallel_summary(steps, p.deployment.dp, p.deployment.redundant_experts)
           if p.deployment and p.deployment.dp > 1 else {}),
        "seed": p.cfg.seed,
        "warnings": list(p.warnings),
    }

    extra["versions"] = kernel_versions(extra.get("kernel_sources"))  # the tables' vLLM against the semantics'
    extra.update(describe_proposer(p.cfg))
    extra.update(describe_acceptance(p.cfg))  # published rows, the across-k model or the default; {} if given
    warm = p.cfg.workload.warmup_requests  # the first N arrivals are left out of the metrics
    extra["warmup_requests"] = warm
    extra.update(more or {})
    measured = req.sort_values(["arrived_at_s", "request_id"]).iloc[warm:].sort_index() if warm else req
    return SimulationResult(req, steps, summarize(measured, steps, extra), cfg or p.cfg)


def simulate(config: Union[str, Path, Mapping, RunConfig, None] = None,
             overrides: Optional[List[str]] = None) -> SimulationResult:
    """Run one simulation from a config (YAML path, dict or RunConfig) plus ``key=value`` overrides.

    Returns the requests and steps tables (pandas DataFrames) and the summary
    dict. Raises :class:`~vidur_specdec.config.ConfigError` on bad input.
    """
    cfg = load(config, overrides)
    return run_prepared(prepare(cfg))


def run_vidur_sarathi(config: Union[str, Path, Mapping, RunConfig, None] = None,
                      overrides: Optional[List[str]] = None) -> pd.DataFrame:
    """Vidur's own Sarathi scheduler, requests and MetricsStore on the same workload and predictor.

    Speculation settings are ignored (plain decoding). Honours
    ``parallel.num_replicas`` and ``parallel.global_scheduler`` (Vidur's own
    cluster and global scheduler) and closed-loop arrivals. Returns per-request
    ``arrived_at_s, first_token_s, completed_at_s`` in workload order.
    """
    cfg = load(config, overrides)
    cfg.speculative.method = "none"
    p = prepare(cfg)
    sched = SarathiSchedulerConfig(chunk_size=cfg.scheduler.chunk_size, batch_size_cap=cfg.scheduler.batch_size_cap)
    with tempfile.TemporaryDirectory() as tmp:
        metrics = MetricsConfig(write_metrics=True, write_json_trace=False, enable_chrome_trace=False,
                                store_plots=False, output_dir=tmp)
        reset_vidur_ids()
        sim = VidurSimulator(vidur_config(p, sched, Request, metrics))
        try:
            sim.run()
        except AssertionError:
            # Vidur's own Request.restart() keeps its stage counters, so the first preemption trips
            # Vidur's assertion (SpecRequest.restart fixes it; found by tests/test_properties.py)
            raise ConfigError(f"scheduler.num_blocks: Vidur's own Sarathi cannot preempt a request and "
                              f"{p.memory.num_blocks} KV blocks force preemption; give more blocks") from None
        reqs = sim._request_generator.requests  # Vidur's Simulator has no public accessor for its generator
    return pd.DataFrame({
        "arrived_at_s": [r.arrived_at for r in reqs],
        "first_token_s": [r.prefill_completed_at for r in reqs],
        "completed_at_s": [r.completed_at for r in reqs],
    })
