"""plan: which deployment for a model, GPUs, workload and SLOs (docs/plan.md).

Small questions keep the suite fast (short prompts and outputs, one survivor per class);
``benchmarks/bench_plan.py`` times the documented ones (ISL 4000, OSL 500) cold.
"""

import asyncio
import csv
import json
from pathlib import Path

import pytest
import yaml

from conftest import REPO, run_command
from vidur_specdec.config import ConfigError

SLOS = ["--slo-ttft-ms", "1000", "--min-tokens-per-user", "20"]
DSV3 = ["--model", "deepseek-ai/DeepSeek-V3", "--devices", "h200", "--gpus", "16"]
L70 = ["--model", "meta-llama/Llama-3.1-70B-Instruct", "--devices", "h100", "--gpus", "8"]
SMALL = ["--isl", "512", "--osl", "64", "--top", "1", "--check-dropped", "1", "--max-gpus-per-instance", "8"] + SLOS
OUTPUTS = ["plan.csv", "screen.csv", "summary.json", "best.yaml", "plan.html"]


def cli(*args):
    return run_command("plan", *[str(a) for a in args], module="vidur_specdec")


def rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def planned(tmp_path_factory):
    d = tmp_path_factory.mktemp("plan")
    out = {}
    for name, who in (("dsv3", DSV3), ("l70", L70)):
        r = cli(*who, *SMALL, "--output-dir", d / name, "--jobs", "2")
        assert r.returncode == 0, r.stderr
        out[name] = (d / name, r)
    return out


@pytest.mark.parametrize("name", ["dsv3", "l70"])
def test_plan_returns_a_frontier_and_the_best_deployment_with_a_vllm_serve_line_per_pool(planned, name):
    d, r = planned[name]
    summ = json.loads((d / "summary.json").read_text())
    model = summ["question"]["model"]
    assert summ["frontier"]["all"], "no frontier"
    best = summ["best"]
    assert best["meets_slo"] and best["tok_s_gpu"] > 0
    for point in [best] + summ["frontier"]["all"]:
        pools = point["pools"]
        assert [p["pool"] for p in pools] == (["prefill", "decode"] if point["class"].startswith("disagg")
                                             else ["colocated"])
        for p in pools:
            assert p["vllm_serve"].startswith(f"vllm serve {model} ")
            assert ("--speculative-config" in p["vllm_serve"]) == (point["speculation"] != "none")
            if point["speculation"] != "none":
                spec = json.loads(p["vllm_serve"].split("--speculative-config '")[1].split("'")[0])
                assert spec == point["speculative_config"]
                assert spec["num_speculative_tokens_per_batch_size"] == point["schedule"]
    # the screen's pruning is stated and checked by simulation
    sc = summ["screen"]
    assert sc["candidates"] == sum(sc[v] for v in ("survivor", "ranked", "estimate", "bound", "refused"))
    assert sc["dropped_checked_summary"]["simulated"] == len([c for c in sc["dropped_checked"] if c["simulated"]])
    assert summ["simulated_points"] == len(rows(d / "plan.csv"))
    assert f"screened {sc['candidates']} candidates" in r.stdout and "vllm serve" in r.stdout
    assert len(rows(d / "screen.csv")) == sc["candidates"]


def test_deepseek_plan_searches_pools_parallelism_and_mtp(planned):
    d, _ = planned["dsv3"]
    summ = json.loads((d / "summary.json").read_text())
    screen = rows(d / "screen.csv")
    shapes = {r["shape"] for r in screen}
    assert any("DP8 EP8" in s for s in shapes) and any("PP2" in s for s in shapes)
    assert any(r["mode"] == "disaggregated" for r in screen) and any("EPLB" in s for s in shapes)
    assert {r["speculation"] for r in screen} == {"none", "mtp"}
    mtp = next(o for o in summ["speculation_options"] if o["method"] == "mtp")
    assert mtp["source"] == "library" and mtp["rows"] and "DeepSeek-V3" in json.dumps(mtp["rows"])
    classes = {r["class"] for r in rows(d / "plan.csv")}
    assert classes == {"colocated, no speculation", "colocated, speculation", "disaggregated, no speculation",
                       "disaggregated, speculation"}
    assert summ["sources"]["kernel_sources"] and summ["sources"]["acceptance"]
    # refusals are the simulator's own lines: memory per GPU, for DeepSeek-V3 on one H200
    refused = [r for r in screen if r["verdict"] == "refused" and r["shape"] == "TP1 x16 H200"]
    assert refused and "GiB" in refused[0]["reason"]


@pytest.mark.parametrize("name", ["dsv3", "l70"])
def test_best_pick_simulated_again_alone_meets_the_slos_and_matches(planned, name):
    from vidur_specdec import simulate
    from vidur_specdec.sweep.worker import row_metrics

    d, _ = planned[name]
    summ = json.loads((d / "summary.json").read_text())
    best = next(r for r in rows(d / "plan.csv") if r["best"] == "true")
    res = simulate(str(d / "best.yaml"))
    m = row_metrics(res)
    p = summ["slo"]["percentile"]
    for k in ("ttft_ms_p50", f"ttft_ms_p{p}", "tpot_ms_p50", f"tpot_ms_p{p}", "throughput_tok_s"):
        assert float(best[k]) == pytest.approx(m[k], abs=1e-6), k
    assert m[f"ttft_ms_p{p}"] <= summ["slo"]["ttft_ms"] and m[f"tpot_ms_p{p}"] <= summ["slo"]["tpot_ms"]
    assert summ["best"]["tok_s_gpu"] == pytest.approx(m["throughput_tok_s"] / int(best["gpus"]), abs=1e-5)
    assert res.config.workload.concurrency == int(best["concurrency"])


def test_rerun_resumes_from_the_journal_byte_identical(planned):
    d, _ = planned["l70"]
    before = {n: (d / n).read_bytes() for n in OUTPUTS}
    journal = (d / ".plan.journal.jsonl").read_bytes()
    r = cli(*L70, *SMALL, "--output-dir", d, "--jobs", "1")
    assert r.returncode == 0, r.stderr
    assert "0 points simulated now" in r.stderr
    assert (d / ".plan.journal.jsonl").read_bytes() == journal
    for n in OUTPUTS:
        assert (d / n).read_bytes() == before[n], n


def test_plan_page_in_chromium(planned, tmp_path):
    from test_report_browser import CHROMIUM, _drive

    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} not installed")
    d, _ = planned["dsv3"]
    steps = [("state", "JSON.stringify(window.specdecPlan)"),
             ("names", "JSON.stringify(document.getElementById('chart-frontier').data.map(t => t.name))"),
             ("ttft", "document.getElementById('chart-ttft').data.length"),
             ("answer", "document.getElementById('answer').textContent"),
             ("table", "document.querySelectorAll('#frontier-rows tbody tr').length"),
             ("serve", "document.getElementById('best-serve').textContent")]
    shot = tmp_path / "plan-page.png"
    out = asyncio.run(asyncio.wait_for(_drive(d / "plan.html", shot, steps), 60))
    assert out["errors"] == [], out["errors"]
    summ = json.loads((d / "summary.json").read_text())
    state = json.loads(out["state"])
    assert state["frontier"] == sorted(f["point"] for f in summ["frontier"]["all"]) or \
        sorted(state["frontier"]) == sorted(f["point"] for f in summ["frontier"]["all"])
    assert set(state["classes"]) <= set(json.loads(out["names"]))
    assert out["ttft"] == len(state["classes"]) and out["table"] == len(summ["frontier"]["all"])
    assert out["answer"].startswith("Best at TTFT p") and summ["best"]["deployment"] in out["answer"]
    assert "vllm serve" in out["serve"]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_same_plan_any_jobs_byte_identical(tmp_path):
    args = ["--model", "meta-llama/Llama-2-7b-hf", "--devices", "a100", "--gpus", "2", "--isl", "128", "--osl",
            "32", "--modes", "colocated", "--top", "1", "--check-dropped", "0"]
    for jobs in (1, 2):
        r = cli(*args, "--output-dir", tmp_path / f"j{jobs}", "--jobs", jobs)
        assert r.returncode == 0, r.stderr
    for n in OUTPUTS:
        assert (tmp_path / "j1" / n).read_bytes() == (tmp_path / "j2" / n).read_bytes(), n


@pytest.mark.parametrize("args, needles", [
    (["--model", "meta-llama/Llama-3.1-70B-Instruct", "--devices", "h100", "--gpus", "1"],
     ["--gpus: no deployment of meta-llama/Llama-3.1-70B-Instruct on 1 x h100 fits", "GiB",
      "the smallest h100 instance that fits is TP2 H100 (2 GPUs); --gpus 2 would fit"]),
    (["--model", "meta-llama/Llama-3.1-70B-Instruct", "--devices", "h100", "--gpus", "7"],
     ["--gpus: no deployment", "on 7 x h100", "--gpus 6 or 8 would fit"]),
    (L70 + ["--slo-ttft-ms", "10"],
     ["--slo-ttft-ms/--slo-tpot-ms: no deployment can meet TTFT p90 <= 10 ms", "TTFT is at least"]),
    (L70 + ["--slo-tpot-ms", "1", "--min-tokens-per-user", "20"], ["--min-tokens-per-user: give it or --slo-tpot-ms"]),
    (L70 + ["--devices", "h1000"], ["--devices: unknown device 'h1000'"]),
    (L70 + ["--methods", "none,foo"], ["--methods: unknown method 'foo'"]),
    (L70 + ["--slo-percentile", "95"], ["--slo-percentile: must be one of 50, 90, 99"]),
    (L70 + ["--executor", "ray", "--address", "127.0.0.1:9"], ["--address: cannot reach a Ray cluster"]),
])
def test_bad_input_is_one_line_and_writes_nothing(tmp_path, args, needles):
    out = tmp_path / "out"
    r = cli(*args, "--isl", "4000", "--osl", "500", "--output-dir", out)
    lines = r.stderr.strip().splitlines()
    errors = [x for x in lines if x.startswith("error:")]
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert len(errors) == 1 and lines[-1] == errors[0], r.stderr
    for n in needles:
        assert n in errors[0], errors[0]
    assert not out.exists()


def test_python_api_returns_dataframes_and_names_bad_arguments(planned, tmp_path):
    from vidur_specdec import plan

    with pytest.raises(ConfigError, match=r"^gpus: must be an integer"):
        plan(model="meta-llama/Llama-3.1-70B-Instruct", devices="h100", gpus="x")
    with pytest.raises(ConfigError, match=r"^foo: not a plan option"):
        plan(model="meta-llama/Llama-3.1-70B-Instruct", foo=1)
    with pytest.raises(ConfigError, match=r"^gpus: required"):
        plan(model="meta-llama/Llama-3.1-70B-Instruct", devices="h100")
    d, _ = planned["l70"]
    p = plan(model="meta-llama/Llama-3.1-70B-Instruct", devices="h100", gpus=8, isl=512, osl=64, top=1,
             check_dropped=1, slo_ttft_ms=1000, min_tokens_per_user=20, output_dir=d, jobs=1)
    assert len(p.points) == len(rows(d / "plan.csv")) and len(p.screen) == len(rows(d / "screen.csv"))
    assert p.frontier["frontier_all"].all() and p.best["deployment"] == p.summary["best"]["deployment"]


def test_a_plan_file_names_a_base_config_and_its_options(tmp_path):
    from vidur_specdec.plan.inputs import build_spec, flag_name

    f = tmp_path / "plan.yaml"
    f.write_text(yaml.safe_dump({"base": str(REPO / "configs" / "llama3.1-70b-tp4-h100.yaml"),
                                 "seed": 3, "plan": {"gpus": 8, "isl": 1000, "osl": 100, "slo_ttft_ms": 800}}))
    spec = build_spec(str(f), ["engine.step_overhead_ms=0.4"], {"osl": 200}, flag_name)
    assert spec.gpus == 8 and spec.slo_ttft_ms == 800 and spec.base.seed == 3
    assert spec.base.workload.prompt_tokens.value == 1000 and spec.base.workload.output_tokens.value == 200
    assert spec.base.engine.step_overhead_ms == 0.4 and spec.devices == ("h100",)
    assert spec.base.speculative.method == "ngram"  # the base's own speculation: a candidate at its acceptance
    f.write_text(yaml.safe_dump({"plan": {"gpus": 8, "nodes": 3}}))
    with pytest.raises(ConfigError, match=r"^plan.nodes: 8 GPUs do not split evenly over 3 nodes"):
        build_spec(str(f), [], {}, flag_name)
    f.write_text(yaml.safe_dump({"plan": {"gpu": 8}}))
    with pytest.raises(ConfigError, match=r"^plan.gpu: not a plan option"):
        build_spec(str(f), [], {}, flag_name)


def test_no_point_meeting_the_slos_is_one_line_naming_the_closest():
    from vidur_specdec.plan.inputs import build_spec, flag_name
    from vidur_specdec.plan.run import _no_answer

    spec = build_spec(None, [], {"model": "meta-llama/Llama-3.1-70B-Instruct", "devices": "h100", "gpus": 8,
                                 "slo_ttft_ms": 500, "slo_tpot_ms": 20}, flag_name)
    rows_ = [{"point": 0, "deployment": "TP8 H100, none, 8192 tokens", "concurrency": 4, "refused": "",
              "ttft_ms_at_slo_percentile": 620.0, "tpot_ms_at_slo_percentile": 18.0},
             {"point": 1, "deployment": "TP4 x2 H100, none, 8192 tokens", "concurrency": 2, "refused": "",
              "ttft_ms_at_slo_percentile": 900.0, "tpot_ms_at_slo_percentile": 25.0}]
    msg = str(_no_answer(spec, rows_))
    assert "\n" not in msg and "no simulated deployment meets TTFT p90 <= 500 ms" in msg
    assert "the closest, TP8 H100, none, 8192 tokens at concurrency 4, has TTFT p90 620 ms" in msg
