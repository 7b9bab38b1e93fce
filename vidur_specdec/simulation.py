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
import logging
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Union

import pandas as pd
from vidur.config import (
    BaseRequestGeneratorConfig,
    CacheConfig,
    ClusterConfig,
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

from vidur_specdec import acceptance as acceptance_mod
from vidur_specdec import memory, proposers, verify_cost
from vidur_specdec.config import ConfigError, RunConfig, load
from vidur_specdec.config_warnings import config_warnings
from vidur_specdec.metrics import StepRecorder, requests_frame, summarize
from vidur_specdec.models import KNOWN_MODELS, ModelSpec
from vidur_specdec.predictor import (
    SHIPPED,
    SpecDecPredictorConfig,
    file_digest,
    load_time_model,
    locate_profile,
    shipped_profiles_root,
)
from vidur_specdec.request import SpecRequest
from vidur_specdec.scheduler import SpecSarathiSchedulerConfig
from vidur_specdec.workload import RequestSpec, generate

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
    BaseEvent._id = 0


def _reset_entity_counters(cls) -> None:
    if "_id" in cls.__dict__:
        cls._id = -1
    for sub in cls.__subclasses__():
        _reset_entity_counters(sub)


def vidur_model_name(spec: ModelSpec) -> str:
    """Vidur's name for ``spec``, registering a Llama-2-style Vidur model config if Vidur lacks one."""
    try:
        BaseModelConfig.create_from_name(spec.name)
        return spec.name
    except ValueError:
        pass
    cls = dataclasses.make_dataclass(
        "SpecDec_" + "".join(c if c.isalnum() else "_" for c in spec.name),
        [("num_layers", int, spec.num_layers), ("num_q_heads", int, spec.num_heads),
         ("num_kv_heads", int, spec.num_kv_heads), ("embedding_dim", int, spec.hidden_size),
         ("mlp_hidden_dim", int, spec.ffn_size), ("max_model_len", int, spec.max_model_len),
         ("vocab_size", int, spec.vocab_size)],
        bases=(Llama2ModelConfig,),
        namespace={"get_name": staticmethod(lambda n=spec.name: n)},
    )
    assert BaseModelConfig.create_from_name(spec.name).__class__ is cls
    return spec.name


class _NoFilesMetricsConfig(MetricsConfig):
    """Vidur's MetricsConfig without its side effect (it makes a timestamped folder)."""

    def __post_init__(self) -> None:
        pass


class _NoFilesSimulationConfig(SimulationConfig):
    """Vidur's SimulationConfig without writing config.json (our configs hold fitted models)."""

    def write_config_to_file(self) -> None:
        pass


class SpecDecSimulator(Simulator):
    """Vidur's simulator with the project's step recorder in place of ``MetricsStore``."""

    def __init__(self, config: SimulationConfig) -> None:
        super().__init__(config)
        self.recorder = StepRecorder()
        self._metric_store = self.recorder

    def _write_output(self) -> None:
        pass  # the caller writes the project's tables

    @property
    def requests(self) -> List[Request]:
        return self._request_generator.requests


# --------------------------------------------------------------------------- the workload, as a Vidur request generator


class SpecDecGeneratorType(BaseIntEnum):
    """Registry keys of this project (values >= 100 never collide with Vidur's)."""

    PREBUILT = 100


SPECDEC_GENERATOR = SpecDecGeneratorType.PREBUILT


@dataclass
class PrebuiltRequestGeneratorConfig(BaseRequestGeneratorConfig):
    """A fixed list of :class:`RequestSpec`; ``request_class`` builds the Vidur requests."""

    specs: list = field(default_factory=list)
    request_class: type = Request

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
    warnings: List[str] = field(default_factory=list)  # config.config_warnings: one line each


def _describe(path: Path, root: str) -> str:
    """A profile file as ``shipped:<relative path>`` or its path, plus a content hash (machine independent)."""
    digest = file_digest(path)[:12]
    if root == SHIPPED:
        return f"shipped:{Path(path).relative_to(shipped_profiles_root()).as_posix()} sha256:{digest}"
    return f"{path} sha256:{digest}"


def prepare(cfg: RunConfig) -> Prepared:
    """Fit the predictors, plan memory, draw the workload; raises :class:`ConfigError` on bad input."""
    spec = cfg.speculative
    model = KNOWN_MODELS[cfg.model]
    mlp, att = locate_profile(cfg.profiles, cfg.device, cfg.model)
    cache = cfg.predictor.cache_dir
    target = load_time_model(mlp, att, cache_dir=cache)
    files = {"target_mlp": _describe(mlp, cfg.profiles), "target_attention": _describe(att, cfg.profiles)}
    draft_spec = None
    draft_model = None
    if spec.enabled and spec.method == "draft_model":
        draft_spec = KNOWN_MODELS[spec.draft_model]
        root = spec.draft_profiles or cfg.profiles
        key = "speculative.draft_profiles" if spec.draft_profiles else "profiles"
        dmlp, datt = locate_profile(root, cfg.device, spec.draft_model, key=key)
        draft_model = load_time_model(dmlp, datt, cache_dir=cache)
        files.update(draft_mlp=_describe(dmlp, root), draft_attention=_describe(datt, root))
    try:
        mem = memory.plan(model, cfg.device, cfg.scheduler.block_size, cfg.scheduler.memory_margin_fraction,
                          draft=draft_spec)
    except ValueError as e:
        raise ConfigError(f"scheduler.memory_margin_fraction: {e}") from None
    warnings = config_warnings(cfg, gpu_blocks=mem.num_blocks)
    if cfg.scheduler.num_blocks is not None:
        mem = dataclasses.replace(mem, num_blocks=cfg.scheduler.num_blocks)
    specs = generate(cfg.workload, cfg.seed)
    longest = max(range(len(specs)), key=lambda i: specs[i].prompt_tokens + specs[i].output_tokens)
    total = specs[longest].prompt_tokens + specs[longest].output_tokens
    if total > model.max_model_len:
        raise ConfigError(f"workload.trace_file: request {longest} has prompt + output = {total} tokens "
                          f"> max_model_len {model.max_model_len}")
    need = memory.min_blocks_to_finish(total, mem.block_size, cfg.scheduler.watermark_blocks_fraction)
    if mem.num_blocks < need:
        raise ConfigError(f"scheduler.num_blocks: {mem.num_blocks} blocks cannot run request {longest} "
                          f"({total} tokens) to completion; allowed: >= {need}")
    predictor = SpecDecPredictorConfig(
        target=target,
        verify_cost=verify_cost.build(spec),
        proposer=proposers.build(spec, draft_model, draft_spec.num_layers if draft_spec else 0),
    )
    scheduler = SpecSarathiSchedulerConfig(
        chunk_size=cfg.scheduler.chunk_size,
        batch_size_cap=cfg.scheduler.batch_size_cap,
        num_speculative_tokens=spec.num_speculative_tokens if spec.enabled else 0,
        acceptance=acceptance_mod.build(spec, cfg.seed),
        max_draft_context=draft_spec.max_model_len if draft_spec else None,
    )
    return Prepared(cfg, specs, model, mem, predictor, scheduler, files, warnings)


def vidur_config(p: Prepared, scheduler_config, request_class, metrics_config=None) -> SimulationConfig:
    """Vidur's SimulationConfig for a prepared run (replica: TP 1, PP 1)."""
    replica = ReplicaConfig(
        model_name=vidur_model_name(p.model), num_pipeline_stages=1, tensor_parallel_size=1,
        device=p.cfg.device, network_device=f"{p.cfg.device}_pairwise_nvlink",
    )
    cache = CacheConfig(
        block_size=p.memory.block_size, num_blocks=int(p.memory.num_blocks),
        watermark_blocks_fraction=p.cfg.scheduler.watermark_blocks_fraction,
        memory_margin_fraction=p.cfg.scheduler.memory_margin_fraction,
    )
    cluster = ClusterConfig(
        num_replicas=1, replica_config=replica, cache_config=cache,
        global_scheduler_config=RoundRobinGlobalSchedulerConfig(),
        replica_scheduler_config=scheduler_config,
    )
    generator = PrebuiltRequestGeneratorConfig(
        seed=p.cfg.seed, max_tokens=p.model.max_model_len, specs=p.specs, request_class=request_class,
    )
    metrics = metrics_config or _NoFilesMetricsConfig(
        write_metrics=False, write_json_trace=False, enable_chrome_trace=False, store_plots=False,
    )
    return _NoFilesSimulationConfig(
        seed=p.cfg.seed, log_level="warning", cluster_config=cluster, request_generator_config=generator,
        execution_time_predictor_config=p.predictor, metrics_config=metrics,
    )


def run_prepared(p: Prepared) -> SimulationResult:
    """Run the event loop for a prepared config and build the tables."""
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
    req = requests_frame(sim.requests)
    steps = sim.recorder.steps_frame()
    acc = p.scheduler.acceptance
    extra = {
        "model": p.cfg.model,
        "device": p.cfg.device,
        "profiles": p.profile_files,
        "method": p.cfg.speculative.method if p.cfg.speculative.enabled else "none",
        "num_speculative_tokens": p.scheduler.num_speculative_tokens,
        "verify_attention": p.cfg.speculative.verify_attention,
        "expected_accepted_per_full_step": acc.mean_accepted if acc else 0.0,
        "kv_blocks_target": int(p.memory.num_blocks),
        "kv_blocks_draft": int(p.memory.draft_blocks),
        "memory": p.memory.to_dict(),
        "seed": p.cfg.seed,
        "warnings": list(p.warnings),
    }
    return SimulationResult(req, steps, summarize(req, steps, extra), p.cfg)


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

    Speculation settings are ignored (plain decoding). Returns per-request
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
        sim = Simulator(vidur_config(p, sched, Request, metrics))
        try:
            sim.run()
        except AssertionError:
            # Vidur's own Request.restart() keeps its stage counters, so the first preemption trips
            # Vidur's assertion (SpecRequest.restart fixes it; found by tests/test_properties.py)
            raise ConfigError(f"scheduler.num_blocks: Vidur's own Sarathi cannot preempt a request and "
                              f"{p.memory.num_blocks} KV blocks force preemption; give more blocks") from None
        reqs = sim._request_generator.requests
    return pd.DataFrame({
        "arrived_at_s": [r.arrived_at for r in reqs],
        "first_token_s": [r._prefill_completed_at for r in reqs],
        "completed_at_s": [r._completed_at for r in reqs],
    })
