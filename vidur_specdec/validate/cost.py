"""The simulator's step pricer, as the validation harness uses it.

A real engine's step log gives each step's sums (requests, decoding requests,
guesses, prefill tokens, context tokens), not its per-request composition;
:func:`vidur_specdec.pricing.plan.plan_from_sums` rebuilds a step plan from
them (its approximations and their direction of error are named there and in
docs/validation.md), and the run's own
:class:`~vidur_specdec.pricing.pricer.StepPricer` — the object the simulator
and ``tune`` price with — prices it. For a step whose requests all decode with
the same guesses (every decode step of a static-k run) the rebuilt plan is the
step itself, so the price is the simulator's exactly.
"""

from __future__ import annotations

from typing import Optional

from vidur_specdec.config import ConfigError
from vidur_specdec.pricing.plan import plan_from_lists, plan_from_sums, split_sums  # noqa: F401 (re-exported)
from vidur_specdec.pricing.price import StepPrice


def pricer_for(cfg):
    """The step pricer a simulation of ``cfg`` (a loaded RunConfig) prices with: its resolved plan's
    (:func:`vidur_specdec.engine.simulation.prepare`), the same profiles, policy, proposer, overheads,
    collectives and MoE layers. A data-parallel group's or a pipeline's step log is refused: a log times one
    engine's whole step."""
    # lazy: start-up cost of pandas, scipy, sklearn
    from vidur_specdec.engine.simulation import prepare

    p = cfg.parallel
    if p.data_parallel_size > 1:  # a step log is one engine's; a data-parallel group's step needs every rank's batch
        raise ConfigError("parallel.data_parallel_size: validate prices one engine's step log; a data-parallel "
                          "group (> 1) is not modelled here")
    if p.pipeline_parallel_size > 1:
        raise ConfigError("parallel.pipeline_parallel_size: validate prices one engine's whole step; a step log of "
                          "a pipeline-parallel engine times its stages apart; use pipeline_parallel_size 1")
    plan = prepare(cfg)
    if hasattr(plan, "pools"):  # a disaggregated deployment: its decode pool runs every verify step
        plan = plan.pool("decode").prepared
    return plan.pricer


def price_sums(pricer, num_reqs: int, decode_reqs: int, spec_tokens: int, prefill_tokens: int, ctx_tokens: int,
               num_tokens: Optional[int] = None) -> StepPrice:
    """A step log row's price (:func:`~vidur_specdec.pricing.plan.plan_from_sums`); ``num_tokens`` the row's own
    token count when it differs from the sums' (a padded batch)."""
    plan = plan_from_sums(num_reqs, decode_reqs, spec_tokens, prefill_tokens, ctx_tokens, num_tokens=num_tokens)
    return pricer.price(plan)
