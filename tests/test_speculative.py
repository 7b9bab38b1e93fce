"""Speculative semantics: tokens charged vs advanced, acceptance, budget, KV, preemption."""

import math

import numpy as np
import pytest

from conftest import each_batch, small
from vidur_specdec import run_vidur_sarathi, simulate
from vidur_specdec.speculation.acceptance import expected_tokens_per_step


def _tokens_right(res):
    r = res.requests
    assert len(r) == res.summary["num_requests"]
    assert (r["output_tokens"] == 1 + r["decode_steps"] + r["accepted_tokens"]).all()
    assert (r["accepted_tokens"] <= r["guesses"]).all()
    assert r[["ttft_ms", "e2e_ms"]].notna().all().all()
    assert (r["completed_at_s"] >= r["first_token_s"]).all()
    assert (r["first_token_s"] > r["arrived_at_s"]).all()


@pytest.mark.parametrize("method", ["none", "ngram", "fixed", "draft_model"])
def test_every_request_gets_exactly_its_tokens(method):
    res = simulate(small(method=method))
    _tokens_right(res)
    if method != "none":
        assert res.summary["accepted_tokens"] > 0


@pytest.mark.parametrize("k0", [{"method": "none"}, {"num_speculative_tokens": 0}])
def test_no_speculation_equals_vidur_sarathi(k0):
    cfg = small(num_requests=80, qps=6.0)
    cfg["speculative"].update(k0)
    ours = simulate(cfg).requests
    vidur = run_vidur_sarathi(cfg)
    np.testing.assert_array_equal(ours["first_token_s"].to_numpy(), vidur["first_token_s"].to_numpy())
    np.testing.assert_array_equal(ours["completed_at_s"].to_numpy(), vidur["completed_at_s"].to_numpy())
    assert (ours["accepted_tokens"] == 0).all()


def test_alpha_one_advances_k_plus_one_clamped_at_end():
    k = 4
    res = simulate(small(alpha=1.0, k=k))
    r = res.requests
    # every decode step keeps all guesses; each request needs ceil((out-1)/(k+1)) steps
    expected_steps = np.ceil((r["output_tokens"] - 1) / (k + 1)).astype(int)
    assert (r["decode_steps"] == expected_steps).all()
    s = res.steps
    assert (s["accepted_tokens"] == s["guesses"]).all()


def test_mean_acceptance_length_matches_formula():
    alpha, k = 0.6, 4
    cfg = small(num_requests=30, qps=0.05, alpha=alpha, k=k)
    cfg["workload"]["output_tokens"] = {"dist": "fixed", "value": 1500}
    cfg["workload"]["prompt_tokens"] = {"dist": "fixed", "value": 64}
    res = simulate(cfg)
    got = res.summary["mean_acceptance_length"]
    want = expected_tokens_per_step(alpha, k)
    assert abs(got / want - 1) < 0.02, (got, want)


def test_per_position_and_histogram_acceptance():
    base = small(num_requests=30, qps=0.5, k=3)
    base["workload"]["output_tokens"] = {"dist": "fixed", "value": 600}
    pos = dict(base, speculative={"method": "ngram", "num_speculative_tokens": 3,
                                  "acceptance_per_position": [0.9, 0.5, 0.1]})
    hist = dict(base, speculative={"method": "ngram", "num_speculative_tokens": 3,
                                   "acceptance_histogram": [0.1, 0.45, 0.405, 0.045]})
    a, b = simulate(pos).summary, simulate(hist).summary
    want = 1 + 0.45 + 2 * 0.405 + 3 * 0.045  # same pmf either way
    assert a["mean_acceptance_length"] == pytest.approx(want, rel=0.03)
    assert a["accepted_tokens"] == b["accepted_tokens"]  # identical pmf, identical streams


def test_acceptance_stream_is_independent_of_load():
    # low loads: no budget shortening, so each request sees the same draws
    lo = simulate(small(qps=0.5)).requests
    hi = simulate(small(qps=2.0)).requests
    assert (lo["guesses"] == hi["guesses"]).all()
    assert (lo["accepted_tokens"] == hi["accepted_tokens"]).all()


def test_per_token_verify_never_cheaper_than_shared_kv():
    # static arrivals: the schedule does not depend on step times, so steps line up one to one
    runs = {}
    for mode in ("shared_kv", "interpolated", "per_token"):
        cfg = small(num_requests=40, k=8, alpha=0.5)
        cfg["workload"]["arrival"] = "static"
        cfg["workload"].pop("qps")
        cfg["speculative"]["verify_attention"] = mode
        runs[mode] = simulate(cfg)
    lo, mid, hi = (runs[m].steps for m in ("shared_kv", "interpolated", "per_token"))
    assert len(lo) == len(hi) == len(mid)
    assert (lo["num_tokens"].to_numpy() == hi["num_tokens"].to_numpy()).all()
    assert (hi["verify_ms"].to_numpy() >= lo["verify_ms"].to_numpy()).all()
    assert (mid["verify_ms"].to_numpy() >= lo["verify_ms"].to_numpy()).all()
    assert (mid["verify_ms"].to_numpy() <= hi["verify_ms"].to_numpy()).all()
    spec = lo["guesses"] > 0
    assert (hi["verify_ms"][spec] > lo["verify_ms"][spec]).any()
    assert runs["per_token"].summary["tpot_ms"]["p50"] > runs["shared_kv"].summary["tpot_ms"]["p50"]


def test_alpha_zero_is_slower_than_no_speculation():
    none = simulate(small(method="none")).summary
    spec = simulate(small(alpha=0.0)).summary
    assert spec["accepted_tokens"] == 0
    assert spec["tpot_ms"]["p50"] > none["tpot_ms"]["p50"]
    assert spec["decode_steps"] == none["decode_steps"]


def test_good_acceptance_speeds_up_tpot_at_low_load():
    none = simulate(small(method="none", qps=1.0)).summary
    spec = simulate(small(alpha=0.8, qps=1.0)).summary
    assert spec["tpot_ms"]["p50"] < none["tpot_ms"]["p50"]


def test_verify_tokens_fit_the_chunk_budget():
    cfg = small(num_requests=80, k=8, alpha=0.7)
    cfg["workload"]["arrival"] = "static"
    cfg["workload"].pop("qps")
    cfg["scheduler"] = {"chunk_size": 64}
    res = simulate(cfg)
    s = res.steps
    # verify tokens are shortened to fit; only one-token decodes may exceed the budget (Sarathi's rule)
    assert (s["num_tokens"] <= np.maximum(64, s["decode_reqs"])).all()
    assert ((s["num_tokens"] <= 64) | (s["guesses"] == 0)).all()
    assert (s["guesses"] < 8 * s["decode_reqs"]).any()  # some drafts were shortened
    _tokens_right(res)


def test_lookahead_kv_is_held_before_every_verify_step():
    seen = []

    def check(sched, batch):
        bs = sched._cache_config.block_size
        for req, q in zip(batch.requests, batch.num_q_tokens):
            if req.is_prefill_complete and q > 1:
                assert sched._allocation_map[req.id] * bs >= req.num_processed_tokens + q
                seen.append(q)

    cfg = small(num_requests=40, k=6)
    cfg["scheduler"] = {"num_blocks": 300}
    with each_batch(check):
        _tokens_right(simulate(cfg))
    assert seen


@pytest.mark.parametrize("method", ["none", "ngram", "draft_model"])
def test_forced_preemption_keeps_every_token_right(method):
    cfg = small(num_requests=60, method=method, k=6)
    cfg["workload"]["arrival"] = "static"
    cfg["workload"].pop("qps")
    cfg["scheduler"] = {"num_blocks": 150}
    res = simulate(cfg)
    assert res.summary["restarts"] > 0
    _tokens_right(res)


def test_draft_model_shrinks_kv_blocks_and_costs_time():
    ngram = simulate(small(method="ngram")).summary
    draft = simulate(small(method="draft_model")).summary
    assert draft["kv_blocks_target"] < ngram["kv_blocks_target"]
    assert draft["kv_blocks_draft"] == draft["kv_blocks_target"]
    assert ngram["kv_blocks_draft"] == 0
    assert draft["draft_ms_total"] > ngram["draft_ms_total"] > 0
    assert draft["ttft_ms"]["p50"] > ngram["ttft_ms"]["p50"]  # the drafter prefills each prompt too


def test_runs_are_deterministic_and_repeatable_in_one_process():
    a = simulate(small())
    b = simulate(small(method="none"))
    c = simulate(small())
    assert a.requests.equals(c.requests)
    assert a.steps.equals(c.steps)
    assert not a.requests.equals(b.requests)
    assert a.summary == c.summary


def test_trace_workload(tmp_path):
    trace = tmp_path / "t.csv"
    trace.write_text("arrived_at_s,prompt_tokens,output_tokens\n0.0,100,20\n0.5,300,1\n0.2,50,64\n")
    cfg = small()
    cfg["workload"] = {"arrival": "trace", "trace_file": str(trace)}
    res = simulate(cfg)
    assert list(res.requests["prompt_tokens"]) == [100, 50, 300]
    assert math.isnan(res.requests["tpot_ms"].iloc[2])  # one output token: no TPOT
    _tokens_right(res)


def test_measured_profile_mode(measured_profiles):
    res = simulate(small(num_requests=30), overrides=[f"profiles={measured_profiles}"])
    _tokens_right(res)
    assert "attention.sample.csv" in res.summary["profiles"]["target_attention"]


def test_guesses_leave_a_token_for_every_later_decode():
    # 8 decodes, budget 8: plain Sarathi fills the step with 8 one-token decodes, so no room for guesses
    cfg = small(num_requests=8, k=4, alpha=0.7)
    cfg["workload"] = {"num_requests": 8, "arrival": "static",
                       "prompt_tokens": {"dist": "fixed", "value": 1}, "output_tokens": {"dist": "fixed", "value": 50}}
    cfg["scheduler"] = {"chunk_size": 8}
    s = simulate(cfg).steps
    assert (s["num_tokens"] <= 8).all()
    cfg["scheduler"] = {"chunk_size": 16}
    s = simulate(cfg).steps
    assert (s["num_tokens"] <= 16).all() and (s["guesses"] > 0).any()


def test_kv_blocks_too_few_for_the_longest_request_are_refused_before_running():
    from vidur_specdec.config import ConfigError

    cfg = small(num_requests=2, method="none")
    cfg["workload"] = {"num_requests": 2, "arrival": "static",
                       "prompt_tokens": {"dist": "fixed", "value": 61}, "output_tokens": {"dist": "fixed", "value": 48}}
    cfg["scheduler"] = {"block_size": 32, "num_blocks": 4}  # 4 blocks hold 109 tokens, but Sarathi needs one free
    with pytest.raises(ConfigError, match=r"scheduler.num_blocks: .* allowed: >= 5"):
        simulate(cfg)
    cfg["scheduler"]["num_blocks"] = 5
    _tokens_right(simulate(cfg))


def test_drafter_stops_guessing_at_its_context_limit():
    cfg = small(num_requests=1, method="draft_model", k=4, alpha=1.0)
    cfg["workload"] = {"num_requests": 1, "arrival": "static",
                       "prompt_tokens": {"dist": "fixed", "value": 2000}, "output_tokens": {"dist": "fixed", "value": 300}}
    res = simulate(cfg)
    _tokens_right(res)
    s = res.steps[res.steps["decode_reqs"] > 0]
    # llama-160m has max_model_len 2048: guesses stop once the context reaches it
    assert (s.loc[s["ctx_tokens"] >= 2048, "guesses"] == 0).all()
    assert (s.loc[s["ctx_tokens"] + s["guesses"] > 2048, "guesses"] == 0).all()
    assert (s.loc[s["ctx_tokens"] < 2040, "guesses"] == 4).all()


@pytest.mark.parametrize("row", ["nan,100,20", "inf,100,20", "0.1,50.5,20", "0.1,,20", "-1,10,10"])
def test_bad_trace_values_are_one_line_errors(tmp_path, row):
    from vidur_specdec.config import ConfigError

    trace = tmp_path / "t.csv"
    trace.write_text("arrived_at_s,prompt_tokens,output_tokens\n0.0,10,5\n" + row + "\n")
    cfg = small()
    cfg["workload"] = {"arrival": "trace", "trace_file": str(trace)}
    with pytest.raises(ConfigError, match="workload.trace_file"):
        simulate(cfg)
