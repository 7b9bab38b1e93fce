"""tune: acceptance inputs carried to smaller k, checks before the first point, nothing left after a failure."""


import pytest
import yaml

from conftest import run_command
from vidur_specdec.engine.resolve import from_dict
from vidur_specdec.speculation.acceptance import expected_tokens_per_step
from test_tune import CFG


def cli(*args):
    return run_command("tune", *args)


def test_mean_length_carries_the_alpha_it_implies_at_k_max():
    from vidur_specdec.tune.points import Setting, build_config, setting_overrides

    spec = {**CFG["speculative"], "acceptance_rate": None, "mean_acceptance_length": 2.8}
    base = from_dict({**CFG, "speculative": spec})
    alphas = set()
    for k in (1, 2, 3):
        s = build_config(base, setting_overrides(base, Setting(k))).speculative
        assert s.num_speculative_tokens == k and s.mean_acceptance_length is None
        alphas.add(s.acceptance_rate)
    (a,) = alphas
    assert abs(expected_tokens_per_step(a, 3) - 2.8) < 1e-9


def test_histogram_becomes_per_position_rates():
    from vidur_specdec.tune.acceptance_carry import rates_from_histogram
    from vidur_specdec.speculation.acceptance import pmf_from_rates

    h = [0.2, 0.2, 0.2, 0.4]
    assert list(pmf_from_rates(rates_from_histogram(h))) == pytest.approx(h)


@pytest.mark.parametrize("args, words", [
    (["--slo-ttft-ms", "nan"], "--slo-ttft-ms"),
    (["--slo-tpot-ms", "inf"], "--slo-tpot-ms"),
    (["--slo-tpot-ms", "-3"], "--slo-tpot-ms"),
    (["--set", "speculative.num_speculative_tokens=0"], "speculative.num_speculative_tokens"),
    (["--set", "speculative.method=fixed"], "speculative.method"),
    (["--loads", "1,x"], "--loads"),
    (["--load-axis", "concurrency", "--loads", "100000"], "--loads"),
    (["--warmup-requests", "100000"], "workload.warmup_requests"),
])
def test_bad_options_are_refused_before_any_point(tmp_path, args, words):
    p = tmp_path / "cfg.yaml"
    p.write_text(yaml.safe_dump(CFG))
    r = cli("--config", p, "--output-dir", tmp_path / "out", *args)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and words in r.stderr, r.stderr
    assert not (tmp_path / "out").exists()


def test_a_failed_tune_leaves_nothing_that_blocks_the_rerun(tmp_path):
    p = tmp_path / "cfg.yaml"
    p.write_text(yaml.safe_dump({**CFG, "workload": {**CFG["workload"], "num_requests": 12}}))
    # SLOs no load meets: the capacity search fails after simulating points
    r = cli("--config", p, "--output-dir", tmp_path / "out", "--slo-ttft-ms", "0.001")
    assert r.returncode == 2 and r.stderr.strip().splitlines()[-1].startswith("error:"), r.stderr
    assert not (tmp_path / "out").exists()


def test_request_counts_follow_the_measured_dataset():
    from vidur_specdec.tune.loads import requests_for_concurrency

    assert [requests_for_concurrency(c, None) for c in (1, 8, 32, 64, 128, 256)] == [22, 88, 128, 220, 440, 880]
    assert requests_for_concurrency(2, None) == 22 and requests_for_concurrency(16, None) == 64
    assert requests_for_concurrency(16, 0.5) == 8


def test_scheduler_defaults_follow_vllm_serve_per_device():
    h100 = from_dict({"model": "meta-llama/Llama-3.1-8B-Instruct", "device": "h100"}).scheduler
    assert (h100.max_num_batched_tokens, h100.max_num_seqs, h100.gpu_memory_utilization) == (8192, 1024, 0.92)
    assert (h100.chunk_size, h100.batch_size_cap) == (8192, 1024)
    a100 = from_dict({"scheduler": {"chunk_size": 512}}).scheduler
    assert (a100.max_num_batched_tokens, a100.max_num_seqs) == (512, 256)


def test_head_on_another_target_warns():
    from vidur_specdec.speculation.proposers.pairing import describe_proposer

    cfg = from_dict({"model": "meta-llama/Llama-3.1-70B-Instruct", "device": "h100",
                     "parallel": {"tensor_parallel_size": 4}, "speculative": {"method": "eagle3"}})
    d = describe_proposer(cfg)
    assert d["proposer_weights"] == "yuhuili/EAGLE3-LLaMA3.3-Instruct-70B"
    assert "Llama-3.3-70B-Instruct" in d["proposer_pairing_warning"]


def test_overload_bounds_ttft_growth_as_well_as_queue_waits():
    from vidur_specdec.tune.loads import TTFT_GROWTH_FACTOR, overload_reason, point_overloaded

    ref = 73.0  # TTFT p50 without speculation at the lightest grid load (ms)
    assert not point_overloaded({"overloaded": 0, "ttft_ms_p50": 206.0}, ref)
    # EAGLE-3 k = 3 at concurrency 64 with a 512-token budget: waits are short, TTFT p50 is 2.08 s
    assert point_overloaded({"overloaded": 0, "ttft_ms_p50": 2084.0}, ref)
    assert overload_reason({"overloaded": 0, "ttft_ms_p50": TTFT_GROWTH_FACTOR * ref + 1}, ref) == "ttft"
    assert overload_reason({"overloaded": 1, "ttft_ms_p50": 80.0}, ref) == "queue"
    assert not point_overloaded({"overloaded": 0, "ttft_ms_p50": 2084.0}, None)  # no reference yet


def test_answer_names_the_schedule_s_k_at_each_load_and_where_a_static_k_differs():
    from vidur_specdec.tune.page import answer

    chk = [{"load": 1.0, "schedule_k": 3, "batch_size_p50": 1.0, "best_static_k": 3, "shortfall_vs_best": 0.0},
           {"load": 8.0, "schedule_k": 3, "batch_size_p50": 8.0, "best_static_k": 3, "shortfall_vs_best": 0.0},
           {"load": 32.0, "schedule_k": 3, "batch_size_p50": 31.0, "best_static_k": 3, "shortfall_vs_best": 0.0},
           {"load": 64.0, "schedule_k": 3, "batch_size_p50": 57.0, "best_static_k": 1, "shortfall_vs_best": 0.232,
            "overloaded": True}]
    summ = {"deployment": {"method": "eagle3", "k": 3}, "checks": chk,
            "slo": {"ttft_ms": 450.0, "tpot_ms": 40.0, "percentile": 99},
            "capacity": {"none": 6.0, "speculative": 6.0}}
    a = answer(summ, "concurrency")
    assert a.startswith("EAGLE-3: the schedule runs k = 3 at concurrency 1\u201364 (median batch 1\u201357); "
                        "at concurrency 64 the best static k is 1, the schedule 23.2 % behind it (the schedule's "
                        "run is overloaded there)")
    assert a.endswith("capacity under the SLOs (TTFT p99 \u2264 450 ms, TPOT p99 \u2264 40 ms): 6 concurrent "
                      "requests with the schedule, 6 without.")
    chk[-1].update(best_static_k=3, shortfall_vs_best=0.0, schedule_k=2, overloaded=False)
    a = answer(summ, "concurrency")
    assert "k = 3 at concurrency 1\u201332 (median batch 1\u201331); k = 2 at concurrency 64 (median batch 57); " \
           "at concurrency 64 the best static k is 3" in a
