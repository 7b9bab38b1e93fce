"""Engine step logs (item 5): reading the layout, acceptance, step-time split, cost-model check."""

import json
import math

import numpy as np
import pandas as pd
import pytest
from validate_fixtures import MODEL, RUN, small_config, small_profiles, write_steplog_tree  # noqa: F401

from vidur_specdec.validate import steplog_read, steplogs
from vidur_specdec.validate.cli import main
from vidur_specdec.validate.cost import price_sums, pricer_for, split_sums


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    root = tmp_path_factory.mktemp("steplogs")
    truth = write_steplog_tree(root)
    return root, truth


def test_reads_layout_and_key_columns(tree):
    root, truth = tree
    steps = steplog_read.read_table(root, "steps")
    assert len(steps) == 400
    assert set(steplog_read.KEY) <= set(steps.columns)
    assert steps["target"].iloc[0] == RUN["target"]
    assert steplog_read.read_table(root, "steps", {"c": 999}).empty
    assert steplog_read.read_table(root, "nosuchtable") is None


def test_key_columns_inferred_from_path(tmp_path):
    write_steplog_tree(tmp_path, drop_key_columns=True, steps_n=20)
    steps = steplog_read.read_table(tmp_path, "steps")
    row = steps.iloc[0]
    assert (row["gpu"], row["target"], row["split"], row["drafter"], int(row["k"])) == (
        RUN["gpu"], RUN["target"], RUN["split"], RUN["drafter"], RUN["k"])


def test_acceptance_from_hist_recovers_alpha(tree):
    root, truth = tree
    pos, summ = steplogs.acceptance_from_hist(steplog_read.read_table(root, "steps"))
    assert len(summ) == 1
    s = summ.iloc[0]
    assert s["drafts"] == 400 * truth["decodes"]  # prefill first tokens were taken off hist[1]
    assert abs(s["alpha"] - truth["alpha"]) < 0.03
    assert s["drafted_fraction"] == pytest.approx(1.0)
    cond = pos.sort_values("position")["conditional_rate"].to_numpy()
    assert np.all(np.abs(cond - truth["alpha"]) < 0.06)


def test_acceptance_from_tokens_per_category(tree):
    root, truth = tree
    tokens = steplog_read.read_table(root, "tokens")
    outputs = steplog_read.read_table(root, "outputs")
    pos, summ = steplogs.acceptance_from_tokens(tokens, outputs)
    by_cat = summ.set_index("category")
    for cat, a in truth["cat_alphas"].items():
        assert abs(by_cat.loc[cat, "alpha"] - a) < 0.03, cat
        c = pos[(pos["category"] == cat)].sort_values("position")["conditional_rate"].to_numpy()
        assert np.all(np.abs(c - a) < 0.08), (cat, c)
    assert by_cat.loc["all", "drafts"] == 3000
    lo, hi = sorted(truth["cat_alphas"].values())
    assert lo < by_cat.loc["all", "alpha"] < hi


def test_step_time_split(tree):
    root, truth = tree
    steps = steplog_read.read_table(root, "steps")
    d = steplogs.step_durations(steps)
    t = truth["step_times"]
    assert d["fwd_ms"].to_numpy() == pytest.approx(t["fwd"])
    assert d["lm_head_ms"].to_numpy() == pytest.approx(t["lm_head"])
    assert d["sampling_ms"].to_numpy() == pytest.approx(t["sampling"])
    assert d["drafter_ms"].to_numpy() == pytest.approx(t["drafter"])
    assert d["other_ms"].to_numpy() == pytest.approx(0.2 + t["tail"])  # before the forward + after the drafter
    summary = steplogs.step_time_summary(steps, d)
    assert summary["fwd_ms_median"].iloc[0] == pytest.approx(t["fwd"])


def test_request_latency_from_chunks(tree):
    root, truth = tree
    lat = steplogs.request_latency(steplog_read.read_table(root, "requests"))
    assert len(lat) == len(truth["requests"])
    for got, want in zip(lat.to_dict("records"), truth["requests"]):
        for key in ("ttft_ms", "tpot_ms", "e2e_ms", "output_tokens"):
            assert got[key] == pytest.approx(want[key]), key
        assert got["decode_steps"] == want["chunks"] - 1
        assert got["accepted_tokens"] == want["output_tokens"] - want["chunks"]


def test_request_latency_with_epoch_times_has_no_ttft():
    df = pd.DataFrame({"question_id": ["a"], "chunks": [json.dumps([1, 2, 3])],
                       "times": [json.dumps([1.7e9 + 0.1, 1.7e9 + 0.12, 1.7e9 + 0.14])]})
    r = steplogs.request_latency(df).iloc[0]
    assert math.isnan(r["ttft_ms"]) and math.isnan(r["e2e_ms"])
    assert r["tpot_ms"] == pytest.approx(40 / 5, rel=1e-4)
    df["sent_at"] = 1.7e9
    r = steplogs.request_latency(df).iloc[0]
    assert r["ttft_ms"] == pytest.approx(100)


def test_split_sums_spreads_evenly():
    dq, dctx, pf = split_sums(num_reqs=4, decode_reqs=3, spec_tokens=10, prefill_tokens=100, ctx_tokens=1000)
    assert sorted(dq) == [4, 4, 5] and sum(dctx) == 1000 and max(dctx) - min(dctx) <= 1
    assert pf == [(0, 100)]
    dq, dctx, pf = split_sums(num_reqs=2, decode_reqs=0, spec_tokens=0, prefill_tokens=300, ctx_tokens=64)
    assert dq == [] and sum(c for c, _ in pf) == 64 and sum(n for _, n in pf) == 300


def test_step_pricer_reproduces_simulator_steps(small_profiles):  # noqa: F811
    """Fed the simulator's own steps table, validate's pricing of each row gives back its step times.

    Exact for decode-only steps (shared_kv prices the mean context, as the
    split does); mixed steps move prefill context onto decodes (see pricing/plan.py).
    """
    from vidur_specdec import simulate
    from vidur_specdec.engine.resolve import load

    cfg = small_config(small_profiles, num_requests=20, qps=20.0)
    res = simulate(cfg)
    pricer = pricer_for(load(cfg))
    steps = res.steps
    dec = steps[steps["prefill_tokens"] == 0]
    assert len(dec) > 20
    for r in dec.itertuples(index=False):
        p = price_sums(pricer, r.num_reqs, r.decode_reqs, r.guesses, r.prefill_tokens, r.ctx_tokens, r.num_tokens)
        assert p.verify_ms == pytest.approx(r.verify_ms, rel=1e-9)
        assert p.draft_ms == pytest.approx(r.draft_ms, rel=1e-9)
        # engine overhead counts the requests verifying with guesses, which an even split of guesses can change
        assert p.duration_ms == pytest.approx(r.duration_ms, rel=1e-3)
    mixed = steps[(steps["prefill_tokens"] > 0) & (steps["decode_reqs"] > 0)]
    for r in mixed.itertuples(index=False):
        p = price_sums(pricer, r.num_reqs, r.decode_reqs, r.guesses, r.prefill_tokens, r.ctx_tokens, r.num_tokens)
        assert p.verify_ms == pytest.approx(r.verify_ms, rel=0.05)


def test_step_check_against_a_log_made_from_the_simulator(small_profiles, tmp_path):  # noqa: F811
    from vidur_specdec import simulate
    from vidur_specdec.engine.resolve import load

    cfg = small_config(small_profiles, num_requests=12, qps=20.0)
    # the published step-log layout names our `guesses` column `spec_tokens`
    steps = simulate(cfg).steps.rename(columns={"guesses": "spec_tokens"})
    log = steps.assign(**{**RUN, "target": MODEL, "c": 4, "start": 1}, t_fwd=0.0, t_fwd_end=steps["verify_ms"],
                       t_lg0=steps["verify_ms"], t_lg1=steps["verify_ms"], t_samp=steps["verify_ms"],
                       t_d0=steps["verify_ms"], t_d1=steps["duration_ms"], t_end=steps["duration_ms"],
                       hist="[0]")
    path = tmp_path / "steps" / "x.csv"
    path.parent.mkdir(parents=True)
    log.to_csv(path, index=False)
    out = steplogs.analyze(tmp_path, pricer_for(load(cfg)))
    s = out["step_check_summary"].set_index("kind")
    assert s.loc["decode", "target_median_abs_pct_error"] < 1e-6
    assert s.loc["decode", "step_median_ratio"] == pytest.approx(1.0)
    assert s.loc["all", "steps"] == len(steps)


def test_steps_cli_writes_tables(tree, small_profiles, tmp_path, capsys):  # noqa: F811
    root, truth = tree
    from validate_fixtures import write_yaml

    cfg = write_yaml(tmp_path / "cfg.yaml", small_config(small_profiles))
    out = tmp_path / "out"
    rc = main(["steps", "--root", str(root), "--out", str(out), "--config", str(cfg), "--max-steps", "50"])
    assert rc == 0
    for name in ("acceptance", "acceptance_summary", "step_times", "step_check", "step_check_summary",
                 "request_latency", "runs"):
        assert (out / f"{name}.csv").is_file(), name
    assert len(pd.read_csv(out / "step_check.csv")) == 50
    summary = json.loads((out / "steps_summary.json").read_text())
    assert summary["outputs"]["runs"] == 2
    acc = pd.read_csv(out / "acceptance_summary.csv")
    assert set(acc["source"]) == {"hist", "tokens"}


def test_steps_cli_bad_root(tmp_path, capsys):
    rc = main(["steps", "--root", str(tmp_path / "missing"), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "--root" in err
    assert not (tmp_path / "o").exists()
    rc = main(["steps", "--root", str(tmp_path), "--out", str(tmp_path / "o")])
    assert rc == 2 and "no step-log tables" in capsys.readouterr().err


def test_parquet_tables(tmp_path):
    pytest.importorskip("pyarrow")
    truth = write_steplog_tree(tmp_path, fmt="parquet", steps_n=100)
    out = steplogs.analyze(tmp_path)
    s = out["acceptance_summary"]
    assert abs(s[s["source"] == "hist"]["alpha"].iloc[0] - truth["alpha"]) < 0.06
    assert len(out["request_latency"]) == len(truth["requests"])
