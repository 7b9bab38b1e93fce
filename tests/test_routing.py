import math

import numpy as np
import pytest

from vidur_specdec.costs import routing as r


def fit_rho(n_tokens: int, distinct: float, num_experts: int, top_k: int, zipf_s: float = 0.0) -> float:
    """rho at which one request's block of ``n_tokens`` wakes ``distinct`` experts (bisection)."""
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if r.expected_distinct([n_tokens], num_experts, top_k, mid, zipf_s) > distinct:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def step_groups(decodes: int = 0, verify_lengths=(), prefill_chunks=()) -> list:
    """Group sizes of a step: plain decodes, verify blocks of k guesses (k+1 tokens), prefill chunks."""
    return [1] * int(decodes) + [int(k) + 1 for k in verify_lengths] + [int(c) for c in prefill_chunks]


def test_uniform_independent_limit_closed_form():
    for E, k, n in [(8, 2, 1), (8, 2, 7), (128, 8, 6), (256, 8, 64)]:
        want = E * (1 - (1 - k / E) ** n)
        assert r.expected_distinct([1] * n, E, k, rho=0.0) == pytest.approx(want, rel=1e-12)
        assert r.expected_distinct([n], E, k, rho=0.0) == pytest.approx(want, rel=1e-12)  # rho 0: groups irrelevant


def test_single_token_wakes_top_k_and_full_locality_never_grows():
    assert r.expected_distinct([1], 256, 8) == pytest.approx(8)
    assert r.expected_distinct([50], 256, 8, rho=1.0) == pytest.approx(8)
    assert r.expected_distinct([1] * 3, 256, 8, rho=1.0) == pytest.approx(256 * (1 - (1 - 8 / 256) ** 3))


def test_monotone_and_bounded():
    prev = 0.0
    for n in range(1, 200, 7):
        d = r.expected_distinct([n], 128, 8)
        assert prev <= d <= 128
        prev = d
    # more locality, fewer experts; more skew, fewer experts
    assert r.expected_distinct([6], 128, 8, rho=0.8) < r.expected_distinct([6], 128, 8, rho=0.2)
    assert r.expected_distinct([1] * 32, 128, 8, rho=0, zipf_s=1.0) < r.expected_distinct([1] * 32, 128, 8, rho=0)


def test_default_rho_reproduces_calibration_point():
    # OpenVINO GenAI #4390: Qwen3-30B-A3B, 6-token verify block of one request ~ 24 experts
    assert r.expected_distinct([6], 128, 8) == pytest.approx(24, abs=0.5)
    assert fit_rho(6, 24, 128, 8) == pytest.approx(0.55, abs=0.01)


def test_marginals_sum_to_top_k_and_cap_at_one():
    p = np.asarray(r._marginals(16, 8, 3.0))
    assert p.sum() == pytest.approx(8)
    assert p.max() <= 1 + 1e-12 and (np.diff(p) <= 1e-12).all()


def test_ep_rank_loads_sum():
    g = np.array([1] * 32 + [4] * 8)
    (woken, _), (rows, _) = r._rank_loads(g, 256, 8, 8, r.DEFAULT_RHO, 0.8, "interleaved")
    assert woken.sum() == pytest.approx(r.expected_distinct(list(g), 256, 8, zipf_s=0.8))
    assert rows.sum() == pytest.approx(64 * 8)
    one = np.ones(32, dtype=int)
    _, (rows_c, _) = r._rank_loads(one, 256, 8, 8, r.DEFAULT_RHO, 0.8, "contiguous")
    _, (rows_i, _) = r._rank_loads(one, 256, 8, 8, r.DEFAULT_RHO, 0.8, "interleaved")
    assert rows_c.max() > rows_i.max()
    assert r.ep_busiest_rank([1] * 32, 256, 8, 8, zipf_s=0.8)[1] > r.ep_busiest_rank(
        [1] * 32, 256, 8, 8, zipf_s=0.8, placement="interleaved")[1]
    with pytest.raises(ValueError):
        r.ep_busiest_rank([1], 256, 8, ep=3)
    with pytest.raises(ValueError):
        r.ep_busiest_rank([1], 256, 8, ep=8, placement="striped")


def test_bad_inputs():
    for bad in (dict(num_experts=0, top_k=1), dict(num_experts=8, top_k=9)):
        with pytest.raises(ValueError):
            r.expected_distinct([1], **bad)
    with pytest.raises(ValueError):
        r.expected_distinct([0], 8, 2)
    with pytest.raises(ValueError):
        r.expected_distinct([1], 8, 2, rho=1.5)


def test_deterministic():
    g = step_groups(decodes=200, verify_lengths=[4] * 56, prefill_chunks=[512, 1024])
    # priced every MoE step: the distinct experts (any EP size), and the busiest EP rank (EP runs);
    # their cost per call is measured by benchmarks/bench_moe.py
    for call in (lambda: r.expected_distinct(g, 256, 8), lambda: r.ep_busiest_rank(g, 256, 8, 8)):
        assert call() == call()


def test_verify_block_wakes_more_than_one_token_and_never_more_than_the_model_has():
    for E, k in ((128, 8), (8, 2), (256, 8), (32, 4)):
        one = r.expected_distinct([1], E, k)
        for guesses in (1, 3, 5, 7):
            block = r.expected_distinct([guesses + 1], E, k)
            assert one < block <= E
            # a block of one request shares experts: fewer than as many separate decodes
            assert block < r.expected_distinct([1] * (guesses + 1), E, k)


def test_large_batch_wakes_almost_every_expert():
    for E, k in ((128, 8), (256, 8), (8, 2)):
        assert r.expected_distinct([1] * 256, E, k) > 0.99 * E
        assert r.expected_distinct([2048], E, k) > 0.95 * E  # a long prefill chunk too


def test_held_out_unique_expert_ratios_stay_within_a_third():
    # vLLM RFC 46295: unique experts over K=0 ~1.3x (K=1), ~3.2x (K=4), ~6.1x (K=8) on an
    # (unnamed) 256-expert top-8 model; the default locality gives 1.44x / 2.71x / 4.32x
    for K, want in ((1, 1.3), (4, 3.2), (8, 6.1)):
        got = r.expected_distinct([K + 1], 256, 8) / 8
        assert abs(got - want) / want < 0.33


def test_published_skew_is_the_fit_of_the_cited_loads():
    """PUBLISHED_ZIPF_S is the Zipf exponent whose 256 popularities vary as much as the cited per-expert loads."""
    assert len(r.PUBLISHED_LOADS) == 16
    assert r.fit_zipf_s() == pytest.approx(r.PUBLISHED_ZIPF_S, abs=0.005)
    cv = lambda x: float(np.std(x) / np.mean(x))  # noqa: E731
    w = np.arange(1, 257) ** -r.PUBLISHED_ZIPF_S
    assert cv(w) == pytest.approx(cv(r.PUBLISHED_LOADS), abs=0.01)


def test_moe_routing_picks_the_popularity_and_a_dense_model_refuses_it():
    import dataclasses

    from vidur_specdec.architectures.errors import ModelError
    from vidur_specdec.architectures.models import KNOWN_MODELS
    from vidur_specdec.architectures.parse import model_from_dict

    qwen = KNOWN_MODELS["Qwen/Qwen3-30B-A3B"]
    assert r.zipf_of(qwen) == 0.0 and "moe_routing" not in qwen.to_dict()
    skewed = dataclasses.replace(qwen, moe_routing="zipf")
    assert r.zipf_of(skewed) == r.PUBLISHED_ZIPF_S
    assert model_from_dict(skewed.to_dict()) == skewed
    assert r.expected_distinct([1] * 16, 128, 8, zipf_s=r.zipf_of(skewed)) < r.expected_distinct([1] * 16, 128, 8)
    assert "Zipf s 0.45" in r.describe(skewed) and r.describe(qwen).startswith("uniform (every expert alike")
    with pytest.raises(ModelError, match="moe_routing must be one of uniform, zipf"):
        model_from_dict({**qwen.to_dict(), "moe_routing": "power_law"})
    dense = KNOWN_MODELS["meta-llama/Llama-3.1-8B"].to_dict()
    with pytest.raises(ModelError, match="moe_routing zipf needs routed experts; .* is dense"):
        model_from_dict({**dense, "moe_routing": "zipf"})
