"""Proposals that may be empty or short (n-gram, suffix, traces with ``proposed``) and the trace converter."""

import copy
import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from vidur_specdec import simulate
from vidur_specdec.config import ConfigError
from vidur_specdec.engine.resolve import load

REPO = Path(__file__).resolve().parents[1]


def batch64(method="ngram", k=4, runner=None, **spec):
    """64 requests in flight, fixed lengths, H100 (shipped profile)."""
    cfg = {"seed": 5, "device": "h100",
           "workload": {"num_requests": 128, "arrival": "closed", "concurrency": 64,
                        "prompt_tokens": {"dist": "fixed", "value": 128},
                        "output_tokens": {"dist": "fixed", "value": 128}},
           "speculative": {"method": method, "num_speculative_tokens": k, "acceptance_rate": 0.7, **spec}}
    if runner:
        cfg["engine"] = {"model_runner": runner}
    return cfg


def _per_decode(res):
    d = res.steps[res.steps["decode_reqs"] > 0]
    return d["guesses"].sum() / d["decode_reqs"].sum()


def test_ngram_v1_charges_only_matching_steps():
    v1 = simulate(batch64(runner="v1", proposal_rate=0.3))
    full = simulate(batch64(runner="v1"))
    # 0.3 x 4 guesses per decode step, a little less near each request's end
    assert 1.1 < _per_decode(v1) < 1.25
    assert _per_decode(full) > 3.8
    # fewer tokens charged per step: steps are cheaper, and a request takes more of them
    dec = lambda r: r.steps[r.steps["decode_reqs"] > 0]  # noqa: E731
    assert dec(v1)["duration_ms"].mean() < dec(full)["duration_ms"].mean()
    r = v1.requests
    assert (r["output_tokens"] == 1 + r["decode_steps"] + r["accepted_tokens"]).all()


def test_ngram_v2_charges_k_and_accepts_nothing_without_a_match():
    v2 = simulate(batch64(runner="v2", proposal_rate=0.3))
    v1 = simulate(batch64(runner="v1", proposal_rate=0.3))
    assert _per_decode(v2) > 3.8  # every decode carries k
    # the same matches, so the same acceptance, but at k + 1 tokens charged per step
    a = lambda r: r.requests["accepted_tokens"].sum() / r.requests["decode_steps"].sum()  # noqa: E731
    assert a(v2) == pytest.approx(a(v1), rel=0.1)
    assert a(v2) < 0.5 * a(simulate(batch64(runner="v2")))


def test_rate_one_is_the_fixed_k_run_exactly():
    plain = simulate(batch64())
    for extra in ({"proposal_rate": 1.0}, {}):
        for runner in ("v1", "v2"):
            res = simulate(batch64(runner=runner, **extra))
            pd.testing.assert_frame_equal(res.steps, plain.steps)


def test_rate_zero_on_v1_is_plain_decoding():
    res = simulate(batch64(runner="v1", proposal_rate=0.0))
    assert res.steps["guesses"].sum() == 0 and res.requests["accepted_tokens"].sum() == 0


def test_proposals_are_deterministic_and_spread_keeps_the_mean():
    a = simulate(batch64(runner="v1", proposal_rate=0.5, proposal_spread=0.2))
    b = simulate(batch64(runner="v1", proposal_rate=0.5, proposal_spread=0.2))
    pd.testing.assert_frame_equal(a.steps, b.steps)
    per_req = a.requests["guesses"] / a.requests["decode_steps"]
    assert per_req.std() > simulate(batch64(runner="v1", proposal_rate=0.5)).requests["guesses"].div(
        a.requests["decode_steps"]).std()
    assert 1.5 < _per_decode(a) < 2.3


def test_prompt_lookup_min_longer_than_every_context_never_proposes():
    res = simulate(batch64(runner="v1", prompt_lookup_min=10_000))
    assert res.steps["guesses"].sum() == 0


def test_suffix_proposes_variable_lengths_on_v1_whatever_the_runner():
    res = simulate(batch64(method="suffix", k=8, runner="v2", proposal_rate=0.6,
                           suffix_decoding_max_tree_depth=6))
    g = res.requests["guesses"].sum() / res.requests["decode_steps"].sum()
    # a match proposes min(8, m), m uniform in 1..6 (mean 3.5): 0.6 x 3.5 = 2.1 per decode step
    assert 1.8 < g < 2.3
    steps = res.steps[res.steps["decode_reqs"] == 1]  # lone decodes show single proposals
    assert (res.steps["guesses"] % 8 != 0).any() or not len(steps)


@pytest.mark.parametrize("spec, key", [
    ({"method": "eagle", "proposal_rate": 0.5},
     "speculative.proposal_rate: does nothing with speculative.method eagle; read only with speculative.method ngram"),
    ({"method": "ngram", "prompt_lookup_min": 6, "prompt_lookup_max": 3},
     "speculative.prompt_lookup_min: must be <= prompt_lookup_max (3), got 6"),
    ({"method": "suffix", "prompt_lookup_min": 3},
     "speculative.prompt_lookup_min: does nothing with speculative.method suffix; read only with speculative.method ngram"),
    ({"method": "ngram", "proposal_rate": 0.9, "proposal_spread": 0.4}, "speculative.proposal_spread: must be below"),
    ({"method": "ngram", "proposal_rate": 1.5}, "speculative.proposal_rate: must be a number in [0, 1]"),
])
def test_bad_proposal_keys_name_the_key(spec, key):
    cfg = batch64()
    cfg["speculative"].update(spec)
    with pytest.raises(ConfigError) as e:
        load(cfg)
    assert str(e.value).startswith(key) and "\n" not in str(e.value)


def test_bad_model_runner_names_the_key():
    with pytest.raises(ConfigError, match=r"^engine.model_runner: "):
        load(batch64(runner="v3"))


# --------------------------------------------------------------------------- traces carry proposals


def test_trace_zeros_charge_one_token(tmp_path):
    run = [0, 2, 1, 0, 3, 2, 1, 0, 1, 0, 0, 0]
    proposed = [0, 0, 0, 3, 3, 3, 3, 3, 0, 0, 3, 3]
    trace = tmp_path / "t.jsonl"
    trace.write_text(json.dumps({"prompt_tokens": 20, "output_tokens": len(run), "accept_run": run,
                                 "proposed": proposed}) + "\n")
    cfg = {"seed": 1, "workload": {"num_requests": 1, "arrival": "static"}, "scheduler": {"batch_size_cap": 1},
           "speculative": {"method": "eagle", "num_speculative_tokens": 3, "acceptance_trace": str(trace)}}
    s = simulate(cfg).steps
    s = s[s["decode_reqs"] > 0]
    # positions 1, 2 no draft (1 token each); 3: 3 guesses keep 0; 4: keep 3; 8, 9 no draft;
    # 10: keep 0 of 1 (one token left to guess); 11: the last token, nothing to guess
    assert s["guesses"].tolist() == [0, 0, 3, 3, 0, 0, 1, 0]
    assert s["accepted_tokens"].tolist() == [0, 0, 0, 3, 0, 0, 0, 0]


def test_trace_proposed_of_wrong_length_is_one_line(tmp_path):
    trace = tmp_path / "t.jsonl"
    trace.write_text(json.dumps({"prompt_tokens": 4, "output_tokens": 3, "accept_run": [0, 1, 0],
                                 "proposed": [0, 1]}) + "\n")
    from vidur_specdec.speculation.acceptance_trace import read_trace

    with pytest.raises(ConfigError, match="line 1: proposed has 2 entries; output_tokens is 3"):
        read_trace(trace)


def _steplog(tmp_path):
    """A tokens + outputs dataset as the step-log card lays it out (native-list Parquet).

    Two runs (drafters ngram k=3 and eagle3 k=3) share request index 0. In the
    n-gram run request 0 (prompt 50, 12 output tokens) has steps with 3, 2 and
    1 guesses and steps with no draft (no rows); request 1 (prompt 9, 4 tokens)
    never drafts. The last draft crosses the end (output ends at 12).
    """
    key = {"gpu": "h100", "target": "meta-llama/Llama-3.1-8B-Instruct", "split": "qualitative", "c": 1, "start": 0}
    rows = []

    def step(run, n, req, prompt, p, acc):
        for j, a in enumerate(acc):
            rows.append({**key, **run, "step": n, "req": req, "draft_pos": j + 1, "ctx": prompt + p + j,
                         "out_pos": p + j, "accepted": a, "token": 7})

    ng = {"drafter": "ngram", "k": 3}
    # out_pos 1: no draft; 2: 3 guesses keep 2 (advances to 5); 5: no draft; 6: 2 guesses keep 0;
    # 7: 1 guess keeps 1 (advances to 9); 9..10: no draft; 11: 3 guesses keep 3 but output ends at 12
    step(ng, 2, 0, 50, 2, [True, True, False])
    step(ng, 4, 0, 50, 6, [False, False])
    step(ng, 5, 0, 50, 7, [True])
    step(ng, 8, 0, 50, 11, [True, True, True])
    ea = {"drafter": "eagle3", "k": 3}
    step(ea, 1, 0, 30, 1, [True, False, False])
    tokens = pd.DataFrame(rows)
    outputs = pd.DataFrame([
        {**key, **ng, "req": 0, "prompt_tokens": 50, "output_ids": list(range(12))},
        {**key, **ng, "req": 1, "prompt_tokens": 9, "output_ids": list(range(4))},
        {**key, **ea, "req": 0, "prompt_tokens": 30, "output_ids": list(range(3))},
    ])
    root = tmp_path / "ds"
    for name, df in (("tokens", tokens), ("outputs", outputs)):
        for drafter, part in df.groupby("drafter"):
            d = root / name / "h100" / "meta-llama" / "Llama-3.1-8B-Instruct" / "qualitative" / f"{drafter}-k3"
            d.mkdir(parents=True)
            part.to_parquet(d / "part-0.parquet")
    return root, tokens, outputs


def test_converter_places_steps_by_out_pos_and_keeps_lengths(tmp_path):
    from vidur_specdec.speculation.acceptance_trace import from_tokens_table

    _, tokens, outputs = _steplog(tmp_path)
    lines = {(d["run"]["drafter"], d["run"]["req"]): d for d in from_tokens_table(tokens, outputs=outputs)}
    ng0 = lines[("ngram", 0)]
    assert (ng0["prompt_tokens"], ng0["output_tokens"]) == (50, 12)
    assert ng0["accept_run"] == [0, 0, 2, 1, 0, 0, 0, 1, 0, 0, 0, 3]
    assert ng0["proposed"] == [0, 0, 3, 2, 1, 0, 2, 1, 1, 0, 0, 3]
    assert (lines[("ngram", 1)]["output_tokens"], lines[("ngram", 1)]["proposed"]) == (4, [0, 0, 0, 0])
    assert lines[("ngram", 1)]["prompt_tokens"] == 9
    ea = lines[("eagle3", 0)]
    assert (ea["prompt_tokens"], ea["output_tokens"], ea["accept_run"]) == (30, 3, [0, 1, 0])
    # without an outputs table: prompt from ctx - out_pos, output up to the last step's end
    alone = {(d["run"]["drafter"], d["run"]["req"]): d for d in from_tokens_table(tokens)}
    assert alone[("ngram", 0)]["prompt_tokens"] == 50 and alone[("ngram", 0)]["output_tokens"] == 15


def test_converter_without_a_prompt_length_is_an_error():
    from vidur_specdec.speculation.acceptance_trace import from_tokens_table

    t = pd.DataFrame({"req": [0], "step": [1], "draft_pos": [1], "accepted": [True]})
    with pytest.raises(ConfigError, match="no prompt length for request 0"):
        from_tokens_table(t)


def test_converter_reads_a_directory_and_the_trace_replays_it(tmp_path):
    root, _, _ = _steplog(tmp_path)
    out = tmp_path / "trace.jsonl"
    p = subprocess.run([sys.executable, "-m", "vidur_specdec.speculation.acceptance_trace", str(root / "tokens"),
                        str(out)], capture_output=True, text=True, cwd=REPO)
    assert p.returncode == 0, p.stderr
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    ngram = [d for d in lines if d["run"]["drafter"] == "ngram"]
    assert sorted((d["prompt_tokens"], d["output_tokens"]) for d in ngram) == [(9, 4), (50, 12)]
    only = tmp_path / "ngram.jsonl"
    only.write_text("".join(json.dumps(d) + "\n" for d in ngram if d["run"]["req"] == 0))
    cfg = {"seed": 1, "workload": {"num_requests": 1, "arrival": "static"}, "scheduler": {"batch_size_cap": 1},
           "speculative": {"method": "ngram", "num_speculative_tokens": 3, "acceptance_trace": str(only)}}
    res = simulate(cfg)
    assert res.requests[["prompt_tokens", "output_tokens"]].values.tolist() == [[50, 12]]
    s = res.steps[res.steps["decode_reqs"] > 0]
    # replayed at the recorded k: the recorded guesses and acceptance, one token where nothing was drafted
    assert s["guesses"].tolist() == [0, 3, 0, 2, 1, 0, 0, 0]
    assert s["accepted_tokens"].tolist() == [0, 2, 0, 0, 1, 0, 0, 0]


def test_converter_missing_path_is_one_line(tmp_path):
    p = subprocess.run([sys.executable, "-m", "vidur_specdec.speculation.acceptance_trace",
                        str(tmp_path / "nope"), str(tmp_path / "o.jsonl")], capture_output=True, text=True, cwd=REPO)
    assert p.returncode == 2 and p.stderr.strip() == f"error: tokens: file not found: {tmp_path / 'nope'}"
