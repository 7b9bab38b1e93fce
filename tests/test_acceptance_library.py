"""The cited acceptance library: every row's fields, sources and rate/length consistency; the across-k model."""

import pytest

from vidur_specdec.speculation import across_k, library


def test_every_row_is_well_formed_and_cited():
    rows = library.rows()
    assert len(rows) >= 360
    problems = {r.line: library.row_problems(r) for r in rows}
    assert {line: p for line, p in problems.items() if p} == {}


def test_rates_agree_with_the_mean_length_where_both_are_given():
    both = [r for r in library.rows() if r.per_position]
    assert len(both) >= 8
    for r in both:  # n-gram and suffix rows: rates per proposing step, L over every step
        drafted = r.proposal_rate if r.proposal_rate is not None else 1.0
        assert abs(1 + drafted * sum(r.unconditional()) - r.mean_acceptance_length) <= library.CONSISTENCY_TOL, \
            r.describe()


def test_row_checks_catch_bad_rows(tmp_path):
    good = library.rows()[0]
    from dataclasses import replace

    assert library.row_problems(replace(good, source="a blog")) == ["source names no file@commit, issue, PR or paper"]
    assert any("disagrees" in p for p in library.row_problems(replace(good, mean_acceptance_length=3.0)))
    assert any("per-position rates for k" in p for p in library.row_problems(replace(good, k=4)))
    assert any("method" in p for p in library.row_problems(replace(good, method="lookahead")))
    bad = tmp_path / "lib.csv"
    bad.write_text(",".join(library.FIELDS[:-1]) + "\n")
    with pytest.raises(ValueError, match="columns"):
        library.read_library(bad)


def test_the_pairs_people_deploy_are_there():
    targets = {r.target for r in library.rows()}
    for t in ("meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.3-70B-Instruct", "Qwen/Qwen3-8B",
              "Qwen/Qwen3-235B-A22B-Instruct-2507", "openai/gpt-oss-20b", "deepseek-ai/DeepSeek-V3"):
        assert t in targets
    r = library.find(target="meta-llama/Llama-3.1-8B-Instruct",
                     drafter="RedHatAI/Llama-3.1-8B-Instruct-speculator.eagle3", dataset="mt-bench", k=3)
    assert [x.mean_acceptance_length for x in r] == [2.60]
    assert "test_acceptance_length.py@" in r[0].source


def test_constant_alpha_is_a_special_case_and_the_anchor_is_exact():
    rates = across_k.rates(0.7, 1.0, 4)
    assert list(rates) == [0.7] * 4
    for d in (0.8, 0.97, 1.1):
        a1 = across_k.alpha1_for(2.79, 3, d)
        assert across_k.mean_length(across_k.rates(a1, d, 3)) == pytest.approx(2.79, abs=1e-9)


def test_fitted_decays_and_held_out_error_beat_constant_alpha():
    assert across_k.decay("eagle3") < 1.0 and across_k.decay("mtp") < 1.0
    assert across_k.decay("draft_model") == 1.0  # no published curve: the constant-alpha rule
    rows = {r["family"]: r for r in across_k.held_out()}
    for fam in ("eagle3", "mtp", "ngram"):
        assert rows[fam]["model_mean"] < rows[fam]["constant_mean"]


def test_published_curve_at_k3_predicts_the_others():
    # vLLM's EAGLE-3 curve (yuhuili head, MT-Bench): L at k = 3 anchors the EAGLE-3 model
    curve = {r.k: r.mean_acceptance_length for r in library.find(
        drafter="yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", dataset="mt-bench") if "20780" in r.source}
    for k, published in curve.items():
        got = across_k.mean_length(across_k.rates_at("eagle3", k, curve[3], 3))
        assert got == pytest.approx(published, abs=0.05)


def test_the_held_out_table_in_the_docs_is_current():
    import importlib.util
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location("acceptance_across_k", root / "scripts" / "acceptance_across_k.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    text = (root / "docs" / "model.md").read_text()
    begin, end = mod.BEGIN, mod.END
    assert text[text.index(begin):text.index(end) + len(end)] == mod.block(), \
        "stale: run python scripts/acceptance_across_k.py --write"


def test_acceptance_subcommand_lists_and_filters(capsys):
    from vidur_specdec import cli

    assert cli.main(["acceptance", "--drafter", "RedHatAI/Llama-3.1-8B-Instruct-speculator.eagle3"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 2 and "L=2.6" in out[0] and "test_acceptance_length.py@" in out[0]
    assert out[1] == "1 rows, 1 (target, drafter, dataset) pairs"
    assert cli.main(["acceptance", "--contains", "no-such-model"]) == 2
    assert capsys.readouterr().err.startswith("error: acceptance: no row matches")
    assert cli.main(["acceptance", "--families"]) == 0
    assert "eagle3" in capsys.readouterr().out
