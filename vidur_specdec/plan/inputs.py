"""What a plan is asked: the model, the GPUs, the workload, the SLOs and the limits (docs/plan.md, "Inputs").

One table (:data:`OPTIONS`) defines every plan option once: its command-line
flag (``--gpus``), its key in a plan file's ``plan:`` section (``gpus``), its
keyword in ``vidur_specdec.plan(...)`` (``gpus``), its default and its check.
A bad value is one :class:`ConfigError` line naming the option as the caller
wrote it (the flag on the command line, the keyword from Python, ``plan.<key>``
in a file).

The *base* run config carries everything the search does not choose (the
engine's per-step costs, profiles, verify attention, ``kv_cache_dtype``, the
seed, the workload's length distributions and acceptance dataset): a run
config given with ``--config``, or a plan file::

    base: ../configs/deepseek-v3-mtp-h200.yaml   # optional; relative to this file
    workload: {dataset: mt-bench}                 # run-config keys over the base (optional)
    plan:
      gpus: 16
      devices: [h200]
      isl: 4000
      osl: 500
      slo_ttft_ms: 1000
      min_tokens_per_user: 20

Flags override the file's ``plan:`` keys; ``--set`` overrides run-config keys.
Units: ms for times, tokens for lengths, GPUs for counts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from vidur_specdec.config import ConfigError

# Default SLOs: tune's (MLPerf Inference v5.0 interactive Llama-2-70B: TTFT <= 450 ms, TPOT <= 40 ms);
# the percentile is the 90th: a closed-loop point measures tens of requests, whose p99 is their maximum.
DEFAULT_SLO_TTFT_MS = 450.0
DEFAULT_SLO_TPOT_MS = 40.0
DEFAULT_PERCENTILE = 90
DEFAULT_K_MAX = 3
DEFAULT_TOP = 2
DEFAULT_CHECK_DROPPED = 2
DEFAULT_TOLERANCE = 0.25
NODE_GPUS = 8  # GPUs of one NVLink node (an HGX H100/H200 board; engine/kv_transfer.py's NODE_GPUS)
MODES = ("colocated", "disaggregated")
PERCENTILES = (50, 90, 99)


@dataclass(frozen=True)
class Option:
    """One plan option: ``name`` (the plan key and Python keyword), its flag, default, check and help."""

    name: str
    default: Any
    parse: Callable[[Any, str], Any]  # (raw value, how the caller named it) -> value; ConfigError when bad
    help: str
    metavar: Optional[str] = None

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")


def _int(lo: int, hi: int):
    def parse(v, where):
        if isinstance(v, bool) or not isinstance(v, (int, str)) or not str(v).strip().lstrip("-").isdigit():
            raise ConfigError(f"{where}: must be an integer in [{lo}, {hi:,}], got {v!r}")
        x = int(v)
        if not lo <= x <= hi:
            raise ConfigError(f"{where}: must be an integer in [{lo}, {hi:,}], got {x}")
        return x
    return parse


def _float(lo: float, hi: float, open_lo: bool = True):
    def parse(v, where):
        try:
            x = float(v)
        except (TypeError, ValueError):
            x = math.nan
        if isinstance(v, bool) or not math.isfinite(x) or (x <= lo if open_lo else x < lo) or x > hi:
            raise ConfigError(f"{where}: must be a finite number in {'(' if open_lo else '['}{lo:g}, {hi:g}], "
                              f"got {v!r}")
        return x
    return parse


def _opt(parse):
    def inner(v, where):
        return None if v is None else parse(v, where)
    return inner


def _list(item, allow_empty: bool = False):
    """A list: a YAML/Python sequence or a comma-separated string."""
    def parse(v, where):
        if isinstance(v, str):
            parts = [p.strip() for p in v.split(",") if p.strip()]
        elif isinstance(v, (list, tuple)):
            parts = list(v)
        else:
            raise ConfigError(f"{where}: must be a list (or comma-separated text), got {v!r}")
        if not parts and not allow_empty:
            raise ConfigError(f"{where}: must name at least one value")
        out = []
        for p in parts:
            x = item(p, where)
            if x not in out:
                out.append(x)
        return tuple(out)
    return parse


def _name(v, where):
    if not isinstance(v, str) or not v.strip():
        raise ConfigError(f"{where}: must be a non-empty name, got {v!r}")
    return v.strip()


def _choice(values):
    def parse(v, where):
        if v not in values:
            raise ConfigError(f"{where}: must be one of {', '.join(map(str, values))}, got {v!r}")
        return v
    return parse


def _percentile(v, where):
    x = _int(1, 99)(v, where)
    if x not in PERCENTILES:
        raise ConfigError(f"{where}: must be one of {', '.join(map(str, PERCENTILES))}, got {x}")
    return x


def _max_num_seqs(v, where):
    if v == "auto":
        return "auto"
    return _int(1, 100_000)(v, where)


OPTIONS: Tuple[Option, ...] = (
    Option("model", None, _opt(_name), "the model (a known Hugging Face name or a config.json); default: the base "
           "config's model"),
    Option("devices", None, _opt(_list(_name)), "GPU kinds allowed, comma-separated (h100,h200,...); each "
           "deployment uses one kind; default: the base config's device", "KINDS"),
    Option("gpus", None, _opt(_int(1, 4096)), "GPUs every deployment uses, all of them (replicas x GPUs per "
           "instance, or prefill + decode pools)", "N"),
    Option("isl", None, _opt(_int(1, 1_000_000)), "input (prompt) tokens of every request; default: the base "
           "config's prompt lengths", "TOKENS"),
    Option("osl", None, _opt(_int(1, 1_000_000)), "output tokens of every request; default: the base config's "
           "output lengths", "TOKENS"),
    Option("dataset", None, _opt(_name), "dataset (or category) published acceptance is taken for "
           "(workload.dataset; python -m vidur_specdec acceptance lists them)"),
    Option("slo_ttft_ms", DEFAULT_SLO_TTFT_MS, _float(0, 1e7), "TTFT SLO (ms) at --slo-percentile", "MS"),
    Option("slo_tpot_ms", None, _opt(_float(0, 1e7)), f"TPOT SLO (ms) at --slo-percentile (default "
           f"{DEFAULT_SLO_TPOT_MS:g}, or 1000 / --min-tokens-per-user)", "MS"),
    Option("min_tokens_per_user", None, _opt(_float(0, 1e6)), "the TPOT SLO as output tokens/s per user "
           "(TPOT <= 1000 / this)", "TOKENS_PER_S"),
    Option("slo_percentile", DEFAULT_PERCENTILE, _percentile, "percentile the SLOs apply to (50, 90 or 99)", "P"),
    Option("max_gpus_per_instance", None, _opt(_int(1, 4096)), "largest instance (TP x PP x DP GPUs); "
           "default: --gpus", "N"),
    Option("nodes", None, _opt(_int(1, 512)), f"nodes the GPUs sit in (default: --gpus / {NODE_GPUS}, rounded "
           "up); tensor parallelism stays inside a node", "N"),
    Option("methods", None, _opt(_list(_name)), "speculation methods allowed, comma-separated (none, mtp, eagle3, "
           "ngram, ...); default: none plus every drafter the acceptance library knows for the model and the "
           "base config's own", "METHODS"),
    Option("modes", MODES, _list(_choice(MODES)), "colocated, disaggregated or both (default)", "MODES"),
    Option("k_max", DEFAULT_K_MAX, _int(1, 16), "largest k a speculation schedule may use", "K"),
    Option("max_num_batched_tokens", None, _opt(_list(_int(16, 1_000_000))), "token budgets to search, "
           "comma-separated (default: vLLM's serve default for the device, then one step towards the binding "
           "SLO per survivor)", "TOKENS"),
    Option("max_num_seqs", "auto", _max_num_seqs, "requests per step per scheduler (auto: just above the batch "
           "the step-cost estimate meets the TPOT SLO at, at most vLLM's serve default)", "N"),
    Option("top", DEFAULT_TOP, _int(1, 1000), "survivors simulated per class (colocated/disaggregated x "
           "with/without speculation), best static estimate first", "N"),
    Option("check_dropped", DEFAULT_CHECK_DROPPED, _int(0, 1000), "candidates the screen dropped that are "
           "simulated to check it", "N"),
    Option("tolerance", DEFAULT_TOLERANCE, _float(0, 1), "a load bracket stops when its upper end is within "
           "this fraction of its lower end", "FRACTION"),
)
BY_NAME = {o.name: o for o in OPTIONS}


@dataclass
class PlanSpec:
    """A checked plan question: the base run config (a :class:`~vidur_specdec.config.RunConfig`) and the options.

    ``slo_tpot_ms`` is resolved (given, from ``min_tokens_per_user``, or the default); ``devices``,
    ``max_gpus_per_instance`` and ``nodes`` are filled in.
    """

    base: Any
    model: str
    devices: Tuple[str, ...]
    gpus: int
    slo_ttft_ms: float
    slo_tpot_ms: float
    slo_percentile: int
    max_gpus_per_instance: int
    gpus_per_node: int
    methods: Optional[Tuple[str, ...]]
    modes: Tuple[str, ...]
    k_max: int
    max_num_batched_tokens: Optional[Tuple[int, ...]]
    max_num_seqs: Any
    top: int
    check_dropped: int
    tolerance: float
    isl: Optional[int] = None
    osl: Optional[int] = None
    dataset: Optional[str] = None
    options: Dict[str, Any] = field(default_factory=dict)  # as given, for summary.json and the plan hash

    @property
    def slo(self) -> Dict[str, float]:
        return {"ttft_ms": self.slo_ttft_ms, "tpot_ms": self.slo_tpot_ms, "percentile": self.slo_percentile}


def read_plan_file(path) -> Tuple[Dict, Dict, Optional[Path]]:
    """``(run-config mapping, plan options, base_dir)`` from ``--config FILE``.

    A file with a ``plan:`` section is a plan file: its ``base:`` (a run config path, relative to the file)
    is read first and its other top-level keys are merged over it; otherwise the file is the base run config.
    """
    from vidur_specdec.config import read_yaml, set_dotted

    path = Path(path)
    data = read_yaml(path)
    if not isinstance(data, dict) or "plan" not in data:
        return data, {}, path.resolve().parent
    plan = data.pop("plan")
    if plan is None:
        plan = {}
    if not isinstance(plan, dict):
        raise ConfigError(f"plan: must be a mapping of plan options in {path}, got {plan!r}")
    unknown = sorted(k for k in plan if k not in BY_NAME)
    if unknown:
        raise ConfigError(f"plan.{unknown[0]}: not a plan option (allowed: {', '.join(BY_NAME)})")
    base_ref = data.pop("base", None)
    run: Dict = {}
    base_dir = path.resolve().parent
    if base_ref is not None:
        if not isinstance(base_ref, str):
            raise ConfigError(f"base: must be the path of a run config, got {base_ref!r}")
        bp = Path(base_ref)
        bp = bp if bp.is_absolute() else path.resolve().parent / bp
        if not bp.is_file():
            raise ConfigError(f"base: {bp} is not a file")
        run = read_yaml(bp)
        if isinstance(run, dict) and "plan" in run:
            raise ConfigError(f"base: {bp} is a plan file; name a run config")
        from vidur_specdec.config.paths import resolve_paths

        resolve_paths(run, bp.resolve().parent)  # the base's relative paths against its own folder
    for key, value in data.items():  # the file's run-config keys over the base's, mappings key by key (as --set)
        set_dotted(run, key, value)
    return run, dict(plan), base_dir


def check_options(given: Mapping[str, Any], where: Callable[[str], str]) -> Dict[str, Any]:
    """Every option parsed and checked (defaults filled); ``where(name)`` names an option in messages."""
    unknown = sorted(k for k in given if k not in BY_NAME)
    if unknown:
        raise ConfigError(f"{where(unknown[0])}: not a plan option (allowed: {', '.join(BY_NAME)})")
    return {o.name: o.parse(given[o.name], where(o.name)) if given.get(o.name) is not None else o.default
            for o in OPTIONS}


def build_spec(config, overrides: Sequence[str], given: Mapping[str, Any],
               where: Callable[[str], str]) -> PlanSpec:
    """The plan question from a base (a run-config/plan-file path, a mapping or None), ``--set``s and options.

    ``given`` holds the options set by the caller (flags or keywords) over a plan file's own; ``where``
    names an option in messages as the caller wrote it. Everything is checked here, before any work.
    """
    from vidur_specdec.engine.resolve import load

    file_opts: Dict[str, Any] = {}
    base_dir = None
    if isinstance(config, (str, Path)):
        if not Path(config).is_file():
            raise ConfigError(f"--config: {config} is not a file")
        run, file_opts, base_dir = read_plan_file(config)
    elif isinstance(config, Mapping):
        run = dict(config)
        if "plan" in run:
            file_opts = dict(run.pop("plan") or {})
            if "base" in run:
                raise ConfigError("base: a mapping cannot name a base file; merge the base's keys into it")
    elif config is None:
        run = {}
    else:
        raise ConfigError(f"config: must be a YAML path, a mapping or None, got {type(config).__name__}")
    merged = {k: v for k, v in file_opts.items()}
    merged.update({k: v for k, v in given.items() if v is not None})
    caller = where
    where = lambda name: f"plan.{name}" if name in file_opts and given.get(name) is None else caller(name)  # noqa: E731
    opts = check_options(merged, where)

    run = dict(run)
    if opts["model"] is not None:
        run["model"] = opts["model"]
    if not run.get("speculative"):  # no speculation of the user's: the search adds what the library knows
        run["speculative"] = {"method": "none", "num_speculative_tokens": 0}
    wl = dict(run.get("workload") or {})
    for opt, key in (("isl", "prompt_tokens"), ("osl", "output_tokens")):
        if opts[opt] is not None:
            wl[key] = {"dist": "fixed", "value": opts[opt]}
    run["workload"] = wl
    if opts["devices"]:
        from vidur_specdec.hardware.devices import get_device

        for d in opts["devices"]:
            try:
                get_device(d)
            except ConfigError as e:
                raise ConfigError(f"{where('devices')}: {str(e).split(': ', 1)[-1]}") from None
        run["device"] = opts["devices"][0]
    base = load(run, list(overrides or []), base_dir=base_dir)
    dataset = opts["dataset"] or base.workload.dataset
    if base.workload.dataset is not None:
        # the dataset picks published acceptance for every drafter the search tries (as tune --compare-drafters
        # does); the runs carry each drafter's rates as given, so the base keeps none of its own lookup
        from vidur_specdec.tune.points import build_config

        ov = {"workload.dataset": None}
        if base.speculative.acceptance_source == "published":
            ov.update({"speculative.acceptance_source": None,
                       "speculative.acceptance_per_position": list(base.speculative.acceptance_per_position)})
        base = build_config(base, ov)
    if base.disaggregation.enabled:
        raise ConfigError("disaggregation.prefill_instances: plan chooses the pools itself; remove the "
                          "disaggregation keys from the base config")
    if base.workload.arrival == "trace":
        raise ConfigError("workload.arrival: plan runs every point closed-loop (vllm bench serve "
                          "--max-concurrency); a trace's arrival times are not used: give its lengths with "
                          "--isl/--osl or a length distribution")
    devices = tuple(opts["devices"] or (base.device,))
    if opts["gpus"] is None:
        raise ConfigError(f"{where('gpus')}: required (the GPUs every deployment uses)")
    gpus = opts["gpus"]
    tpot = opts["slo_tpot_ms"]
    if opts["min_tokens_per_user"] is not None:
        if tpot is not None:
            raise ConfigError(f"{where('min_tokens_per_user')}: give it or {where('slo_tpot_ms')}, not both")
        tpot = 1000.0 / opts["min_tokens_per_user"]
    if tpot is None:
        tpot = DEFAULT_SLO_TPOT_MS
    nodes = opts["nodes"] if opts["nodes"] is not None else max(1, math.ceil(gpus / NODE_GPUS))
    if gpus % nodes:
        raise ConfigError(f"{where('nodes')}: {gpus} GPUs do not split evenly over {nodes} nodes")
    per_node = gpus // nodes
    if per_node > NODE_GPUS:
        raise ConfigError(f"{where('nodes')}: {gpus} GPUs on {nodes} node{'s' if nodes > 1 else ''} is "
                          f"{per_node} per node, more than the {NODE_GPUS} of one NVLink node; use --nodes "
                          f"{math.ceil(gpus / NODE_GPUS)} or more")
    mgi = opts["max_gpus_per_instance"] if opts["max_gpus_per_instance"] is not None else gpus
    methods = opts["methods"]
    if methods is not None:
        from vidur_specdec.config.registry import choices

        known = ("none",) + tuple(m for m in choices("speculative.method")() if m != "none")
        bad = [m for m in methods if m not in known]
        if bad:
            raise ConfigError(f"{where('methods')}: unknown method {bad[0]!r}; allowed: {', '.join(known)}")
    shown = {k: (list(v) if isinstance(v, tuple) else v) for k, v in opts.items()}
    shown.update(devices=list(devices), slo_tpot_ms=tpot, nodes=nodes, max_gpus_per_instance=mgi,
                 model=base.model)
    return PlanSpec(base=base, model=base.model, devices=devices, gpus=gpus, slo_ttft_ms=opts["slo_ttft_ms"],
                    slo_tpot_ms=float(tpot), slo_percentile=opts["slo_percentile"], max_gpus_per_instance=mgi,
                    gpus_per_node=per_node, methods=methods, modes=opts["modes"], k_max=opts["k_max"],
                    max_num_batched_tokens=opts["max_num_batched_tokens"], max_num_seqs=opts["max_num_seqs"],
                    top=opts["top"], check_dropped=opts["check_dropped"], tolerance=opts["tolerance"],
                    isl=opts["isl"], osl=opts["osl"], dataset=dataset, options=shown)


def flag_name(name: str) -> str:
    return BY_NAME[name].flag if name in BY_NAME else name


def list_value(v) -> Optional[List]:
    return None if v is None else list(v)
