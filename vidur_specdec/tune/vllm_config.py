"""The vLLM configuration a tune writes, in the forms vLLM 0.33.0 accepts (docs/tune.md, "What to paste").

Read from vLLM 0.33.0's wheel:

* ``vllm/config/speculative.py``: ``SpeculativeMethod`` lists ngram, draft_model,
  suffix, eagle, eagle3, the MTP types (``mtp``), dflash, ngram_gpu, dspark and
  custom_class, so no ``medusa`` and no ``fixed``; ``num_speculative_tokens_per_batch_size``
  is ``list[tuple[int, int, int]]`` (inclusive ``[lo, hi, k]``; the dict form is
  refused by ``vllm/v1/spec_decode/dynamic/utils.py``); there is no
  ``speculative_token_tree``; n-gram's ``prompt_lookup_min``/``max`` default to 5.
* ``vllm/config/vllm.py``: the per-batch-size schedule is dropped (static k used)
  on Model Runner V1 for methods other than ngram, eagle, eagle3, mtp,
  draft_model and dflash, and whenever ``data_parallel_size`` > 1.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from vidur_specdec.config.vllm_defaults import VLLM_VERSION, serve_batch_defaults
from vidur_specdec.speculation.proposers import weights_name
import json

VLLM_METHODS = ("ngram", "draft_model", "suffix", "eagle", "eagle3", "mtp", "dflash", "ngram_gpu", "dspark")
SCHEDULE_METHODS = ("ngram", "eagle", "eagle3", "mtp", "draft_model", "dflash")
NGRAM_PROMPT_LOOKUP = 5  # vLLM's prompt_lookup_min = prompt_lookup_max when neither is given


def tune_warnings(base) -> List[str]:
    """One line each: what vLLM 0.33 would not run as simulated, a head on another target, a carried budget."""
    # lazy: start-up cost of pandas
    from vidur_specdec.speculation.proposers.pairing import describe_proposer
    from vidur_specdec.engine.deployment import resolved_device

    s = base.speculative
    out = []
    if s.method not in VLLM_METHODS:
        out.append(f"warning: speculative.method: vLLM {VLLM_VERSION} has no {s.method} method; the "
                   "speculative_config written names it but vLLM refuses it")
    elif s.method not in SCHEDULE_METHODS:
        out.append(f"warning: num_speculative_tokens_per_batch_size: vLLM {VLLM_VERSION} drops the schedule for "
                   f"{s.method} on Model Runner V1 and runs the static num_speculative_tokens")
    pair = describe_proposer(base)["proposer_pairing_warning"]
    if pair:
        out.append(pair)
    from vidur_specdec.speculation.acceptance_source import default_warning

    acc = default_warning(base)  # the default alpha, or another pair's rows (borrowed) or a scaled dataset
    if acc:
        out.append(f"warning: {acc}")
    dev = resolved_device(base)
    tok, seqs = serve_batch_defaults(dev)
    sc = base.scheduler
    if (sc.max_num_batched_tokens, sc.max_num_seqs) != (tok, seqs):
        out.append(f"warning: scheduler.max_num_batched_tokens {sc.max_num_batched_tokens} and max_num_seqs "
                   f"{sc.max_num_seqs} come from the config, not vLLM {VLLM_VERSION}'s serve defaults on "
                   f"{dev.name} ({tok}, {seqs}); set both to null to use those")
    return out


def speculative_config(base, sched) -> Dict[str, Any]:
    """vLLM's ``speculative_config`` for the tuned schedule (only keys vLLM 0.33 has)."""
    s = base.speculative
    out: Dict[str, Any] = {"method": s.method, "model": weights_name(base)}  # ngram: null, as vLLM's default
    out["num_speculative_tokens"] = sched.k
    out["num_speculative_tokens_per_batch_size"] = [list(r) for r in sched.schedule]
    if s.method == "ngram":
        out["prompt_lookup_min"] = NGRAM_PROMPT_LOOKUP
        out["prompt_lookup_max"] = NGRAM_PROMPT_LOOKUP
    if s.method == "draft_model" and s.draft_tensor_parallel_size is not None:
        out["draft_tensor_parallel_size"] = s.draft_tensor_parallel_size
    return out


def engine_args(base) -> Dict[str, Any]:
    """The engine keys the tune simulated, to pass beside the speculative_config."""
    sc = base.scheduler
    out = {"max_num_batched_tokens": sc.max_num_batched_tokens, "max_num_seqs": sc.max_num_seqs,
           "gpu_memory_utilization": sc.gpu_memory_utilization, "block_size": sc.block_size,
           "tensor_parallel_size": base.parallel.tensor_parallel_size}
    # vLLM's weight/KV format and expert-parallel arguments, only when set away from vLLM's defaults
    if base.quantization is not None:
        out["quantization"] = base.quantization
    if base.kv_cache_dtype != "auto":
        out["kv_cache_dtype"] = base.kv_cache_dtype
    if base.parallel.enable_expert_parallel:
        out["enable_expert_parallel"] = True
    if base.parallel.pipeline_parallel_size > 1:
        out["pipeline_parallel_size"] = base.parallel.pipeline_parallel_size
    if base.parallel.data_parallel_size > 1:  # vLLM's --data-parallel-size: max_num_seqs is per rank
        out["data_parallel_size"] = base.parallel.data_parallel_size
    if base.parallel.enable_eplb:
        out["enable_eplb"] = True
        if base.parallel.num_redundant_experts:
            out["eplb_config"] = {"num_redundant_experts": base.parallel.num_redundant_experts}
    if base.parallel.enable_dbo:  # vLLM's --enable-dbo and its two thresholds (their defaults left out)
        out["enable_dbo"] = True
        for name in ("dbo_decode_token_threshold", "dbo_prefill_token_threshold"):
            if getattr(base.parallel, name) != getattr(type(base.parallel)(), name):
                out[name] = getattr(base.parallel, name)
    return out


def serve_command(base, spec_cfg: Dict[str, Any]) -> str:
    """A ``vllm serve`` line with the simulated engine keys and the speculative_config."""
    e = engine_args(base)
    flags = " ".join(f"--{k.replace('_', '-')}" + ("" if v is True else f" '{json.dumps(v, separators=(',', ':'))}'"
                                                     if isinstance(v, dict) else f" {v}") for k, v in e.items())
    return f"vllm serve {base.model} {flags} --speculative-config '{json.dumps(spec_cfg, separators=(',', ':'))}'"


def deployment(base) -> Dict[str, Any]:
    """What the tune is for: model, GPU, TP, replicas, method, k, acceptance input."""
    s = base.speculative
    used = s.acceptance_input()
    value: Optional[Any] = getattr(s, used) if used else None
    return {"model": base.model, "device": str(base.device), "tensor_parallel_size": base.parallel.tensor_parallel_size,
            **({"pipeline_parallel_size": base.parallel.pipeline_parallel_size}
               if base.parallel.pipeline_parallel_size > 1 else {}),
            "num_replicas": base.parallel.num_replicas, "method": s.method, "k": s.num_speculative_tokens,
            "acceptance_input": used, "acceptance_value": value, "vllm_version": VLLM_VERSION,
            **({"data_parallel_size": base.parallel.data_parallel_size}
               if base.parallel.data_parallel_size > 1 else {})}
