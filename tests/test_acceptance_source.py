"""Acceptance by name: the library's rows for a drafter, the across-k model, the factors, the default said aloud."""

from pathlib import Path
import json
import pytest

from vidur_specdec import load, simulate
from vidur_specdec.config import ConfigError
from vidur_specdec.speculation import acceptance_factors, across_k
from vidur_specdec.speculation.acceptance import AcceptanceModel
from vidur_specdec.speculation.acceptance_source import describe

L8 = ["model=meta-llama/Llama-3.1-8B-Instruct", "device=h100", "speculative.method=eagle3"]
REDHAT = "RedHatAI/Llama-3.1-8B-Instruct-speculator.eagle3"
SMALL = ["workload.num_requests=40", "workload.arrival=static", "workload.prompt_tokens.dist=fixed",
         "workload.prompt_tokens.value=256", "workload.output_tokens.dist=fixed", "workload.output_tokens.value=256"]


def test_published_pair_draws_the_published_length_and_cites_it():
    r = simulate(None, L8 + SMALL + [f"speculative.model={REDHAT}", "speculative.num_speculative_tokens=3",
                                     "speculative.acceptance_source=published", "workload.dataset=mt-bench"])
    s = r.summary
    assert abs(s["mean_acceptance_length"] - 2.60) < 0.05
    assert s["acceptance_source"] == "published"
    assert "tests/v1/spec_decode/test_acceptance_length.py@" in s["acceptance_rows"][0]["source"]
    assert s["acceptance_model"]["how"] == "rates as published"
    json.dumps(s)  # summary.json is written from it


def test_a_length_at_another_k_follows_the_family_model_not_one_alpha():
    from vidur_specdec.speculation.acceptance import alpha_from_mean_length, expected_tokens_per_step

    got = []
    for k in range(1, 9):
        cfg = load(None, L8 + [f"speculative.num_speculative_tokens={k}", "speculative.mean_acceptance_length=2.79",
                               "speculative.acceptance_at_k=3"])
        model = AcceptanceModel.from_config(cfg.speculative, 0)
        got.append(1 + model.mean_accepted)
        assert cfg.speculative.acceptance_per_position == across_k.rates_at("eagle3", k, 2.79, 3)
        assert describe(cfg)["acceptance_model"]["family"] == "eagle3"
    assert got[2] == pytest.approx(2.79, abs=1e-9)
    alpha = alpha_from_mean_length(2.79, 3)
    assert got[7] < expected_tokens_per_step(alpha, 8) - 0.2  # the constant-alpha rule is well above at k = 8
    assert got == sorted(got)


def test_acceptance_given_directly_is_untouched():
    cfg = load(None, L8 + ["speculative.mean_acceptance_length=2.79", "speculative.num_speculative_tokens=3"])
    assert cfg.speculative.acceptance_source == "given"
    assert cfg.speculative.acceptance_per_position is None
    assert describe(cfg) == {}
    with pytest.raises(ConfigError, match="^workload.dataset: only for published"):
        load(None, L8 + ["speculative.acceptance_rate=0.7", "workload.dataset=gsm8k"])


def test_a_known_pair_without_acceptance_uses_the_library():
    cfg = load(None, L8 + ["speculative.num_speculative_tokens=4"])  # the default head: yuhuili EAGLE-3
    assert cfg.speculative.acceptance_source == "published"
    d = describe(cfg)
    assert d["acceptance_rows"][0]["drafter"] == "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"
    assert d["acceptance_model"]["expected_mean_acceptance_length"] == pytest.approx(3.08, abs=1e-6)


def test_default_acceptance_is_said_in_one_warning_line_and_the_summary():
    r = simulate(None, SMALL + ["model=meta-llama/Llama-2-7b-hf", "speculative.method=eagle",
                                "speculative.num_speculative_tokens=2", "workload.num_requests=8"])
    s = r.summary
    assert s["acceptance_source"] == "default"
    lines = [w for w in s["warnings"] if w.startswith("speculative.acceptance_rate: no acceptance given")]
    assert len(lines) == 1 and "\n" not in lines[0]


def test_no_match_is_one_line_listing_the_nearest_rows():
    with pytest.raises(ConfigError) as e:
        load(None, ["model=meta-llama/Llama-2-7b-hf", "speculative.method=eagle",
                    "speculative.acceptance_source=published"])
    msg = str(e.value)
    assert msg.startswith("speculative.acceptance_source: no published acceptance") and "nearest rows" in msg
    assert "\n" not in msg
    with pytest.raises(ConfigError, match="^workload.dataset: unknown dataset"):
        load(None, L8 + ["workload.dataset=poetry"])


def test_published_source_set_on_the_command_line_replaces_the_files_acceptance():
    cfg = load({"model": "meta-llama/Llama-3.1-8B-Instruct", "device": "h100",
                "speculative": {"method": "eagle3", "acceptance_rate": 0.7}},
               ["speculative.acceptance_source=published"])
    assert cfg.speculative.acceptance_source == "published"
    with pytest.raises(ConfigError, match="^speculative.acceptance_rate: acceptance_source published"):
        load({"model": "meta-llama/Llama-3.1-8B-Instruct", "device": "h100",
              "speculative": {"method": "eagle3", "acceptance_rate": 0.7, "acceptance_source": "published"}})


def test_dataset_and_temperature_factors():
    base = L8 + ["speculative.num_speculative_tokens=3", "speculative.acceptance_source=published"]
    chat = describe(load(None, base))["acceptance_model"]["expected_mean_acceptance_length"]
    hot = describe(load(None, base + ["workload.temperature=1.0"]))["acceptance_model"]
    assert hot["factors"]["temperature"] == pytest.approx(acceptance_factors.temperature_factor(1.0))
    assert hot["expected_mean_acceptance_length"] - 1 == pytest.approx((chat - 1) * hot["factors"]["temperature"])
    coding = describe(load(None, base + ["workload.dataset=coding"]))["acceptance_model"]
    assert coding["dataset"] == "mt-bench" and coding["factors"]["dataset"] > 1
    with pytest.raises(ConfigError, match="dataset factor is off"):
        load(None, base + ["workload.dataset=coding", "speculative.acceptance_factors=[context]"])


def test_context_factor_lowers_a_long_requests_acceptance():
    cfg = load(None, L8 + [f"speculative.model={REDHAT}", "speculative.num_speculative_tokens=3",
                           "speculative.acceptance_source=published"])
    model = AcceptanceModel.from_config(cfg.speculative, 0)
    short = model._context_cdf(1000)
    long = model._context_cdf(16384)
    assert short == model._cdf_list
    assert long[0] > short[0]  # more drafts rejected at the first guess
    assert acceptance_factors.context_factor(20480) < 0.1 < acceptance_factors.context_factor(8192) < 1
    off = load(None, L8 + [f"speculative.model={REDHAT}", "speculative.acceptance_source=published",
                           "speculative.acceptance_factors=[]"])
    assert AcceptanceModel.from_config(off.speculative, 0)._context_rates is None


def test_a_traces_per_request_categories_scale_published_acceptance(tmp_path):
    trace = tmp_path / "t.csv"
    rows = ["arrived_at_s,prompt_tokens,output_tokens,category"]
    rows += [f"0,256,256,{'coding' if i % 2 else 'chat'}" for i in range(40)]
    trace.write_text("\n".join(rows) + "\n")
    base = L8 + [f"speculative.model={REDHAT}", "speculative.num_speculative_tokens=3",
                 "speculative.acceptance_source=published", "workload.arrival=trace",
                 f"workload.trace_file={trace}"]
    req = simulate(None, base).requests
    per = req.groupby(req.index % 2).apply(lambda d: 1 + d["accepted_tokens"].sum() / d["decode_steps"].sum())
    assert per[1] > per[0] + 0.3  # coding requests (odd) accept more than chat ones (factor 1.43 on L - 1)
    plain = simulate(None, base + ["speculative.acceptance_factors=[context]"]).requests
    same = plain.groupby(plain.index % 2).apply(lambda d: 1 + d["accepted_tokens"].sum() / d["decode_steps"].sum())
    assert abs(same[1] - same[0]) < 0.2


def test_a_tune_page_names_where_its_acceptance_came_from():
    from vidur_specdec.speculation.acceptance_source import describe
    from vidur_specdec.tune.page import acceptance_html

    cfg = load(str(Path(__file__).resolve().parents[1] / "configs" / "llama3.1-8b-h100.yaml"),
               ["speculative.acceptance_source=published", "speculative.acceptance_rate=null",
                "speculative.model=RedHatAI/Llama-3.1-8B-Instruct-speculator.eagle3", "workload.dataset=mt-bench"])
    acc = describe(cfg)  # what tune's summary.json carries under "acceptance"
    assert acc["acceptance_source"] == "published"
    page = acceptance_html(acc)
    assert page.startswith('<p id="acceptance">') and "test_acceptance_length.py" in page
    given = load(str(Path(__file__).resolve().parents[1] / "configs" / "llama3.1-8b-h100.yaml"))
    assert describe(given) == {} and acceptance_html(describe(given)) == ""  # acceptance given: nothing added
