"""A run's deployment: target and drafter models, the GPU, tensor-parallel sizes and their profiles.

One resolver for ``model:``, ``device:``, ``parallel.tensor_parallel_size``,
``speculative.draft_model`` and ``speculative.draft_tensor_parallel_size``
(:func:`resolve`) and one for the operator profiles those need
(:func:`profiles`). Used by ``simulation.prepare``, the sweep's profile digests and
the validation harness, so they all read the same files. Whether the deployment
fits its GPU's memory, with the remedy when it does not: :mod:`vidur_specdec.engine.memory_fit`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional

from vidur_specdec.costs import kernels, pipeline
from vidur_specdec.architectures import quant
from vidur_specdec.architectures.models import ModelSpec, resolve_model
from vidur_specdec.config import ConfigError, RunConfig
from vidur_specdec.costs.memory import TP_SIZES, tp_fits
from vidur_specdec.hardware.devices import DeviceSpec, get_device
from vidur_specdec.costs.profiles.on_demand import ProfileChoice, choose_profile
from vidur_specdec.engine.dp_checks import check_data_parallel
from vidur_specdec.speculation import acceptance as acceptance_mod


def with_formats(model: ModelSpec, cfg: RunConfig) -> ModelSpec:
    """``model`` at the run's ``quantization`` and ``kv_cache_dtype`` (vLLM's engine arguments).

    ``quantization`` null keeps the checkpoint's own format; ``fp8`` on a bf16
    checkpoint is vLLM's online (dynamic) fp8 of every linear layer; a value
    that differs from a quantized checkpoint's own is refused, as vLLM refuses
    it (``ModelConfig._verify_quantization``); ``mxfp4`` needs an MXFP4
    checkpoint (gpt-oss). ``kv_cache_dtype`` fp8 stores K and V in one byte.
    """
    q = cfg.quantization
    if q is not None and q != model.quantization:
        if model.quantization:
            raise ConfigError(f"quantization: {q} differs from {model.name}'s checkpoint format "
                              f"{model.quantization}; allowed: null or {model.quantization}")
        if q != "fp8":  # a checkpoint's format (mxfp4, modelopt, modelopt_fp4, ...): vLLM reads it from its files
            raise ConfigError(quant.needs_checkpoint(q, model.name))
        model = dataclasses.replace(model, quantization=q)
    if cfg.kv_cache_dtype == "fp8" and model.kv_cache_dtype != "fp8":
        model = dataclasses.replace(model, kv_cache_dtype="fp8")
    return model


def resolved_model(cfg: RunConfig) -> ModelSpec:
    """The target's :class:`ModelSpec` (``model:`` is a known name or a file) at the run's weight and KV
    formats (:func:`with_formats`); :class:`ConfigError` if bad."""
    return with_formats(resolve_model(cfg.model, "model"), cfg)


def resolved_draft_model(cfg: RunConfig) -> ModelSpec:
    """The drafter's :class:`ModelSpec` (``speculative.draft_model``); :class:`ConfigError` if bad.

    Its weights keep their own format; its KV cache takes the target's
    ``kv_cache_dtype`` (vLLM: the draft inherits it, vllm/config/speculative.py).
    """
    draft = resolve_model(cfg.speculative.draft_model, "speculative.draft_model")
    if cfg.kv_cache_dtype == "fp8":
        draft = dataclasses.replace(draft, kv_cache_dtype="fp8")
    return draft


def check_formats(model: ModelSpec, device: DeviceSpec) -> None:
    """Refuse, in one line, a weight or KV format the device has no path for in this simulator."""
    quant.check_device(model, device)  # NVFP4 needs FP4 tensor cores
    if device.fp8_flops:
        return
    if model.quantization == "fp8":
        # FP8 (e4m3) tensor cores start with Ada/Hopper (compute capability 8.9+, vLLM's supports_fp8);
        # vLLM would fall back to Marlin weight-only fp8 on an A100, which is not modelled
        raise ConfigError(f"quantization: fp8 weights ({model.name}) need FP8 tensor cores, which {device.name} "
                          "lacks; use h100 or h200")
    if model.kv_cache_dtype == "fp8":
        # vLLM's FlashAttention backend stores fp8 KV only on SM90+ (vllm/v1/attention/backends/fa_utils.py)
        raise ConfigError(f"kv_cache_dtype: fp8 needs an FP8-capable GPU for FlashAttention's fp8 KV path, "
                          f"which {device.name} is not; allowed on it: auto")


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
    check_formats(model, device)
    tp = cfg.parallel.tensor_parallel_size
    check_data_parallel(cfg, model)
    if cfg.parallel.enable_expert_parallel:
        if not model.is_moe:
            raise ConfigError(f"parallel.enable_expert_parallel: {model.name} has no experts; allowed: false")
        ep, key = tp * cfg.parallel.data_parallel_size, ("parallel.data_parallel_size x tensor_parallel_size"
                                                         if cfg.parallel.data_parallel_size > 1
                                                         else "parallel.tensor_parallel_size")
        if model.num_experts % ep and not cfg.parallel.enable_eplb:
            # with EPLB the physical experts (logical + redundant) must split instead (dp_checks); vLLM spreads
            # an uneven split's remainder over the last GPUs, which the routing model does not
            raise ConfigError(f"parallel.enable_expert_parallel: {model.num_experts} experts do not split over "
                              f"{key} {ep} GPUs evenly; give EPLB spare copies that make them "
                              "(enable_eplb, num_redundant_experts)")
    if not tp_fits(model, tp):
        raise _tp_error("parallel.tensor_parallel_size", tp, model)
    check_pipeline(cfg, model)
    draft = resolved_draft_model(cfg)  # a bad name is refused whatever the method
    s = cfg.speculative
    if s.draft_tensor_parallel_size is not None and s.draft_tensor_parallel_size not in (1, tp):
        # vLLM, vllm/config/speculative.py (SpeculativeConfig._verify_and_get_draft_tp): 1 or the target's.
        raise ConfigError(f"speculative.draft_tensor_parallel_size: must be 1 or the target's "
                          f"parallel.tensor_parallel_size ({tp}) as in vLLM, got {s.draft_tensor_parallel_size}")
    if s.enabled and s.method == "draft_model":
        if draft.vocab_size != model.vocab_size:
            # vLLM 0.33 vllm/config/speculative.py, SpeculativeConfig.verify_equal_vocab_size_if_draft_model
            raise ConfigError(f"speculative.draft_model: {draft.name} has a {draft.vocab_size}-token vocabulary and "
                              f"the target {model.name} {model.vocab_size}; vLLM requires them equal (its guesses "
                              f"are token ids of the target's vocabulary)")
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


def check_pipeline(cfg: RunConfig, model: ModelSpec) -> None:
    """Refuse, in one line, pipeline parallelism vLLM 0.33 would refuse or this simulator cannot model.

    vLLM splits layers unevenly when ``pipeline_parallel_size`` does not divide
    them (``get_pp_indices``), so only more stages than layers is refused. A hybrid
    model's stages hold their own linear-attention and full-attention layers by
    position (Qwen3.5 ``SupportsPP``; each stage priced and planned with its own).
    EAGLE-3 under PP needs the target's decoder to relay its auxiliary hidden states
    between stages (``supports_aux_hidden_states_over_pp``: LlamaModel and
    Qwen2Model and their subclasses in vLLM 0.33, Llama4Model among them; not
    Qwen3MoeModel, DeepseekV2Model, GptOssModel or Qwen3NextModel, Qwen3.5's), else
    ``verify_supports_aux_hidden_states_over_pp`` raises
    (``vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py``): refused for every MoE
    target but Llama 4 (the one with chunked attention) and every hybrid one.
    """
    pp = cfg.parallel.pipeline_parallel_size
    if pp == 1:
        return
    if pp > model.num_layers:
        raise ConfigError(f"parallel.pipeline_parallel_size: {pp} stages exceed {model.name}'s "
                          f"{model.num_layers} layers; allowed: 1 to {model.num_layers}")
    s = cfg.speculative
    relays = not model.linear_layers and (not model.is_moe or model.chunked_layers)  # Llama/Qwen2-family decoders
    if s.enabled and s.method in pipeline.AUX_METHODS and not relays:
        raise ConfigError(f"parallel.pipeline_parallel_size: vLLM 0.33 runs {s.method} under pipeline parallelism only "
                          f"on Llama/Qwen2-family targets (auxiliary hidden states relayed between stages), "
                          f"not on {model.name}; use pipeline_parallel_size 1 or another speculative.method")


@dataclass(frozen=True)
class Deployment:
    """Resolved target (and drafter, when ``method: draft_model`` speculates) on one GPU type."""

    model: ModelSpec
    device: DeviceSpec
    tp: int  # GPUs per replica (target)
    draft: Optional[ModelSpec] = None
    draft_tp: int = 1  # the drafter's tensor-parallel size (vLLM: 1 or the target's)
    ep: int = 1  # expert-parallel size of the target's MoE layers (vLLM: DP x TP when enabled, else 1)
    pp: int = 1  # pipeline stages per replica (parallel.pipeline_parallel_size), each of ``tp`` GPUs
    dp: int = 1  # data-parallel ranks of one replica (attention and KV per rank)
    redundant_experts: int = 0  # EPLB's spare expert copies over the ep GPUs (0: EPLB off)
    # the one source of every kernel time of the run (vidur_specdec.costs.kernels.KernelSource)
    kernels: object = dataclasses.field(default=None, compare=False, hash=False)

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
    tp = cfg.parallel.tensor_parallel_size
    p = cfg.parallel
    return Deployment(model, device, tp, draft, draft_tp(cfg) if draft else 1, ep_size(cfg, model, tp),
                      pp=cfg.parallel.pipeline_parallel_size,
                      dp=p.data_parallel_size, redundant_experts=p.num_redundant_experts if p.enable_eplb else 0,
                      kernels=kernel_source(cfg, device))


def kernel_source(cfg: RunConfig, device: DeviceSpec):
    """The run's :class:`~vidur_specdec.costs.kernels.KernelSource` (:func:`vidur_specdec.costs.kernels.for_run`)."""
    return kernels.for_run(cfg.profiles, device, cfg.engine.all_reduce)


def ep_size(cfg: RunConfig, model: ModelSpec, tp: int) -> int:
    """Expert-parallel size: ``dp x tp`` when ``parallel.enable_expert_parallel`` is on an MoE model, else 1.

    vLLM (vllm/model_executor/layers/fused_moe/config.py): ``ep_size = dp x pcp x tp``
    (pcp 1 here), and ``use_ep`` only when that exceeds 1.
    """
    ep = tp * cfg.parallel.data_parallel_size
    return ep if (cfg.parallel.enable_expert_parallel and model.is_moe and ep > 1) else 1


def profiles(cfg: RunConfig, dep: Deployment, longest_tokens: int) -> Dict[str, ProfileChoice]:
    """``{"target": ..., "draft": ...}`` profile choices (``draft`` only with a drafter).

    ``longest_tokens`` (the run's longest prompt + output + guesses) sets the
    context a built profile covers.
    """
    cache = cfg.predictor.cache_dir
    out = {"target": choose_profile(cfg.profiles, dep.model, dep.device, dep.tp, longest_tokens=longest_tokens,
                                    chunk_size=cfg.scheduler.chunk_size, cache_dir=cache, kernels=dep.kernels)}
    if dep.draft is not None:
        s = cfg.speculative
        root = s.draft_profiles or cfg.profiles
        key = "speculative.draft_profiles" if s.draft_profiles else "profiles"
        tp_key = ("speculative.draft_tensor_parallel_size" if s.draft_tensor_parallel_size is not None
                  else "parallel.tensor_parallel_size")
        out["draft"] = choose_profile(root, dep.draft, dep.device, dep.draft_tp, longest_tokens=longest_tokens,
                                      chunk_size=cfg.scheduler.chunk_size, cache_dir=cache, key=key, tp_key=tp_key,
                                      kernels=dep.kernels)
    return out


def time_models(cfg: RunConfig, dep: Deployment, longest_tokens: int):
    """The fitted operator-time models of a run: ``(target, drafter or None, profile choices)``.

    Profiles are chosen (shipped, measured, or built and cached) by
    :func:`profiles`; each model is fitted at its own TP from the fit cache
    (``predictor.cache_dir``). One place for :func:`vidur_specdec.engine.simulation.prepare`,
    the validation harness's cost model and the draft-model proposer.
    """
    # lazy: start-up cost of scipy, sklearn, vidur
    from vidur_specdec.costs.fit_cache import load_time_model

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
    # lazy: start-up of `python -m vidur_specdec.main --help` (would load vidur_specdec.engine.workload)
    from vidur_specdec.engine.workload import generate

    specs = generate(cfg.workload, cfg.seed)
    s = cfg.speculative
    if acceptance is None and s.enabled and s.acceptance_input() == "acceptance_trace":
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
