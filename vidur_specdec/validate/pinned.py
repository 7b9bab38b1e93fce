"""The vLLM launch arguments that pin a server's acceptance to the simulated one, so a replay measures timing alone.

vLLM 0.33.0 has a synthetic rejection sampler for benchmarking (read in its
wheel, ``vllm/config/speculative.py``): ``rejection_sample_method`` (line 562;
``"standard"``, ``"synthetic"``, ``"block"`` or ``"fly"``, line 83) set to
``"synthetic"`` accepts guesses at given rates whatever the drafter proposed,
with exactly one of

* ``synthetic_acceptance_rates`` (line 571): per-position *unconditional*
  rates — entry i is the probability that the first i + 1 guesses are all
  accepted; length ``num_speculative_tokens``, each in [0, 1], non-increasing;
* ``synthetic_acceptance_length`` (line 579): a mean acceptance length, turned
  into the minimum-variance rates ``[1, ..., 1, frac, 0, ...]`` (lines 588-597).

Both are checked by ``_resolve_synthetic_acceptance_rates`` (lines 599-631)
from ``__post_init__`` (lines 1973-1987). The simulator's acceptance is a pmf
over accepted guesses per draft; its unconditional rates are the tails
P(A >= i + 1), so the pinned server draws the same distribution of accepted
guesses per draft (not only the same mean), at every step of every request.
The rates are written, not the length, because the length's minimum-variance
schedule has another distribution (always 1 or 2 more guesses accepted).

What cannot be pinned is refused or said: an acceptance trace (acceptance that
moves with each request's output position) has no fixed per-position rates
(refused); a per-request spread (``speculative.acceptance_spread``) is
one rate for all requests on the server (a warning). Calibration
(:mod:`.calibrate`) reads vLLM's per-position counters
(``vllm:spec_decode_num_accepted_tokens_per_pos``) back into rates, so a
replay against the pinned server checks that the pin held.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List, Union

from vidur_specdec.validate.common import ValidateError

PINNED_FILE = "vllm_pinned.json"
RATE_DIGITS = 6  # rates are written rounded to 6 decimals (a mean length to 1e-5)


def synthetic_rates(cfg) -> List[float]:
    """vLLM's ``synthetic_acceptance_rates`` for the run: P(A >= i) for i = 1..num_speculative_tokens."""
    import numpy as np

    from vidur_specdec.speculation.acceptance import AcceptanceModel

    spec = cfg.speculative
    if not spec.enabled:
        raise ValidateError("speculative.method: none; there is no acceptance to pin (set a proposer and k)")
    if spec.acceptance_input() == "acceptance_trace":
        raise ValidateError("speculative.acceptance_trace: acceptance that moves with each request's output "
                            "position has no fixed per-position rates to pin; give acceptance_per_position")
    pmf = np.asarray(AcceptanceModel.from_config(spec, cfg.seed).pmf, dtype=float)
    k = int(spec.num_speculative_tokens)
    tails = [float(pmf[i:].sum()) for i in range(1, len(pmf))][:k]
    if len(tails) < k:
        raise ValidateError(f"speculative.num_speculative_tokens: {k} guesses, but the acceptance input describes "
                            f"{len(tails)}; vLLM needs one rate per guess")
    rates = [min(1.0, max(0.0, round(t, RATE_DIGITS))) for t in tails]
    for i in range(1, len(rates)):  # rounding keeps the tails non-increasing; guard against ties broken upward
        rates[i] = min(rates[i], rates[i - 1])
    return rates


def pinned_speculative_config(cfg) -> Dict[str, Any]:
    """vLLM 0.33's ``speculative_config`` for the run, with its acceptance pinned (synthetic sampler)."""
    from vidur_specdec.speculation.proposers import weights_name

    spec = cfg.speculative
    rates = synthetic_rates(cfg)
    out: Dict[str, Any] = {"method": spec.method, "model": weights_name(cfg),
                           "num_speculative_tokens": int(spec.num_speculative_tokens)}
    if spec.num_speculative_tokens_per_batch_size:
        out["num_speculative_tokens_per_batch_size"] = [list(r) for r in spec.num_speculative_tokens_per_batch_size]
    if spec.method == "draft_model" and spec.draft_tensor_parallel_size is not None:
        out["draft_tensor_parallel_size"] = spec.draft_tensor_parallel_size
    out["rejection_sample_method"] = "synthetic"
    out["synthetic_acceptance_rates"] = rates
    return out


def serve_line(cfg, sc: Dict[str, Any]) -> str:
    """One ``vllm serve`` line for ``cfg``'s engine keys and the speculative_config ``sc``."""
    s = cfg.scheduler
    pp = cfg.parallel.pipeline_parallel_size
    flags = {"tensor-parallel-size": cfg.parallel.tensor_parallel_size,
             "pipeline-parallel-size": pp if pp > 1 else None,
             "max-num-batched-tokens": s.max_num_batched_tokens, "max-num-seqs": s.max_num_seqs,
             "gpu-memory-utilization": s.gpu_memory_utilization, "block-size": s.block_size}
    return (f"vllm serve {cfg.model} " + " ".join(f"--{k} {v}" for k, v in flags.items() if v is not None)
            + f" --speculative-config '{json.dumps(sc, separators=(',', ':'))}'")


def pool_lines(cfg) -> Dict[str, Dict[str, Any]]:
    """A disaggregated config's pools: each pool's instances and its ``vllm serve`` line, with the pool's own
    engine keys, the speculative_config (pinned on the decode pool, the one that verifies; the prefill pool's
    must hash the same for vLLM's NIXL connector) and ``--kv-transfer-config`` (the NIXL connector,
    ``kv_both``, as vLLM 0.33 documents it)."""
    from vidur_specdec.config.disaggregation import KV_TRANSFER_CONFIG
    from vidur_specdec.engine.topology import ROLES, check

    cfgs = check(cfg)  # each pool's config; a pair NIXL would refuse is refused here, naming the key
    sc = pinned_speculative_config(cfgs["decode"])
    out = {}
    for role in ROLES:
        pc = cfgs[role]
        out[role] = {"instances": getattr(cfg.disaggregation, f"{role}_instances"), "device": str(pc.device),
                     "vllm_serve": serve_line(pc, sc) + f" --kv-transfer-config '{KV_TRANSFER_CONFIG}'"}
    return out


def pinned(cfg) -> Dict[str, Any]:
    """What :data:`PINNED_FILE` holds: the speculative_config, a ``vllm serve`` line (one per pool of a
    disaggregated config, ``pools``), the mean length, warnings."""
    from vidur_specdec.config.vllm_defaults import VLLM_VERSION

    pools = None
    if cfg.disaggregation.enabled:
        from vidur_specdec.engine.topology import pool_config

        pools = pool_lines(cfg)
        cfg = pool_config(cfg, "decode")  # the pool that verifies: its acceptance is what is pinned
    sc = pinned_speculative_config(cfg)
    line = serve_line(cfg, sc)
    if pools is not None:
        line = "\n".join(f"# {role}, {p['instances']} instance{'s' if p['instances'] > 1 else ''} on {p['device']}:\n"
                         f"{p['vllm_serve']}" for role, p in pools.items())
    warnings = []
    if cfg.speculative.acceptance_spread:
        warnings.append(f"speculative.acceptance_spread {cfg.speculative.acceptance_spread:g}: the simulator draws "
                        "a rate per request around the mean; the pinned server uses the mean rates for every request")
    body = {"vllm_version": VLLM_VERSION, "speculative_config": sc, "vllm_serve": line,
            "mean_acceptance_length": round(1.0 + sum(sc["synthetic_acceptance_rates"]), RATE_DIGITS - 1),
            "acceptance_input": cfg.speculative.acceptance_input(), "warnings": warnings}
    if pools is not None:
        body["pools"] = pools
    return body


def write_pinned(cfg, out: Union[str, Path]) -> Dict[str, Any]:
    """Write :data:`PINNED_FILE` into folder ``out`` (created if absent); returns its content."""
    from vidur_specdec.validate.common import write_text

    body = pinned(cfg)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    write_text(out / PINNED_FILE, json.dumps(body, indent=1) + "\n")
    return body
