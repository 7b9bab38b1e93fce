"""Wide expert parallel (the all-to-all within and across NVLink domains) and pools of data-parallel groups."""

import numpy as np
import pytest

from conftest import REPO
from vidur_specdec import simulate
from vidur_specdec.architectures.models import resolve_model
from vidur_specdec.config import ConfigError
from vidur_specdec.costs import all_to_all as A
from vidur_specdec.engine.resolve import load

DS = resolve_model("deepseek-ai/DeepSeek-V3", "model")
POOLS = str(REPO / "configs" / "disagg-deepseek-v3-mtp-dp8-dp16-h200.yaml")


def _ms(system, ep, tokens=128, mode="decode"):
    return sum(A.layer_ms(system, DS, mode, tokens, ep))


def test_across_hgx_nodes_the_measured_node_ratios_are_read_at_their_remote_share():
    for nodes in (2, 4, 8):
        xs, ys = A._node_ratio("h200_sxm", "deepep_ll", "dispatch", nodes)
        assert A.cross_factor("h200_sxm", "deepep_ll", "dispatch", 8 * nodes, 64) == pytest.approx(
            np.interp(64, xs, ys))
    # between measured node counts linear in the remote share; past 8 nodes the last step's slope, still growing
    f24 = A.cross_factor("h200_sxm", "deepep_ll", "dispatch", 24, 64)
    assert A.cross_factor("h200_sxm", "deepep_ll", "dispatch", 16, 64) < f24 < \
        A.cross_factor("h200_sxm", "deepep_ll", "dispatch", 32, 64)
    wide = [_ms("h200_sxm", ep) for ep in (8, 16, 32, 64, 96, 320)]
    assert wide == sorted(wide)
    # the figures docs/model.md quotes ("Wide expert parallel")
    assert [round(_ms("h200_sxm", ep), 2) for ep in (8, 16, 32, 64, 320)] == [0.21, 0.55, 0.78, 0.89, 0.98]
    assert [round(_ms("gb200", ep), 2) for ep in (8, 72, 144)] == [0.27, 0.33, 0.84]


def test_within_an_nvl72_rack_the_nvlink_all_to_all_scales_the_tray_rows():
    assert A.table_ep("gb200") == 4 and A.table_ep("h200_sxm") == 8 and A.domain_of("gb200") == 72
    assert A.domain_factor("gb200", "dispatch", DS, 4, 64) == 1.0  # the rows' own EP: as measured
    in_rack = [A.domain_factor("gb200", "dispatch", DS, ep, 512) for ep in (8, 16, 32, 64, 72)]
    assert in_rack == sorted(in_rack) and in_rack[0] > 1
    assert A.remote_share("gb200", 72) == 0 and A.remote_share("gb200", 144) == 0.5
    assert _ms("gb200", 144) > _ms("gb200", 72)  # a second rack crosses the network
    assert A.domain_factor("h200_sxm", "dispatch", DS, 64, 512) == 1.0  # HGX: the node is the domain


def test_kernel_sources_say_what_is_measured_and_what_is_scaled():
    assert "measured ratio" in A.describe("h200_sxm", DS, 16) and "NVLink all-to-all" not in A.describe(
        "h200_sxm", DS, 16)
    assert "interpolated between measured node counts" in A.describe("h200_sxm", DS, 24)
    wide = A.describe("b200_sxm", DS, 320)
    assert "extrapolated past the measured 8 nodes" in wide and "h200_sxm's rows for b200_sxm" in wide
    rack = A.describe("gb300", DS, 72)
    assert "extrapolated past the measured EP 64" in rack and "gb200's rows for gb300" in rack
    assert A.describe("h200_sxm", DS, 8).startswith("measured: h200_sxm") and ";" not in A.describe(
        "h200_sxm", DS, 8)


def test_ep_72_needs_eplb_slots_and_then_runs_on_a_gb200_rack():
    base = {"model": "deepseek-ai/DeepSeek-V3", "device": "gb200", "profiles": "shipped",
            "parallel": {"tensor_parallel_size": 1, "data_parallel_size": 72, "enable_expert_parallel": True},
            "workload": {"num_requests": 80, "arrival": "static",
                         "prompt_tokens": {"dist": "fixed", "value": 128}, "output_tokens": {"dist": "fixed", "value": 8}},
            "speculative": {"method": "mtp", "num_speculative_tokens": 1, "acceptance_rate": 0.85}}
    with pytest.raises(ConfigError, match=r"^parallel.enable_expert_parallel: 256 experts do not split over .* 72 "
                                          r"GPUs evenly; give EPLB spare copies") as e:
        load(base)
    assert "\n" not in str(e.value)
    base["parallel"].update(enable_eplb=True, num_redundant_experts=32)
    res = simulate(base)
    assert res.summary["num_gpus"] == 72 and res.summary["expert_parallel_size"] == 72
    assert "EP 72 within the 72-GPU NVLink domain" in res.summary["kernel_sources"]["all_to_all"]
    assert (res.steps.a2a_ms > 0).all() and res.requests.completed_at_s.notna().all()


@pytest.fixture(scope="module")
def pools_run():
    return simulate(POOLS, ["workload.num_requests=60"])


def test_pools_of_dp_ep_groups_run(pools_run):
    s = pools_run.summary
    assert s["num_gpus"] == 24 and s["kv_link"]["name"] == "infiniband_ndr"
    pre, dec = s["pools"]["prefill"], s["pools"]["decode"]
    assert (pre["data_parallel_size"], pre["expert_parallel_size"], pre["enable_dbo"]) == (8, 8, False)
    assert (dec["data_parallel_size"], dec["expert_parallel_size"], dec["enable_dbo"]) == (16, 16, True)
    assert "across NVLink domains" in dec["all_to_all"] and "across" not in pre["all_to_all"]
    assert 0 < dec["a2a_share"] < 1 and "dbo_steps" in dec and "a2a_share" not in s  # per pool, not mixed
    steps = pools_run.steps
    assert set(steps.pool) == {"prefill", "decode"} and (steps.a2a_ms > 0).all()
    req = pools_run.requests
    assert req.completed_at_s.notna().all() and set(req.prefill_replica) == {0}


def test_a_data_parallel_pool_beside_a_tensor_parallel_one():
    res = simulate(POOLS, ["workload.num_requests=30", "disaggregation.prefill.data_parallel_size=1",
                           "disaggregation.prefill.tensor_parallel_size=8"])
    steps = res.steps
    assert steps[steps.pool == "prefill"].a2a_ms.isna().all() and (steps[steps.pool == "decode"].a2a_ms > 0).all()
    assert res.summary["num_gpus"] == 8 + 16 and "data_parallel_size" not in res.summary["pools"]["prefill"]


@pytest.mark.parametrize("over, match", [
    (["disaggregation.prefill.enable_dbo=true"], r"^disaggregation.prefill.enable_dbo: does nothing without "),
    (["disaggregation.decode.data_parallel_size=3"],
     r"^disaggregation.decode: parallel.enable_expert_parallel: 256 experts do not split over "
     r"disaggregation.decode.data_parallel_size"),
])
def test_a_pools_own_parallel_keys_are_checked_in_its_name(over, match):
    with pytest.raises(ConfigError, match=match) as e:
        simulate(POOLS, ["workload.num_requests=8", "disaggregation.prefill.data_parallel_size=1"] + over)
    assert "\n" not in str(e.value)


def test_split_steps_in_pools_give_the_references_tables():
    """Both engines, DBO splitting steps on both pools' ranks (thresholds lowered so a small run splits)."""
    import sys

    from vidur_specdec.engine import simulation
    from vidur_specdec.engine.core.run import run_core
    from vidur_specdec.engine.reference.run import run_reference
    from vidur_specdec.engine.simulation import prepare

    p = prepare(load(POOLS, ["workload.num_requests=96", "workload.arrival=static",
                             "disaggregation.decode.dbo_decode_token_threshold=2",
                             "disaggregation.decode.dbo_prefill_token_threshold=2",
                             "disaggregation.prefill.enable_dbo=true",
                             "disaggregation.prefill.dbo_prefill_token_threshold=64"]))
    mod = sys.modules[simulation.__name__]
    core, ref = run_core(p, mod), run_reference(p, mod)
    assert core.steps.to_csv(index=False) == ref.steps.to_csv(index=False)
    assert core.requests.to_csv(index=False) == ref.requests.to_csv(index=False)
    assert set(core.steps[core.steps.dbo == 1].pool) == {"prefill", "decode"}
