"""Per-batch-size k schedules (vLLM's num_speculative_tokens_per_batch_size): validation, lookup, simulation."""


import pandas as pd
import pytest

from conftest import each_batch, small, run_command
from vidur_specdec.config import ConfigError
from vidur_specdec.engine.resolve import from_dict
from vidur_specdec.speculation.schedule import KEY, KSchedule, config_warnings, parse
from vidur_specdec.engine.simulation import simulate


def with_schedule(schedule, **kw):
    cfg = small(**kw)
    cfg["speculative"]["num_speculative_tokens_per_batch_size"] = schedule
    return cfg


def test_dict_and_list_forms_are_one_schedule_sorted():
    d = parse({"17-64": 2, "1-16": 3, "65-4096": 0})
    assert d == parse([[65, 4096, 0], [1, 16, 3], [17, 64, 2]]) == [(1, 16, 3), (17, 64, 2), (65, 4096, 0)]
    a = from_dict(with_schedule({"1-16": 3, "17-64": 2})).to_dict()
    b = from_dict(with_schedule([[17, 64, 2], [1, 16, 3]])).to_dict()
    assert a == b and a["speculative"]["num_speculative_tokens_per_batch_size"] == [[1, 16, 3], [17, 64, 2]]


@pytest.mark.parametrize("schedule, where, words", [
    ([[1, 16, 3], [16, 32, 2]], "[1]", "overlaps"),
    ({"1-16": 3, "8-32": 2}, '["8-32"]', "overlaps"),
    ([[2, 16, 3]], "[0]", "must start at 1"),
    ({"2-16": 3, "17-32": 1}, '["2-16"]', "must start at 1"),
    ({"1_16": 3}, '["1_16"]', "malformed range key"),
    ({"1-x": 3}, '["1-x"]', "malformed range key"),
    ({"1-16": -1}, '["1-16"]', "k must be >= 0"),
    ([[1, 16, -2]], "[0]", "k must be >= 0"),
    ([[1, 16]], "[0]", "[lo, hi, k]"),
    ([[1, 16, 1, 100, 3]], "[0]", "5-item"),
    ([[1, 16, 2.5]], "[0]", "integer"),
    ([[16, 1, 2]], "[0]", "start 16 must be <= end 1"),
    ({}, "", "must not be empty"),
    ("1-16:3", "", "mapping"),
])
def test_bad_schedules_are_one_line_naming_the_entry(schedule, where, words):
    with pytest.raises(ConfigError) as e:
        from_dict(with_schedule(schedule))
    msg = str(e.value)
    assert msg.startswith(f"speculative.num_speculative_tokens_per_batch_size{where}:"), msg
    assert words in msg and "\n" not in msg


def test_lookup_follows_vllm_gaps_inherit_and_k_is_clamped():
    # the cases of vLLM's tests/v1/spec_decode/test_dynamic_sd.py
    s = KSchedule(parse([[1, 16, 3], [32, 128, 2], [256, 2048, 0]]), k_max=3, max_batch_size=256)
    assert [s.k_for(b) for b in (1, 16, 17, 31, 32, 128, 129, 255, 256)] == [3, 3, 3, 3, 2, 2, 2, 2, 0]
    assert s.k_for(0) == 3  # no request scheduled: the static k
    assert s.k_for(10_000) == 0
    c = KSchedule(parse([[1, 256, 4]]), k_max=3, max_batch_size=256)
    assert c.k_for(1) == c.k_for(256) == 3


def test_k_above_the_maximum_warns_once_per_range():
    cfg = from_dict(with_schedule({"1-8": 6, "9-4096": 2}, k=4))
    w = config_warnings(cfg.speculative)
    assert len(w) == 1 and '["1-8"]' in w[0] and "clamped to 4" in w[0]
    assert config_warnings(from_dict(with_schedule({"1-8": 4}, k=4)).speculative) == []


def test_steps_use_the_k_of_the_previous_steps_batch_size():
    sched = {"1-3": 4, "6-4096": 1}  # 4-5 is a gap: inherits 4
    res = simulate(with_schedule(sched, num_requests=60, qps=6.0, k=4))
    s = res.steps
    look = KSchedule(parse(sched), 4, 128)
    assert s["k"].iloc[0] == 4
    assert (s["k"].iloc[1:].to_numpy() == [look.k_for(n) for n in s["num_reqs"].iloc[:-1]]).all()
    assert set(s["k"]) == {1, 4}
    assert (s["guesses"] <= s["k"] * s["decode_reqs"]).all()
    assert res.summary["k_flips"] == int((s["k"].diff().fillna(0) != 0).sum()) > 0
    assert res.summary["num_speculative_tokens_per_batch_size"] == [[1, 3, 4], [6, 4096, 1]]


def test_schedule_of_zeros_is_plain_decoding_and_one_range_is_static_k():
    base = small(num_requests=40, k=0, method="none")
    zero = simulate(with_schedule({"1-4096": 0}, num_requests=40, k=4))
    plain = simulate(base)
    cols = ["request_id", "ttft_ms", "tpot_ms", "e2e_ms"]
    pd.testing.assert_frame_equal(zero.requests[cols], plain.requests[cols])
    assert (zero.steps["k"] == 0).all() if len(zero.steps) == 1 else (zero.steps["k"].iloc[1:] == 0).all()
    static = simulate(small(num_requests=40, k=3))
    one = simulate(with_schedule([[1, 4096, 3]], num_requests=40, k=3))
    pd.testing.assert_frame_equal(one.requests, static.requests)
    assert one.summary["k_flips"] == 0 and (one.steps["k"] == 3).all()


@pytest.mark.parametrize("method,lookahead", [("draft_model", 6), ("ngram", 0)])
def test_lookahead_kv_is_sized_by_the_static_maximum(method, lookahead):
    held, short = [], []

    def check(sched, batch):
        bs = sched._cache_config.block_size
        for req, q in zip(batch.requests, batch.num_q_tokens):
            if req.is_prefill_complete and (q > 1 or lookahead):  # a plain n-gram decode keeps Sarathi's rule
                have = sched._allocation_map[req.id] * bs
                assert have >= req.num_processed_tokens + q + lookahead
                held.append(q)
                short.append(have < req.num_processed_tokens + q + 6)

    with each_batch(check):
        res = simulate(with_schedule({"1-4096": 1}, num_requests=30, k=6, method=method))
    assert held and max(held) == 2 and (res.steps["k"].iloc[1:] == 1).all()
    assert any(short) == (lookahead == 0)  # n-gram holds no lookahead slots: some steps have fewer than k spare


def test_flip_warning_threshold():
    from vidur_specdec.engine.metrics import FLIP_WARN_FRACTION, flip_warning

    assert flip_warning({"k_flips": 5, "num_steps": 100}) == ""
    assert FLIP_WARN_FRACTION == 0.05 and "#49548" in flip_warning({"k_flips": 6, "num_steps": 100})


def _cli(*args):
    return run_command(*args)


def test_cli_warns_on_clamp_and_on_frequent_flips(tmp_path):
    import yaml

    # short requests arriving fast: the batch size crosses the 2|3 boundary often
    cfg = with_schedule({"1-2": 6, "3-4096": 0}, num_requests=40, qps=20.0, k=4)
    cfg["workload"]["output_tokens"] = {"dist": "uniform", "min": 8, "max": 24}
    cfg["workload"]["prompt_tokens"] = {"dist": "uniform", "min": 32, "max": 128}
    p = tmp_path / "c.yaml"
    p.write_text(yaml.safe_dump(cfg))
    r = _cli("--config", p, "--output-dir", tmp_path / "out")
    assert r.returncode == 0, r.stderr
    lines = [x for x in r.stderr.splitlines() if x.startswith("warning:")]
    assert any("clamped to 4" in x for x in lines)
    assert any("#49548" in x for x in lines)
    assert "k" in pd.read_csv(tmp_path / "out" / "steps.csv").columns
    bad = _cli("--config", p, "--output-dir", tmp_path / "bad", "--set",
               f'{KEY}={{"1-4": 2, "3-8": 1}}')
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and KEY in bad.stderr
    assert not (tmp_path / "bad").exists()


def test_k_flips_are_counted_within_each_replica():
    """Two replicas each holding their own k: interleaving their steps is not a flip."""
    import pandas as pd

    from vidur_specdec.engine.metrics import k_flips

    steps = pd.DataFrame({"replica": [0, 1, 0, 1, 0, 1], "k": [3, 1, 3, 1, 3, 2]})
    assert k_flips(steps) == 1  # replica 1: 1 -> 1 -> 2
    assert k_flips(steps.drop(columns="replica")) == 5


def test_a_schedule_with_a_token_tree_is_one_line():
    from vidur_specdec.config import ConfigError
    from vidur_specdec.engine.resolve import from_dict

    with pytest.raises(ConfigError, match=r"^speculative.num_speculative_tokens_per_batch_size: .*token_tree"):
        from_dict({"speculative": {"method": "eagle", "num_speculative_tokens": 3,
                                   "speculative_token_tree": [[0], [1], [0, 0]],
                                   "num_speculative_tokens_per_batch_size": {"1-16": 2}}})
