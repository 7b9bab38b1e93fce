"""The step plan on a Vidur batch: how the Vidur-backed engine hands each step's plan to the pricer.

The plan itself (:class:`~vidur_specdec.pricing.plan.StepPlan`) lives with the
pricer; this module is the Vidur side of it. Vidur creates the
:class:`~vidur.entities.Batch` and hands the same object to the stage scheduler,
to the predictor (``get_execution_time(batch, stage)``) and back to the replica
scheduler's ``on_batch_end``; the predictor is built by Vidur apart from the
scheduler, and a replica may have several batches in flight (pipeline stages, a
data-parallel group's ranks). So the plan rides on the batch: :func:`attach` sets
one attribute, :data:`PLAN_ATTRIBUTE`, once (a second plan for the same batch is
refused), and :func:`plan_of` reads it. The recorders never see the batch (Vidur
hands them a ``BatchStage``): the plan reaches them on the step price the
predictor returns (``price.plan``). This module is the only one that reads or
writes an attribute of a Vidur batch beyond Vidur's own fields (a test greps the
package for it).

A batch formed outside the speculative scheduler (Vidur's own Sarathi in the
baseline run, a hand-built batch in a script or test) has no plan attached;
:func:`plan_of` derives one from its public fields: k 0, every decoding request's
guesses ``tokens charged − 1``, accepted from the request's ``planned`` when it
has one, else 0.
"""

from __future__ import annotations

from vidur_specdec.pricing.plan import (  # noqa: F401 (re-exported: where the engine's modules read them)
    DecodePart,
    PrefillPart,
    RequestPlan,
    StepComposition,
    StepPlan,
    build_plan,
    idle_rank_plan,
    merge_ranks,
)

PLAN_ATTRIBUTE = "step_plan"  # the one attribute this project sets on a Vidur Batch


def plan_batch(batch, k: int = 0, drafter_sync: bool = False, draft_recompute: tuple = ()) -> StepPlan:
    """The plan of a formed batch: its requests as they stand (``planned`` = (guesses, accepted) where set),
    its decoding requests first, then its prefill chunks (a Sarathi batch's own order).

    Read once per batch by the scheduler, before any request of it advances.
    """
    dec = DecodePart([], [], [], [], [], [], [], [])
    pre = PrefillPart([], [], [], [], [])
    for req, q, kv in zip(batch.requests, batch.num_q_tokens, batch.num_kv_tokens):
        part = dec if req.is_prefill_complete else pre
        part.ids.append(getattr(req, "id", -1))
        part.indices.append(getattr(req, "index", -1))
        part.context.append(kv - q)
        if part is dec:
            planned = getattr(req, "planned", None)
            g, a = planned if planned is not None else (q - 1, 0)
            dec.charged.append(q)
            dec.guesses.append(g)
            dec.accepted.append(a)
            dec.catchup.append(getattr(req, "catchup_tokens", 1))
            dec.previous_q.append(getattr(req, "previous_q_tokens", 1))
        else:
            pre.chunks.append(q)
            pre.completes.append(kv >= req.num_prefill_tokens)  # the chunk completes the prompt: logits
    return build_plan(k, drafter_sync, dec, pre, draft_recompute)


def attach(batch, plan: StepPlan) -> None:
    """Set ``batch``'s plan (once: a batch already planned is refused)."""
    if getattr(batch, PLAN_ATTRIBUTE, None) is not None:
        raise ValueError(f"batch {getattr(batch, 'id', '?')} already has a step plan")
    setattr(batch, PLAN_ATTRIBUTE, plan)


def plan_of(batch) -> StepPlan:
    """The plan attached to ``batch`` (a plan is its own), else one derived from its public fields."""
    if isinstance(batch, StepPlan):
        return batch
    plan = getattr(batch, PLAN_ATTRIBUTE, None)
    return plan if plan is not None else plan_batch(batch)
