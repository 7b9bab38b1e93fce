"""Dual-batch overlap (parallel.enable_dbo): vLLM's split rule, the overlap schedule, the priced step and the refusals."""

import pytest

from conftest import REPO
from vidur_specdec import simulate
from vidur_specdec.config import ConfigError
from vidur_specdec.engine.resolve import load
from vidur_specdec.engine.simulation import prepare
from vidur_specdec.pricing import dbo as DBO
from vidur_specdec.pricing.plan import decode_plan, merge_ranks, plan_from_lists
from vidur_specdec.speculation.proposals import runner_of

DP16 = str(REPO / "configs" / "deepseek-v3-mtp-dp16-ep16-h200.yaml")
LOADED = ["workload.concurrency=320", "workload.num_requests=320", "workload.output_tokens.max=128"]  # 20 per rank: some split
RULE = DBO.DualBatchOverlap(decode_threshold=32, prefill_threshold=512, decode_query_len=2)


@pytest.fixture(scope="module")
def dp16_runs():
    """The DP 16 + EP 16 example with 320 requests at once, DBO off and on."""
    return {dbo: simulate(DP16, LOADED + (["parallel.enable_dbo=true"] if dbo else [])) for dbo in (False, True)}


def test_dp16_with_dbo_runs_and_exposes_less_all_to_all(dp16_runs):
    off, on = dp16_runs[False].steps, dp16_runs[True].steps
    assert off.dbo.sum() == 0 and (off.a2a_exposed_ms == off.a2a_ms).all()
    assert on.dbo.sum() > 0 and (on.a2a_exposed_ms <= on.a2a_ms + 1e-9).all()
    assert on.a2a_exposed_ms.sum() < off.a2a_exposed_ms.sum()
    split = on[on.dbo == 1]
    assert (split.a2a_exposed_ms < split.a2a_ms).all()  # a split step hides some of its all-to-all
    parts = on.verify_ms + on.draft_ms + on.lm_head_ms + on.sampling_ms + on.overhead_ms
    assert (parts - on.duration_ms).abs().max() < 1e-6
    assert dp16_runs[True].summary["dbo_steps"] == pytest.approx(on.dbo.mean(), abs=1e-6)
    assert dp16_runs[True].summary["a2a_share"] < dp16_runs[False].summary["a2a_share"]


def test_the_mtp_modules_own_dispatch_and_combine_is_priced(dp16_runs):
    s = dp16_runs[False].steps
    drafting = s[s.guesses > 0]
    assert (drafting.draft_a2a_ms > 0).all() and (drafting.draft_a2a_ms < drafting.draft_ms).all()
    plain = simulate(DP16, ["workload.num_requests=40", "speculative.method=none"]).steps
    assert (plain.draft_a2a_ms == 0).all()


def _part(q, ctx=1000, prefill=()):
    return plan_from_lists(list(q), [ctx] * len(q), list(prefill))


def test_every_rank_votes_with_its_own_threshold():
    uniform = _part([2] * 20)  # 40 tokens, every request 1 + k
    assert RULE.wants(uniform) and not RULE.wants(_part([2] * 15))  # 30 < 32
    assert not RULE.wants(_part([2] * 19 + [1]))  # not uniform: the prefill threshold 512
    assert RULE.wants(_part([2] * 10, prefill=[(0, 500)])) and not RULE.wants(_part([2] * 5, prefill=[(0, 500)]))
    assert RULE.split_point([uniform, uniform]) == 20
    assert RULE.split_point([uniform, _part([2] * 15)]) is None  # one rank below: nobody splits
    # the ranks pad to the largest; a rank whose second micro-batch would be empty stops the split
    assert RULE.split_point([_part([2] * 16), _part([2] * 40)]) is None  # 80 // 2 = 40 >= 32
    assert RULE.split_point([_part([2] * 21), _part([2] * 40)]) == 40


def test_the_cut_splits_the_request_across_it():
    a, b = DBO.cut(_part([3, 3, 3], ctx=100, prefill=[(50, 11)]), 4)
    assert a.composition.decode_q == [3, 1] and a.composition.decode_ctx == [100, 100]
    assert b.composition.decode_q == [2, 3] and b.composition.decode_ctx == [101, 100]
    assert b.composition.prefill == [(50, 11)] and a.num_tokens + b.num_tokens == 20
    a, b = DBO.cut(_part([], prefill=[(0, 100)]), 30)  # a chunk split: its second part after the first's KV
    assert a.composition.prefill == [(0, 30)] and b.composition.prefill == [(30, 70)]


def test_each_slot_lasts_the_longer_of_its_compute_and_communication():
    quiet = DBO.LayerParts(a0=1, a1=1, s1=0.5, s0a1=1.5, e0=1, e1=1, d0=0.2, d1=0.2, c0=0.2, c1=0.2)
    assert DBO.moe_layer_ms(quiet) == (1 + 1 + 1.5 + 1.5, 0.0)
    loud = quiet._replace(d1=3.0, c0=2.0)
    assert DBO.moe_layer_ms(loud) == (5.0, pytest.approx(2.0 + 0.5))


def test_splitting_costs_the_weights_twice_and_pays_at_larger_batches():
    """The figures docs/model.md quotes (DeepSeek-V3 MTP k = 1, DP 16, 1,000 tokens of context)."""
    off = prepare(load(DP16, ["workload.num_requests=20"])).pricer
    on = prepare(load(DP16, ["workload.num_requests=20", "parallel.enable_dbo=true"])).pricer
    got = {b: (on.price(decode_plan(b, 1, 1000, ranks=16)), off.price(decode_plan(b, 1, 1000, ranks=16)))
           for b in (8, 16, 64)}
    assert got[8][0].split == 0 and got[8][0].duration_ms == got[8][1].duration_ms  # 16 tokens < 32: whole
    assert got[16][0].split == 1 and got[16][0].a2a_exposed_ms < got[16][0].a2a_ms
    assert (round(got[16][0].duration_ms, 1), round(got[16][1].duration_ms, 1)) == (49.9, 42.1)
    assert (round(got[64][0].duration_ms, 1), round(got[64][1].duration_ms, 1)) == (64.5, 72.9)
    # the ranks' compute in each slot is the slowest rank's: one rank with longer contexts slows every slot
    slow = merge_ranks([decode_plan(64, 1, 1000)] * 15 + [decode_plan(64, 1, 8000)])
    assert on.price(slow).duration_ms > got[64][0].duration_ms


def test_dbo_runs_on_vllms_v1_model_runner():
    cfg = load(DP16, ["parallel.enable_dbo=true", "speculative.method=ngram", "workload.num_requests=8"])
    assert cfg.engine.model_runner == "v2" and runner_of(cfg.speculative, cfg.engine, cfg.parallel) == "v1"


@pytest.mark.parametrize("over, match", [
    (["parallel.data_parallel_size=1", "parallel.enable_expert_parallel=false", "parallel.enable_dbo=true"],
     r"^parallel.enable_dbo: does nothing with parallel.data_parallel_size 1"),
    (["parallel.dbo_decode_token_threshold=16"], r"^parallel.dbo_decode_token_threshold: does nothing with "
                                                 r"parallel.enable_dbo false"),
    (["parallel.enable_dbo=true", "parallel.dbo_prefill_token_threshold=1"],
     r"^parallel.dbo_prefill_token_threshold: must be at least the 2 micro-batches"),
    (["parallel.enable_dbo=true", "speculative.num_speculative_tokens_per_batch_size={1-8: 1, 9-4096: 0}"],
     r"^parallel.enable_dbo: with speculative.num_speculative_tokens_per_batch_size is not modelled"),
])
def test_dbo_settings_vllm_refuses_or_that_do_nothing_are_one_line(over, match):
    with pytest.raises(ConfigError, match=match) as e:
        load(DP16, over)
    assert "\n" not in str(e.value)


def test_the_serve_command_carries_dbo():
    from vidur_specdec.tune.vllm_config import engine_args, serve_command

    args = engine_args(load(DP16, ["parallel.enable_dbo=true", "parallel.dbo_decode_token_threshold=64"]))
    assert args["enable_dbo"] is True and args["dbo_decode_token_threshold"] == 64
    assert "dbo_prefill_token_threshold" not in args  # vLLM's default left out
    assert "--enable-dbo --dbo-decode-token-threshold 64" in serve_command(load(
        DP16, ["parallel.enable_dbo=true", "parallel.dbo_decode_token_threshold=64"]), {})
    assert "enable_dbo" not in engine_args(load(DP16))
