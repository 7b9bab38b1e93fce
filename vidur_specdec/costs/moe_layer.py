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

Dense leading layers (DeepSeek's first three) keep the profile's MLP ops. Times in
ms per layer; ``device`` is the builder's device mapping (``peak_flops``,
``mem_bw``, ``sms``, ``l2_bytes``).
"""

from __future__ import annotations

from typing import Mapping, Optional, Sequence, Tuple

from vidur_specdec.architectures.moe import BYTES_PER_WEIGHT
from vidur_specdec.costs import routing
from vidur_specdec.costs.profiles import params as P
from vidur_specdec.costs.profiles.builder import complete_device_fields, fp8_device, gemm_ms, stream_ms


def expert_bytes_per_weight(spec) -> float:
    """Bytes per routed-expert weight at the checkpoint's format (bf16 2, fp8 1, mxfp4 0.53125)."""
    return BYTES_PER_WEIGHT.get(spec.quantization or "", 2.0)


def moe_layer_ms(spec, device: Mapping, tp: int, groups: Sequence[int], rho: float = routing.DEFAULT_RHO,
                 zipf_s: float = routing.DEFAULT_ZIPF_S, efficiency: Optional[Mapping] = None,
                 weight_bytes: Optional[float] = None, ep: int = 1) -> Tuple[float, float]:
    """(ms of one MoE layer on one GPU, expected distinct routed experts woken) for the step ``groups``.

    ``weight_bytes`` overrides the bytes per expert weight (default: the checkpoint's format).
    ``ep`` > 1: expert parallel over the ``tp`` GPUs (vLLM's ``enable_expert_parallel``, EP
    size = TP size): each GPU holds ``E/ep`` whole experts and the step waits for the GPU
    with the most work (:func:`~vidur_specdec.costs.routing.ep_busiest_rank`: its woken
    experts and token rows); shared experts stay tensor-parallel. The distinct count
    returned is the whole model's either way.
    """
    tokens = int(sum(groups))
    if tokens == 0:
        return 0.0, 0.0
    e = P.EFFICIENCY if efficiency is None else efficiency
    dev = complete_device_fields(device)
    g, l2 = e["gemm"], e["l2"]
    h, E, k = spec.hidden_size, spec.num_experts, spec.experts_per_token
    wb = expert_bytes_per_weight(spec) if weight_bytes is None else weight_bytes
    distinct = routing.expected_distinct(list(groups), E, k, rho, zipf_s)
    if ep > 1:  # whole experts; the busiest GPU's woken experts and rows
        f = spec.expert_ffn_size
        woken, rows = routing.ep_busiest_rank(list(groups), E, k, ep, rho, zipf_s)
    else:  # every expert split 1/tp wide on every GPU
        f = spec.expert_ffn_size / tp
        woken, rows = distinct, tokens * k
    # fp8 experts and shared experts run W8A8 on the FP8 tensor cores (DeepSeek-V3's block-fp8 fused MoE);
    # MXFP4 experts on Hopper run W4A16 (OpenAI triton_kernels: bf16 activations), so at the bf16 rate
    fdev = fp8_device(dev) if spec.quantization == "fp8" else dev
    # router GEMM + top-k / softmax over T x E scores
    ms = float(gemm_ms(tokens, h, E, dev, g, P.DTYPE_BYTES))
    ms += float(stream_ms(2.0 * tokens * E * 4, dev, e["add"], l2))
    # routed experts: grouped GEMM over the woken experts (gate_up then down, two launches)
    flops = 2.0 * rows * 3 * h * f
    floor = woken * 2.0 * P.KERNEL["gemm_tile_m"] * 3 * h * f
    t_compute = max(flops, floor) / (fdev["peak_flops"] * g["compute_eff_max"])
    nbytes = woken * 3 * h * f * wb + rows * (2 * h + 3 * f) * P.DTYPE_BYTES
    t_memory = nbytes / (dev["mem_bw"] * g["mem_eff"])
    pw = g["overlap_exp"]
    ms += (t_compute**pw + t_memory**pw) ** (1.0 / pw) * 1e3 + 2 * g["launch_ms"]
    ms += float(stream_ms(3.0 * rows * f * P.DTYPE_BYTES, dev, e["mlp_act"], l2))  # SiLU(gate) * up
    if spec.shared_ffn_size:
        sf = spec.shared_ffn_size / tp
        sb = spec.linear_weight_bytes if spec.quantization == "fp8" else None  # fp8 weights; activations bf16
        ms += (float(gemm_ms(tokens, h, 2 * sf, fdev, g, P.DTYPE_BYTES, weight_b=sb))
               + float(gemm_ms(tokens, sf, h, fdev, g, P.DTYPE_BYTES, weight_b=sb)))
        ms += float(stream_ms(3.0 * tokens * sf * P.DTYPE_BYTES, dev, e["mlp_act"], l2))
    return ms, distinct
