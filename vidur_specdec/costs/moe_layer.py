"""Time of one mixture-of-experts MLP layer for one step, on the profile builder's roofline.

A step is a list of token *groups* (:mod:`vidur_specdec.costs.routing`: a prefill
chunk, a plain decode, a verify block of k+1 tokens of one request).
On one of ``tp`` GPUs (every expert split ``1/tp`` wide, vLLM's default without
expert parallelism) one MoE layer runs

* the router: a [T x hidden] x [hidden x E] GEMM (bf16, replicated) and its top-k;
* the routed experts as one grouped GEMM pair (gate_up, down): it streams the
  weights of the ``D`` distinct experts the step wakes (:mod:`~vidur_specdec.costs.routing`)
  and computes ``2 T top_k 3 hidden f/tp`` FLOPs, with a floor of one
  ``gemm_tile_m``-row tile per woken expert (a grouped GEMM pads each expert's
  rows to a whole tile, so small batches stay memory-bound); compute and memory
  are joined by the builder's power mean with its fitted GEMM efficiencies;
* the shared experts (DeepSeek) as an ordinary dense gated MLP.

With a measured curve (``routed``, a :class:`~vidur_specdec.costs.fused_moe_table.FusedMoeCurve`)
the routed experts (grouped GEMMs and activation) are instead vLLM's measured
fused-MoE kernel time read by the experts the step wakes and the rows it
carries (:func:`routed_table_ms`), the same way for every kind of step;
router and shared experts stay on the roofline (the table does not time them).
The experts a step wakes come from the routing model at the model's expert
popularity (``ModelSpec.moe_routing``, :func:`~vidur_specdec.costs.routing.zipf_of`).

Dense leading layers (DeepSeek's first three) keep the profile's MLP ops. Times in
ms per layer; ``device`` is the builder's device mapping (``peak_flops``,
``mem_bw``, ``sms``, ``l2_bytes``).
"""

from __future__ import annotations

import math
from typing import Mapping, Optional, Sequence, Tuple

from vidur_specdec.architectures import quant
from vidur_specdec.costs import eplb, routing
from vidur_specdec.costs.profiles import params as P
from vidur_specdec.costs.profiles.builder import complete_device_fields, dtype_device, gemm_ms, stream_ms


#: what each ``scope`` of :func:`moe_layer_ms` prices
SCOPES = ("all", "local", "routed", "router", "shared")
SCOPES_WITH = {"router": ("all", "local", "router"), "routed": ("all", "routed"), "shared": ("all", "local", "shared")}


def expert_bytes_per_weight(spec) -> float:
    """Bytes per routed-expert weight at the checkpoint's format (bf16 2, fp8 1, mxfp4 0.53125, nvfp4 and int4
    0.5625: :data:`vidur_specdec.architectures.quant.FORMAT_BYTES`)."""
    return quant.weight_bytes(spec, "experts")


def part_device(spec, dev: Mapping, part: str):
    """(``dev`` at the tensor-core rate ``part``'s GEMMs run at, bytes per weight or None for bf16): fp8 W8A8 and
    NVFP4 W4A4 at their own rates; MXFP4 and int4 experts are W4A16 (bf16 activations), at the bf16 rate."""
    return dtype_device(dev, quant.gemm_dtype(spec, part))


def uniform_distinct(tokens: float, num_experts: int, top_k: int) -> float:
    """Experts ``tokens`` unrelated tokens wake in expectation at uniform popularity: ``E (1 - (1 - top_k/E)^T)``.

    The routing model's own expectation for single-token groups
    (:func:`~vidur_specdec.costs.routing.expected_distinct` with ``zipf_s`` 0).
    """
    if tokens <= 0:
        return 0.0
    if top_k >= num_experts:
        return float(num_experts)
    return float(-num_experts * math.expm1(tokens * math.log1p(-top_k / num_experts)))


def balanced_tokens(distinct: float, num_experts: int, top_k: int) -> float:
    """The token count whose ``balanced`` table row wakes ``distinct`` experts: ``min(D, E) / top_k``.

    The tables' balanced routing gives n tokens exactly ``min(E, n top_k)``
    distinct experts (AIConfigurator's ``balanced_logits``), so the row that
    streams the weights of D experts is the row at ``D / top_k``; every expert
    is woken from ``E / top_k`` tokens on.
    """
    return min(float(distinct), float(num_experts)) / top_k


def routed_table_ms(curve, tokens: float, distinct: float, num_experts: int, top_k: int) -> float:
    """Routed-expert ms of a step of ``tokens`` waking ``distinct`` experts, read from a measured table.

    One reading for every step (plain decodes, verify blocks, prefill chunks):
    the table's ``balanced`` row that wakes the step's ``D`` experts, at
    ``x = D / top_k`` tokens (:func:`balanced_tokens`), prices the weights it
    streams; once the step carries more rows than the row where every expert
    is woken (``n_E = E / top_k`` tokens), the table's rise from
    ``max(x, n_E)`` to T is added (the rows a step adds once its experts all
    stream): ``t(x) + [t(T) - t(max(x, n_E))]`` for ``T > max(x, n_E)``.
    Below ``n_E`` a step's ``T top_k`` rows are priced as the row's ``D``
    (one per woken expert): docs/model.md names the error.
    """
    if tokens <= 0:
        return 0.0
    x = min(float(tokens), balanced_tokens(distinct, num_experts, top_k))
    ms = curve.ms(x)
    knee = max(x, num_experts / top_k)
    if tokens > knee:
        ms += curve.ms(tokens) - curve.ms(knee)
    return float(ms)


def moe_layer_ms(spec, device: Mapping, tp: int, groups: Sequence[int], rho: float = routing.DEFAULT_RHO,
                 zipf_s: Optional[float] = None, efficiency: Optional[Mapping] = None,
                 weight_bytes: Optional[float] = None, ep: int = 1, routed=None,
                 redundant: int = 0, scope: str = "all", dispatched: bool = False) -> Tuple[float, float]:
    """(ms of one MoE layer on one GPU, expected distinct routed experts woken) for the step ``groups``.

    ``routed``: a measured curve (``.ms(tokens)``, ms per GPU at the step's whole
    token count, read for ``tp`` / ``ep`` already) pricing the routed experts
    (:func:`routed_table_ms`); None prices them on the roofline. With ``ep`` > 1
    the table (balanced: every GPU the same load) is read where each GPU would
    carry the busiest GPU's woken experts and rows (``ep`` times them).

    ``zipf_s`` None: the popularity skew of ``spec``'s ``moe_routing`` (:func:`~vidur_specdec.costs.routing.zipf_of`).
    ``weight_bytes`` overrides the bytes per expert weight (default: the checkpoint's format).
    ``ep`` > 1: expert parallel over the ``tp`` GPUs (vLLM's ``enable_expert_parallel``, EP
    size = TP size): each GPU holds ``E/ep`` whole experts and the step waits for the GPU
    with the most work (:func:`~vidur_specdec.costs.routing.ep_busiest_rank`: its woken
    experts and token rows); shared experts stay tensor-parallel. The distinct count
    returned is the whole model's either way. ``redundant`` > 0: EPLB's spare expert
    copies (:mod:`~vidur_specdec.costs.eplb`) spread the busiest GPU's load. ``scope``:
    ``all``; ``local`` the router and shared experts only (what a data-parallel rank
    runs on its own tokens); ``routed`` the routed experts only (the busiest GPU's);
    ``router`` and ``shared`` one part of ``local`` each (dual-batch overlap places them apart).
    ``dispatched``: an all-to-all delivers each GPU only its own rows (data parallel > 1),
    so ``routed`` is the EP-1 table (one GPU, every expert, its kernel over the tokens
    it is given) read at the busiest GPU's rows / top-k tokens waking its woken experts;
    the EP tables' rows are measured at data parallel 1, where every GPU permutes all
    the step's tokens.
    """
    tokens = int(sum(groups))
    if tokens == 0:
        return 0.0, 0.0
    e = P.EFFICIENCY if efficiency is None else efficiency
    dev = complete_device_fields(device)
    g, l2 = e["gemm"], e["l2"]
    h, E, k = spec.hidden_size, spec.num_experts, spec.experts_per_token
    wb = expert_bytes_per_weight(spec) if weight_bytes is None else weight_bytes
    zipf_s = routing.zipf_of(spec) if zipf_s is None else zipf_s
    distinct = routing.expected_distinct(list(groups), E, k, rho, zipf_s)
    fdev = part_device(spec, dev, "experts")[0]
    if scope not in SCOPES:
        raise ValueError(f"scope must be one of {', '.join(SCOPES)}, got {scope!r}")
    router, remote, shared = (scope in parts for parts in SCOPES_WITH.values())
    # router GEMM + top-k / softmax over T x E scores
    ms = float(gemm_ms(tokens, h, E, dev, g, P.DTYPE_BYTES)) if router else 0.0
    if router:
        ms += float(stream_ms(2.0 * tokens * E * 4, dev, e["add"], l2))
    if not remote:
        pass
    elif routed is not None and ep > 1 and dispatched:  # the busiest GPU's received rows, on the EP-1 table
        woken, rows = _busiest(groups, E, k, ep, rho, zipf_s, redundant)
        ms += routed_table_ms(routed, rows / k, woken, E, k)
    elif routed is not None and ep > 1:  # the busiest GPU, read where the table's balanced rows load every GPU so
        woken, rows = _busiest(groups, E, k, ep, rho, zipf_s, redundant)
        ms += routed_table_ms(routed, rows * ep / k, min(float(E), woken * ep), E, k)
    elif routed is not None:
        ms += routed_table_ms(routed, tokens, distinct, E, k)
    else:
        grouped, act = _routed_roofline_ms(spec, dev, fdev, e, tp, ep, groups, distinct, wb, rho, zipf_s, redundant)
        ms += grouped
        ms += act
    if shared and spec.shared_ffn_size:
        sf = spec.shared_ffn_size / tp
        sdev, sb = part_device(spec, dev, "shared_experts")  # weights at their format; activations bf16
        ms += (float(gemm_ms(tokens, h, 2 * sf, sdev, g, P.DTYPE_BYTES, weight_b=sb))
               + float(gemm_ms(tokens, sf, h, sdev, g, P.DTYPE_BYTES, weight_b=sb)))
        ms += float(stream_ms(3.0 * tokens * sf * P.DTYPE_BYTES, dev, e["mlp_act"], l2))
    return ms, distinct


def _busiest(groups, E: int, k: int, ep: int, rho: float, zipf_s: float, redundant: int):
    """(woken experts, token rows) of the busiest expert-parallel GPU, with EPLB's spare copies when ``redundant``."""
    if redundant:
        return eplb.busiest_rank(list(groups), E, k, ep, redundant, rho, zipf_s)
    return routing.ep_busiest_rank(list(groups), E, k, ep, rho, zipf_s)


def _routed_roofline_ms(spec, dev, fdev, e, tp, ep, groups, distinct, wb, rho, zipf_s,
                        redundant: int = 0) -> Tuple[float, float]:
    """The routed experts on the builder's roofline: (grouped GEMM pair over the woken experts, SiLU) in ms."""
    g, l2 = e["gemm"], e["l2"]
    h, E, k = spec.hidden_size, spec.num_experts, spec.experts_per_token
    tokens = int(sum(groups))
    if ep > 1:  # whole experts; the busiest GPU's woken experts and rows
        f = spec.expert_ffn_size
        woken, rows = _busiest(groups, E, k, ep, rho, zipf_s, redundant)
    else:  # every expert split 1/tp wide on every GPU
        f = spec.expert_ffn_size / tp
        woken, rows = distinct, tokens * k
    # fp8 experts run W8A8 on the FP8 tensor cores (DeepSeek-V3's block-fp8 fused MoE), NVFP4 ones W4A4 on the
    # FP4 tensor cores; MXFP4 experts on Hopper and int4 ones run W4A16 (bf16 activations), at the bf16 rate
    # routed experts: grouped GEMM over the woken experts (gate_up then down, two launches)
    flops = 2.0 * rows * 3 * h * f
    floor = woken * 2.0 * P.KERNEL["gemm_tile_m"] * 3 * h * f
    t_compute = max(flops, floor) / (fdev["peak_flops"] * g["compute_eff_max"])
    nbytes = woken * 3 * h * f * wb + rows * (2 * h + 3 * f) * P.DTYPE_BYTES
    t_memory = nbytes / (dev["mem_bw"] * g["mem_eff"])
    pw = g["overlap_exp"]
    grouped = (t_compute**pw + t_memory**pw) ** (1.0 / pw) * 1e3 + 2 * g["launch_ms"]
    return grouped, float(stream_ms(3.0 * rows * f * P.DTYPE_BYTES, dev, e["mlp_act"], l2))  # SiLU(gate) * up
