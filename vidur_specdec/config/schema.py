"""Run configuration: the schema, its defaults and its own cross-field checks (:func:`read_config`).

A run config is a YAML mapping whose shape is the dataclasses below. Every
field carries its allowed range in its metadata, so one generic validator
(:mod:`vidur_specdec.config.fields`) checks any config and names the offending
key::

    speculative.acceptance_rate: must be a number in [0, 1], got 1.5

Reading files and ``--set`` overrides is :mod:`vidur_specdec.config.files`;
relative paths, :mod:`vidur_specdec.config.paths`. Units: times in ms unless the name
ends in ``_s``; lengths in tokens.
"""

from __future__ import annotations

import copy
import dataclasses
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

from vidur_specdec.config.disaggregation import MAX_DP, DisaggregationConfig
from vidur_specdec.config.errors import ConfigError
from vidur_specdec.config.fields import _build, _f
from vidur_specdec.config.paths import resolve_paths
from vidur_specdec.config.registry import choices
from vidur_specdec.config import unused
from vidur_specdec.config.files import apply_overrides, read_yaml
from vidur_specdec.config.overlay import assignments, without_replaced


LENGTH_DISTS = ("fixed", "uniform", "lognormal")
TP_SIZES = (1, 2, 4, 8)  # tensor-parallel sizes the simulator models (one 8-GPU node)
# quantization values modelled (null: the checkpoint's own format), vLLM 0.33's method names
# (model_executor/layers/quantization/__init__.py QuantizationMethods); architectures/quant.py reads them
QUANTIZATIONS = ("fp8", "mxfp4", "modelopt", "modelopt_fp4", "compressed-tensors")
KV_CACHE_DTYPES = ("auto", "fp8")  # kv_cache_dtype values modelled
MAX_K = 64  # guesses per request per step (a token tree's node count)
# parallel.global_scheduler values: Vidur's own global schedulers by their GlobalSchedulerType names
# (vidur 0.0.26 vidur/types/global_scheduler_type.py; engine.simulation maps each to its Vidur config)
GLOBAL_SCHEDULERS = ("round_robin", "lor")
SIMULATORS = ("core", "vidur")  # the engine core (vidur_specdec/engine/core) or the Vidur-backed reference
ACCEPTANCE_KEYS = unused.ACCEPTANCE_INPUTS  # the acceptance inputs, most specific first (one of them at a time)
ACCEPTANCE_SOURCES = ("given", "published", "default")
ACCEPTANCE_FACTORS = ("context", "dataset", "temperature")  # speculation/acceptance_factors.py
DEFAULT_ALL_REDUCE = "vllm_custom"  # engine.all_reduce default: vLLM's custom all-reduce (hardware.collectives checks it is registered)


@dataclass
class LengthDist:
    """A seeded token-length distribution.

    ``fixed`` uses ``value``; ``uniform`` draws integers in [min, max];
    ``lognormal`` (heavier tail) draws exp(N(ln median, sigma)) clipped to [min, max].
    """

    dist: str = _f("fixed", choices=LENGTH_DISTS)
    value: int = _f(256, lo=1, hi=1_000_000)
    min: int = _f(1, lo=1, hi=1_000_000)
    max: int = _f(4096, lo=1, hi=1_000_000)
    median: float = _f(256.0, lo=1.0, hi=1_000_000.0)
    sigma: float = _f(1.0, lo=0.0, hi=5.0)

    def bounds(self) -> tuple:
        """Smallest and largest length this distribution can produce (tokens)."""
        if self.dist == "fixed":
            return self.value, self.value
        return self.min, self.max


@dataclass
class WorkloadConfig:
    num_requests: int = _f(300, lo=1, hi=10_000_000)
    arrival: str = _f("poisson", choices=("poisson", "static", "trace", "closed"),
                      doc="poisson: exponential gaps at qps; static: all at t=0; trace: trace_file; "
                          "closed: keep `concurrency` requests in flight")
    qps: float = _f(1.0, lo=1e-6, hi=1e6, doc="requests per second (poisson; refused otherwise: vidur_specdec/config/unused.py)")
    concurrency: Optional[int] = _f(None, lo=1, hi=10_000_000,
                                    doc="requests kept in flight (closed), as vllm bench serve --max-concurrency")
    trace_file: Optional[str] = _f(None, doc="CSV/JSONL/Parquet trace: this project's, Vidur's or Azure's columns")
    prompt_tokens: LengthDist = _f(LengthDist(dist="lognormal", median=512, sigma=0.7, min=16, max=2048))
    output_tokens: LengthDist = _f(LengthDist(dist="lognormal", median=192, sigma=0.7, min=8, max=1024))
    warmup_requests: int = _f(0, lo=0, hi=10_000_000, doc="the first N requests (arrival order) are left out of "
                                                          "the metrics")
    dataset: Optional[str] = _f(None, doc="the dataset (mt-bench, gsm8k, humaneval, ...) or category (chat, coding, "
                                          "math, qa) published acceptance is taken for; null = mt-bench where the "
                                          "library has it (python -m vidur_specdec acceptance lists them)")
    temperature: Optional[float] = _f(None, lo=0.0, hi=2.0,
                                      doc="sampling temperature (vLLM's SamplingParams.temperature) of published "
                                          "acceptance; null = the library row's own")
    requests_per_concurrency: Optional[float] = _f(None, lo=0.01, hi=1e4,
                                                   doc="tune's closed-loop points: requests per request in "
                                                       "flight; null = the measured dataset's counts (docs/tune.md)")


@dataclass
class SchedulerConfig:
    """Sarathi replica scheduler of each replica (pipeline parallel 1; tensor parallel: :class:`ParallelConfig`)."""

    chunk_size: Optional[int] = _f(None, lo=1, hi=1_000_000, doc="alias of max_num_batched_tokens")
    batch_size_cap: Optional[int] = _f(None, lo=1, hi=100_000, doc="alias of max_num_seqs")
    block_size: int = _f(16, lo=1, hi=1024, doc="tokens per KV block (a hybrid model's raised as vLLM raises it)")
    num_blocks: Optional[int] = _f(None, lo=1, hi=100_000_000, doc="target KV blocks; null = from GPU memory")
    watermark_blocks_fraction: float = _f(0.01, lo=0.0, hi=0.5)
    memory_margin_fraction: Optional[float] = _f(None, lo=0.0, hi=0.9,
                                                 doc="GPU memory kept free: 1 - gpu_memory_utilization")
    # vLLM's names (vidur_specdec/config/vllm_defaults.py): null = what `vllm serve` picks on the device.
    max_num_batched_tokens: Optional[int] = _f(None, lo=1, hi=1_000_000,
                                               doc="token budget per step (prefill chunks + verify tokens)")
    max_num_seqs: Optional[int] = _f(None, lo=1, hi=100_000, doc="requests per step at most")
    gpu_memory_utilization: Optional[float] = _f(None, lo=0.1, hi=1.0, doc="fraction of GPU memory vLLM uses")


@dataclass
class ParallelConfig:
    """How one deployment is spread over GPUs (vLLM's names)."""

    # --- tensor parallelism ---
    tensor_parallel_size: int = _f(1, choices=TP_SIZES,
                                   doc="GPUs per replica; must split the model's query heads evenly")
    enable_expert_parallel: bool = _f(False, doc="vLLM's name: MoE layers expert-parallel over the replica's "
                                                 "GPUs (EP size = data_parallel_size x tensor_parallel_size), "
                                                 "whole experts per GPU")

    # --- data parallelism (vLLM's --data-parallel-size): attention per rank, experts over all ranks ---
    data_parallel_size: int = _f(1, lo=1, hi=MAX_DP, doc="attention ranks of one replica, each with its own KV "
                                                         "and scheduler; MoE experts over all ranks (needs "
                                                         "enable_expert_parallel); steps synchronised")
    enable_eplb: bool = _f(False, doc="vLLM's name: expert-parallel load balancing (redundant experts placed "
                                      "by load)")
    num_redundant_experts: int = _f(0, lo=0, hi=4096, doc="vLLM's eplb_config.num_redundant_experts: spare "
                                                          "expert copies over the EP GPUs (needs enable_eplb)")
    # --- dual-batch overlap (vLLM 0.33 vllm/config/parallel.py: enable_dbo, dbo_*_token_threshold) ---
    enable_dbo: bool = _f(False, doc="vLLM's --enable-dbo: each step split into two micro-batches whose MoE "
                                     "dispatch/combine overlap the other's compute (needs data_parallel_size > 1)")
    dbo_decode_token_threshold: int = _f(32, lo=0, hi=1_000_000,
                                         doc="vLLM's name and default: a decode-only step is split when every "
                                             "rank has at least this many tokens")
    dbo_prefill_token_threshold: int = _f(512, lo=0, hi=1_000_000,
                                          doc="vLLM's name and default: a step with a prefill chunk is split when "
                                              "every rank has at least this many tokens")
    pipeline_parallel_size: int = _f(1, lo=1, hi=16,
                                     doc="vLLM's name: pipeline stages per replica, each with tensor_parallel_size "
                                         "GPUs and its share of the layers (vLLM's split)")

    # --- replicas ---
    num_replicas: int = _f(1, lo=1, hi=1024, doc="identical replicas behind one global scheduler")
    global_scheduler: str = _f("round_robin", choices=GLOBAL_SCHEDULERS,
                               doc="Vidur's global scheduler: round_robin or lor (least outstanding requests)")




@dataclass
class SpeculativeConfig:
    method: str = _f("ngram", choices=choices("speculative.method"))
    num_speculative_tokens: int = _f(4, lo=0, hi=MAX_K, doc="k, guesses per decode step (a tree: its node count)")
    model: Optional[str] = _f(None, doc="eagle/eagle3/mtp/medusa head: a known Hugging Face name or a YAML file")
    draft_vocab_size: Optional[int] = _f(None, lo=1, hi=10_000_000,
                                         doc="EAGLE-3 LM-head vocabulary; null = the head's (32000)")
    speculative_token_tree: Optional[Any] = _f(None, doc="vLLM token tree: list of paths of child indices")
    acceptance_rate: Optional[float] = _f(0.7, lo=0.0, hi=1.0, doc="alpha, i.i.d. per guess")
    mean_acceptance_length: Optional[float] = _f(None, lo=1.0, hi=MAX_K + 1.0,
                                                 doc="vLLM's tokens per decode step incl. the bonus token, at k")
    acceptance_at_k: Optional[int] = _f(None, lo=1, hi=MAX_K,
                                        doc="the k mean_acceptance_length was measured at; the run's k then uses "
                                            "the method family's per-position model (docs/model.md)")
    acceptance_source: Optional[str] = _f(None, choices=ACCEPTANCE_SOURCES,
                                          doc="null: the acceptance keys given, else the library's row for the "
                                              "drafter, else the default alpha 0.7 with a warning; published: the "
                                              "library (speculation/library.py)")
    acceptance_factors: List[str] = _f(list(ACCEPTANCE_FACTORS), choices=ACCEPTANCE_FACTORS,
                                       doc="factors on published acceptance (context, dataset, temperature)")
    acceptance_spread: Optional[float] = _f(None, lo=0.0, hi=0.5,
                                            doc="std of each request's own alpha (Beta around the mean)")
    acceptance_trace: Optional[str] = _f(None, doc="JSON-lines file: prompt_tokens, output_tokens, accept_run")
    acceptance_per_position: Optional[List[float]] = _f(None, lo=0.0, hi=1.0,
                                                        doc="conditional rates alpha_1..alpha_k")
    acceptance_histogram: Optional[List[float]] = _f(None, lo=0.0, hi=1.0,
                                                     doc="P(accepted = 0..k) at full k")
    verify_attention: str = _f("shared_kv", choices=choices("speculative.verify_attention"))
    verify_interpolation_weight: float = _f(0.5, lo=0.0, hi=1.0,
                                            doc="lambda: interpolated = lambda*per_token + (1-lambda)*shared_kv")
    ngram_cost_ms: float = _f(0.1, lo=0.0, hi=1e4, doc="CPU n-gram lookup, ms per step that proposes")
    fixed_cost_ms: float = _f(0.5, lo=0.0, hi=1e4, doc="ms per proposal round (one guess per request)")
    draft_model: str = _f("JackFram/llama-160m",
                          doc="known model name, Hugging Face config.json or YAML of ModelSpec fields")
    draft_tensor_parallel_size: Optional[int] = _f(None, choices=TP_SIZES,
                                                   doc="drafter's TP: null = target's; else 1 or the target's (vLLM)")
    draft_profiles: Optional[str] = _f(None, doc="profile root for the drafter; null = same as profiles")
    num_speculative_tokens_per_batch_size: Any = _f(
        None, doc='vLLM\'s per-batch-size k schedule: {"1-16": 3, "17-64": 2} or [[1, 16, 3], [17, 64, 2]]; '
                  "null = k fixed (vidur_specdec/speculation/schedule.py)")
    # --- proposals that may be empty or short (n-gram, suffix; docs/model.md "Proposals") ---
    proposal_rate: float = _f(1.0, lo=0.0, hi=1.0,
                              doc="ngram/suffix: fraction of a request's decode steps whose context finds a "
                                  "match and proposes; 1 = every step (model-based proposers always propose k)")
    proposal_spread: Optional[float] = _f(None, lo=0.0, hi=0.5,
                                          doc="std of each request's own proposal_rate (Beta around the mean)")
    prompt_lookup_min: Optional[int] = _f(None, lo=1, hi=1_000_000,
                                          doc="ngram: shortest n-gram matched (vLLM; null = 5, or max when only "
                                              "max is set); no step proposes before the context has this many tokens")
    prompt_lookup_max: Optional[int] = _f(None, lo=1, hi=1_000_000,
                                          doc="ngram: longest n-gram matched (vLLM; null = 5, or min when only "
                                              "min is set)")
    suffix_decoding_max_tree_depth: int = _f(24, lo=1, hi=1_000_000,
                                             doc="suffix: longest match / speculation (vLLM default 24)")
    suffix_decoding_max_cached_requests: int = _f(10000, lo=0, hi=100_000_000,
                                                  doc="suffix: requests in the global tree (vLLM default 10000)")
    suffix_decoding_max_spec_factor: float = _f(1.0, lo=0.0, hi=1e6,
                                                doc="suffix: guesses <= factor x matched length (vLLM default 1.0)")
    suffix_decoding_min_token_prob: float = _f(0.1, lo=0.0, hi=1.0,
                                               doc="suffix: drop guesses below this frequency (vLLM default 0.1)")
    suffix_cost_ms: float = _f(0.1, lo=0.0, hi=1e4, doc="CPU suffix-tree lookup, ms per step that proposes")
    draft_sample_method: str = _f("greedy", choices=("greedy", "probabilistic"),
                                  doc="how a drafter picks its guesses (vLLM's key; greedy argmax is vLLM 0.33's "
                                      "default)")

    def acceptance_input(self) -> Optional[str]:
        """The acceptance input used: the most specific one given
        (trace > histogram > per_position > mean_acceptance_length > rate)."""
        for name in ACCEPTANCE_KEYS:
            if getattr(self, name) is not None:
                return name
        return None

    @property
    def enabled(self) -> bool:
        """True when verify steps carry guesses (method set and k > 0)."""
        return self.method != "none" and self.num_speculative_tokens > 0


@dataclass
class PredictorConfig:
    """Fitted operator-time models are cached on disk by the content hash of their profile."""

    cache_dir: Optional[str] = _f(None, doc="cache folder; null = per-user (~/.cache/vidur_specdec)")


@dataclass
class EngineConfig:
    """What a step costs beyond the decoder layers (vLLM V1 engine defaults; sources in docs/model.md)."""

    step_overhead_ms: float = _f(0.5, lo=0.0, hi=1e4,
                                 doc="engine CPU work per step on the critical path: schedule, prepare inputs, launch")
    overhead_ms_per_request: float = _f(0.005, lo=0.0, hi=1e3, doc="extra engine CPU work per request in the step")
    sampling_ms: float = _f(0.25, lo=0.0, hi=1e4, doc="sampler / rejection sampler, fixed per step that samples")
    sampling_logit_passes: float = _f(10.0, lo=0.0, hi=1e3,
                                      doc="passes over the fp32 logits (rows x vocab x 4 B) at HBM bandwidth")
    lm_head: bool = _f(True, doc="price the LM head on every row that needs logits (false: layers only, as Vidur)")
    all_reduce: str = _f(DEFAULT_ALL_REDUCE, choices=choices("engine.all_reduce"),
                         doc="tensor-parallel all-reduce: vLLM's custom all-reduce with NCCL fallback, or NCCL only")
    model_runner: str = _f("v2", choices=("v1", "v2"),
                           doc="vLLM's model runner (v2 is vLLM 0.33's default): on v1 an n-gram request "
                               "without a match is charged one token; on v2 it is charged k + 1")
    # --- what speculation adds (docs/model.md, "What a draft pass costs") ---
    spec_step_ms: float = _f(0.25, lo=0.0, hi=1e4,
                             doc="fixed cost of a step that verifies guesses, any proposer: speculative metadata "
                                 "and input preparation, rejection-sampler launch")
    spec_ms_per_request: float = _f(0.002, lo=0.0, hi=1e3,
                                    doc="per request verified with guesses: its k + 1 outputs processed")
    draft_pass_ms: float = _f(0.05, lo=0.0, hi=1e4,
                              doc="CUDA-graph replay of one sequential drafter pass (GPU drafters)")
    draft_prepare_ms: float = _f(0.53, lo=0.0, hi=1e4,
                                 doc="input preparation before each drafter pass: positions, slot mapping, "
                                     "attention metadata")
    draft_first_pass_ms: float = _f(1.14, lo=0.0, hi=1e4,
                                    doc="extra preparation of a drafter's first pass in a step: its inputs built "
                                        "from the target's outputs (catch-up tokens, rejected positions)")
    kernel_launch_ms: float = _f(0.005, lo=0.0, hi=1e3,
                                 doc="floor of one small kernel (draft argmax, EAGLE-3 vocabulary mapping)")
    enforce_eager: bool = _f(False, doc="vLLM's enforce_eager: no CUDA graphs, every layer's kernels launched "
                                        "one by one (eager_ms_per_layer per layer per forward)")
    eager_ms_per_layer: float = _f(0.32, lo=0.0, hi=1e3,
                                   doc="launch cost per decoder layer per forward without CUDA graphs")
    piecewise_graph_cost: float = _f(0.19, lo=0.0, hi=10.0,
                                     doc="piecewise CUDA graphs (v1 with a per-batch-size schedule): added time "
                                         "per step as a fraction of a one-token target forward")


@dataclass
class RunConfig:
    seed: int = _f(0, lo=0, hi=2**32 - 1)
    model: str = _f("meta-llama/Llama-2-7b-hf",
                    doc="known model name, Hugging Face config.json or YAML of ModelSpec fields")
    device: str = _f("a100", doc="a100, h100, h200, b200, b300, gb200, gb300, l40s, rtx_pro_6000 or a YAML file of device figures")
    # vLLM's engine arguments of the same names (vllm/config/model.py quantization; vllm/config/cache.py
    # kv_cache_dtype, default "auto" = the model's dtype); the values this simulator models.
    quantization: Optional[str] = _f(None, choices=QUANTIZATIONS,
                                     doc="weight format: null = the checkpoint's own (gpt-oss mxfp4 experts, "
                                         "DeepSeek-V3 fp8, NVIDIA's NVFP4 checkpoints modelopt_fp4, else bf16); "
                                         "fp8 (every linear layer, W8A8; also online on a bf16 checkpoint); "
                                         "mxfp4, modelopt (ModelOpt FP8), modelopt_fp4 (ModelOpt NVFP4, Blackwell "
                                         "only), compressed-tensors (int4 experts): a checkpoint's own format")
    kv_cache_dtype: str = _f("auto", choices=KV_CACHE_DTYPES,
                             doc="KV-cache element: auto = bf16 (2 bytes), fp8 = e4m3 (1 byte)")
    profiles: str = _f("shipped", doc="'shipped' (the shipped A100 profiles, else vLLM's measured kernel tables where the GPU has them, else the roofline), 'built' (the analytical roofline) or a directory in Vidur's profile layout")
    simulator: str = _f("core", choices=SIMULATORS,
                        doc="core: this project's engine core (fast); vidur: the same schedule on Vidur's event "
                            "loop, entities and Sarathi scheduler, subclassed (the reference the core is held to)")
    workload: WorkloadConfig = _f(WorkloadConfig())
    scheduler: SchedulerConfig = _f(SchedulerConfig())
    parallel: ParallelConfig = _f(ParallelConfig())
    speculative: SpeculativeConfig = _f(SpeculativeConfig())
    predictor: PredictorConfig = _f(PredictorConfig())
    engine: EngineConfig = _f(EngineConfig())
    disaggregation: DisaggregationConfig = _f(DisaggregationConfig())

    # The folder relative paths were resolved against (set by load(); not a config key).
    base_dir: typing.ClassVar[Optional[Path]] = None
    # The speculative acceptance keys the mapping gave (set by build_config; not a config key).
    acceptance_given: typing.ClassVar[Optional[frozenset]] = None

    def to_dict(self) -> Dict[str, Any]:
        return dataclasses.asdict(self)

    def to_input(self) -> Dict[str, Any]:
        """:meth:`to_dict` less what resolving the config wrote into it, so the mapping resolves again to
        this config: the conditional rates ``acceptance_per_position`` that ``acceptance_source: published``
        (the library's row at the run's k) and ``acceptance_at_k`` (the family's per-position model) put there.
        What a sweep row or tune point hands its worker, a run's ``config.yaml`` and a RunConfig passed to
        ``load``/``simulate``/``tune`` are built from."""
        d = self.to_dict()
        spec = d["speculative"]
        if spec.get("acceptance_source") == "published":
            for key in ACCEPTANCE_KEYS:
                spec[key] = None
            spec["proposal_rate"] = 1.0  # n-gram and suffix: the library's row gives it, with the rates
        if spec.get("acceptance_at_k") is not None:
            spec["acceptance_per_position"] = None
        return d


def _check_cross_fields(cfg: RunConfig) -> None:
    """Constraints between fields of the schema itself; each error names the key to change.

    Checks that need a model, a device or the speculation code (max_model_len,
    tensor-parallel splits, trees, schedules, acceptance inputs) run when the
    config is resolved (:mod:`vidur_specdec.engine.resolve`).
    """
    w = cfg.workload
    for name in ("prompt_tokens", "output_tokens"):
        d: LengthDist = getattr(w, name)
        if d.dist != "fixed" and d.min > d.max:
            raise ConfigError(f"workload.{name}.min: must be <= workload.{name}.max ({d.max}), got {d.min}")
    if w.output_tokens.bounds()[0] < 1:
        raise ConfigError("workload.output_tokens: must produce at least 1 token")
    if w.arrival == "trace" and not w.trace_file:
        raise ConfigError("workload.trace_file: required when workload.arrival is trace")
    if w.warmup_requests >= w.num_requests:
        raise ConfigError(f"workload.warmup_requests: must be below workload.num_requests ({w.num_requests}), "
                          f"got {w.warmup_requests}")
    if w.arrival == "closed" and w.concurrency is None:
        raise ConfigError("workload.concurrency: required when workload.arrival is closed; "
                          "allowed: an integer >= 1 (requests kept in flight)")
    d = cfg.disaggregation
    if d.enabled and not (d.prefill_instances and d.decode_instances):
        zero = "prefill_instances" if not d.prefill_instances else "decode_instances"
        raise ConfigError(f"disaggregation.{zero}: must be >= 1 when the other pool has instances "
                          "(both 0 = colocated)")


def build_config(data: Optional[Mapping], shared: Sequence[str] = ()) -> RunConfig:
    """Validate a (possibly partial) mapping against the schema and return a full :class:`RunConfig`.

    Missing keys take their defaults. Raises :class:`ConfigError` with one line
    naming the first bad key and what is allowed. Schema only: use
    :func:`vidur_specdec.load` for a config that is also resolved and checked
    across layers. A set key the config does not read is refused
    (:mod:`vidur_specdec.config.unused`), except those under ``shared`` (a sweep
    checks its base's keys across its rows).
    """
    cfg = _build(RunConfig, data or {}, "")
    _check_cross_fields(cfg)
    unused.check(cfg, shared)
    spec = (data or {}).get("speculative") or {}
    cfg.acceptance_given = frozenset(k for k in ACCEPTANCE_KEYS if spec.get(k) is not None)
    return cfg


def check_file_alone(data: Mapping, given: Sequence[str]) -> None:
    """The file's own keys against the file's own modes (a ``--set`` of a mode keeps the file as a template)."""
    try:
        alone = _build(RunConfig, data, "")
    except ConfigError:
        return  # a value the overrides replace; the full config below is checked
    unused.check(alone, shared=given)


def read_config(source: Union[str, Path, Mapping, RunConfig, None], overrides: Union[str, Sequence[str], None] = None,
                base_dir: Union[str, Path, None] = None) -> RunConfig:
    """Read a config from a path, a mapping or a :class:`RunConfig`, apply ``overrides``, check the schema.

    Relative paths in a file (``profiles``, ``workload.trace_file``, ... see
    :data:`~vidur_specdec.config.paths.PATH_KEYS`) resolve against that file's folder; in a mapping, against
    ``base_dir`` (default: the working directory, i.e. left as written).
    Overrides (``--set``) come from the command line and stay relative to the
    working directory. The result's ``base_dir`` attribute is that folder
    (None for the working directory).
    """
    if base_dir is not None and (isinstance(base_dir, (bytes, bytearray)) or not isinstance(base_dir, (str, Path))):
        raise ConfigError(f"base_dir: must be a folder (str or pathlib.Path), got {str(repr(base_dir))[:80]}")
    if isinstance(source, RunConfig):
        data = source.to_input()
        base_dir = base_dir if base_dir is not None else getattr(source, "base_dir", None)
    elif isinstance(source, (str, Path)):
        data = read_yaml(source)
        base_dir = Path(source).resolve().parent
    else:
        if source is not None and not isinstance(source, Mapping):
            raise ConfigError(f"config: must be a YAML path, a mapping or a RunConfig, got {type(source).__name__}")
        data = copy.deepcopy(dict(source or {}))
    resolve_paths(data, base_dir)
    # what the --set values replace in the file: an aliased name, the acceptance, an old method's keys
    data = without_replaced(data, assignments(overrides))
    given = unused.leaves(apply_overrides({}, overrides))  # the keys --set gives, checked whatever their value
    kept = [k for k in unused.leaves(data) if not any(unused.overlaps(k, g) for g in given)]
    if isinstance(source, RunConfig):
        kept = [unused.CHECKED]  # built and checked once; keys a --set of a mode left as a template stay
    elif given:
        check_file_alone(data, given)
    cfg = build_config(apply_overrides(data, overrides), shared=kept if given or isinstance(source, RunConfig) else ())
    unused.check_given(given, cfg)
    cfg.base_dir = Path(base_dir) if base_dir is not None else None
    return cfg
