"""Sweep files: parsing, grid expansion, row identity, parameter columns, baselines and the sweep hash."""

from __future__ import annotations

import copy
import dataclasses
import itertools
import math
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

from vidur_specdec.config import (
    ConfigError,
    RunConfig,
    SpeculativeConfig,
    read_yaml,
    resolve_path,
    resolve_paths,
    set_dotted,
)
from vidur_specdec.config import unused
from vidur_specdec.config.overlay import assignments, overlay, without_replaced
from vidur_specdec.config.schema import check_file_alone
from vidur_specdec.config.disaggregation import DisaggregationConfig
from vidur_specdec.config.schema import ParallelConfig
from vidur_specdec.engine.resolve import from_dict
from vidur_specdec.sweep.digest import canonical_json, short_sha, profile_digests
from vidur_specdec.sweep.worker import METRIC_COLUMNS, POOL_METRIC_COLUMNS
from vidur_specdec import __version__

SWEEP_KEYS = ("sweep", "base", "grid", "rows")
JOURNAL_FORMAT = 1
MAX_SWEEP_ROWS = 10_000  # rows of one sweep (grids and rows together), counted before any row is built;
# each row is a simulation of seconds to minutes, and resolving one row's config takes about a millisecond

# Parameter columns every sweep CSV has: (column, dotted config key).
STANDARD_PARAMS = [
    ("model", "model"),
    ("device", "device"),
    ("profiles", "profiles"),
    ("num_requests", "workload.num_requests"),
    ("qps", "workload.qps"),
    ("method", "speculative.method"),
    ("k", "speculative.num_speculative_tokens"),
    ("acceptance_rate", "speculative.acceptance_rate"),
    ("verify_attention", "speculative.verify_attention"),
    ("tensor_parallel_size", "parallel.tensor_parallel_size"),
    ("num_replicas", "parallel.num_replicas"),
]


@dataclass
class SweepRow:
    index: int
    overrides: Dict[str, Any]      # dotted key -> value, as written in the sweep file
    config: RunConfig              # resolved and normalised
    row_id: str
    load_id: str                   # hash of the resolved config without its speculative section

    @property
    def config_dict(self) -> Dict:
        """The mapping a worker resolves again into this row's config (:meth:`RunConfig.to_input`)."""
        return self.config.to_input()

    @property
    def is_baseline(self) -> bool:
        return not self.config.speculative.enabled

    def describe(self) -> str:
        return ", ".join(f"{k}={fmt_value(v)}" for k, v in self.overrides.items()) or "base config"


@dataclass
class Sweep:
    name: str
    description: str
    rows: List[SweepRow]
    columns: List[str]
    param_columns: List[Tuple[str, str]]     # (column, dotted key)
    sweep_hash: str
    source: Optional[str] = None
    baseline_of: Dict[int, Optional[int]] = field(default_factory=dict)

    @property
    def csv_name(self) -> str:
        return f"{self.name}.csv"

    @property
    def journal_name(self) -> str:
        return f".{self.name}.journal.jsonl"


def is_sweep(data: Mapping) -> bool:
    """True when a loaded YAML mapping describes a sweep (a top-level ``sweep``, ``grid`` or ``rows`` key)."""
    return isinstance(data, Mapping) and any(k in data for k in ("sweep", "grid", "rows"))


_KEY_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def fmt_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return "null"
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, (list, dict)):
        return json.dumps(v, separators=(",", ":"))
    return str(v)


def _get_dotted(data: Mapping, key: str):
    node = data
    for part in key.split("."):
        node = node[part]
    return node


def _check_key(where: str, key) -> str:
    if not isinstance(key, str) or not _KEY_RE.match(key):
        raise ConfigError(f"{where}: {key!r} is not a dotted config key (e.g. speculative.acceptance_rate)")
    return key


def _expand_grid(where: str, grid) -> List[Dict[str, Any]]:
    if not isinstance(grid, Mapping):
        raise ConfigError(f"{where}: must be a mapping of dotted.key: [values], got {grid!r}")
    if not grid:
        raise ConfigError(f"{where}: is empty; give at least one key with a list of values")
    keys, values = [], []
    for key, vals in grid.items():
        _check_key(where, key)
        if not isinstance(vals, list):
            raise ConfigError(f"{where}.{key}: must be a list of values, got {vals!r}")
        if not vals:
            raise ConfigError(f"{where}.{key}: empty list of values, so the grid has no rows")
        keys.append(key)
        values.append(vals)
    _check_rows(where, math.prod(len(v) for v in values))
    return [dict(zip(keys, combo)) for combo in itertools.product(*values)]


def _check_rows(where: str, n: int) -> None:
    if n > MAX_SWEEP_ROWS:
        raise ConfigError(f"{where}: expands to {n:,} rows, more than {MAX_SWEEP_ROWS:,} (each row is a simulation); "
                          "split the sweep or give fewer values")


def _normalise(cfg: RunConfig) -> RunConfig:
    if not cfg.speculative.enabled:
        cfg.speculative = SpeculativeConfig(method="none", num_speculative_tokens=0)
    return cfg


# Keys that cannot change a run's numbers, left out of row identity.
# The vLLM-named scheduler keys repeat their aliases' resolved values (vidur_specdec/config/vllm_defaults.py).
# keys that never change a row's numbers: the fit cache's folder, the vLLM-named aliases of scheduler keys, and the
# engine that runs the schedule (the engine core and the Vidur-backed reference give the same tables)
NOT_IDENTITY = ("predictor.cache_dir", "scheduler.max_num_batched_tokens", "scheduler.max_num_seqs",
                "scheduler.gpu_memory_utilization", "simulator")
NEUTRAL = {"workload.warmup_requests": 0, "workload.requests_per_concurrency": None,
           "quantization": None, "kv_cache_dtype": "auto", "parallel.enable_expert_parallel": False,
           "parallel.pipeline_parallel_size": 1,
           "parallel.data_parallel_size": 1, "parallel.enable_eplb": False, "parallel.num_redundant_experts": 0,
           **{f"parallel.{k}": getattr(ParallelConfig(), k) for k in ("enable_dbo", "dbo_decode_token_threshold",
                                                                       "dbo_prefill_token_threshold")},
           "workload.dataset": None, "workload.temperature": None, "speculative.acceptance_at_k": None,
           "speculative.acceptance_factors": ["context", "dataset", "temperature"],
           "disaggregation": dataclasses.asdict(DisaggregationConfig()),  # colocated: one mixed pool
           # a pool's own DP, EPLB and DBO keys at null (after the whole section: pools keep their older ids)
           **{f"disaggregation.{role}.{k}": None for role in ("prefill", "decode")
              for k in ("data_parallel_size", "enable_eplb", "num_redundant_experts", "enable_dbo",
                        "dbo_decode_token_threshold", "dbo_prefill_token_threshold")}}
# acceptance the user gave (or speculation off) is what every row before acceptance_source meant
NEUTRAL_SOURCES = (None, "given")


def identity(cfg: RunConfig) -> Dict:
    """The resolved config a row id is the hash of: ``cfg`` without :data:`NOT_IDENTITY` keys."""
    d = cfg.to_dict()
    for key, neutral in NEUTRAL.items():  # newer keys at their neutral value leave older row ids as they were
        *path, name = key.split(".")
        node = d
        for part in path:
            node = node.get(part, {}) if isinstance(node, dict) else {}
        if isinstance(node, dict) and node.get(name, neutral) == neutral:
            node.pop(name, None)
    if d.get("speculative", {}).get("acceptance_source", None) in NEUTRAL_SOURCES:
        d.get("speculative", {}).pop("acceptance_source", None)
    for key in NOT_IDENTITY:
        *path, last = key.split(".")
        node = d
        for part in path:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict):
            node.pop(last, None)
            if not node and path:
                parent = d
                for part in path[:-1]:
                    parent = parent[part]
                parent.pop(path[-1])
    return d


def load_sweep(source: Union[str, Path, Mapping], overrides: Optional[List[str]] = None,
               name: Optional[str] = None) -> Sweep:
    """Parse, expand and validate a sweep (a YAML path or a mapping); ``overrides`` apply to ``base``.

    Raises :class:`ConfigError` (one line) on an unknown top-level key, an empty
    grid, a bad or unknown config key in any row, or two rows that are the same run.
    """
    src = None
    base_dir: Optional[Path] = None  # relative paths resolve against the sweep file's folder (mapping: as written)
    if isinstance(source, (str, Path)):
        src = str(source)
        data = read_yaml(source)
        base_dir = Path(source).resolve().parent
        default_name = Path(source).stem
    else:
        data = dict(source or {})
        default_name = "sweep"
    unknown = [k for k in data if k not in SWEEP_KEYS]
    if unknown:
        raise ConfigError(f"{unknown[0]}: unknown top-level key in a sweep file; allowed: {', '.join(SWEEP_KEYS)} "
                          "(run config keys go under base:)")
    meta = data.get("sweep") or {}
    if not isinstance(meta, Mapping):
        raise ConfigError(f"sweep: must be a mapping with name/description, got {meta!r}")
    bad = [k for k in meta if k not in ("name", "description")]
    if bad:
        raise ConfigError(f"sweep.{bad[0]}: unknown key; allowed under sweep: name, description")
    sweep_name = name or meta.get("name") or default_name
    if not isinstance(sweep_name, str) or not _NAME_RE.match(sweep_name):
        raise ConfigError(f"sweep.name: must be letters, digits, '_', '-', '.', got {sweep_name!r}")
    description = meta.get("description") or ""
    if not isinstance(description, str):
        raise ConfigError("sweep.description: must be a string")

    base = data.get("base") or {}
    base_file = isinstance(base, str)  # a run config file: its keys are checked as run checks its --config
    if isinstance(base, str):
        p = Path(resolve_path(base, base_dir or Path.cwd()))
        if not p.is_file():
            raise ConfigError(f"base: file not found: {base}")
        base = resolve_paths(read_yaml(p, "base"), p.resolve().parent)  # paths in it: against its own folder
    elif isinstance(base, Mapping):
        base = resolve_paths(copy.deepcopy(dict(base)), base_dir)
    if not isinstance(base, Mapping):
        raise ConfigError(f"base: must be a run config mapping or a path to one, got {base!r}")
    try:
        pairs = assignments(overrides or [])
        if base_file:  # a run config file, checked as `run --config FILE --set ...` checks it: its own keys
            # against its own modes; --set and the rows may then change a mode under them (a template)
            check_file_alone(without_replaced(base, pairs), unused.leaves(overlay({}, pairs)))
        base = overlay(dict(base), pairs)  # the rule --set follows on a run config
        template = unused.leaves(base)  # keys a row's config may leave unread: checked across the rows below
        from_dict(base, shared=template)
    except ConfigError as e:
        raise ConfigError(f"base: {e}") from None

    grid = data.get("grid")
    rows = data.get("rows")
    if grid is None and rows is None:
        raise ConfigError("grid: a sweep needs a grid: or rows:")
    expanded: List[Tuple[str, Dict[str, Any]]] = []
    if grid is not None:
        grids = grid if isinstance(grid, list) else [grid]
        if not grids:
            raise ConfigError("grid: is empty; give at least one key with a list of values")
        for gi, g in enumerate(grids):
            where = "grid" if not isinstance(grid, list) else f"grid[{gi}]"
            expanded += [(where, r) for r in _expand_grid(where, g)]
            _check_rows("grid", len(expanded))
    if rows is not None:
        if not isinstance(rows, list):
            raise ConfigError(f"rows: must be a list of {{dotted.key: value}} mappings, got {rows!r}")
        if not rows:
            raise ConfigError("rows: is empty; give at least one row")
        for ri, r in enumerate(rows):
            if not isinstance(r, Mapping):
                raise ConfigError(f"rows[{ri}]: must be a mapping of dotted.key: value, got {r!r}")
            for k in r:
                _check_key(f"rows[{ri}]", k)
            expanded.append((f"rows[{ri}]", dict(r)))
        _check_rows("grid and rows", len(expanded))

    out: List[SweepRow] = []
    seen: Dict[str, int] = {}
    for i, (where, ov) in enumerate(expanded):
        try:
            row_tree: Dict[str, Any] = {}  # the row's keys as a tree, its relative paths against the sweep file
            for k, v in ov.items():
                set_dotted(row_tree, k, v)
            # the row over its base by the rule --set follows on a run config (mappings merge key by key)
            data_i = overlay(base, list(resolve_paths(row_tree, base_dir).items()))
            cfg = from_dict(data_i, shared=template)
            unused.check_given(ov, cfg)  # a row's own key must change its run, whatever its value
            cfg = _normalise(cfg)
        except ConfigError as e:
            raise ConfigError(f"{where} (sweep row {i}: {', '.join(f'{k}={fmt_value(v)}' for k, v in ov.items())}): "
                              f"{e}") from None
        d = identity(cfg)
        rid = short_sha(canonical_json(d))
        if rid in seen:
            j = seen[rid]
            why = " (speculation is off in both, so their speculative.* keys have no effect)" \
                if not cfg.speculative.enabled else ""
            raise ConfigError(f"{where}: sweep rows {j} and {i} are the same run{why}: "
                              f"{out[j].describe()} | {', '.join(f'{k}={fmt_value(v)}' for k, v in ov.items())}")
        seen[rid] = i
        d.pop("speculative")
        d.get("disaggregation", {}).pop("draft_kv", None)  # speculation's (a drafter's KV): same load as its baseline
        out.append(SweepRow(i, ov, cfg, rid, short_sha(canonical_json(d))))

    # a base key no row reads is refused (a base file's own keys were checked above, as run checks them)
    checked = unused.leaves(overlay({}, pairs)) if base_file else template
    why = unused.unused_in_all(checked, [r.config for r in out])
    if why:
        raise ConfigError(f"base: no row of this sweep reads it: {why}")

    # parameter columns: the standard ones, then any other varied key in order of first appearance
    std_keys = {k for _, k in STANDARD_PARAMS}
    params = list(STANDARD_PARAMS)
    if any(r.config.speculative.method == "draft_model" for r in out):
        params.append(("draft_model", "speculative.draft_model"))
    std_keys |= {k for _, k in params}
    for r in out:
        for k in r.overrides:
            if k not in std_keys and all(k != c for c, _ in params):
                params.append((k, k))
                std_keys.add(k)
    metrics = METRIC_COLUMNS + (POOL_METRIC_COLUMNS if any(r.config.disaggregation.enabled for r in out) else [])
    columns = ["row", "row_id"] + [c for c, _ in params] + metrics + ["tpot_speedup", "speedup_above_acceptance",
                                                                             "baseline_row",
                                                                             "sweep_hash"]
    baselines = {r.load_id: r.index for r in out if r.is_baseline}
    baseline_of = {r.index: baselines.get(r.load_id) for r in out}

    profiles: Dict[str, str] = {}
    for r in out:
        profiles.update(profile_digests(r.config))

    sweep_hash = short_sha(canonical_json({"format": JOURNAL_FORMAT, "rows": [r.row_id for r in out], "columns": columns,
                              "profiles": profiles, "version": __version__}))
    return Sweep(sweep_name, description, out, columns, params, sweep_hash, src, baseline_of)
