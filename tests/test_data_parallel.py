"""Data-parallel attention with expert parallel: the group's scheduler, router, step price, all-to-all and EPLB."""

import pytest

from vidur_specdec import simulate
from vidur_specdec.architectures.models import resolve_model
from vidur_specdec.config import ConfigError
from vidur_specdec.costs import all_to_all, eplb, memory, routing
from vidur_specdec.engine.resolve import load
from vidur_specdec.sweep.definition import identity

DS = "deepseek-ai/DeepSeek-V3"
SMALL = {
    "seed": 0, "model": DS, "device": "h200", "profiles": "shipped",
    "parallel": {"tensor_parallel_size": 1, "data_parallel_size": 16, "enable_expert_parallel": True},
    "workload": {"num_requests": 40, "arrival": "closed", "concurrency": 24,
                 "prompt_tokens": {"dist": "lognormal", "median": 256, "sigma": 0.5, "min": 16, "max": 1024},
                 "output_tokens": {"dist": "lognormal", "median": 32, "sigma": 0.5, "min": 8, "max": 96}},
    "speculative": {"method": "mtp", "num_speculative_tokens": 2, "acceptance_rate": 0.85},
}


@pytest.fixture(scope="module")
def dp_run():
    return simulate(SMALL)


def test_a_group_step_is_the_slowest_rank_plus_experts_plus_all_to_all(dp_run):
    s = dp_run.steps
    assert {"a2a_ms", "dp_slowest_rank_ms", "dp_mean_rank_ms", "dp_idle_ranks"} <= set(s.columns)
    parts = s.verify_ms + s.draft_ms + s.lm_head_ms + s.sampling_ms + s.overhead_ms
    assert (parts - s.duration_ms).abs().max() < 1e-6
    assert (s.a2a_ms > 0).all() and (s.dp_slowest_rank_ms >= s.dp_mean_rank_ms - 1e-9).all()
    # the step waits for the slowest rank's own work, then every rank's shared MoE and all-to-all
    assert (s.duration_ms >= s.dp_slowest_rank_ms + s.a2a_ms - 1e-6).all()
    # 24 requests over 16 ranks: once the queue drains some ranks run vLLM's dummy batch
    assert s.dp_idle_ranks.max() > 0 and s.dp_idle_ranks.max() < 16
    assert dp_run.requests.output_tokens.sum() > 0 and dp_run.requests.completed_at_s.notna().all()
    assert dp_run.summary["num_gpus"] == 16 and dp_run.summary["data_parallel_size"] == 16
    assert s.iloc[0].dp_idle_ranks == 0  # 24 arrivals at t = 0 spread over all 16 ranks
    assert 0 < dp_run.summary["a2a_share"] < 1


def test_prefill_steps_use_deepep_normal_and_decode_steps_low_latency():
    spec = resolve_model(DS, "model")
    assert all_to_all.STEP_MODE == {"decode": "deepep_ll", "prefill": "deepep_ht"}
    ll = [sum(all_to_all.layer_ms("h200_sxm", spec, "decode", t, 8)) for t in (1, 16, 64, 256)]
    assert ll == sorted(ll) and ll[0] > 0
    # two nodes (EP 16) cost more than one (EP 8) at the same tokens per rank (measured ratio)
    assert sum(all_to_all.layer_ms("h200_sxm", spec, "decode", 64, 16)) > ll[2]
    # a bf16 model sends twice the bytes of block-fp8 on dispatch: read further up the table
    assert all_to_all.wire_bytes(spec, "dispatch") < all_to_all.wire_bytes(resolve_model("Qwen/Qwen3-235B-A22B", "m"),
                                                                             "dispatch")


class _Rank:
    def __init__(self, waiting=0, running=0, used=0, blocks=100):
        self._request_queue = [None] * waiting
        self._allocation_map = {i: 1 for i in range(running)}
        self._num_allocated_blocks = used
        self._cache_config = type("C", (), {"num_blocks": blocks})()

    def add_request(self, request):
        self._request_queue.append(request)


def test_router_is_vllms_least_loaded():
    from vidur_specdec.engine.dp_router import LeastLoadedScan
    from vidur_specdec.engine.reference.dp_group import DPGroupReplicaScheduler

    group = DPGroupReplicaScheduler.__new__(DPGroupReplicaScheduler)
    group.ranks, group.rank_of = [_Rank(running=3), _Rank(running=1), _Rank(running=1)], {}
    group._router = LeastLoadedScan(3)
    req = type("R", (), {"id": 0})
    group.add_request(req)  # fewest waiting + running: rank 1 (tie with rank 2, scan starts at 0)
    assert group.rank_of[0] == 1
    req.id = 1
    group.add_request(req)  # rank 1 now 2, rank 2 holds 1
    assert group.rank_of[1] == 2
    # a waiting queue on a rank whose KV is 90 % full weighs 6 x 0.4 per waiting request (vLLM's penalty)
    group.ranks, group._router = [_Rank(waiting=1, used=90), _Rank(running=2)], LeastLoadedScan(2)
    req.id = 2
    group.add_request(req)
    assert group.rank_of[2] == 1


@pytest.mark.parametrize("parallel, match", [
    ({"data_parallel_size": 2}, r"is dense; vLLM runs its data-parallel ranks as independent engines"),
])
def test_dense_data_parallel_is_refused(parallel, match):
    with pytest.raises(ConfigError, match=match) as e:
        load({"model": "meta-llama/Llama-3.1-8B-Instruct", "device": "h100", "parallel": parallel})
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("parallel, match", [
    ({"data_parallel_size": 2}, r"^parallel.data_parallel_size: > 1 without parallel.enable_expert_parallel"),
    ({"data_parallel_size": 3, "enable_expert_parallel": True}, r"256 experts do not split over .* 3 GPUs"),
    ({"data_parallel_size": 16, "enable_expert_parallel": True, "enable_eplb": True, "num_redundant_experts": 8},
     r"^parallel.num_redundant_experts: 256 experts \+ 8 redundant do not split"),
    ({"enable_eplb": True}, r"^parallel.enable_eplb: does nothing with parallel.enable_expert_parallel false"),
])
def test_bad_data_parallel_settings_are_one_line(parallel, match):
    with pytest.raises(ConfigError, match=match) as e:
        load({"model": DS, "device": "h200", "parallel": {"tensor_parallel_size": 1, **parallel}})
    assert "\n" not in str(e.value)


def test_data_parallel_without_all_to_all_tables_is_one_line():
    cfg = dict(SMALL, profiles="built")
    with pytest.raises(ConfigError, match=r"^parallel.data_parallel_size: no measured all-to-all on h200") as e:
        simulate(cfg)
    assert "\n" not in str(e.value)


def test_new_keys_at_their_defaults_leave_row_identity_alone():
    d = identity(load({"model": DS, "device": "h200", "parallel": {"tensor_parallel_size": 8}}))["parallel"]
    assert not {"data_parallel_size", "enable_eplb", "num_redundant_experts"} & set(d)


def test_eplb_spreads_skewed_load_and_costs_slots_when_uniform():
    g = [1] * 128
    for z in (0.5, 1.0):  # popular experts sit together under vLLM's linear placement; EPLB spreads them
        assert eplb.busiest_rank(g, 256, 8, 16, 32, zipf_s=z)[1] < 0.5 * routing.ep_busiest_rank(g, 256, 8, 16,
                                                                                                 zipf_s=z)[1]
    off, on = routing.ep_busiest_rank(g, 256, 8, 16), eplb.busiest_rank(g, 256, 8, 16, 32)
    assert on[1] == pytest.approx(off[1], rel=0.01) and on[0] > off[0]  # uniform: rows as before, more slots woken
    copies, where = eplb.placement(256, 8, 16, 32, 1.0)
    assert sum(copies) == 288 and len(where) == 288
    assert {sum(1 for _, g in where if g == r) for r in range(16)} == {18}
    spec = resolve_model(DS, "model")
    assert memory.weight_bytes(spec, 1, 16, 32) > memory.weight_bytes(spec, 1, 16)


def test_tune_prices_the_per_rank_batch_on_the_whole_group():
    from vidur_specdec.tune.choose import step_pricer
    from vidur_specdec.tune.vllm_config import engine_args, serve_command

    cfg = load(dict(SMALL, parallel={**SMALL["parallel"], "enable_eplb": True, "num_redundant_experts": 16}))
    _, price = step_pricer(cfg)
    one, eight = price(1, 0, 600), price(8, 0, 600)
    assert 0 < one < eight and price(8, 2, 600) > eight  # b is every rank's batch; guesses add verify tokens
    args = engine_args(cfg)
    assert args["data_parallel_size"] == 16 and args["enable_eplb"] is True
    assert "--eplb-config '{\"num_redundant_experts\":16}'" in serve_command(cfg, {})


def test_a_rank_that_does_not_fit_names_the_tensor_parallel_size_that_does_at_its_data_parallel_size():
    cfg = dict(SMALL, device="h100", parallel={**SMALL["parallel"], "data_parallel_size": 8})
    with pytest.raises(ConfigError, match=r"at tensor_parallel_size 1 with expert parallel\) .* needs "
                                          r"parallel.tensor_parallel_size >= 2$") as e:
        simulate(cfg)
    assert "\n" not in str(e.value)
