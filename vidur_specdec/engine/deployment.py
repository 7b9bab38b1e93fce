"""A run's deployment: target and drafter models, the GPU, tensor-parallel sizes and their profiles.

One resolver for ``model:``, ``device:``, ``parallel.tensor_parallel_size``,
``speculative.draft_model`` and ``speculative.draft_tensor_parallel_size``
(:func:`resolve`), one for the operator profiles those need
(:func:`profiles`), and the memory check with its remedy (:func:`plan_memory`):
a model that does not fit is refused naming the smallest tensor-parallel size
that would fit. Used by ``simulation.prepare``, the sweep's profile digests and
the validation cost model, so they all read the same files.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional

from vidur_specdec.costs import memory
from vidur_specdec.architectures.models import ModelSpec, resolve_model
from vidur_specdec.config import ConfigError, RunConfig
from vidur_specdec.costs.memory import TP_SIZES, NoRoomError, tp_fits
from vidur_specdec.hardware.devices import DeviceSpec, get_device
from vidur_specdec.costs.profiles.on_demand import ProfileChoice, choose_profile


def resolved_model(cfg: RunConfig) -> ModelSpec:
    """The target's :class:`ModelSpec` (``model:`` is a known name or a file); :class:`ConfigError` if bad."""
    return resolve_model(cfg.model, "model")


def resolved_draft_model(cfg: RunConfig) -> ModelSpec:
    """The drafter's :class:`ModelSpec` (``speculative.draft_model``); :class:`ConfigError` if bad."""
    return resolve_model(cfg.speculative.draft_model, "speculative.draft_model")


def resolved_device(cfg: RunConfig):
    """The :class:`~vidur_specdec.hardware.devices.DeviceSpec` that ``device:`` names; :class:`ConfigError` if bad."""
    return get_device(cfg.device)


def draft_tp(cfg: RunConfig) -> int:
    """The drafter's tensor-parallel size: ``speculative.draft_tensor_parallel_size`` or the target's."""
    d = cfg.speculative.draft_tensor_parallel_size
    return cfg.parallel.tensor_parallel_size if d is None else d


def _tp_error(key: str, tp: int, m: ModelSpec) -> ConfigError:
    ok = [t for t in TP_SIZES if tp_fits(m, t)]
    return ConfigError(f"{key}: {tp} does not split {m.name}'s {m.num_heads} query heads, {m.num_kv_heads} KV "
                       f"heads and {m.ffn_size} MLP columns evenly; allowed: {', '.join(map(str, ok))}")


def check(cfg: RunConfig):
    """Model, device and tensor-parallel checks, and the longest request against the model's context.

    Returns (target ModelSpec, drafter ModelSpec or None); :class:`ConfigError` naming the key otherwise.
    """
    model = resolved_model(cfg)
    device = resolved_device(cfg)
    if model.quantization == "fp8" and device.name == "a100":
        # FP8 (e4m3) tensor cores start with Hopper (compute capability 8.9+); vLLM serves fp8 checkpoints there
        raise ConfigError(f"device: {model.name}'s checkpoint is fp8, which an a100 has no FP8 tensor cores for; "
                          "use h100 or h200")
    tp = cfg.parallel.tensor_parallel_size
    if not tp_fits(model, tp):
        raise _tp_error("parallel.tensor_parallel_size", tp, model)
    draft = resolved_draft_model(cfg)  # a bad name is refused whatever the method
    s = cfg.speculative
    if s.draft_tensor_parallel_size is not None and s.draft_tensor_parallel_size not in (1, tp):
        # vLLM, vllm/config/speculative.py (SpeculativeConfig._verify_and_get_draft_tp): 1 or the target's.
        raise ConfigError(f"speculative.draft_tensor_parallel_size: must be 1 or the target's "
                          f"parallel.tensor_parallel_size ({tp}) as in vLLM, got {s.draft_tensor_parallel_size}")
    if s.enabled and s.method == "draft_model":
        dtp = draft_tp(cfg)
        if not tp_fits(draft, dtp):
            key = ("speculative.draft_tensor_parallel_size" if s.draft_tensor_parallel_size is not None
                   else "parallel.tensor_parallel_size")
            raise _tp_error(key, dtp, draft)
    else:
        draft = None
    w = cfg.workload
    longest = w.prompt_tokens.bounds()[1] + w.output_tokens.bounds()[1]
    if w.arrival != "trace" and longest > model.max_model_len:
        raise ConfigError(f"workload.prompt_tokens: longest prompt + longest output = {longest} tokens "
                          f"exceeds {model.name}'s max_model_len {model.max_model_len}")
    return model, draft


@dataclass(frozen=True)
class Deployment:
    """Resolved target (and drafter, when ``method: draft_model`` speculates) on one GPU type."""

    model: ModelSpec
    device: DeviceSpec
    tp: int  # GPUs per replica (target)
    draft: Optional[ModelSpec] = None
    draft_tp: int = 1  # the drafter's tensor-parallel size (vLLM: 1 or the target's)

    def vidur_device_sku(self) -> str:
        """The Vidur device SKU for Vidur's ``ReplicaConfig`` bookkeeping only.

        Vidur 0.0.26 knows a100 and h100 (not h200, not custom devices); the
        simulator's predictor and memory plan never read Vidur's SKU figures, so
        h200 maps to h100 (same generation) and any other device to a100.
        """
        return {"a100": "a100", "h100": "h100", "h200": "h100"}.get(self.device.name, "a100")


def resolve(cfg: RunConfig) -> Deployment:
    """The deployment ``cfg`` describes; :class:`ConfigError` on a bad model, device or TP (checked at load too)."""
    model = resolved_model(cfg)
    device = resolved_device(cfg)
    s = cfg.speculative
    draft = resolved_draft_model(cfg) if (s.enabled and s.method == "draft_model") else None
    return Deployment(model, device, cfg.parallel.tensor_parallel_size, draft, draft_tp(cfg) if draft else 1)


def profiles(cfg: RunConfig, dep: Deployment, longest_tokens: int) -> Dict[str, ProfileChoice]:
    """``{"target": ..., "draft": ...}`` profile choices (``draft`` only with a drafter).

    ``longest_tokens`` (the run's longest prompt + output + guesses) sets the
    context a built profile covers.
    """
    cache = cfg.predictor.cache_dir
    out = {"target": choose_profile(cfg.profiles, dep.model, dep.device, dep.tp, longest_tokens=longest_tokens,
                                    chunk_size=cfg.scheduler.chunk_size, cache_dir=cache)}
    if dep.draft is not None:
        s = cfg.speculative
        root = s.draft_profiles or cfg.profiles
        key = "speculative.draft_profiles" if s.draft_profiles else "profiles"
        tp_key = ("speculative.draft_tensor_parallel_size" if s.draft_tensor_parallel_size is not None
                  else "parallel.tensor_parallel_size")
        out["draft"] = choose_profile(root, dep.draft, dep.device, dep.draft_tp, longest_tokens=longest_tokens,
                                      chunk_size=cfg.scheduler.chunk_size, cache_dir=cache, key=key, tp_key=tp_key)
    return out


def time_models(cfg: RunConfig, dep: Deployment, longest_tokens: int):
    """The fitted operator-time models of a run: ``(target, drafter or None, profile choices)``.

    Profiles are chosen (shipped, measured, or built and cached) by
    :func:`profiles`; each model is fitted at its own TP from the fit cache
    (``predictor.cache_dir``). One place for :func:`vidur_specdec.engine.simulation.prepare`,
    the validation harness's cost model and the draft-model proposer.
    """
    from vidur_specdec.engine.predictor import load_time_model

    choices = profiles(cfg, dep, longest_tokens)
    cache = cfg.predictor.cache_dir
    t = choices["target"]
    target = load_time_model(t.mlp, t.attention, tp=dep.tp, cache_dir=cache)
    draft = None
    if dep.draft is not None:
        d = choices["draft"]
        draft = load_time_model(d.mlp, d.attention, tp=dep.draft_tp, cache_dir=cache)
    return target, draft, choices


def run_requests(cfg: RunConfig, acceptance=None) -> List:
    """The run's requests (:class:`~vidur_specdec.engine.workload.RequestSpec`), in workload order.

    The workload drawn from its seed; with an acceptance trace
    (``speculative.acceptance_trace``) each request takes its prompt and output
    lengths from its trace line, so lengths and acceptance stay paired.
    ``acceptance`` is the run's built acceptance model, if the caller has it;
    else a trace is read here.
    """
    from vidur_specdec.engine.workload import generate

    specs = generate(cfg.workload, cfg.seed)
    s = cfg.speculative
    if acceptance is None and s.enabled and s.acceptance_input() == "acceptance_trace":
        from vidur_specdec.speculation import acceptance as acceptance_mod

        acceptance = acceptance_mod.build(s, cfg.seed)
    if hasattr(acceptance, "line"):
        specs = [dataclasses.replace(r, prompt_tokens=acceptance.line(i).prompt_tokens,
                                     output_tokens=acceptance.line(i).output_tokens) for i, r in enumerate(specs)]
    return specs


def longest_request_tokens(cfg: RunConfig, specs: Optional[List] = None) -> int:
    """Tokens of the run's longest request (prompt + output + k guesses); :func:`run_requests` if not given."""
    if specs is None:
        specs = run_requests(cfg)
    k = cfg.speculative.num_speculative_tokens if cfg.speculative.enabled else 0
    return max(s.prompt_tokens + s.output_tokens for s in specs) + k


def _plan_at(cfg: RunConfig, dep: Deployment, tp: int, dtp: int, head: tuple = (0, 0)) -> memory.MemoryPlan:
    return memory.plan(dep.model, dep.device, cfg.scheduler.block_size, cfg.scheduler.memory_margin_fraction,
                       draft=dep.draft, tp=tp, draft_tp=dtp, head=head)


def _smallest_tp_that_fits(cfg: RunConfig, dep: Deployment, need_blocks: int,
                           head: tuple = (0, 0)) -> Optional[int]:
    """Smallest TP above ``dep.tp`` at which the weights leave ``need_blocks`` KV blocks per GPU, or None."""
    explicit_one = cfg.speculative.draft_tensor_parallel_size == 1  # stays 1 at any target TP (vLLM)
    for t in TP_SIZES:
        if t <= dep.tp or not tp_fits(dep.model, t):
            continue
        dtp = 1 if explicit_one else t
        if dep.draft is not None and not tp_fits(dep.draft, dtp):
            continue
        try:
            if _plan_at(cfg, dep, t, dtp, head).num_blocks >= need_blocks:
                return t
        except NoRoomError:
            continue
    return None


def lookahead_tokens(cfg: RunConfig) -> int:
    """vLLM's ``num_lookahead_tokens`` for the run (tokens): k for eagle/eagle3/mtp/draft_model, else 0."""
    from vidur_specdec.speculation.proposers import REGISTRY

    spec = cfg.speculative
    cls = REGISTRY.get(spec.method) if spec.enabled else None
    return spec.num_speculative_tokens if cls is not None and cls.drafter_forward else 0


def plan_memory(cfg: RunConfig, dep: Deployment, longest_total: int, longest_index: int,
                head: tuple = (0, 0)) -> memory.MemoryPlan:
    """KV blocks per GPU; a model that does not fit names ``parallel.tensor_parallel_size`` and the smallest TP that does.

    ``longest_total`` is the longest request's prompt + output tokens (request
    ``longest_index``); with ``scheduler.num_blocks`` null the plan must hold it.
    ``head`` is a draft head's (weight bytes, KV bytes per token) per GPU (see
    :func:`vidur_specdec.speculation.proposers.head_memory`).
    """
    sch = cfg.scheduler
    # a GPU drafter's lookahead slots (vLLM's num_lookahead_tokens) are held on top of the request's own tokens
    need = memory.min_blocks_to_finish(longest_total + lookahead_tokens(cfg), sch.block_size,
                                       sch.watermark_blocks_fraction)
    try:
        mem = _plan_at(cfg, dep, dep.tp, dep.draft_tp, head)
    except NoRoomError as e:
        t = _smallest_tp_that_fits(cfg, dep, need, head)
        fix = (f"needs parallel.tensor_parallel_size >= {t}" if t else
               f"does not fit at any parallel.tensor_parallel_size ({', '.join(map(str, TP_SIZES))}); "
               "lower scheduler.memory_margin_fraction or use a larger device")
        raise ConfigError(f"parallel.tensor_parallel_size: {e}; {fix}") from None
    if sch.num_blocks is not None:
        mem = dataclasses.replace(mem, num_blocks=sch.num_blocks)
    elif mem.num_blocks < need:
        t = _smallest_tp_that_fits(cfg, dep, need, head)
        if t is not None:
            raise ConfigError(f"parallel.tensor_parallel_size: at {dep.tp}, {mem.num_blocks} KV blocks per GPU cannot "
                              f"run request {longest_index} ({longest_total} tokens) to completion; "
                              f"needs parallel.tensor_parallel_size >= {t}")
    if mem.num_blocks < need:
        raise ConfigError(f"scheduler.num_blocks: {mem.num_blocks} blocks cannot run request {longest_index} "
                          f"({longest_total} tokens) to completion; allowed: >= {need}")
    return mem


def gpu_blocks(cfg: RunConfig, dep: Deployment, head: tuple = (0, 0)) -> Optional[int]:
    """KV blocks per GPU the weights leave room for (ignoring ``scheduler.num_blocks``); None if none."""
    try:
        return _plan_at(cfg, dep, dep.tp, dep.draft_tp, head).num_blocks
    except NoRoomError:
        return None


def profile_files(cfg: RunConfig) -> Dict[str, Path]:
    """``{name: path}`` of the profile files a run of ``cfg`` reads (target, and drafter if used).

    Names are ``<device>/<model>/<file>`` (plus ``/tp<k>`` for k > 1, and the
    built grid for built profiles), machine independent. Profiles that are
    built on demand are built (and cached) here.
    """
    dep = resolve(cfg)
    out = {}
    for role, choice in profiles(cfg, dep, longest_request_tokens(cfg)).items():
        model, tp = (dep.model, dep.tp) if role == "target" else (dep.draft, dep.draft_tp)
        stem = f"{dep.device.name}/{model.name}" + (f"/tp{tp}" if tp != 1 else "")
        if choice.source == "built":
            stem = choice.label[len("built:"):]
        for path in (choice.mlp, choice.attention):
            out[f"{stem}/{path.name}"] = path
    return out
