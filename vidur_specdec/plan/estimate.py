"""Analytic bounds and a static estimate of one candidate, from the run's own step pricer (no simulation).

Every price here is the simulator's: :class:`~vidur_specdec.pricing.pricer.StepPricer`
on plans built by :mod:`vidur_specdec.pricing.plan` (the same object the engine
prices its steps with), and tokens advanced per decode step come from tune's
``expected_advanced`` (the acceptance input at k_max).

**Bounds** (a candidate over either cannot meet the SLO at any load):

* ``ttft_lb_ms``: the prompt at the SLO's percentile prefilled alone, in chunks of
  ``max_num_batched_tokens`` (each chunk one step with nothing else in it); with
  prefill and decode pools plus the KV transfer and one decode step. Every request's
  TTFT is at least its own lone prefill, so the percentile is too.
* ``tpot_lb_ms``: one decode step of one request (the shortest context of the workload)
  over the tokens it advances on average, at the best k. A step with more requests,
  or a prefill chunk in it, costs no less. It uses the *expected* tokens advanced, so
  it bounds the median and higher percentiles (those the SLOs take), not the luckiest
  request.

**Static estimate** (ranks survivors and places the first simulated load): the steady
state of ``b`` requests per scheduler decoding at the best k for b, the prompts of the
finishing requests' successors prefilled in whole chunks of the budget left, each in one
step (a data-parallel group's step waits for any rank's chunk: :func:`steady_step`);
TPOT = the mean step / advanced; TTFT = the prompt's chunks, each in such a step. Prefill and decode pools: the decode pool at b per rank, the
prefill pool at its throughput in full chunks, the deployment at the smaller of the
two (the prefill pool kept at most :data:`PREFILL_BUSY` busy). The best point is
the largest b on a geometric grid whose TPOT and TTFT meet the SLOs (under pipeline
parallelism b is one micro-batch, PP of them in flight, and a request steps once per
PP slowest stages); its load is
Little's law's concurrency (requests/s x E2E). Queueing, percentiles and
step-to-step variation are left out: the simulation measures them
(docs/plan.md, "The screen", for the direction of each).
Units: ms, tokens, requests.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence

import numpy as np

from vidur_specdec.pricing.plan import decode_plan, idle_rank_plan, merge_ranks, plan_from_lists

PREFILL_BUSY = 0.9  # a prefill pool is planned at most 90 % busy (past it queues grow without bound; tune's knee)
GRID_FACTOR = 1.4  # batch sizes estimated: 1, 2, 3, 4, 5, 7, ... growing by this factor


@dataclass
class Workload:
    """What the estimate reads of the drawn workload (tokens)."""

    isl: float           # mean prompt
    osl: float           # mean output
    prompt_at_p: int     # the prompt at the SLO's percentile
    context: int         # a typical decode step's context: mean prompt + half the mean output
    shortest: int        # the shortest prompt


def workload_of(specs, percentile: int) -> Workload:
    prompts = np.array([s.prompt_tokens for s in specs], dtype=float)
    outputs = np.array([s.output_tokens for s in specs], dtype=float)
    return Workload(float(prompts.mean()), float(outputs.mean()),
                    int(np.percentile(prompts, percentile, method="lower")),
                    int(round(prompts.mean() + outputs.mean() / 2)), int(prompts.min()))


@dataclass
class Estimate:
    """Bounds (ms) and the static estimate at the SLOs (None: no batch meets them)."""

    ttft_lb_ms: float
    tpot_lb_ms: float
    best: Optional[Dict] = None
    curve: List[Dict] = field(default_factory=list)


def batch_grid(cap: int) -> List[int]:
    out, b = [], 1.0
    while int(b) <= cap:
        if not out or int(b) != out[-1]:
            out.append(int(b))
        b *= GRID_FACTOR
    if out[-1] != cap:
        out.append(cap)
    return out


class Pricing:
    """A pool's step prices: plans for one rank, run on every rank of a data-parallel group.

    ``ms`` is the step's interval (under pipeline parallelism its slowest stage: with the pipeline full one
    micro-batch leaves per slowest stage); ``alone`` prices a step with nothing else in flight: the other ranks
    run vLLM's dummy batch, and under pipeline parallelism it is the latency through every stage.
    """

    def __init__(self, pricer, budget: int):
        self.pricer = pricer
        self.dp = int(pricer.dp)
        self.pp = int(pricer.pp)
        self.budget = int(budget)

    def ms(self, plan, alone: bool = False) -> float:
        if self.dp > 1:
            plan = merge_ranks([plan] + ([idle_rank_plan()] * (self.dp - 1) if alone else [plan] * (self.dp - 1)))
        if alone and self.pp > 1:
            return sum(self.pricer.price(plan, st).total_time for st in range(self.pp)) * 1e3
        return self.pricer.duration_ms(plan)

    def decode(self, b: int, k: int, ctx: int, alone: bool = False) -> float:
        return self.ms(decode_plan(b, k, ctx), alone)

    def mixed(self, b: int, k: int, ctx: int, chunk: int, chunk_ctx: int) -> float:
        if chunk <= 0:
            return self.decode(b, k, ctx)
        return self.ms(plan_from_lists([k + 1] * b, [ctx] * b, [(chunk_ctx, chunk)], k=k))

    def lone_prefill(self, prompt: int) -> float:
        """A prompt prefilled alone in chunks of the budget (ms)."""
        done, t = 0, 0.0
        while done < prompt:
            c = min(self.budget, prompt - done)
            t += self.ms(plan_from_lists([], [], [(done, c)]), alone=True)
            done += c
        return t


def best_k(pr: Pricing, b: int, ctx: int, adv: Sequence[float]) -> int:
    """The k with most tokens advanced per ms of a decode step of b requests (ties: the smaller)."""
    return max(range(len(adv)), key=lambda k: (round(b * adv[k] / pr.decode(b, k, ctx), 12), -k))


def bounds(pr: Pricing, w: Workload, adv: Sequence[float], extra_ttft_ms: float = 0.0):
    """(ttft_lb_ms, tpot_lb_ms, first decode step ms): the two lower bounds above."""
    tpots = [pr.decode(1, k, w.shortest, alone=True) / adv[k] for k in range(len(adv))]
    first = pr.decode(1, 0, w.prompt_at_p, alone=True)
    return pr.lone_prefill(w.prompt_at_p) + extra_ttft_ms + first, min(tpots), first


def steady_step(pr: Pricing, b: int, k: int, a: float, w: Workload) -> Optional[Dict]:
    """The mean step of b requests per scheduler decoding at k, with the prompts of their successors.

    Each scheduler starts ``b x a / OSL`` prompts a step; a prompt takes ``ceil(ISL / room)`` chunks of the
    budget left by the decodes (``room``), each chunk in one step. A step carries a chunk with probability
    ``f`` (per scheduler); a data-parallel group's step waits for its slowest rank, so it carries one when
    any rank does (``1 - (1 - f)^DP``). None: the budget cannot carry the prompts (prefill-bound).
    """
    room = pr.budget - b * (k + 1)
    if room <= 0:
        return None
    prompts = b * a / w.osl
    n_chunks = int(math.ceil(w.isl / room))
    chunk = int(math.ceil(w.isl / n_chunks))
    f = prompts * n_chunks
    if f > 1.0:  # more than one chunk a step: prompts share each step's room
        chunk = int(math.ceil(prompts * w.isl))
        if chunk > room:
            return None
        f = 1.0
    dec = pr.decode(b, k, w.context)
    if pr.dp > 1:
        mix_plan = merge_ranks([plan_from_lists([k + 1] * b, [w.context] * b, [(int(w.isl / 2), chunk)], k=k)]
                               + [decode_plan(b, k, w.context)] * (pr.dp - 1))
        mix = pr.pricer.duration_ms(mix_plan)
    else:
        mix = pr.mixed(b, k, w.context, chunk, int(w.isl / 2))
    p_any = 1.0 - (1.0 - f) ** pr.dp
    return {"step_ms": p_any * mix + (1.0 - p_any) * dec, "chunk_step_ms": mix, "chunks": n_chunks}


def colocated(pr: Pricing, w: Workload, adv: Sequence[float], gpus_per_instance: int, cap: int,
              slo: Dict) -> Estimate:
    """The estimate of one colocated instance (replicas scale it; tokens/s per GPU is the instance's)."""
    ttft_lb, tpot_lb, _ = bounds(pr, w, adv)
    est = Estimate(ttft_lb, tpot_lb)
    for b in batch_grid(max(1, cap // pr.pp)):  # b: one micro-batch under pipeline parallelism
        k = best_k(pr, b, w.context, adv)
        a = adv[k]
        st = steady_step(pr, b, k, a, w)
        if st is None:
            break  # the budget cannot carry this batch's prefills: past it the instance is prefill-bound
        step = st["step_ms"]
        tpot = pr.pp * step / a  # a request's micro-batch steps once per pass of the full pipeline
        ttft = pr.pp * st["chunks"] * st["chunk_step_ms"]
        tok_gpu = pr.dp * b * a / step * 1e3 / gpus_per_instance
        row = {"batch": b, "k": k, "step_ms": step, "tpot_ms": tpot, "ttft_ms": ttft, "tok_s_gpu": tok_gpu,
               "tok_s_user": 1e3 / tpot}
        est.curve.append(row)
        if tpot > slo["tpot_ms"]:
            break  # a larger batch only takes longer steps
        if ttft <= slo["ttft_ms"]:
            est.best = row
    return est


def disaggregated(pre: Pricing, dec: Pricing, link, w: Workload, adv: Sequence[float], prefill_instances: int,
                  decode_instances: int, gpus: int, cap: int, slo: Dict) -> Estimate:
    """The estimate of prefill and decode pools: the decode pool's batch, capped by the prefill pool's rate."""
    kv_ms = link.time_ms(w.prompt_at_p)
    lone = pre.lone_prefill(w.prompt_at_p)
    first = dec.decode(1, 0, w.prompt_at_p, alone=True)
    tpot_lb = min(dec.decode(1, k, w.shortest, alone=True) / adv[k] for k in range(len(adv)))
    est = Estimate(lone + kv_ms + first, tpot_lb)
    full = min(pre.budget, int(math.ceil(w.isl)))
    per_req = pre.ms(plan_from_lists([], [], [(0, full)])) * w.isl / full / pre.dp  # ms of one prompt in full steps
    rate_pre = PREFILL_BUSY * prefill_instances * 1e3 / per_req  # requests/s the prefill pool takes
    for b in batch_grid(cap):
        k = best_k(dec, b, w.context, adv)
        a = adv[k]
        step = dec.decode(b, k, w.context)
        tpot = step / a
        rate_dec = decode_instances * dec.dp * b * a / step * 1e3 / w.osl
        rate = min(rate_pre, rate_dec)
        ttft = lone + kv_ms + step
        row = {"batch": b, "k": k, "step_ms": step, "tpot_ms": tpot, "ttft_ms": ttft,
               "tok_s_gpu": rate * w.osl / gpus, "tok_s_user": 1e3 / tpot, "prefill_bound": rate_pre < rate_dec}
        est.curve.append(row)
        if tpot > slo["tpot_ms"]:
            break
        if ttft <= slo["ttft_ms"] and (est.best is None or row["tok_s_gpu"] > est.best["tok_s_gpu"] * (1 + 1e-9)):
            est.best = row
        if rate_pre < rate_dec:
            break  # the prefill pool is the limit: a larger decode batch adds nothing
    return est


def concurrency(row: Dict, w: Workload, gpus: int) -> float:
    """Little's law: requests in flight = requests/s x E2E (s) at an estimated point."""
    rate = row["tok_s_gpu"] * gpus / w.osl
    e2e_ms = row["ttft_ms"] + max(w.osl - 1, 0) * row["tpot_ms"]
    return rate * e2e_ms / 1e3
