"""Run one simulation: config → prepared run (deployment, memory plan, pricer, schedule) → engine → tables.

:func:`simulate` is the library entry point (notebooks, sweeps, tests)::

    from vidur_specdec import simulate
    res = simulate("configs/default.yaml", overrides=["speculative.num_speculative_tokens=2"])
    res.requests, res.steps, res.summary

:func:`prepare` builds and checks everything a run needs (:class:`Prepared`:
the workload, the memory plan, the one step pricer, the scheduler settings);
:func:`run_prepared` runs it on the engine core (:mod:`vidur_specdec.engine.core`)
or, with ``simulator: vidur``, on Vidur's event loop (:mod:`vidur_specdec.engine.reference`);
:func:`finish` builds the summary. :func:`run_vidur_sarathi` runs Vidur's own
``SarathiReplicaScheduler`` with Vidur's own requests and metrics store on the
same workload and pricer: the reference that ``method: none`` must reproduce.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Tuple, Union

import pandas as pd

from vidur_specdec.architectures.models import ModelSpec
from vidur_specdec.config import ConfigError, RunConfig
from vidur_specdec.costs import memory  # noqa: F401 (Prepared.memory is a memory.MemoryPlan)
from vidur_specdec.costs.profiles.on_demand import describe
from vidur_specdec.engine import deployment, memory_fit
from vidur_specdec.engine.core.run import run_core
from vidur_specdec.engine.deployment import Deployment
from vidur_specdec.engine.digest import plan_digest
from vidur_specdec.engine.metrics import data_parallel_summary, summarize
from vidur_specdec.engine.resolve import load, pricer as resolved_pricer, resolve
from vidur_specdec.engine.topology import prepare_topology
from vidur_specdec.engine.warnings import config_warnings
from vidur_specdec.engine.workload import RequestSpec
from vidur_specdec.speculation import acceptance as acceptance_mod
from vidur_specdec.speculation import proposers
from vidur_specdec.speculation.acceptance_source import describe as describe_acceptance, row_category
from vidur_specdec.speculation.proposals import ProposalModel
from vidur_specdec.speculation.proposers.pairing import describe_proposer
from vidur_specdec.speculation.tree import parse_tree
from vidur_specdec.costs.kernels import versions as kernel_versions


@dataclass
class SimulationResult:
    """Per-request and per-step tables (pandas) plus the run summary (dict)."""

    requests: pd.DataFrame
    steps: pd.DataFrame
    summary: Dict
    config: RunConfig


@dataclass(frozen=True)
class SchedulerSettings:
    """What one scheduler (a replica's, or a data-parallel rank's) runs with: the token budget and
    ``max_num_seqs``, and the speculation it schedules (None/0: none). Both engines read it.

    ``chunk_size``: ``max_num_batched_tokens`` (tokens per step: prefill chunks + verify tokens);
    ``batch_size_cap``: ``max_num_seqs``; ``num_speculative_tokens``: the static k; ``acceptance``: the
    acceptance model (:mod:`vidur_specdec.speculation.acceptance` or a trace), None without speculation;
    ``tree_nodes``: a token tree's node count; ``max_draft_context``: the drafter's ``max_model_len``
    (tokens); ``k_schedule``: vLLM's per-batch-size schedule ``((lo, hi, k), ...)``; ``proposals``: the
    n-gram/suffix proposal model (None: every step proposes k); ``num_lookahead_tokens``: KV slots past
    ``1 + guesses`` (vLLM: k for a GPU drafter); ``drafter_sync``: a GPU drafter runs its first pass on steps
    whose scheduled k is 0; ``state_blocks``: blocks a running request holds for a hybrid model's
    linear-attention state beside its KV blocks (:attr:`~vidur_specdec.costs.memory.MemoryPlan.state_pages`;
    0: none), taken when it is admitted and freed with it.
    """

    chunk_size: int
    batch_size_cap: int
    num_speculative_tokens: int = 0
    acceptance: object = None
    tree_nodes: Optional[int] = None
    max_draft_context: Optional[int] = None
    k_schedule: Optional[Tuple[Tuple[int, int, int], ...]] = None
    proposals: object = None
    num_lookahead_tokens: int = 0
    drafter_sync: bool = False
    state_blocks: int = 0


@dataclass(frozen=True)
class Prepared:
    """A run resolved once: everything its engine needs, built and checked before the event loop starts.

    Frozen (its fields are never reassigned; ``specs`` and ``warnings`` are tuples) and content-hashed
    (:attr:`digest`). The engines (:func:`run_prepared`), ``tune`` (:func:`vidur_specdec.tune.choose.step_pricer`)
    and ``validate`` (:func:`vidur_specdec.validate.cost.pricer_for`) take a run through it. ``cfg`` is the
    resolved config (vLLM's defaults and the acceptance filled in; the caller's input is never changed),
    ``specs`` the drawn workload, ``memory`` the memory plan, ``pricer`` the one step pricer, ``scheduler``
    what each scheduler runs with, ``profile_files``/``profile_source`` the operator profiles read,
    ``deployment`` the resolved models, device, parallel sizes and kernel source.
    """

    cfg: RunConfig
    specs: Tuple[RequestSpec, ...]
    model: ModelSpec
    memory: memory.MemoryPlan
    pricer: object  # the run's one StepPricer (vidur_specdec.pricing.pricer)
    scheduler: SchedulerSettings
    profile_files: Dict[str, str]
    deployment: Optional[Deployment] = None
    profile_source: Dict[str, Optional[str]] = field(default_factory=dict)  # target/draft: shipped|built|measured
    warnings: Tuple[str, ...] = ()  # config.config_warnings: one line each

    @property
    def digest(self) -> str:
        """SHA-256 (hex, 16) of what decides the run's results: the resolved config, the workload, the model and
        device, the memory plan, the scheduler settings, the profiles and kernel tables read (their names and
        digests) and the package version. Two plans with the same digest give the same tables."""
        return plan_digest(self)


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
    mem = memory_fit.plan_memory(cfg, dep, total, longest, head=head)
    gpu_blocks = mem.num_blocks if cfg.scheduler.num_blocks is None else memory_fit.gpu_blocks(cfg, dep, head)
    warnings = config_warnings(cfg, gpu_blocks=gpu_blocks)
    warnings += dep.kernels.warnings(dep.tp, [model], dep.ep)  # what the kernel source could not measure
    pricer, choices = resolved_pricer(cfg, dep, deployment.longest_request_tokens(cfg, specs))
    proposer = pricer.proposer
    t = choices["target"]
    files = {"target_mlp": describe(t, t.mlp), "target_attention": describe(t, t.attention)}
    if draft_spec is not None:
        d = choices["draft"]
        files.update(draft_mlp=describe(d, d.mlp), draft_attention=describe(d, d.attention))
    tree = parse_tree(spec.speculative_token_tree) if spec.enabled else None
    scheduler = SchedulerSettings(
        chunk_size=cfg.scheduler.chunk_size,
        batch_size_cap=cfg.scheduler.batch_size_cap,
        num_speculative_tokens=spec.num_speculative_tokens if spec.enabled else 0,
        acceptance=acceptance,
        tree_nodes=tree.num_nodes if tree else None,
        max_draft_context=proposer.max_context,
        k_schedule=tuple(tuple(r) for r in spec.num_speculative_tokens_per_batch_size)
        if spec.enabled and spec.num_speculative_tokens_per_batch_size else None,
        proposals=ProposalModel.from_config(cfg),
        num_lookahead_tokens=proposers.lookahead_tokens(cfg),
        drafter_sync=bool(spec.enabled and proposer.drafter_forward),
        state_blocks=mem.state_pages,
    )
    sources = {"target": t.source, "draft": choices["draft"].source if draft_spec is not None else None}
    return Prepared(cfg, tuple(specs), model, mem, pricer, scheduler, files, dep, sources, tuple(warnings))


def run_prepared(p: Prepared) -> SimulationResult:
    """Run a prepared config (or topology of pools) and build the tables: on the engine core, or with
    ``simulator: vidur`` on Vidur's event loop (the reference)."""
    if p.cfg.simulator == "core":
        return run_core(p, sys.modules[__name__])
    # lazy: only the reference imports Vidur (its start-up cost, wandb's temp folders)
    from vidur_specdec.engine.reference.run import run_reference

    return run_reference(p, sys.modules[__name__])


def kernel_sources(dep: Deployment, model: ModelSpec) -> Dict[str, str]:
    """``summary.json`` ``kernel_sources``: per op family, where its times come from; a data-parallel
    deployment adds its all-to-all (measured, or what is scaled from what)."""
    out = dep.kernels.sources(dep.tp, [s for s in (model, dep.draft) if s is not None], dep.ep)
    if dep.dp > 1:
        out["all_to_all"] = dep.kernels.all_to_all_source(model, dep.ep)
    return out


def finish(p: Prepared, req: pd.DataFrame, steps: pd.DataFrame, more: Optional[Dict] = None,
           cfg: Optional[RunConfig] = None) -> SimulationResult:
    """The run's result from its tables: the summary of ``p``'s run, updated with ``more``; ``cfg`` the run's."""
    acc = p.scheduler.acceptance
    extra = {
        "model": p.model.name,
        "device": p.deployment.device.name if p.deployment else p.cfg.device,
        "tensor_parallel_size": int(p.pricer.tp),
        "profiles": p.profile_files,
        "profile_source": dict(p.profile_source),
        **({"kernel_sources": kernel_sources(p.deployment, p.model)}
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
           if p.deployment and p.deployment.dp > 1 and "pool" not in steps else {}),  # pools: per pool
        "seed": p.cfg.seed,
        "plan_digest": p.digest,  # the resolved run's content hash (a topology's: set by its pool figures)
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
    """Vidur's own Sarathi scheduler, requests and MetricsStore on the same workload and step pricer.

    Speculation settings are ignored (plain decoding). Honours
    ``parallel.num_replicas`` and ``parallel.global_scheduler`` (Vidur's own
    cluster and global scheduler) and closed-loop arrivals. Returns per-request
    ``arrived_at_s, first_token_s, completed_at_s`` in workload order.
    """
    # lazy: only the reference imports Vidur
    from vidur_specdec.engine.reference.run import run_plain_sarathi

    cfg = load(config, overrides)
    cfg.speculative.method = "none"
    return run_plain_sarathi(prepare(cfg))
