"""tune on prefill and decode pools: the schedule is one decode instance's, points run the whole deployment."""

import pytest

from vidur_specdec import tune
from vidur_specdec.config import ConfigError
from vidur_specdec.engine.resolve import from_dict
from vidur_specdec.engine.topology import pool_config
from vidur_specdec.tune.choose import choose_schedule
from vidur_specdec.tune.points import Setting, build_config, run_point, setting_overrides

BASE = {
    "seed": 3,
    "model": "meta-llama/Llama-3.1-8B-Instruct",
    "device": "h100",
    "workload": {"num_requests": 12, "arrival": "poisson", "qps": 4.0,
                 "prompt_tokens": {"dist": "uniform", "min": 200, "max": 1500},
                 "output_tokens": {"dist": "uniform", "min": 4, "max": 40}},
    "speculative": {"method": "eagle3", "num_speculative_tokens": 2, "acceptance_rate": 0.6},
    # the decode instances are smaller than the prefill one: the schedule must follow theirs
    "disaggregation": {"prefill_instances": 1, "decode_instances": 1, "draft_kv": "recompute",
                       "decode": {"tensor_parallel_size": 2, "max_num_seqs": 24}},
}


def test_schedule_is_priced_on_one_decode_instance():
    cfg = from_dict(BASE)
    ranges, table = choose_schedule(cfg, 2)
    assert ranges[0][0] == 1 and ranges[-1][1] == 24  # the decode instance's max_num_seqs, not the run's 1024
    alone = choose_schedule(pool_config(cfg, "decode"), 2)  # the decode pool's config as a colocated run
    assert (ranges, table["rows"]) == (alone[0], alone[1]["rows"])


def test_a_point_runs_the_whole_deployment_and_reads_the_decode_pool_batch():
    base = from_dict(BASE)
    k0 = build_config(base, setting_overrides(base, Setting(0)))  # no drafter: nothing left to recompute
    assert k0.disaggregation.draft_kv == "transfer" and k0.disaggregation.enabled
    ov = {**setting_overrides(base, Setting(2)), "workload.qps": 50.0}  # decode batches of 2-3, prefills of 1
    k2 = build_config(base, ov)
    out = run_point(k2.to_dict(), 450.0, 40.0)["metrics"]
    from vidur_specdec import simulate

    r = simulate(k2)
    parts = sum(r.requests[f"ttft_{p}_ms"] for p in ("queue", "prefill", "kv_transfer", "first_decode"))
    assert out["ttft_ms_p50"] == pytest.approx(float(parts.median()))  # TTFT carries prefill and transfer
    assert (r.requests["ttft_kv_transfer_ms"] > 0).all()
    dec = r.steps[r.steps["pool"] == "decode"]["num_reqs"].median()
    pre = r.steps[r.steps["pool"] == "prefill"]["num_reqs"].median()
    assert out["batch_size_p50"] == float(dec) != float(pre)  # the decode pool's batches, not the prefill pool's


def test_a_pool_s_own_speculative_section_is_refused_in_one_line(tmp_path):
    d = {**BASE, "disaggregation": {**BASE["disaggregation"], "decode": {"speculative": {"acceptance_rate": 0.7}}}}
    with pytest.raises(ConfigError) as e:
        tune(d, output_dir=tmp_path / "out", jobs=1)
    msg = str(e.value)
    assert msg.startswith("disaggregation.decode.speculative:") and "\n" not in msg
    assert not (tmp_path / "out").exists()
