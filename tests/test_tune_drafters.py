"""Which drafter: the candidates the library gives a target, each at its own published acceptance, as points."""

import pytest

from conftest import REPO
from vidur_specdec.config import ConfigError
from vidur_specdec.engine.resolve import load
from vidur_specdec.speculation.acceptance_source import acceptance_for
from vidur_specdec.tune.drafters import candidates, lines, setting
from vidur_specdec.tune.points import Setting, build_config, setting_overrides

L8B = ["device=h100", "model=meta-llama/Llama-3.1-8B-Instruct", "speculative.method=eagle3",
       "speculative.num_speculative_tokens=3", "speculative.acceptance_rate=0.7"]


@pytest.fixture(scope="module")
def cfg8b():
    return load(REPO / "configs" / "default.yaml", L8B)


def test_llama_8b_candidates_are_the_library_s_drafters_at_their_own_acceptance(cfg8b):
    ds, cands, skipped = candidates(cfg8b, 3)
    assert ds == "mt-bench"
    by = {c["label"]: c for c in cands}
    # the config's own drafter at the user's acceptance, then every drafter with MT-Bench rows of its own
    assert cands[0]["input"] == "yours" and cands[0]["label"] == "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B (your input)"
    assert {"RedHatAI/Llama-3.1-8B-Instruct-speculator.eagle3", "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B",
            "yuhuili/EAGLE-LLaMA3.1-Instruct-8B", "suffix"} <= set(by)
    for c in cands[1:]:
        assert c["rows"] and all(r["source"] and r["dataset"] == "mt-bench" for r in c["rows"])
        for k in (1, 2, 3):
            want = acceptance_for(cfg8b.model, c["drafter"], k, "mt-bench", c["method"], borrow=False,
                                  use=("temperature",))
            assert c["rates"][str(k)] == pytest.approx(list(want.rates), abs=1e-6)
    red = by["RedHatAI/Llama-3.1-8B-Instruct-speculator.eagle3"]
    assert red["mean_acceptance_length_at_k_max"] == pytest.approx(2.60, abs=0.05)  # vLLM's pinned 2.60 at k = 3
    assert red["acceptance_rule"] == "rates as published"
    # suffix decoding on MT-Bench, cited: its proposal rate comes from the same row
    assert by["suffix"]["proposal_rate"] == pytest.approx(0.126)
    # n-gram has no MT-Bench figure of its own: not ranked, named with the datasets it has
    ngram = next(x for x in skipped if x["drafter"] == "ngram")
    assert ngram["reason"].startswith("not ranked: no published acceptance for mt-bench") and "blazedit" in \
        ngram["reason"]


def test_a_candidate_point_changes_only_the_drafter_and_its_acceptance(cfg8b):
    _, cands, _ = candidates(cfg8b, 3)
    c = next(c for c in cands if c["drafter"] == "yuhuili/EAGLE-LLaMA3.1-Instruct-8B")
    s = setting(c, 2)
    assert s.label == "yuhuili/EAGLE-LLaMA3.1-Instruct-8B k=2"
    pt = build_config(cfg8b, setting_overrides(cfg8b, s))
    assert (pt.speculative.method, pt.speculative.model, pt.speculative.num_speculative_tokens) == (
        "eagle", "yuhuili/EAGLE-LLaMA3.1-Instruct-8B", 2)
    assert pt.speculative.acceptance_per_position == pytest.approx(c["rates"]["2"])
    assert pt.speculative.acceptance_rate is None or pt.speculative.acceptance_input() == "acceptance_per_position"
    assert pt.workload == cfg8b.workload and pt.scheduler == cfg8b.scheduler and pt.device == cfg8b.device
    sx = build_config(cfg8b, setting_overrides(cfg8b, setting(next(c for c in cands if c["method"] == "suffix"), 3)))
    assert sx.speculative.method == "suffix" and sx.speculative.model is None
    assert sx.speculative.proposal_rate == pytest.approx(0.126)
    assert setting(cands[0], 2) == Setting(2)  # your input: the config's own point


def test_a_target_the_library_does_not_know_is_refused_with_the_nearest():
    cfg = load({"speculative": {"method": "ngram"}})  # no acceptance given: the default alpha
    with pytest.raises(ConfigError, match="knows no drafter for meta-llama/Llama-2-7b-hf; nearest targets"):
        candidates(cfg, 3)  # Llama-2-7B at the default alpha: nothing to rank
    mine = load(REPO / "configs" / "default.yaml", ["speculative.method=ngram"])  # the user's own alpha 0.7
    assert [c["label"] for c in candidates(mine, 3)[1]] == ["ngram (your input)"]


def test_the_comparison_in_words():
    d = {"dataset": "mt-bench", "loads": [
        {"load": "1", "winner": "a", "ahead_by": 0.31, "ranking": [
            {"drafter": "a", "method": "eagle3", "k": 3, "value": 5.0, "tpot_speedup": 2.4},
            {"drafter": "b", "method": "suffix", "k": 1, "value": 6.55, "tpot_speedup": 1.1}]},
        {"load": "8", "winner": "a", "ahead_by": 0.042, "ranking": [
            {"drafter": "a", "method": "eagle3", "k": 3, "value": 9.0, "tpot_speedup": 2.1},
            {"drafter": "b", "method": "eagle", "k": 2, "value": 9.378, "tpot_speedup": 2.0}]}],
        "skipped": [{"drafter": "ngram", "method": "ngram",
                     "reason": "not ranked: no published acceptance for mt-bench (the library has blazedit)"}]}
    assert lines(d, "concurrency") == [
        "drafters at concurrency 1 on mt-bench: a (eagle3, k = 3) wins, 2.40x TPOT over no speculation, ahead of b "
        "(k = 1) by 31.0 %",
        "drafters at concurrency 8 on mt-bench: a (eagle3, k = 3) wins, 2.10x TPOT over no speculation, ahead of b "
        "(k = 2) by 4.2 %",
        "drafters: a leads at concurrency 1, 8 by 4.2-31.0 %",
        "drafter ngram (ngram) not ranked: no published acceptance for mt-bench (the library has blazedit)"]
