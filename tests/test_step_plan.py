"""The step plan: one immutable record per step, the only thing this project hangs on Vidur's batch."""

import re
from types import SimpleNamespace

import pytest

from conftest import REPO, each_batch, small
from vidur_specdec import simulate
from vidur_specdec.costs.step_overheads import logit_rows
from vidur_specdec.engine.reference import step_plan
from vidur_specdec.engine.reference.step_plan import PLAN_ATTRIBUTE, StepPlan, attach, merge_ranks, plan_batch, plan_of

# what stamping our own state on a batch looks like: a private attribute read or written on a batch (or a
# data-parallel rank's part), getattr/setattr on one, or the attribute names the package used to stamp
STAMP = re.compile(r"\b(batch|part|b)\._[a-z]|\b(getattr|setattr|hasattr)\((batch|part|b)\b"
                   r"|\b_specdec_[a-z]|\b_dp_parts\b")


def test_only_the_step_plan_module_reaches_into_a_batch():
    assert STAMP.search('k = getattr(batch, "_specdec_k", 0)') and STAMP.search("part._specdec_moe = x")
    assert STAMP.search("batch._dp_parts = parts") and not STAMP.search("batch_stage._batch_id, batch.requests")
    hits = []
    for path in sorted((REPO / "vidur_specdec").rglob("*.py")):
        if path.name == "step_plan.py" and path.parent.name == "reference":
            continue
        for no, line in enumerate(path.read_text().splitlines(), 1):
            if STAMP.search(line):
                hits.append(f"{path.relative_to(REPO)}:{no}: {line.strip()}")
    assert not hits, "\n".join(hits)


def _check(batches):
    def check(sched, batch):
        plan = getattr(batch, PLAN_ATTRIBUTE)
        q, kv = list(batch.num_q_tokens), list(batch.num_kv_tokens)
        assert isinstance(plan, StepPlan) and plan_of(batch) is plan and plan.num_requests == len(batch.requests)
        assert plan.request_ids == tuple(r.id for r in batch.requests)
        assert plan.tokens_charged == tuple(q) and plan.context == tuple(k - c for k, c in zip(kv, q))
        assert plan.num_tokens == batch.total_num_q_tokens == sum(q)
        assert plan.logit_rows == logit_rows(batch)
        for r, rp in zip(batch.requests, plan.requests):
            assert rp.decoding == r.is_prefill_complete and rp.k == plan.k
            if rp.decoding:  # tokens charged k-bounded guesses + 1, advanced accepted + 1
                assert (rp.guesses, rp.accepted) == r.planned and rp.tokens_charged == rp.guesses + 1
                assert rp.tokens_advanced == rp.accepted + 1 and rp.guesses <= plan.k and rp.prefill_chunk == 0
            else:
                assert rp.guesses == rp.accepted == 0 and rp.tokens_advanced == rp.prefill_chunk == rp.tokens_charged
        comp = plan.composition
        assert comp.decode_q == [c for c, d in zip(q, plan.decoding) if d] and comp.drafter_sync == plan.drafter_sync
        assert plan.drafter_sync == (plan.k == 0)  # a GPU drafter under a schedule: its sync pass at k = 0
        with pytest.raises(AttributeError):
            plan.k = 7
        with pytest.raises(ValueError, match="already has a step plan"):
            attach(batch, plan)
        batches.append(plan)

    return check


def test_each_step_is_planned_once_and_recorded_from_its_plan():
    """A GPU drafter under a per-batch-size schedule (k 0 on large batches: drafter sync steps)."""
    plans = []
    cfg = small(num_requests=24, qps=50.0, method="eagle", k=3)
    cfg["speculative"]["num_speculative_tokens_per_batch_size"] = {"1-6": 3, "7-4096": 0}
    with each_batch(_check(plans)):
        res = simulate(cfg)
    s = res.steps
    assert len(plans) == len(s) and {p.k for p in plans} == {0, 3} and any(p.drafter_sync for p in plans)
    # the recorder's columns are the plans' totals, step for step (one replica: start order is plan order)
    assert list(s.k) == [p.k for p in plans]
    assert list(s.guesses) == [p.guesses_total for p in plans]
    assert list(s.accepted_tokens) == [p.accepted_total for p in plans]
    assert list(s.prefill_tokens) == [p.prefill_tokens for p in plans]
    assert list(s.ctx_tokens) == [p.context_tokens for p in plans]
    assert res.requests.guesses.sum() == s.guesses.sum() > 0


def _batch(*reqs):
    """A hand-built batch: (prefill complete, tokens charged, KV after the step, planned or None) per request."""
    rs = [SimpleNamespace(id=i, index=10 + i, is_prefill_complete=d, num_prefill_tokens=kv, planned=p)
          for i, (d, _, kv, p) in enumerate(reqs)]
    q = [r[1] for r in reqs]
    return SimpleNamespace(requests=rs, num_q_tokens=q, num_kv_tokens=[r[2] for r in reqs], total_num_q_tokens=sum(q))


def test_a_data_parallel_step_is_its_ranks_side_by_side():
    a = plan_batch(_batch((True, 4, 104, (3, 2)), (False, 64, 64, None)), k=3)
    b = plan_batch(_batch((True, 2, 52, (1, 0))), k=1, drafter_sync=True)
    group = merge_ranks([a, None, b])
    assert group.dp_parts == (a, None, b) and group.k == 3 and group.drafter_sync
    assert group.tokens_charged == (4, 64, 2) and group.guesses == (3, 0, 1) and group.accepted == (2, 0, 0)
    assert (group.num_tokens, group.num_decodes, group.guesses_total, group.accepted_total) == (70, 2, 4, 2)
    assert (group.prefill_tokens, group.context_tokens, group.logit_rows, group.verifying) == (64, 150, 7, 2)
    assert group.composition.decode_q == [4, 2] and group.composition.prefill == [(0, 64)]
    assert group.has_prefill and a.has_prefill and b.decode_only and step_plan.idle_rank_plan(1).decode_only


def test_a_batch_formed_elsewhere_is_planned_from_its_public_fields():
    """Vidur's own Sarathi (the baseline) and hand-built batches: k 0, guesses = tokens charged - 1."""
    batch = _batch((True, 3, 103, None), (False, 16, 32, None))
    plan = plan_of(batch)
    assert not hasattr(batch, PLAN_ATTRIBUTE) and plan.k == 0 and not plan.drafter_sync
    assert plan.guesses == (2, 0) and plan.accepted == (0, 0) and plan.indices == (10, 11)
    assert plan.logit_rows == 3 + 1 and plan.verifying == 1  # the chunk reaches its prefill target
    assert plan_of(plan) is plan and step_plan.idle_rank_plan(1).num_tokens == 1
