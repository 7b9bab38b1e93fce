"""The search space of a plan: deployment shapes, speculation options and token budgets (docs/plan.md, "Search").

A :class:`Candidate` is one ``vllm serve`` setup (or one pair of them for prefill
and decode pools) on all of the plan's GPUs: a :class:`Shape` (how the GPUs are
split), a :class:`SpecOption` (no speculation, or one drafter at its own
acceptance) and ``max_num_batched_tokens``. Shapes come from generators
registered by mode (:data:`SHAPES`, :func:`shape_generator`): a new kind of
deployment is a new generator, not a branch here. Generators enumerate
everything whose GPU count divides the plan's and leave every other rule (the
model's divisibility, memory per GPU, vLLM's refusals) to the simulator's own
checks, which the screen calls (:mod:`.screen`).

Units: GPUs for counts, tokens for budgets.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

from vidur_specdec.config import ConfigError
from vidur_specdec.config.disaggregation import PoolConfig
from vidur_specdec.config.schema import TP_SIZES

PP_SIZES = (1, 2, 4, 8, 16)  # pipeline stages tried (vLLM splits the layers; the simulator refuses what does not split)
DP_SIZES = (1, 2, 4, 8, 16, 32, 64)  # data-parallel attention ranks tried (MoE models, with expert parallel)


@dataclass(frozen=True)
class PoolShape:
    """One pool of a disaggregated deployment: ``instances`` of ``tp`` GPUs (``dp`` ranks where pools have them)."""

    tp: int
    ep: bool
    instances: int
    dp: int = 1

    @property
    def gpus(self) -> int:
        return self.instances * self.tp * self.dp

    def label(self, role: str) -> str:
        return (f"{self.instances}{role[0].upper()} "
                f"(TP{self.tp}{f' DP{self.dp}' if self.dp > 1 else ''}{' EP' if self.ep else ''})")


@dataclass(frozen=True)
class Shape:
    """How one deployment uses the GPUs: colocated replicas of a TP x PP x DP instance, or prefill/decode pools."""

    mode: str  # colocated | disaggregated
    device: str
    tp: int = 1
    pp: int = 1
    dp: int = 1
    ep: bool = False
    redundant_experts: Optional[int] = None  # EPLB on with this many spare expert copies; None: EPLB off
    replicas: int = 1
    prefill: Optional[PoolShape] = None
    decode: Optional[PoolShape] = None

    @property
    def gpus_per_instance(self) -> int:
        return self.tp * self.pp * self.dp

    @property
    def gpus(self) -> int:
        if self.mode == "disaggregated":
            return self.prefill.gpus + self.decode.gpus
        return self.replicas * self.gpus_per_instance

    @property
    def ranks(self) -> int:
        """Schedulers that decode in parallel: replicas x data-parallel ranks (decode instances x ranks)."""
        if self.mode == "disaggregated":
            return self.decode.instances * self.decode.dp
        return self.replicas * self.dp

    @property
    def label(self) -> str:
        if self.mode == "disaggregated":
            return f"{self.prefill.label('prefill')} + {self.decode.label('decode')} {self.device.upper()}"
        parts = [f"TP{self.tp}"] + ([f"PP{self.pp}"] if self.pp > 1 else []) + \
                ([f"DP{self.dp}"] if self.dp > 1 else [])
        if self.ep:
            parts.append(f"EP{self.tp * self.dp}")
        if self.redundant_experts is not None:
            parts.append(f"EPLB+{self.redundant_experts}")
        return " ".join(parts) + (f" x{self.replicas}" if self.replicas > 1 else "") + f" {self.device.upper()}"

    def overrides(self) -> Dict[str, Any]:
        """The run-config keys (dotted) that set this shape."""
        ov: Dict[str, Any] = {"device": self.device}
        if self.mode == "disaggregated":
            ov.update({"parallel.tensor_parallel_size": self.decode.tp, "parallel.num_replicas": 1,
                       "parallel.enable_expert_parallel": self.decode.ep,
                       "disaggregation.prefill_instances": self.prefill.instances,
                       "disaggregation.decode_instances": self.decode.instances,
                       "disaggregation.router": "least_loaded"})
            for role, p in (("prefill", self.prefill), ("decode", self.decode)):
                ov[f"disaggregation.{role}.tensor_parallel_size"] = p.tp
                ov[f"disaggregation.{role}.enable_expert_parallel"] = p.ep
                if p.dp > 1:
                    ov[f"disaggregation.{role}.data_parallel_size"] = p.dp
            return ov
        ov.update({"parallel.tensor_parallel_size": self.tp, "parallel.pipeline_parallel_size": self.pp,
                   "parallel.data_parallel_size": self.dp, "parallel.enable_expert_parallel": self.ep,
                   "parallel.num_replicas": self.replicas})
        if self.replicas > 1:  # requests go to the least loaded replica (llm-d's and Dynamo's routers route by load)
            ov["parallel.global_scheduler"] = "lor"
        if self.redundant_experts is not None:
            ov["parallel.enable_eplb"] = True
            ov["parallel.num_redundant_experts"] = self.redundant_experts
        return ov


# --------------------------------------------------------------------------- shape generators, by mode

ShapeGen = Callable[["SearchContext"], Iterable[Shape]]
SHAPES: Dict[str, ShapeGen] = {}


def shape_generator(mode: str):
    """Register a generator of the shapes of one mode (``colocated``, ``disaggregated``, ...)."""
    def register(fn: ShapeGen) -> ShapeGen:
        SHAPES[mode] = fn
        return fn
    return register


@dataclass(frozen=True)
class SearchContext:
    """What the generators read: the GPUs, the limits and whether the model has experts."""

    gpus: int
    device: str
    max_gpus_per_instance: int
    gpus_per_node: int
    is_moe: bool
    num_experts: int


def _eplb_options(ctx: SearchContext, ep_size: int) -> List[Optional[int]]:
    """EPLB off, and on with one spare expert copy per expert-parallel GPU (vLLM's eplb_config)."""
    return [None, ep_size] if ctx.is_moe and ep_size > 1 else [None]


def instance_shapes(ctx: SearchContext, max_gpus: Optional[int] = None) -> Iterable[Tuple[int, int, int, bool]]:
    """(tp, pp, dp, ep) of every instance of at most ``max_gpus`` GPUs (default: the plan's limit)."""
    cap = ctx.max_gpus_per_instance if max_gpus is None else max_gpus
    for tp in TP_SIZES:
        if tp > ctx.gpus_per_node:
            continue
        for pp in PP_SIZES:
            for dp in DP_SIZES:
                n = tp * pp * dp
                if n > cap or (dp > 1 and (pp > 1 or not ctx.is_moe)):
                    continue  # data-parallel attention: MoE only, without pipeline stages (the simulator's rule)
                for ep in ((False, True) if ctx.is_moe and tp * dp > 1 and dp == 1 else (dp > 1,)):
                    yield tp, pp, dp, ep


@shape_generator("colocated")
def colocated(ctx: SearchContext) -> Iterable[Shape]:
    for tp, pp, dp, ep in instance_shapes(ctx):
        n = tp * pp * dp
        if ctx.gpus % n:
            continue
        for red in (_eplb_options(ctx, tp * dp) if ep else [None]):
            yield Shape("colocated", ctx.device, tp=tp, pp=pp, dp=dp, ep=ep, redundant_experts=red,
                        replicas=ctx.gpus // n)


def pool_shapes(ctx: SearchContext) -> List[Tuple[int, int, bool]]:
    """(tp, dp, ep) of one instance of a pool: the keys ``disaggregation.<pool>`` has in this build."""
    has_dp = "data_parallel_size" in {f.name for f in dataclasses.fields(PoolConfig)}
    out = []
    for tp in TP_SIZES:
        if tp > min(ctx.gpus_per_node, ctx.max_gpus_per_instance):
            continue
        for dp in (DP_SIZES if has_dp and ctx.is_moe else (1,)):
            if tp * dp > ctx.max_gpus_per_instance:
                continue
            for ep in ((False, True) if ctx.is_moe and tp * dp > 1 and dp == 1 else (dp > 1,)):
                out.append((tp, dp, ep))
    return out


@shape_generator("disaggregated")
def disaggregated(ctx: SearchContext) -> Iterable[Shape]:
    pools = pool_shapes(ctx)
    for ptp, pdp, pep in pools:
        for dtp, ddp, dep in pools:
            pg, dg = ptp * pdp, dtp * ddp
            for x in range(1, ctx.gpus // pg + 1):
                rest = ctx.gpus - x * pg
                if rest < dg or rest % dg:
                    continue
                yield Shape("disaggregated", ctx.device, prefill=PoolShape(ptp, pep, x, pdp),
                            decode=PoolShape(dtp, dep, rest // dg, ddp))


# --------------------------------------------------------------------------- speculation options


@dataclass(frozen=True)
class SpecOption:
    """No speculation, or one drafter at its own acceptance; ``overrides``: its ``speculative.*`` keys at ``k_max``."""

    name: str
    method: str
    drafter: Optional[str]
    source: str  # none | library | config
    k_max: int
    overrides: Tuple[Tuple[str, Any], ...] = ()
    # what summary.json says about it (rows, rule, input); not part of its identity
    acceptance: Tuple[Tuple[str, Any], ...] = dataclasses.field(default=(), compare=False)

    @property
    def enabled(self) -> bool:
        return self.method != "none"

    def override_dict(self) -> Dict[str, Any]:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.overrides}


NONE = SpecOption("none", "none", None, "none", 0,
                  (("speculative.method", "none"), ("speculative.num_speculative_tokens", 0)))


def spec_options(base, k_max: int, methods: Optional[Tuple[str, ...]], dataset: Optional[str]) -> Tuple[
        List[SpecOption], List[Dict]]:
    """(options, skipped): no speculation, every drafter the library knows for the model at its published
    acceptance (``tune --compare-drafters``'s candidates), and the base config's own speculation when it
    states its acceptance (it replaces the library's for the same drafter). ``methods`` filters them."""
    from vidur_specdec.tune.drafters import setting
    from vidur_specdec.speculation.acceptance_source import drafter_name

    out: List[SpecOption] = [NONE]
    skipped: List[Dict] = []
    s = base.speculative
    own = None
    if s.method != "none" and s.num_speculative_tokens > 0 and s.acceptance_source in ("given", "published"):
        used = s.acceptance_input()
        own = SpecOption(f"{s.method} (config)", s.method, drafter_name(base), "config", s.num_speculative_tokens,
                         (("speculative.method", s.method), ("speculative.num_speculative_tokens",
                                                              s.num_speculative_tokens)),
                         (("input", used), ("value", getattr(s, used) if used else None),
                          ("acceptance_source", s.acceptance_source)))
    cands, skipped, ds_of = _library(base, k_max, dataset)
    for c in cands:
        if own is not None and c["drafter"] == own.drafter and c["method"] == own.method:
            continue  # the user's acceptance for this drafter replaces the library's
        st = setting(c, k_max)
        ov = (("speculative.num_speculative_tokens", k_max),) + tuple((k, v) for k, v in st.spec)
        short = c["method"] if c["method"] == "mtp" else f"{c['method']} {c['drafter']}"
        out.append(SpecOption(short, c["method"], c["drafter"], "library", k_max, ov,
                              (("dataset", ds_of[c["drafter"]]), ("dataset_used", c["dataset_used"]),
                               ("rule", c["acceptance_rule"]),
                               ("mean_acceptance_length_at_k_max", c["mean_acceptance_length_at_k_max"]),
                               ("rows", tuple(c["rows"])))))
    if own is not None:
        out.append(own)
    if methods is not None:
        for o in out:
            if o.method not in methods:
                skipped.append({"drafter": o.drafter, "method": o.method, "reason": "method not in --methods"})
        out = [o for o in out if o.method in methods]
    return out, skipped


def _library(base, k_max: int, dataset: Optional[str]) -> Tuple[List[Dict], List[Dict], Dict[str, str]]:
    """The library's drafters for the model, each at its published acceptance (tune's candidates): on
    ``dataset`` when given, else on the dataset a run with ``acceptance_source: published`` picks for it
    (mt-bench where the library has it, else the drafter's first)."""
    from vidur_specdec.speculation import acceptance_source as src
    from vidur_specdec.tune.drafters import candidates

    known = src.drafters_for(base.model)
    ds_of = {d["drafter"]: dataset or (src.DEFAULT_DATASET if src.DEFAULT_DATASET in d["datasets"]
                                       else d["datasets"][0]) for d in known}
    cands, skipped = [], []
    for ds in dict.fromkeys(ds_of.values()):
        try:
            _, got, skip = candidates(base, k_max, ds)
        except ConfigError as e:
            skipped.append({"drafter": None, "method": None, "reason": str(e)})
            continue
        cands += [c for c in got if ds_of.get(c["drafter"]) == ds]
        skipped += [x for x in skip if ds_of.get(x["drafter"]) == ds]
    return cands, skipped, ds_of


# --------------------------------------------------------------------------- candidates


@dataclass(frozen=True)
class Candidate:
    """One deployment: a shape, a speculation option and a token budget (``max_num_batched_tokens``)."""

    shape: Shape
    spec: SpecOption
    budget: int

    @property
    def mode(self) -> str:
        return self.shape.mode

    @property
    def speculative(self) -> bool:
        return self.spec.enabled

    @property
    def cls(self) -> str:
        """Its class on the frontier: colocated / disaggregated, with / without speculation."""
        return f"{self.shape.mode}, {'speculation' if self.spec.enabled else 'no speculation'}"

    @property
    def label(self) -> str:
        return f"{self.shape.label}, {self.spec.name}, {self.budget} tokens"

    def overrides(self, max_num_seqs: Optional[int] = None) -> Dict[str, Any]:
        ov = self.shape.overrides()
        ov.update(self.spec.override_dict())
        if self.spec.enabled:
            ov["speculative.num_speculative_tokens_per_batch_size"] = None
        ov["scheduler.max_num_batched_tokens"] = self.budget
        ov["scheduler.chunk_size"] = None
        ov["scheduler.max_num_seqs"] = max_num_seqs
        ov["scheduler.batch_size_cap"] = None
        if self.shape.mode == "disaggregated" and not self.spec.enabled:
            ov["disaggregation.draft_kv"] = "transfer"
        return ov


def enumerate_candidates(ctxs: List[SearchContext], modes: Tuple[str, ...], specs: List[SpecOption],
                         budgets: Dict[str, Tuple[int, ...]]) -> List[Candidate]:
    """Every candidate, in a fixed order (mode, device, shape, speculation, budget)."""
    out = []
    for mode in modes:
        gen = SHAPES[mode]
        for ctx in ctxs:
            for shape in gen(ctx):
                for spec in specs:
                    for b in budgets[ctx.device]:
                        out.append(Candidate(shape, spec, b))
    return out
