"""Disaggregated prefill and decode: pools, the router, the KV transfer on the TTFT path, bad pool configs."""

import pytest

from vidur_specdec import simulate
from vidur_specdec.config import ConfigError
from vidur_specdec.engine.resolve import load

BASE = {
    "seed": 3,
    "model": "meta-llama/Llama-3.1-8B-Instruct",
    "device": "h100",
    "workload": {"num_requests": 24, "arrival": "poisson", "qps": 6.0,
                 "prompt_tokens": {"dist": "uniform", "min": 200, "max": 1500},
                 "output_tokens": {"dist": "uniform", "min": 4, "max": 40}},
    "speculative": {"method": "ngram", "num_speculative_tokens": 3, "acceptance_rate": 0.6},
}
PD = {"prefill_instances": 1, "decode_instances": 1}


def cfg(**over):
    d = {k: (dict(v) if isinstance(v, dict) else v) for k, v in BASE.items()}
    for k, v in over.items():
        d[k] = v
    return d


@pytest.fixture(scope="module")
def one_p_one_d():
    return simulate(cfg(speculative={"method": "none"}, disaggregation=PD))


def test_ttft_parts_add_up_and_carry_the_transfer(one_p_one_d):
    req, s = one_p_one_d.requests, one_p_one_d.summary
    parts = req["ttft_queue_ms"] + req["ttft_prefill_ms"] + req["ttft_kv_transfer_ms"] + req["ttft_first_decode_ms"]
    assert (parts - req["ttft_ms"]).abs().max() < 1e-6
    assert (req["kv_transfer_ms"] > 0).all() and (req["ttft_kv_transfer_ms"] >= req["kv_transfer_ms"] - 1e-9).all()
    assert set(s["ttft_parts_ms"]) == {"queue", "prefill", "kv_transfer", "first_decode"}
    assert s["pools"]["prefill"]["num_steps"] > 0 and s["pools"]["decode"]["num_steps"] > 0
    assert s["num_gpus"] == 2 and s["kv_link"]["name"] == "nvlink"
    # Llama-3.1-8B: 32 layers x 8 KV heads x 128 x (K, V) x 2 bytes per token, TP 1, no drafter
    assert (req["kv_transfer_bytes"] == req["prompt_tokens"] * 32 * 8 * 128 * 2 * 2).all()
    # every decode step runs on the decode pool: no prefill chunk longer than one token there
    steps = one_p_one_d.steps
    assert steps[steps["pool"] == "decode"]["prefill_tokens"].max() <= 24  # one last prompt token per request


def test_transfer_time_follows_the_link(one_p_one_d):
    slow = simulate(cfg(speculative={"method": "none"},
                        disaggregation={**PD, "kv_link": "infiniband_ndr", "kv_transfer_latency_ms": 50.0}))
    a, b = one_p_one_d.requests, slow.requests
    assert (b["kv_transfer_ms"] - 50.0 - b["kv_transfer_bytes"] / 50e9 * 1e3).abs().max() < 1e-6
    assert b["ttft_ms"].mean() > a["ttft_ms"].mean() + 50.0
    assert slow.summary["kv_link"]["name"] == "infiniband_ndr"


def test_without_the_keys_a_run_is_the_colocated_one():
    a = simulate(cfg())
    b = simulate(cfg(disaggregation={"prefill_instances": 0, "decode_instances": 0, "router": "round_robin"}))
    assert a.requests.equals(b.requests) and a.steps.equals(b.steps)
    assert "ttft_kv_transfer_ms" not in a.requests and "pool" not in a.steps


def test_routers_spread_requests_over_instances():
    for router in ("round_robin", "least_loaded"):
        r = simulate(cfg(disaggregation={"prefill_instances": 2, "decode_instances": 2, "router": router}))
        req = r.requests
        assert req["prefill_replica"].nunique() == 2 and req["replica"].nunique() == 2
        assert set(req["prefill_replica"]).isdisjoint(set(req["replica"]))
        assert r.summary["num_gpus"] == 4 and (req["output_tokens"] == req["decode_steps"] + 1
                                               + req["accepted_tokens"]).all()


def test_recomputed_draft_kv_costs_the_drafter_over_the_prompt():
    long = cfg(model="meta-llama/Llama-3.1-8B-Instruct",
               workload={"num_requests": 3, "arrival": "poisson", "qps": 0.2,
                         "prompt_tokens": {"dist": "fixed", "value": 4000},
                         "output_tokens": {"dist": "fixed", "value": 16}},
               speculative={"method": "eagle3", "num_speculative_tokens": 3, "acceptance_rate": 0.7})
    t = simulate({**long, "disaggregation": PD})
    r = simulate({**long, "disaggregation": {**PD, "draft_kv": "recompute"}})
    gap = r.requests["ttft_first_decode_ms"] - t.requests["ttft_first_decode_ms"]
    assert (gap > 1.0).all()  # the EAGLE-3 head's pass over 4k tokens
    # moving the draft KV costs bytes, recomputing it does not
    assert (t.requests["kv_transfer_bytes"] > r.requests["kv_transfer_bytes"]).all()
    assert (r.requests["ttft_prefill_ms"] - t.requests["ttft_prefill_ms"]).abs().max() < 1e-9


def test_a_full_decode_instance_makes_transfers_wait_and_every_request_still_finishes():
    r = simulate(cfg(speculative={"method": "none"}, scheduler={"num_blocks": 220},
                     workload={**BASE["workload"], "qps": 40.0}, disaggregation=PD))
    req = r.requests
    assert (req["kv_wait_ms"] > 0).any() and req["completed_at_s"].notna().all()
    assert (req["ttft_kv_transfer_ms"] - req["kv_wait_ms"] - req["kv_transfer_ms"]).abs().max() < 1e-6


@pytest.mark.parametrize("over, key", [
    ({"disaggregation": {"prefill_instances": 1}}, "disaggregation.decode_instances:"),
    ({"disaggregation": {**PD, "decode": {"speculative": {"method": "none"}}},
      "speculative": {"method": "eagle3", "num_speculative_tokens": 3}}, "disaggregation.decode.speculative:"),
    ({"disaggregation": {**PD, "draft_kv": "recompute"}}, "disaggregation.draft_kv:"),
    ({"disaggregation": {"prefill_instances": 4, "decode_instances": 8, "kv_link": "nvlink"}},
     "disaggregation.kv_link:"),
    ({"disaggregation": {**PD, "decode": {"tensor_parallel_size": 1}}, "model": "meta-llama/Llama-3.1-70B-Instruct"},
     "disaggregation.decode.tensor_parallel_size:"),
    ({"disaggregation": PD, "parallel": {"num_replicas": 2}}, "parallel.num_replicas:"),
    # a decode pool with another drafter than the prefill pool's (EAGLE against EAGLE-3)
    ({"disaggregation": {**PD, "decode": {"speculative": {"method": "eagle",
                                                           "model": "yuhuili/EAGLE-LLaMA3.1-Instruct-8B"}}},
      "speculative": {"method": "eagle3", "num_speculative_tokens": 3}}, "disaggregation.decode.speculative:"),
])
def test_bad_pool_configs_are_refused_in_one_line(over, key):
    with pytest.raises(ConfigError) as e:
        c = load(cfg(**over))
        from vidur_specdec.engine.simulation import prepare

        prepare(c)
    msg = str(e.value)
    assert msg.startswith(key) and "\n" not in msg, msg


def test_same_config_and_seed_give_identical_tables(one_p_one_d):
    again = simulate(cfg(speculative={"method": "none"}, disaggregation=PD))
    assert again.requests.equals(one_p_one_d.requests) and again.steps.equals(one_p_one_d.steps)


def test_least_loaded_closed_loop_counts_each_request_once():
    closed = {k: v for k, v in BASE["workload"].items() if k != "qps"}  # a closed loop reads no arrival rate
    r = simulate(cfg(workload={**closed, "arrival": "closed", "concurrency": 4},
                     disaggregation={"prefill_instances": 2, "decode_instances": 1, "router": "least_loaded"}))
    req = r.requests.sort_values("arrived_at_s")
    assert len(req) == 24 and (req["arrived_at_s"].iloc[:4] == 0).all()
    # a request arrives only when one completes (a prefill's hand-off is not a completion)
    later = req["arrived_at_s"].iloc[4:].to_numpy()
    done = sorted(req["completed_at_s"].to_numpy())
    assert all(abs(t - d) < 1e-12 for t, d in zip(later, done))
