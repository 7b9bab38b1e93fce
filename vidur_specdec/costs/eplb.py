"""Expert-parallel load balancing (EPLB): redundant experts and their placement, and the busiest GPU under it.

vLLM 0.33.0 (``--enable-eplb``, ``EPLBConfig.num_redundant_experts`` in
``vllm/config/parallel.py``; the policy in ``vllm/distributed/eplb/policy/default.py``,
DeepSeek's EPLB) holds ``E + R`` physical experts over ``ep`` GPUs, ``(E + R) / ep``
slots each: it gives the ``R`` spare slots one at a time to the logical expert whose
load per copy is highest, then packs the copies onto GPUs heaviest first, each to the
GPU with the least load that still has a free slot. Tokens of an expert with ``c``
copies split evenly among them.

Here the loads are the routing model's expected per-token pick probabilities
(:mod:`vidur_specdec.costs.routing`: popularity skew ``zipf_s``, within-request
locality ``rho``), i.e. the placement EPLB converges to when its measured window
matches the model (vLLM rebalances every ``step_interval`` steps from a window of
measured loads; the lag and the window's noise are not modelled: errs low).
:func:`busiest_rank` gives the busiest GPU's (distinct experts woken, token rows),
as :func:`~vidur_specdec.costs.routing.ep_busiest_rank` does without EPLB. Counts are
experts and rows (expected values); ``R`` is a count of experts.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Sequence, Tuple

import numpy as np

from vidur_specdec.costs import routing


@lru_cache(maxsize=64)
def placement(num_experts: int, top_k: int, ep: int, redundant: int, zipf_s: float) -> Tuple[tuple, tuple]:
    """(copies per logical expert, GPU of each physical copy as (expert, gpu) pairs) under EPLB's policy."""
    if (num_experts + redundant) % ep:
        raise ValueError(f"num_experts + redundant = {num_experts + redundant} must split over ep={ep} evenly")
    p = np.asarray(routing._marginals(num_experts, top_k, float(zipf_s)))
    copies = np.ones(num_experts, dtype=int)
    for _ in range(redundant):  # replicate the expert with the most load per copy (ties: lowest id)
        copies[int(np.argmax(p / copies))] += 1
    slots = (num_experts + redundant) // ep
    items = sorted(((p[e] / copies[e], e) for e in range(num_experts) for _ in range(copies[e])),
                   key=lambda t: (-t[0], t[1]))
    load, used, where = np.zeros(ep), np.zeros(ep, dtype=int), []
    for w, e in items:  # balanced packing: heaviest copy first, to the least-loaded GPU with a free slot
        free = np.flatnonzero(used < slots)
        g = int(free[np.argmin(load[free])])
        load[g] += w
        used[g] += 1
        where.append((e, g))
    return tuple(int(c) for c in copies), tuple(where)


def busiest_rank(groups: Sequence[int], num_experts: int, top_k: int, ep: int, redundant: int,
                 rho: float = routing.DEFAULT_RHO, zipf_s: float = routing.DEFAULT_ZIPF_S) -> Tuple[float, float]:
    """(distinct experts woken, token rows) on the busiest of ``ep`` GPUs with ``redundant`` EPLB copies, expected.

    A copy of expert e (``c_e`` copies) is a sub-expert each token picks with
    ``p_e / c_e``, on the routing model's locality chain: tokens split among copies
    at random (vLLM sends a token to one copy by its index; a request's run of tokens
    is spread a little less than here). The
    busiest GPU is ``mean + sd sqrt(2 ln ep)`` over GPUs, as without EPLB, capped at
    the GPU's slots (woken) and at every row ``top_k`` times (rows).
    """
    n = routing._group_sizes(groups)
    if n.size == 0:
        return 0.0, 0.0
    copies, where = placement(num_experts, top_k, ep, redundant, float(zipf_s))
    p = np.asarray(routing._marginals(num_experts, top_k, float(zipf_s))) / np.asarray(copies, dtype=float)
    a = rho + (1.0 - rho) * p  # each copy a sub-expert picked with p_e / c_e, the routing model's chain on it
    b = p * (1.0 - a) / (1.0 - p)
    woken = -np.expm1(routing._log_not_woken(n, p, b))
    var = routing._group_var(n, p, a, b)
    e_idx = np.array([e for e, _ in where])
    g_idx = np.array([g for _, g in where])
    w_mean = np.bincount(g_idx, woken[e_idx], ep)
    w_sd = np.sqrt(np.bincount(g_idx, (woken * (1.0 - woken))[e_idx], ep))
    r_mean = np.bincount(g_idx, (float(n.sum()) * p)[e_idx], ep)
    r_sd = np.sqrt(np.bincount(g_idx, var[e_idx], ep))
    z = math.sqrt(2.0 * math.log(ep))
    slots = (num_experts + redundant) // ep
    busiest_w = float(np.max(np.minimum(slots, w_mean + z * w_sd)))
    busiest_r = float(np.max(np.minimum(float(n.sum()) * min(top_k, slots), r_mean + z * r_sd)))
    return busiest_w, busiest_r
