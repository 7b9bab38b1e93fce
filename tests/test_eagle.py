"""EAGLE / EAGLE-3 / MTP / Medusa heads, token trees, and acceptance inputs."""

import json
import subprocess
import sys

import pytest
import yaml

from conftest import REPO, run_command
from vidur_specdec import simulate
from vidur_specdec.speculation.acceptance import alpha_from_mean_length, expected_tokens_per_step
from vidur_specdec.config import ConfigError
from vidur_specdec.engine.resolve import load
from vidur_specdec.hardware.devices import get_device
from vidur_specdec.costs.fit_cache import load_time_model
from vidur_specdec.costs.profile_files import locate_profile
from vidur_specdec.pricing.plan import StepComposition
from vidur_specdec.speculation.proposers.base import ProposerContext
from vidur_specdec.speculation.proposers.eagle import EagleProposer
from vidur_specdec.speculation.proposers.eagle3 import Eagle3Proposer
from vidur_specdec.speculation.proposers.heads import KNOWN_HEADS
from vidur_specdec.speculation.tree import parse_tree
from vidur_specdec.costs.verify_cost import SharedKV

HEAD3 = str(REPO / "configs/heads/eagle3-llama2-7b.yaml")


def batch1(n=12, out=96, prompt=128, **spec):
    cfg = {"seed": 3, "workload": {"num_requests": n, "arrival": "static",
                                   "prompt_tokens": {"dist": "fixed", "value": prompt},
                                   "output_tokens": {"dist": "fixed", "value": out}},
           "scheduler": {"batch_size_cap": 1}, "speculative": spec}
    return cfg


@pytest.fixture(scope="module")
def target():
    return load_time_model(*locate_profile("shipped", "a100", "meta-llama/Llama-2-7b-hf"))


def _bound(p):
    p.bind(ProposerContext(get_device("a100"), 1))
    return p


# --------------------------------------------------------------------------- heads


def test_eagle3_drafts_faster_than_eagle_on_a_128k_vocabulary(target):
    # Llama-3.1-8B heads, priced with a layer of the Llama-2-7B profile on both sides: only the heads differ
    e = _bound(EagleProposer(KNOWN_HEADS["yuhuili/EAGLE-LLaMA3.1-Instruct-8B"], target, SharedKV()))
    e3 = _bound(Eagle3Proposer(KNOWN_HEADS["yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"], target, SharedKV()))
    for k in range(1, 6):
        for b in (1, 8, 32):
            comp = StepComposition(b * (k + 1), [k + 1] * b, [800] * b, [], [2] * b)
            assert e3.step_time_ms(comp) < e.step_time_ms(comp), (k, b)


def test_draft_time_grows_with_k_and_first_pass_carries_catch_up(target):
    e = _bound(EagleProposer(KNOWN_HEADS["yuhuili/EAGLE-llama2-chat-7B"], target, SharedKV()))
    times = [e.step_time_ms(StepComposition(k + 1, [k + 1], [500], [], [1])) for k in range(1, 6)]
    assert all(b > a for a, b in zip(times, times[1:]))
    one = e.step_time_ms(StepComposition(4, [4], [500], [], [1]))
    four = e.step_time_ms(StepComposition(4, [4], [500], [], [4]))
    assert four > one  # 4 catch-up tokens in pass 1 cost more than 1


def test_head_weights_and_kv_count_against_memory():
    base = simulate(batch1(n=2, out=8, method="ngram", num_speculative_tokens=3)).summary
    eagle = simulate(batch1(n=2, out=8, method="eagle", num_speculative_tokens=3)).summary
    assert eagle["kv_blocks_target"] < base["kv_blocks_target"]
    w, kv = KNOWN_HEADS["yuhuili/EAGLE-llama2-chat-7B"].memory_bytes(1)
    assert eagle["memory"]["draft_weight_bytes"] == w and eagle["memory"]["draft_kv_bytes_per_token"] == kv
    assert kv == 2 * 2 * 128 * 32  # one layer's K and V, fp16


def test_must_hold_eagle3_mean_acceptance_length_at_batch_1():
    res = simulate(batch1(n=40, out=256, method="eagle3", num_speculative_tokens=3,
                          mean_acceptance_length=2.8, model=HEAD3))
    s = res.summary
    assert abs(s["mean_acceptance_length"] - 2.8) / 2.8 < 0.02, s["mean_acceptance_length"]
    r = res.requests
    assert (r["output_tokens"] == 1 + r["decode_steps"] + r["accepted_tokens"]).all()
    d = res.steps[res.steps["guesses"] > 0]
    assert (d["draft_ms"] > 0).all() and (d["verify_ms"] > 0).all()


def test_bad_head_inputs_are_one_line(tmp_path):
    with pytest.raises(ConfigError, match=r"^speculative.model: unknown head"):
        simulate(batch1(method="eagle", num_speculative_tokens=2, model="nobody/no-head"))
    with pytest.raises(ConfigError, match=r"^speculative.model: .*hidden 4096 / vocab 128256"):
        simulate(batch1(method="eagle", num_speculative_tokens=2, model="yuhuili/EAGLE-LLaMA3.1-Instruct-8B"))
    with pytest.raises(ConfigError, match=r"^speculative.num_speculative_tokens: .* 5 heads"):
        simulate(batch1(method="medusa", num_speculative_tokens=6))


# --------------------------------------------------------------------------- trees


def test_tree_parsing_and_validation():
    t = parse_tree("[(0,), (1,), (0, 0), (0, 1), (1, 0), (0, 0, 0)]")
    assert t.num_nodes == 6 and t.levels == (2, 3, 1) and t.depth == 3
    assert parse_tree([[0], [0, 0]]).levels == (1, 1)
    from vidur_specdec.config import parse_set

    _, unquoted = parse_set("speculative.speculative_token_tree=[(0,), (1,), (0, 0)]")  # YAML splits it
    assert parse_tree(unquoted).levels == (2, 1)
    for bad, why in (("[(0,), (0, 0, 0)]", "no parent"), ("[(0,), (0,)]", "twice"), ("[(1,)]", "elder sibling"),
                     ("[(0,), ()]", "non-empty"), ("[[0], [-1]]", "non-empty"), ("(0", "not a list")):
        with pytest.raises(ConfigError, match=why) as e:
            parse_tree(bad)
        assert str(e.value).startswith("speculative.speculative_token_tree:") and "\n" not in str(e.value)


def test_tree_with_n_nodes_charges_n_plus_1_query_tokens():
    tree = "[(0,), (1,), (2,), (0, 0), (1, 0), (0, 0, 0)]"  # N = 6, depth 3
    res = simulate(batch1(n=6, out=64, method="eagle", num_speculative_tokens=6, speculative_token_tree=tree,
                          acceptance_histogram=[0.2, 0.3, 0.3, 0.2]))
    s = res.steps
    dec = s[s["prefill_tokens"] == 0]
    spec = dec[dec["guesses"] > 0]
    assert len(spec) > 50 and (spec["num_tokens"] == 7 * spec["decode_reqs"]).all()
    assert (spec["guesses"] == 6).all() and (spec["accepted_tokens"] <= 3).all()
    r = res.requests
    assert (r["output_tokens"] == 1 + r["decode_steps"] + r["accepted_tokens"]).all()
    # one draft pass per level: deeper trees draft longer than a bushy tree of the same size
    bushy = simulate(batch1(n=6, out=64, method="eagle", num_speculative_tokens=6,
                            speculative_token_tree="[(0,), (1,), (2,), (3,), (4,), (5,)]",
                            acceptance_histogram=[0.5, 0.5])).steps
    assert bushy[bushy["guesses"] > 0]["draft_ms"].median() < spec["draft_ms"].median()


def test_bad_tree_configs_are_one_line():
    with pytest.raises(ConfigError, match=r"^speculative.num_speculative_tokens: must equal the token tree's"):
        load(batch1(method="eagle", num_speculative_tokens=3, speculative_token_tree="[(0,), (1,)]"))
    with pytest.raises(ConfigError, match=r"^speculative.speculative_token_tree: does nothing with speculative.method"):
        load(batch1(method="ngram", num_speculative_tokens=2, speculative_token_tree="[(0,), (1,)]"))


# --------------------------------------------------------------------------- acceptance


def test_mean_acceptance_length_to_alpha():
    for k in (1, 3, 5, 8):
        for L in (1.0, 1.5, 2.8, k + 0.5, k + 1.0):
            if L > k + 1:
                continue
            a = alpha_from_mean_length(L, k)
            assert expected_tokens_per_step(a, k) == pytest.approx(L, abs=1e-9)
    with pytest.raises(ConfigError, match=r"^speculative.mean_acceptance_length: at most k = 3 \+ 1 = 4"):
        load(batch1(method="ngram", num_speculative_tokens=3, mean_acceptance_length=4.5))


def test_acceptance_spread_keeps_the_mean_rate_and_varies_requests():
    cfg = batch1(n=60, out=200, method="ngram", num_speculative_tokens=4, acceptance_rate=0.6)
    flat = simulate(cfg).requests
    cfg["speculative"]["acceptance_spread"] = 0.25
    spread = simulate(cfg).requests
    rate = lambda r: r["accepted_tokens"] / r["guesses"]  # noqa: E731
    assert rate(spread).std() > 2 * rate(flat).std()
    assert simulate(cfg).requests.equals(spread)  # deterministic
    with pytest.raises(ConfigError, match=r"^speculative.acceptance_spread: must be below"):
        load(batch1(method="ngram", num_speculative_tokens=4, acceptance_rate=0.9, acceptance_spread=0.4))


def _trace(tmp_path, lines):
    p = tmp_path / "trace.jsonl"
    p.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return str(p)


def test_trace_replay_accepts_exactly_what_the_trace_says(tmp_path):
    runs = [[0, 3, 2, 1, 0, 5, 4, 3, 2, 1, 0, 0, 1, 0], [0, 0, 0, 2, 1, 0, 9, 8, 7, 6, 5, 4]]
    trace = _trace(tmp_path, [{"prompt_tokens": 40, "output_tokens": len(r), "accept_run": r} for r in runs])

    def expected(run, k):  # walk the trace by hand
        p, acc, steps = 1, [], 0
        while p < len(run):
            g = min(k, len(run) - p - 1)
            a = min(run[p], g)
            acc.append(a)
            p += a + 1
            steps += 1
        return acc

    for k in (3, 5):
        res = simulate(batch1(n=2, method="eagle", num_speculative_tokens=k, acceptance_trace=trace))
        r = res.requests
        assert r["prompt_tokens"].tolist() == [40, 40] and r["output_tokens"].tolist() == [14, 12]
        for i, run in enumerate(runs):
            want = expected(run, k)
            assert r["accepted_tokens"][i] == sum(want) and r["decode_steps"][i] == len(want)
        assert (r["output_tokens"] == 1 + r["decode_steps"] + r["accepted_tokens"]).all()
        # the profile a run builds and the one sweeps digest see the same (trace) lengths
        from vidur_specdec.engine import deployment
        from vidur_specdec.engine.resolve import load

        cfg = load(batch1(n=2, method="eagle", num_speculative_tokens=k, acceptance_trace=trace))
        assert deployment.longest_request_tokens(cfg) == 40 + 14 + k
        s = res.steps
        got = s.loc[s["decode_reqs"] > 0, "accepted_tokens"].tolist()
        assert got == expected(runs[0], k) + expected(runs[1], k)  # batch 1, requests in order


def test_bad_trace_is_one_line_and_writes_nothing(tmp_path):
    trace = _trace(tmp_path, [{"prompt_tokens": 4, "output_tokens": 3, "accept_run": [0, 1, 0]},
                              {"prompt_tokens": 4, "output_tokens": 5, "accept_run": [0, 1]}])
    out = tmp_path / "out"
    p = run_command("--config", "configs/default.yaml", "--output-dir", str(out),
                        "--set", "speculative.method=eagle", "--set", f"speculative.acceptance_trace={trace}",
                        "--set", "workload.num_requests=3", module="vidur_specdec.main")
    assert p.returncode == 2
    assert p.stderr.strip() == (f"error: speculative.acceptance_trace: {trace} line 2: accept_run has 2 entries; "
                                "output_tokens is 5")
    assert not out.exists() or not any(out.iterdir())


def test_converter_from_tokens_table(tmp_path):
    import pandas as pd

    from vidur_specdec.speculation.acceptance_trace import from_tokens_table

    # request 7, k = 3: step 1 keeps 2 of 3, step 2 keeps 3 of 3, step 3 keeps 0 of 3
    rows = []
    for step, acc in ((1, [1, 1, 0]), (2, [1, 1, 1]), (3, [0, 0, 0])):
        rows += [{"step": step, "req": 7, "draft_pos": j + 1, "accepted": a} for j, a in enumerate(acc)]
    lines = from_tokens_table(pd.DataFrame(rows), prompt_tokens=30)
    assert [{k: v for k, v in d.items() if k in ("prompt_tokens", "output_tokens", "accept_run")}
            for d in lines] == [{"prompt_tokens": 30, "output_tokens": 1 + 3 + 4 + 1,
                                 "accept_run": [0, 2, 1, 0, 3, 2, 1, 0, 0]}]
    assert lines[0]["proposed"] == [0, 3, 2, 1, 3, 2, 1, 1, 3]
    tokens = tmp_path / "tokens.csv"
    pd.DataFrame(rows).to_csv(tokens, index=False)
    out = tmp_path / "trace.jsonl"
    p = subprocess.run([sys.executable, "-m", "vidur_specdec.speculation.acceptance_trace", str(tokens), str(out),
                        "--prompt-tokens", "30"], capture_output=True, text=True, cwd=REPO)
    assert p.returncode == 0, p.stderr
    # replayed at the recorded k, the trace gives back the recorded acceptance
    res = simulate(batch1(n=1, method="eagle", num_speculative_tokens=3, acceptance_trace=str(out)))
    assert res.steps.loc[res.steps["decode_reqs"] > 0, "accepted_tokens"].tolist() == [2, 3, 0]


@pytest.mark.parametrize("fields, message", [
    ({"hidden_size": 4096}, "missing head field 'method'"),
    ({"method": "eagle"}, "missing head field 'hidden_size'"),
    ({"method": "lookahead", "hidden_size": 4096}, "method must be one of eagle, eagle3, mtp, medusa"),
])
def test_head_yaml_without_its_required_fields_is_one_line(tmp_path, fields, message):
    head = tmp_path / "h.yaml"
    head.write_text(yaml.safe_dump(fields))
    out = tmp_path / "out"
    p = run_command("--config", "configs/default.yaml",
                        "--output-dir", str(out), "--set", "speculative.method=eagle",
                        "--set", f"speculative.model={head}", "--set", "workload.num_requests=3", module="vidur_specdec.main")
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert p.stderr.startswith("error: speculative.model: ") and message in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1
    assert not out.exists() or not any(out.iterdir())


def test_converter_reads_truth_values_and_empty_run_keys_as_the_harness_does():
    """'yes'/'Yes' count as accepted and an all-empty run-key column keeps its rows (steplogs' rules)."""
    import pandas as pd

    from vidur_specdec.speculation.acceptance_trace import from_tokens_table

    t = pd.DataFrame({"c": [float("nan")] * 4, "req": [0, 0, 0, 0], "step": [1, 1, 2, 2],
                      "draft_pos": [0, 1, 0, 1], "accepted": ["yes", "no", "Yes", "yes"]})
    (line,) = from_tokens_table(t, 5)
    assert (line["prompt_tokens"], line["output_tokens"], line["accept_run"]) == (5, 6, [0, 1, 0, 2, 1, 0])
