"""Which keys a method, an arrival mode or a setting reads: one table, and the check that refuses the rest.

A key is **set** when its value differs from the schema's default (a key at its
default changes nothing whether it is read or not, and the ``config.yaml`` a
run writes lists every key, so it loads again). A set key that the config's
mode does not read is refused with one line naming the key, why it does nothing
here and what would read it::

    speculative.model: does nothing with speculative.method ngram; read only with speculative.method eagle,
    eagle3, mtp or medusa (the EAGLE-family, MTP or Medusa head); set one of those or remove the key

:data:`USES` is the table: one :class:`Use` row per key (several rows for one
key must all hold). ``axis`` is the key whose value decides; ``values`` the
values under which ``key`` is read (a tuple, or a ``range`` for counts);
``axis=None`` marks a key no mode reads (accepted for vLLM's name, not
modelled). Adding a key that only some modes read is one row here;
docs/config.md's "Keys each mode reads" table is generated from it
(``scripts/config_tables.py --write``, checked by a test).

:data:`ONE_OF` lists keys that give one quantity: at most one of them may be
set (none has a vLLM precedence rule, since vLLM takes no acceptance inputs).

Speculation off (``speculative.method: none`` or k = 0) turns the whole
``speculative`` section off: its keys and the rows on the ``speculative.method``
axis are not checked, so a sweep's or tune's baseline keeps the base config's
speculative keys. A sweep checks the keys its rows set (present, whatever the
value) in each row, and a key of its ``base`` only against all rows together
(:func:`unused_in_all`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Iterable, Iterator, List, Optional, Sequence, Tuple

from vidur_specdec.config.disaggregation import MAX_DP
from vidur_specdec.config.errors import ConfigError

CHECKED = "*"  # in ``shared``: a config built and checked before (a RunConfig, a sweep row or tune point sent to a worker)
METHOD = "speculative.method"
ARRIVAL = "workload.arrival"
GENERATED = ("poisson", "static", "closed")  # arrivals whose requests the simulator draws (not trace)
HEADS = ("eagle", "eagle3", "mtp", "medusa", "dflash", "dspark")  # proposers named by speculative.model
DRAFTERS = ("draft_model", "eagle", "eagle3", "mtp", "dflash", "dspark")  # GPU drafters priced pass by pass (head_cost.PassOverheads)


@dataclass(frozen=True)
class Use:
    """``key`` is read only when ``axis`` has one of ``values``; ``what``: what reading it does."""

    key: str
    axis: Optional[str]
    values: Sequence
    what: str


def _pool_rows() -> Tuple[Use, ...]:
    """The disaggregation keys: each read only when the run has prefill and decode pools."""
    pools, on = "disaggregation.prefill_instances", range(1, 1025)
    rows = [Use(f"disaggregation.{k}", pools, on, what) for k, what in (
        ("router", "which instance of a pool a request goes to"),
        ("kv_link", "the link a request's KV crosses between the pools"),
        ("kv_transfer_latency_ms", "the KV link's latency"),
        ("draft_kv", "whether the drafter's KV is transferred or recomputed"))]
    for role in ("prefill", "decode"):
        for k in ("tensor_parallel_size", "enable_expert_parallel", "data_parallel_size", "enable_eplb",
                  "num_redundant_experts", "enable_dbo", "dbo_decode_token_threshold", "dbo_prefill_token_threshold",
                  "device", "max_num_batched_tokens", "max_num_seqs", "speculative"):
            rows.append(Use(f"disaggregation.{role}.{k}", pools, on, f"the {role} pool's own {k}"))
    return tuple(rows)


def _dist_rows(name: str) -> Tuple[Use, ...]:
    w = f"workload.{name}"
    return (Use(f"{w}.value", f"{w}.dist", ("fixed",), "the one length of a fixed distribution"),
            Use(f"{w}.min", f"{w}.dist", ("uniform", "lognormal"), "the shortest length drawn"),
            Use(f"{w}.max", f"{w}.dist", ("uniform", "lognormal"), "the longest length drawn"),
            Use(f"{w}.median", f"{w}.dist", ("lognormal",), "the lognormal's median"),
            Use(f"{w}.sigma", f"{w}.dist", ("lognormal",), "the lognormal's spread"))


USES: Tuple[Use, ...] = (
    # --- speculative: per proposer (the proposer registry, vidur_specdec/speculation/proposers/) ---
    Use("speculative.model", METHOD, HEADS, "the EAGLE-family, MTP, Medusa or block-drafter head"),
    Use("speculative.draft_vocab_size", METHOD, ("eagle3",), "EAGLE-3's own LM-head vocabulary"),
    Use("speculative.speculative_token_tree", METHOD, ("eagle", "eagle3", "mtp"), "a token tree of head guesses"),
    Use("speculative.ngram_cost_ms", METHOD, ("ngram",), "the CPU n-gram lookup per step"),
    Use("speculative.prompt_lookup_min", METHOD, ("ngram",), "the shortest n-gram matched"),
    Use("speculative.prompt_lookup_max", METHOD, ("ngram",), "the longest n-gram matched"),
    Use("speculative.proposal_rate", METHOD, ("ngram", "suffix"), "steps whose context finds a match"),
    Use("speculative.proposal_spread", METHOD, ("ngram", "suffix"), "each request's own proposal rate"),
    Use("speculative.suffix_cost_ms", METHOD, ("suffix",), "the CPU suffix-tree lookup per step"),
    Use("speculative.suffix_decoding_max_tree_depth", METHOD, ("suffix",), "the longest suffix match"),
    Use("speculative.suffix_decoding_max_spec_factor", METHOD, ("suffix",), "guesses per matched token"),
    Use("speculative.suffix_decoding_max_cached_requests", None, (),
        "vLLM's count of past requests in the suffix tree; matches are drawn here, not looked up in a tree"),
    Use("speculative.suffix_decoding_min_token_prob", None, (),
        "vLLM's frequency cut on suffix guesses; lower speculative.suffix_decoding_max_spec_factor instead"),
    Use("speculative.fixed_cost_ms", METHOD, ("fixed",), "the fixed proposer's cost per round"),
    Use("speculative.draft_model", METHOD, ("draft_model",), "the separate draft model"),
    Use("speculative.draft_tensor_parallel_size", METHOD, ("draft_model",), "the draft model's GPUs"),
    Use("speculative.draft_profiles", METHOD, ("draft_model",), "the draft model's profiles"),
    Use("speculative.draft_sample_method", METHOD, DRAFTERS, "how a GPU drafter picks its guesses"),
    Use("speculative.verify_interpolation_weight", "speculative.verify_attention", ("interpolated",),
        "the weight between the two verify-attention bounds"),
    # --- engine: what a drafter pass and a step cost ---
    Use("engine.draft_pass_ms", METHOD, DRAFTERS, "a GPU drafter's graph replay per pass"),
    Use("engine.draft_pass_ms", "engine.enforce_eager", (False,), "a drafter's graph replay (eager: per layer)"),
    Use("engine.draft_prepare_ms", METHOD, DRAFTERS, "a GPU drafter's input preparation per pass"),
    Use("engine.draft_first_pass_ms", METHOD, DRAFTERS, "a GPU drafter's first-pass preparation"),
    Use("engine.kernel_launch_ms", METHOD, DRAFTERS, "a GPU drafter's small kernels"),
    Use("engine.eager_ms_per_layer", "engine.enforce_eager", (True,), "the launch cost without CUDA graphs"),
    Use("engine.piecewise_graph_cost", "engine.model_runner", ("v1",),
        "piecewise CUDA graphs of a per-batch-size k schedule"),
    Use("engine.all_reduce", "parallel.tensor_parallel_size", (2, 4, 8), "the all-reduce between a replica's GPUs"),
    # --- parallel ---
    Use("parallel.global_scheduler", "parallel.num_replicas", range(2, 1025), "which replica a request goes to"),
    Use("parallel.pipeline_parallel_size", "disaggregation.prefill_instances", (0,),
        "pipeline stages of a replica (prefill and decode pools are modelled at one stage)"),
    Use("parallel.enable_eplb", "parallel.enable_expert_parallel", (True,),
        "EPLB's placement of the experts over the expert-parallel GPUs"),
    Use("parallel.num_redundant_experts", "parallel.enable_eplb", (True,), "EPLB's spare expert copies"),
    Use("parallel.enable_dbo", "parallel.data_parallel_size", range(2, MAX_DP + 1),
        "dual-batch overlap: two micro-batches, one's all-to-all under the other's compute"),
    Use("parallel.dbo_decode_token_threshold", "parallel.enable_dbo", (True,),
        "the tokens per rank from which a decode-only step is split"),
    Use("parallel.dbo_prefill_token_threshold", "parallel.enable_dbo", (True,),
        "the tokens per rank from which a step with a prefill chunk is split"),
    # --- workload: per arrival mode ---
    Use("workload.qps", ARRIVAL, ("poisson",), "the Poisson arrival rate"),
    Use("workload.concurrency", ARRIVAL, ("closed",), "the requests kept in flight"),
    Use("workload.trace_file", ARRIVAL, ("trace",), "the trace replayed"),
    Use("workload.num_requests", ARRIVAL, GENERATED, "how many requests are drawn (a trace has its own)"),
    Use("workload.prompt_tokens", ARRIVAL, GENERATED, "the prompt lengths drawn (a trace has its own)"),
    Use("workload.output_tokens", ARRIVAL, GENERATED, "the output lengths drawn (a trace has its own)"),
    *_dist_rows("prompt_tokens"),
    *_dist_rows("output_tokens"),
    # --- disaggregation: read only with prefill and decode pools ---
    *_pool_rows(),
)

# speculative.* keys a prefill instance never reads: it serves each prompt with max_tokens=1 (vLLM's disaggregated
# proxy), so it never verifies a guess; what it does read is the drafter it holds (method, model, k's lookahead
# slots, the draft model and its profiles), which must match the decode pool's EAGLE/MTP config anyway.
PREFILL_UNREAD = ("acceptance_rate", "mean_acceptance_length", "acceptance_at_k", "acceptance_source",
                  "acceptance_factors", "acceptance_spread", "acceptance_trace", "acceptance_per_position",
                  "acceptance_histogram", "verify_attention", "verify_interpolation_weight", "proposal_rate",
                  "proposal_spread", "prompt_lookup_min", "prompt_lookup_max", "ngram_cost_ms", "fixed_cost_ms",
                  "suffix_cost_ms", "suffix_decoding_max_tree_depth", "suffix_decoding_max_cached_requests",
                  "suffix_decoding_max_spec_factor", "suffix_decoding_min_token_prob",
                  "num_speculative_tokens_per_batch_size", "draft_sample_method")


def pool_refusal(cfg) -> Optional[str]:
    """The refusal of a prefill pool's speculative key that a prefill instance never reads, or None."""
    d = getattr(cfg, "disaggregation", None)
    spec = getattr(getattr(d, "prefill", None), "speculative", None)
    if d is None or not d.enabled or not isinstance(spec, dict):
        return None
    for key in spec:
        if key in PREFILL_UNREAD:
            return (f"disaggregation.prefill.speculative.{key}: does nothing: a prefill instance serves each prompt "
                    "with max_tokens=1 (vLLM's disaggregated proxy) and never verifies a guess; set it under "
                    "speculative or disaggregation.decode.speculative")
    return None


# Keys that give one quantity: (the quantity, its keys). At most one may be set; vLLM takes none of these
# inputs, so no vLLM precedence rule applies.
ACCEPTANCE_INPUTS = ("acceptance_trace", "acceptance_histogram", "acceptance_per_position",
                     "mean_acceptance_length", "acceptance_rate")
ONE_OF: Tuple[Tuple[str, Tuple[str, ...]], ...] = (
    ("the acceptance", tuple(f"speculative.{k}" for k in ACCEPTANCE_INPUTS)),
)


# --------------------------------------------------------------------------- reading the table

def get(cfg, key: str):
    """The value of dotted ``key`` in a config (dataclasses all the way down)."""
    node = cfg
    for part in key.split("."):
        node = getattr(node, part)
    return node


def set_keys(cfg, default=None, prefix: str = "") -> Iterator[str]:
    """Dotted leaf keys of ``cfg`` whose value differs from ``default`` (a fresh config of the same class)."""
    default = type(cfg)() if default is None else default
    for f in dataclasses.fields(cfg):
        mine, theirs = getattr(cfg, f.name), getattr(default, f.name)
        if dataclasses.is_dataclass(mine):
            yield from set_keys(mine, theirs, f"{prefix}{f.name}.")
        elif mine != theirs:
            yield f"{prefix}{f.name}"


def _under(leaf: str, key: str) -> bool:
    return leaf == key or leaf.startswith(key + ".")


def overlaps(a: str, b: str) -> bool:
    """True when dotted keys ``a`` and ``b`` are the same key or one is a section holding the other."""
    return _under(a, b) or _under(b, a)


def _values_text(values) -> str:
    if isinstance(values, range):
        return f"{values.start} to {values.stop - 1}"
    names = ["true" if v is True else "false" if v is False else str(v) for v in values]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]


def _fmt(v) -> str:
    return "true" if v is True else "false" if v is False else str(v)


def _off(cfg, row: Use, leaf: str) -> bool:
    """Speculation off: the speculative section and the method's rows are not checked."""
    if cfg is None:
        return False
    spec = cfg.speculative
    off = spec.method == "none" or spec.num_speculative_tokens == 0
    return off and (leaf.startswith("speculative.") or row.axis == METHOD)


def refusal(leaf: str, cfg, off_exempt: bool = True) -> Optional[str]:
    """The one-line refusal of set key ``leaf`` in ``cfg``, or None when ``cfg`` reads it.

    ``off_exempt=False``: a config with speculation off counts as not reading its speculative keys.
    """
    for row in USES:
        if not _under(leaf, row.key) or _off(cfg if off_exempt else None, row, leaf):
            continue
        if row.axis is None:
            return f"{leaf}: not modelled, so it does nothing ({row.what}); remove the key"
        value = get(cfg, row.axis)
        if value not in row.values:
            return (f"{leaf}: does nothing with {row.axis} {_fmt(value)}; read only with {row.axis} "
                    f"{_values_text(row.values)} ({row.what}); set that or remove the key")
    return None


def conflicts(cfg) -> Optional[str]:
    """The refusal of two keys set for one quantity (:data:`ONE_OF`), or None."""
    spec = cfg.speculative
    for what, keys in ONE_OF:
        if keys[0].startswith("speculative.") and (spec.method == "none" or spec.num_speculative_tokens == 0):
            continue
        given = [k for k in keys if _given(cfg, k)]
        if len(given) > 1:
            return (f"{given[-1]}: given with {given[0]}, two inputs for {what}; no vLLM rule says which wins, "
                    f"so give one (remove the other or set it to null)")
    return None


def _given(cfg, key: str) -> bool:
    *path, name = key.split(".")
    section = get(cfg, ".".join(path)) if path else cfg
    value = getattr(section, name)
    return value is not None and value != getattr(type(section)(), name)


def check(cfg, shared: Iterable[str] = ()) -> None:
    """Refuse the first set key ``cfg`` does not read, and two inputs for one quantity.

    ``shared``: dotted keys (or sections) left unchecked here because the caller
    checks them across several configs (a sweep's ``base``).
    """
    shared = tuple(shared)
    for leaf in set_keys(cfg) if CHECKED not in shared else ():
        if any(_under(leaf, s) for s in shared):
            continue
        why = refusal(leaf, cfg)
        if why:
            raise ConfigError(why)
    why = conflicts(cfg) or pool_refusal(cfg)
    if why:
        raise ConfigError(why)


def check_given(keys: Iterable[str], cfg) -> None:
    """Refuse any of ``keys`` (present in a sweep row or a tune axis, whatever the value) that ``cfg`` does not read."""
    for key in keys:
        why = refusal(key, cfg)
        if why:
            raise ConfigError(why)


def unused_in_all(keys: Iterable[str], cfgs: List) -> Optional[str]:
    """The refusal of a shared key (a sweep's base) that no config of ``cfgs`` reads, or None."""
    for key in keys:
        whys = [refusal(key, c, off_exempt=False) for c in cfgs]
        if cfgs and all(whys):
            return whys[0]
    return None


def leaves(data, prefix: str = "") -> List[str]:
    """Dotted leaf keys of a nested mapping (a sweep's base as written)."""
    out: List[str] = []
    for k, v in data.items():
        if isinstance(v, dict) and v:
            out += leaves(v, f"{prefix}{k}.")
        else:
            out.append(f"{prefix}{k}")
    return out


# --------------------------------------------------------------------------- the docs table

def markdown() -> str:
    """docs/config.md's table of the keys each mode reads (written by scripts/config_tables.py)."""
    lines = ["| key | read only when | what it does there |", "| --- | --- | --- |"]
    for row in USES:
        when = "never (not modelled)" if row.axis is None else f"`{row.axis}` is {_values_text(row.values)}"
        lines.append(f"| `{row.key}` | {when} | {row.what} |")
    groups = "; ".join(f"{what}: " + ", ".join(f"`{k}`" for k in keys) for what, keys in ONE_OF)
    lines += ["", f"At most one of each group may be set — {groups}."]
    lines += ["", "A prefill pool never verifies a guess (it serves each prompt with `max_tokens=1`), so under "
              "`disaggregation.prefill.speculative` these keys are refused: "
              + ", ".join(f"`{k}`" for k in PREFILL_UNREAD) + "."]
    return "\n".join(lines)
