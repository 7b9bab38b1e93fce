"""The proposer interface, its registry and what a proposer is priced against.

A proposer prices one engine step from its
:class:`~vidur_specdec.engine.reference.predictor.StepComposition` (``step_time_ms``, ms). It may
also occupy GPU memory (``memory_bytes``: weights, KV bytes per token), cap a
request's context (``max_context``) and name its weights for vLLM
(``weights_key``, :meth:`Proposer.weights_name`). Proposers that run on the target's GPUs (EAGLE-family heads,
Medusa) are bound to the target's device and tensor-parallel size by the
predictor (:meth:`Proposer.bind`) from the predictor config's
``device_spec``/``tensor_parallel_size`` fields (TP 1 and the replica's device
when those are absent).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Tuple
from vidur_specdec.architectures.models import resolve_model
from vidur_specdec.costs.kernels import as_kernels, unbound

REGISTRY: Dict[str, type] = {}


def register(name: str):
    """Class decorator: make a proposer available as ``speculative.method: NAME``."""

    def deco(cls):
        if name in REGISTRY and REGISTRY[name] is not cls:
            raise ValueError(f"proposer {name!r} registered twice")
        cls.name = name
        REGISTRY[name] = cls
        return cls

    return deco


@dataclass
class ProposerContext:
    """What a proposer is priced with once bound: the target's device (DeviceSpec), TP degree, all-reduce
    model and kernel source (the run's :class:`~vidur_specdec.costs.kernels.KernelSource`; None: the
    roofline on ``device`` with ``all_reduce``)."""

    device: object = None  # vidur_specdec.hardware.devices.DeviceSpec
    tensor_parallel_size: int = 1
    all_reduce: Optional[Callable] = None  # (device, world, nbytes) -> ms: the run's engine.all_reduce model
    kernels: object = None  # vidur_specdec.costs.kernels.KernelSource
    # a data-parallel group's rank: a drafter's MoE layer prices only the rank's own share of it (router, shared
    # experts); the group adds its routed experts over all ranks and its all-to-all (pricing/data_parallel.py)
    data_parallel: bool = False

    def all_reduce_ms(self, tokens: int, hidden: int, tp: Optional[int] = None) -> float:
        """One all-reduce (ms) of ``tokens`` × ``hidden`` bf16 activations among ``tp`` GPUs.

        ``tp`` None is the target's TP; 0.0 at TP 1, with no tokens, or when no
        collective model is bound. A tensor-parallel drafter layer (or head
        layer) pays two per pass, after its attention and after its MLP, as the
        target's layers do.
        """
        world = self.tensor_parallel_size if tp is None else tp
        if world <= 1 or tokens <= 0 or self.device is None:
            return 0.0
        if self.kernels is not None:
            return float(self.kernels.all_reduce_ms(int(world), int(tokens) * int(hidden) * 2))
        if self.all_reduce is None:
            return 0.0
        return float(self.all_reduce(self.device, int(world), int(tokens) * int(hidden) * 2))


class Proposer:
    """Base class (also the ``none`` proposer): no time, no memory."""

    name = "none"
    label = "no speculation"
    supports_tree = False  # may speculative.speculative_token_tree be used with it
    variable_proposals = False  # proposes 0..k guesses per request (speculative.proposal_rate); else always k

    # A drafter that runs forward passes on the GPU every step (EAGLE family, MTP, a draft model):
    # vLLM reserves k lookahead KV slots for it (``VllmConfig.num_lookahead_tokens``,
    # vllm/config/vllm.py:625-652 in vLLM 0.33) and runs its first pass even at a scheduled k = 0
    # to keep its KV in sync (vllm/v1/spec_decode/llm_base_proposer.py:616-625).
    drafter_forward = False

    max_context: Optional[int] = None  # the drafter's own max_model_len (tokens), if any
    weights_key: Optional[str] = None  # the config key naming the drafter's / head's weights, if any

    @classmethod
    def from_config(cls, cfg, target_time, cache_dir=None, **context) -> "Proposer":
        """Build from a RunConfig and the target's fitted OperatorTimeModel.

        ``context`` may hold ``deployment`` (the resolved
        :class:`~vidur_specdec.engine.deployment.Deployment`) and ``draft_time`` (the
        drafter's fitted OperatorTimeModel, for ``draft_model``).
        """
        return cls()

    @classmethod
    def weights_name(cls, cfg, target) -> Optional[str]:
        """The drafter's or head's weights as vLLM's ``speculative_config["model"]`` names them, or None.

        ``target`` is the target's ModelSpec (a head defaults to the known one for it).
        """
        return None

    def bind(self, ctx: ProposerContext) -> None:
        """Set the target's device and TP degree (called by the predictor before the first step); prices memoised
        under another binding are dropped."""
        self.ctx = ctx
        self.__dict__.pop("_pass_memo", None)

    def bound_device_tp(self):
        """(DeviceSpec, TP) the proposer is priced on: the bound context's, else the unbound default GPU at TP 1."""
        ctx = getattr(self, "ctx", None)
        if ctx is None or ctx.device is None:
            return unbound().device, 1
        return ctx.device, ctx.tensor_parallel_size

    def kernels_on(self, device):
        """The kernel source pricing this proposer's own kernels on ``device``: the bound run's when it is
        on that device, else the roofline on it (:func:`vidur_specdec.costs.kernels.as_kernels`)."""
        k = getattr(getattr(self, "ctx", None), "kernels", None)
        if k is not None and k.device == device:
            return k
        return as_kernels(device)

    def memory_bytes(self, tp: int = 1) -> Tuple[int, int]:
        """(weight bytes, KV bytes per token) this proposer adds on one GPU."""
        return 0, 0

    @classmethod
    def num_lookahead_tokens(cls, k: int) -> int:
        """KV slots (tokens) vLLM reserves past each step's 1 + guesses: k for a GPU drafter, else 0."""
        return int(k) if cls.drafter_forward else 0

    def step_time_ms(self, comp) -> float:
        """Proposer time of one step (ms)."""
        return 0.0

    def moe_passes(self, comp) -> List[List[int]]:
        """The token groups of each drafter pass that runs an MoE layer, in pass order (empty: none does); a
        data-parallel group prices their routed experts and all-to-all over all its ranks."""
        return []

    def moe_spec(self):
        """The ModelSpec of the drafter's MoE layer (None without one)."""
        return None


class ConstantCostProposer(Proposer):
    """A drafter of constant cost (ms), read from ``speculative.<cost_key>``: once per step in which any
    request proposes (a host-side lookup over the whole batch: ``ngram``, ``suffix``) or, with
    ``per_round``, once per proposal round, as many rounds as the step's longest draft (``fixed``)."""

    cost_key = ""  # the SpeculativeConfig field holding the cost (ms)
    per_round = False

    def __init__(self, cost_ms: float) -> None:
        self.cost_ms = cost_ms

    @classmethod
    def from_config(cls, cfg, target_time, cache_dir=None, **context):
        return cls(getattr(cfg.speculative, cls.cost_key))

    def step_time_ms(self, comp) -> float:
        if self.per_round:
            return self.cost_ms * comp.max_guesses
        return self.cost_ms if comp.max_guesses > 0 else 0.0


def guesses_of(comp):
    """Guesses per decoding request of a step (tokens charged − 1)."""
    return [q - 1 for q in comp.decode_q]


def _target_spec(cfg, context):
    """The target's ModelSpec: from the resolved deployment when given, else resolved from the config."""
    dep = context.get("deployment")
    if dep is not None:
        return dep.model

    return resolve_model(cfg.model, "model")
