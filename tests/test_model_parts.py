"""The modelling parts on their own: acceptance pmfs, verify cost, predictor tables, memory."""

from types import SimpleNamespace

import numpy as np
import pytest
from vidur.config import CacheConfig, ReplicaConfig
from vidur.utils.memory_planner import MemoryPlanner
from vidur.utils.param_counter import ParamCounter

from vidur_specdec.costs import memory
from vidur_specdec.speculation.acceptance import (AcceptanceModel, RequestAcceptance, expected_tokens_per_step,
                                                  pmf_from_rates)
from vidur_specdec.architectures.models import KNOWN_MODELS, get_model
from vidur_specdec.costs.fit_cache import load_time_model
from vidur_specdec.costs.profile_files import locate_profile
from vidur_specdec.pricing.plan import StepComposition
from vidur_specdec.engine.reference.step_plan import plan_of
from vidur_specdec.speculation.proposers.draft_model import DraftModelProposer
from vidur_specdec.speculation.proposers.fixed import FixedProposer
from vidur_specdec.speculation.proposers.ngram import NgramProposer
from vidur_specdec.costs.verify_cost import Interpolated, PerToken, SharedKV

LLAMA7 = "meta-llama/Llama-2-7b-hf"


@pytest.fixture(scope="module")
def target():
    return load_time_model(*locate_profile("shipped", "a100", LLAMA7))


# --------------------------------------------------------------------------- acceptance


def test_pmf_from_iid_rate_matches_closed_form():
    for alpha in (0.0, 0.3, 0.6, 0.8, 1.0):
        for k in (1, 2, 4, 8):
            pmf = pmf_from_rates([alpha] * k)
            assert pmf.sum() == pytest.approx(1.0)
            assert 1 + np.dot(np.arange(k + 1), pmf) == pytest.approx(expected_tokens_per_step(alpha, k))


def test_per_position_rates_are_conditional():
    pmf = pmf_from_rates([0.9, 0.5])
    np.testing.assert_allclose(pmf, [0.1, 0.9 * 0.5, 0.9 * 0.5])


def test_draws_are_clamped_to_the_guesses_and_streams_are_per_request():
    acc = AcceptanceModel(pmf_from_rates([0.8] * 4), seed=7)
    cdf = np.cumsum(acc.pmf).tolist()

    def accepted(u, guesses):
        return RequestAcceptance(cdf, acc.k, np.array([u])).next(guesses, 0)

    assert accepted(0.999999, 4) == 4
    assert accepted(0.999999, 2) == 2
    assert accepted(0.0, 4) == 0
    a, b = acc.stream(3, 100), acc.stream(3, 100)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, acc.stream(4, 100))
    assert not np.array_equal(a, AcceptanceModel(acc.pmf, seed=8).stream(3, 100))


# --------------------------------------------------------------------------- predictor


def test_tables_are_monotone(target):
    for op in target.linear:
        t = np.array(target.linear[op])
        assert (np.diff(t) >= 0).all(), op
    kvs = range(0, 4200, 50)
    for b in (1, 2, 7, 32, 64, 128, 200, 1000):
        row = [target.decode_attention_ms(b, kv) for kv in kvs]
        assert (np.diff(row) >= 0).all()
        assert all(target.decode_attention_ms(b + 1, kv) >= target.decode_attention_ms(b, kv) for kv in kvs)
    for kv in (0, 100, 1000, 3000):
        col = [target.prefill_attention_ms(kv, c) for c in range(1, 4097, 37)]
        assert (np.diff(col) >= 0).all()
        assert target.prefill_attention_ms(kv + 64, 512) >= target.prefill_attention_ms(kv, 512)


def test_fit_reproduces_profile_points(target):
    import pandas as pd

    mlp, att = locate_profile("shipped", "a100", LLAMA7)
    m = pd.read_csv(mlp)
    for _, row in m.sample(20, random_state=0).iterrows():
        n = int(row["num_tokens"])
        assert target.linear_ms("mlp_up_proj", n) == pytest.approx(row["time_stats.mlp_up_proj.median"], rel=1e-9)
    a = pd.read_csv(att)
    d = a[~a["is_prefill"]].sample(20, random_state=0)
    for _, row in d.iterrows():
        got = target.decode_attention_ms(int(row["batch_size"]), row["kv_cache_size"])
        assert got == pytest.approx(row["time_stats.attn_decode.median"], rel=1e-6)


def test_measured_profile_fits_sparse_sample(measured_profiles):
    m = load_time_model(*locate_profile(measured_profiles, "a100", LLAMA7))
    # a point inside the sampled decode rows: batch 40 at KV 1088 measured 0.410 ms
    assert m.decode_attention_ms(40, 1088) == pytest.approx(0.410, rel=0.05)
    assert m.linear_ms("mlp_up_proj", 4096) == pytest.approx(3.3448, rel=0.02)


def _req(prefill_done):
    return SimpleNamespace(is_prefill_complete=prefill_done, num_prefill_tokens=5)


def test_verify_requests_are_classified_by_prefill_state_not_query_count():
    batch = SimpleNamespace(
        requests=[_req(True), _req(False), _req(True)],
        num_q_tokens=[5, 5, 1], num_kv_tokens=[105, 5, 301], total_num_q_tokens=11,
    )
    comp = plan_of(batch).composition
    assert comp.decode_q == [5, 1] and comp.decode_ctx == [100, 300]
    assert comp.prefill == [(0, 5)]
    assert comp.max_guesses == 4


def test_verify_cost_bounds(target):
    rng = np.random.default_rng(0)
    lam = Interpolated(0.3)
    for _ in range(300):
        n = int(rng.integers(1, 200))
        q = rng.integers(1, 10, size=n).tolist()
        ctx = rng.integers(1, 4000, size=n).tolist()
        lo = SharedKV().attention_ms(target, q, ctx)
        hi = PerToken().attention_ms(target, q, ctx)
        mid = lam.attention_ms(target, q, ctx)
        assert lo <= mid <= hi
        assert mid == pytest.approx(0.3 * hi + 0.7 * lo)
    # plain decodes cost the same under every policy (per-token's one read is shared-KV's read, bit for bit)
    for n in (1, 3, 17, 200):
        q1 = [1] * n
        for ctx in (list(range(100, 100 + n)), rng.integers(1, 40000, size=n).tolist()):
            plain = SharedKV().attention_ms(target, q1, ctx)
            assert PerToken().attention_ms(target, q1, ctx) == plain
            assert lam.attention_ms(target, q1, ctx) == pytest.approx(plain)
    # a long draft at long context reads the KV many times
    assert PerToken().attention_ms(target, [9] * 32, [3000] * 32) > 3 * SharedKV().attention_ms(target, [9] * 32, [3000] * 32)


def test_proposer_costs(target):
    comp = StepComposition(num_tokens=13, decode_q=[5, 3, 1], decode_ctx=[100, 200, 300], prefill=[(0, 4)])
    plain = StepComposition(num_tokens=3, decode_q=[1, 1, 1], decode_ctx=[1, 2, 3], prefill=[])
    assert NgramProposer(0.2).step_time_ms(comp) == 0.2
    assert NgramProposer(0.2).step_time_ms(plain) == 0.0
    assert FixedProposer(0.5).step_time_ms(comp) == 2.0  # 4 rounds for the longest draft
    drafter = load_time_model(*locate_profile("shipped", "a100", "JackFram/llama-160m"))
    d = DraftModelProposer(drafter, 12)
    four = d.step_time_ms(comp)
    assert four > 0
    more = StepComposition(num_tokens=17, decode_q=[9, 3, 1], decode_ctx=[100, 200, 300], prefill=[(0, 4)])
    assert d.step_time_ms(more) > four  # more sequential passes
    only_prefill = StepComposition(num_tokens=512, decode_q=[], decode_ctx=[], prefill=[(0, 512)])
    assert d.step_time_ms(only_prefill) > 0  # the drafter prefills prompts too


# --------------------------------------------------------------------------- memory


def test_weight_and_kv_formulas_agree_with_vidur():
    rc = ReplicaConfig(model_name=LLAMA7, num_pipeline_stages=1, tensor_parallel_size=1,
                       device="a100", network_device="a100_pairwise_nvlink")
    spec = get_model(LLAMA7)
    assert spec.params_per_layer() * spec.num_layers == ParamCounter(rc).get_num_parameters_per_device()
    planner = MemoryPlanner(rc, CacheConfig())
    assert spec.kv_bytes_per_token() == planner._get_kv_cache_memory_per_device_per_token()


def test_draft_model_memory_shrinks_target_blocks():
    spec = get_model(LLAMA7)
    alone = memory.plan(spec, "a100", 16, 0.1)
    with_draft = memory.plan(spec, "a100", 16, 0.1, draft=get_model("JackFram/llama-160m"))
    big_draft = memory.plan(spec, "a100", 16, 0.1, draft=get_model("TinyLlama/TinyLlama-1.1B-Chat-v1.0"))
    assert big_draft.num_blocks < with_draft.num_blocks < alone.num_blocks
    assert alone.draft_blocks == 0 and with_draft.draft_blocks == with_draft.num_blocks
    # the formula of docs/model.md, by hand
    d = get_model("JackFram/llama-160m")
    free = alone.usable_bytes - memory.weight_bytes(spec) - memory.weight_bytes(d)
    assert with_draft.num_blocks == free // (16 * (spec.kv_bytes_per_token() + d.kv_bytes_per_token()))
    # close to Vidur's 7,424 blocks (which rounds down to whole 4096-token sequences)
    assert 7424 <= alone.num_blocks < 7424 + 256


def test_memory_that_cannot_hold_the_weights_is_an_error():
    with pytest.raises(ValueError, match="no room"):
        memory.plan(get_model("meta-llama/Llama-2-70b-hf"), "a100", 16, 0.1)


def test_known_models_are_consistent():
    for spec in KNOWN_MODELS.values():
        assert spec.hidden_size % spec.num_heads == 0
        assert spec.num_heads % spec.num_kv_heads == 0


def test_acceptance_streams_are_not_the_workload_stream():
    acc = AcceptanceModel(pmf_from_rates([0.8] * 4), seed=0)
    workload_stream = np.random.default_rng([0, 1]).random(50)
    for i in range(4):
        assert not np.array_equal(acc.stream(i, 50), workload_stream)
