"""The collective model, tensor-parallel communication and what a step costs beyond the layers."""

import math
from types import SimpleNamespace

import numpy as np
import pytest

from conftest import MEASURED, small
from vidur_specdec.hardware import collectives
from vidur_specdec.hardware import collectives_fit
from vidur_specdec.costs import step_overheads
from vidur_specdec.config import DEFAULT_ALL_REDUCE, ConfigError, EngineConfig
from vidur_specdec.engine.resolve import load
from vidur_specdec.engine.reference.step_plan import plan_batch
from vidur_specdec.hardware.devices import get_device
from vidur_specdec.architectures.models import KNOWN_MODELS

A100, H100 = get_device("a100"), get_device("h100")
NETWORK = MEASURED / "network"


# --------------------------------------------------------------------------- collectives

def test_all_reduce_zero_at_world_one_and_no_bytes():
    assert collectives.all_reduce_ms(A100, 1, 1 << 20) == 0.0
    assert collectives.all_reduce_ms(A100, 4, 0) == 0.0
    assert collectives.all_reduce_ms(A100, 2, 2048) > 0.0


@pytest.mark.parametrize("world", [2, 4, 8])
def test_all_reduce_monotone_in_bytes_and_world(world):
    sizes = np.unique(np.logspace(1, 30, 400, base=2).astype(int))
    t = [collectives.all_reduce_ms(A100, world, int(s)) for s in sizes]
    assert all(b >= a for a, b in zip(t, t[1:]))
    assert t[-1] > 10 * t[0]  # large messages are bandwidth bound
    if world < 8:
        assert collectives.all_reduce_ms(A100, world * 2, 1 << 24) > collectives.all_reduce_ms(A100, world, 1 << 24)


def test_faster_link_is_faster_only_where_bandwidth_bound():
    big, small_msg = 1 << 28, 4096
    assert collectives.all_reduce_ms(H100, 8, big) < collectives.all_reduce_ms(A100, 8, big)
    ratio = collectives.all_reduce_ms(A100, 8, big) / collectives.all_reduce_ms(H100, 8, big)
    assert ratio == pytest.approx(900 / 600, rel=0.05)  # bus bytes over a 1.5x link
    assert collectives.all_reduce_ms(H100, 8, small_msg) == collectives.all_reduce_ms(A100, 8, small_msg)


def _need_network():
    if not (NETWORK / collectives.DGX).is_file() or not (NETWORK / collectives.PAIRWISE).is_file():
        pytest.skip("../shared/vidur-profiles/network is not beside this checkout")


def test_held_out_error_within_what_is_reported():
    """The shipped constants, on rows they were not fitted to, stay within the recorded error."""
    _need_network()
    theta = (collectives_fit.FLOOR_MS, collectives_fit.LATENCY_MS, collectives_fit.HOP_MS,
             collectives_fit.BUS_BANDWIDTH)
    rows = collectives.error_table(theta, NETWORK)
    held = {f"{r['file']}:{r['gpus']}": r for r in rows if r["role"] == "held out" and r["band"] == "all"}
    assert set(held) == set(collectives_fit.HELD_OUT_MEDIAN_ABS_ERR)
    for key, reported in collectives_fit.HELD_OUT_MEDIAN_ABS_ERR.items():
        assert held[key]["median_abs_err"] <= reported + 1e-3
        assert reported < 0.35  # what docs/model.md states
    # the bandwidth-bound band (1-16 MiB: where TP all-reduces of big batches sit) is tighter
    for r in rows:
        if r["role"] == "held out" and r["band"] == "1-16 MiB":
            assert r["median_abs_err"] < 0.25


def test_calibration_reproduces_the_shipped_constants():
    _need_network()
    theta, _ = collectives.calibrate(NETWORK, write=False, out=open("/dev/null", "w"))
    shipped = (collectives_fit.FLOOR_MS, collectives_fit.LATENCY_MS, collectives_fit.HOP_MS,
               collectives_fit.BUS_BANDWIDTH)
    for a, b in zip(theta, shipped):
        assert a == pytest.approx(b, rel=1e-3)


def test_calibrate_cli_names_a_missing_folder(tmp_path, capsys):
    assert collectives.main(["calibrate", "--network", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: collectives:") and "\n" not in err


# --------------------------------------------------------------------------- step overheads

def _req(done, prefill_target=100):
    return SimpleNamespace(is_prefill_complete=done, num_prefill_tokens=prefill_target)


def _batch(rows):
    """rows: (prefill complete?, q tokens, kv tokens after the step, prefill target)."""
    return SimpleNamespace(requests=[_req(d, p) for d, _, _, p in rows],
                           num_q_tokens=[q for _, q, _, _ in rows], num_kv_tokens=[kv for _, _, kv, _ in rows])


def test_logit_rows_counts_decodes_verifies_and_completing_prefills():
    b = _batch([
        (True, 1, 300, 100),  # plain decode: 1
        (True, 5, 400, 100),  # verify with 4 guesses: 5
        (False, 64, 64, 100),  # prefill chunk that does not finish the prompt: 0
        (False, 36, 100, 100),  # last chunk: 1
    ])
    assert step_overheads.logit_rows(b) == 7


def test_step_cost_parts():
    model = KNOWN_MODELS["meta-llama/Llama-2-7b-hf"]
    eng = EngineConfig()
    so = step_overheads.build(eng, model, A100, 1)
    one = so.cost(_batch([(True, 1, 300, 100)]))
    many = so.cost(_batch([(True, 1, 300, 100)] * 64))
    assert one.overhead_ms == pytest.approx(eng.step_overhead_ms + eng.overhead_ms_per_request)
    assert many.lm_head_ms > one.lm_head_ms > 0
    assert many.sampling_ms > one.sampling_ms >= eng.sampling_ms
    # LM head of one row reads the whole vocab x hidden bf16 weight: at least its HBM time
    assert one.lm_head_ms >= 32000 * 4096 * 2 / A100.hbm_bandwidth * 1e3 * 0.9
    # a step with no row needing logits samples nothing and has no LM head
    none = so.cost(_batch([(False, 64, 64, 100)]))
    assert none.lm_head_ms == 0 and none.sampling_ms == 0 and none.overhead_ms > 0
    # TP splits the LM head but adds the gather
    tp2 = step_overheads.build(eng, model, A100, 2).cost(_batch([(True, 1, 300, 100)] * 64))
    assert tp2.lm_head_ms != many.lm_head_ms
    off = step_overheads.build(load({"engine": {"lm_head": False}}).engine, model, A100, 1)
    assert off.cost(_batch([(True, 1, 300, 100)])).lm_head_ms == 0


def test_engine_keys_validated():
    with pytest.raises(ConfigError, match=r"^engine.step_overhead_ms: must be"):
        load({"engine": {"step_overhead_ms": -1}})
    with pytest.raises(ConfigError, match=r"^engine.bogus: unknown key"):
        load({"engine": {"bogus": 1}})


# --------------------------------------------------------------------------- in the simulator

def test_steps_carry_the_parts_and_they_add_up():
    from vidur_specdec import simulate

    res = simulate(small(num_requests=12, qps=8.0))
    s = res.steps
    parts = s[["verify_ms", "draft_ms", "lm_head_ms", "sampling_ms", "overhead_ms"]].sum(axis=1)
    assert np.allclose(parts, s["duration_ms"], rtol=1e-12, atol=1e-9)
    assert (s["comm_ms"] == 0).all()  # TP 1
    assert (s["overhead_ms"] > 0).all()
    assert (s["lm_head_ms"] > 0).mean() > 0.9  # only non-final prefill chunks have none
    assert res.summary["overhead_ms_total"] == pytest.approx(s["overhead_ms"].sum())


def test_engine_overheads_only_slow_steps_down():
    from vidur_specdec import simulate

    zero = {"step_overhead_ms": 0.0, "overhead_ms_per_request": 0.0, "sampling_ms": 0.0,
            "sampling_logit_passes": 0.0, "lm_head": False, "spec_step_ms": 0.0, "spec_ms_per_request": 0.0}
    base = simulate(small(num_requests=12, qps=8.0, engine=zero))
    full = simulate(small(num_requests=12, qps=8.0))
    assert (base.steps[["lm_head_ms", "sampling_ms", "overhead_ms"]] == 0).all().all()
    assert full.summary["tpot_ms"]["mean"] > base.summary["tpot_ms"]["mean"]
    assert not math.isnan(full.summary["tpot_ms"]["mean"])


def _pricer(tp: int, all_reduce: str = DEFAULT_ALL_REDUCE):
    """A step pricer over the shipped A100 profile (its per-GPU op tables at any TP) with ``all_reduce``."""
    from vidur_specdec.costs import kernels, verify_cost
    from vidur_specdec.costs.fit_cache import load_time_model
    from vidur_specdec.costs.profile_files import locate_profile
    from vidur_specdec.pricing.pricer import StepPricer
    from vidur_specdec.speculation import proposers

    cfg = load({})
    model = KNOWN_MODELS[cfg.model]
    source = kernels.for_run("shipped", A100, all_reduce)
    return StepPricer(load_time_model(*locate_profile("shipped", "a100", cfg.model)), model, A100, source,
                      verify_cost.build(cfg.speculative), proposer=proposers.build(cfg, None),
                      overheads=step_overheads.build(cfg.engine, model, A100, tp, kernels=source),
                      all_reduce=collectives.all_reduce_model(all_reduce), tp=tp)


@pytest.mark.parametrize("name", sorted(collectives.ALL_REDUCE_MODELS))
def test_tensor_parallel_comm_is_two_all_reduces_per_layer(name):
    """At TP > 1 each layer pays two all-reduces of tokens x hidden x 2 bytes; comm_ms is inside verify_ms."""
    b = _batch([(True, 1, 300, 100)] * 8)
    b.total_num_q_tokens, b.replica_id = 8, 0
    one, two = _pricer(1, name).price(plan_batch(b)), _pricer(2, name).price(plan_batch(b))
    assert one.comm_ms == 0.0
    expected = 2 * 32 * collectives.ALL_REDUCE_MODELS[name](A100, 2, 8 * 4096 * 2)
    assert two.comm_ms == pytest.approx(expected, rel=1e-12) and two.comm_ms > 0
    # same per-GPU op tables here, so the layers differ by the all-reduces alone
    assert two.verify_ms - one.verify_ms == pytest.approx(expected, rel=1e-9)
    # the LM head is split over the GPUs and its shards gathered
    assert two.lm_head_ms != one.lm_head_ms
    total = two.verify_ms + two.lm_head_ms + two.draft_ms + two.sampling_ms + two.overhead_ms
    assert two.total_time * 1e3 == pytest.approx(total, rel=1e-12)


def test_whole_step_near_published_measurements():
    """scripts/check_published.py's Llama-2-7B rows (lmdeploy, A100): within what docs/model.md reports."""
    import importlib.util

    from conftest import REPO

    spec = importlib.util.spec_from_file_location("check_published", REPO / "scripts" / "check_published.py")
    cp = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cp)
    errs = [cp.ms_per_token(r, "shipped") / r.published_ms - 1 for r in cp.ROWS
            if r.model == "meta-llama/Llama-2-7b-hf" and r.batch <= 16]
    assert len(errs) == 5
    assert max(abs(e) for e in errs) < 0.08  # docs/model.md: -0.3 % .. +6.7 % on these rows
