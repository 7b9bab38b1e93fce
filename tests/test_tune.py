"""tune: searches, outputs, determinism across --jobs, feeding speculative_config.json back, bad inputs, the page."""

import csv
import json
import math
import subprocess
import sys

import pytest
import yaml

from conftest import run_command
from vidur_specdec.engine.resolve import from_dict, load
from vidur_specdec.speculation.schedule import parse
from vidur_specdec.engine.simulation import simulate
from vidur_specdec.sweep.worker import row_metrics

# 36 short requests, k up to 3, alpha 0.5, per-token verify: k = 3 stops paying inside the searched loads
CFG = {
    "seed": 1,
    "workload": {"num_requests": 36, "qps": 4.0,
                 "prompt_tokens": {"dist": "uniform", "min": 32, "max": 768},
                 "output_tokens": {"dist": "uniform", "min": 8, "max": 256}},
    "speculative": {"method": "ngram", "num_speculative_tokens": 3, "acceptance_rate": 0.5,
                    "verify_attention": "per_token"},
}
OUTPUTS = ["speculative_config.json", "summary.json", "tune.csv", "tune.html"]


def cli(*args):
    return run_command("tune", *args)


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    d = tmp_path_factory.mktemp("tune")
    p = d / "cfg.yaml"
    p.write_text(yaml.safe_dump(CFG))
    r1 = cli("--config", p, "--output-dir", d / "j1", "--jobs", "1")
    assert r1.returncode == 0, r1.stderr
    r2 = cli("--config", p, "--output-dir", d / "j2", "--jobs", "2")
    assert r2.returncode == 0, r2.stderr
    return d, p, r1


def rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_outputs_are_byte_identical_with_any_jobs_and_on_rerun(tuned):
    d, p, _ = tuned
    for name in OUTPUTS:
        assert (d / "j1" / name).read_bytes() == (d / "j2" / name).read_bytes(), name
    journal = (d / "j1" / ".tune.journal.jsonl").read_bytes()
    again = cli("--config", p, "--output-dir", d / "j1", "--jobs", "2")
    assert again.returncode == 0, again.stderr
    assert (d / "j1" / ".tune.journal.jsonl").read_bytes() == journal  # nothing simulated again
    for name in OUTPUTS:
        assert (d / "j1" / name).read_bytes() == (d / "j2" / name).read_bytes(), name


def test_summary_and_the_crossover_is_straddled_by_simulated_points(tuned):
    d, _, out = tuned
    s = json.loads((d / "j1" / "summary.json").read_text())
    assert s["load_unit"] == "qps"
    assert set(s["crossover"]) == {"1", "2", "3"} and set(s["capacity"]) == {"none", "speculative"}
    assert s["capacity"]["none"] > 0 and all(isinstance(k, int) for k in s["best_k"].values())
    found = {k: v for k, v in s["crossover"].items() if v is not None}
    assert found, "no static k crossed speedup 1 in the searched range"
    pts = rows(d / "j1" / "tune.csv")
    for k, x in found.items():
        lo, hi = s["crossover_bracket"][k]
        assert lo < x < hi and hi <= lo * 1.05 + 1e-9  # the stated tolerance
        at = {float(r["load"]): float(r["tpot_speedup"]) for r in pts if r["setting"] == f"k={k}"}
        assert at[lo] >= 1 > at[hi]
        # the plain simulations at both ends straddle 1 too
        for load, above in ((lo, True), (hi, False)):
            base = simulate(from_dict({**CFG, "workload": {**CFG["workload"], "qps": load},
                                       "speculative": {"method": "none"}}))
            spec = simulate(from_dict({**CFG, "workload": {**CFG["workload"], "qps": load},
                                       "speculative": {**CFG["speculative"], "num_speculative_tokens": int(k)}}))
            sp = base.summary["tpot_ms"]["p50"] / spec.summary["tpot_ms"]["p50"]
            assert (sp >= 1) == above
    assert f"crossover k={next(iter(found))}:" in out.stdout


def test_schedule_checks_within_3_percent(tuned):
    d, _, _ = tuned
    s = json.loads((d / "j1" / "summary.json").read_text())
    assert len(s["checks"]) == 3
    for c in s["checks"]:
        assert c["shortfall_vs_best"] <= 0.03 and c["shortfall_vs_k0"] <= 0.03, c


def test_speculative_config_validates_and_feeds_back_bit_for_bit(tuned):
    d, _, _ = tuned
    sc = json.loads((d / "j1" / "speculative_config.json").read_text())
    assert set(sc) == {"method", "model", "num_speculative_tokens", "num_speculative_tokens_per_batch_size",
                       "prompt_lookup_min", "prompt_lookup_max"}  # vLLM 0.33 n-gram defaults, stated
    assert sc["method"] == "ngram" and sc["model"] is None
    ranges = parse(sc["num_speculative_tokens_per_batch_size"])
    assert max(k for _, _, k in ranges) <= sc["num_speculative_tokens"]
    s = json.loads((d / "j1" / "summary.json").read_text())
    journal = [json.loads(x) for x in (d / "j1" / ".tune.journal.jsonl").read_text().splitlines()[1:]]
    by_row = {j["row"]: j["metrics"] for j in journal}
    pts = rows(d / "j1" / "tune.csv")
    load_txt, sets = sorted(s["reproduce_schedule_at_check_loads"].items())[0]
    # feed the emitted config back through --set, as a user would
    sets = [f"workload.qps={load_txt}",
            f"speculative.num_speculative_tokens={sc['num_speculative_tokens']}",
            "speculative.num_speculative_tokens_per_batch_size="
            + json.dumps(sc["num_speculative_tokens_per_batch_size"])]
    cfg = load(CFG, sets)
    m = row_metrics(simulate(cfg))
    point = next(r for r in pts if r["setting"] == "schedule" and r["load"] == load_txt)
    recorded = by_row[int(point["point"])]
    assert {c: recorded[c] for c in m} == m  # bit for bit


@pytest.mark.parametrize("args, words", [
    (["--k-max", "0"], "--k-max"),
    (["--set", "speculative.method=none"], "speculative.method"),
    (["--set", 'speculative.num_speculative_tokens_per_batch_size={"1-8": 2, "4-16": 1}'],
     "num_speculative_tokens_per_batch_size"),
    (["--tolerance", "0"], "--tolerance"),
    (["--set", "speculative.acceptance_per_position=[0.8, 0.7, 0.6]", "--set", "speculative.acceptance_rate=null",
      "--k-max", "5"], "--k-max"),
])
def test_bad_inputs_are_one_line_and_write_nothing(tmp_path, args, words):
    p = tmp_path / "cfg.yaml"
    p.write_text(yaml.safe_dump(CFG))
    r = cli("--config", p, "--output-dir", tmp_path / "out", *args)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and words in r.stderr, r.stderr
    assert not (tmp_path / "out").exists()


def test_concurrency_axis_needs_closed_loop_load(tmp_path):
    from vidur_specdec.tune.points import AXES

    p = tmp_path / "cfg.yaml"
    p.write_text(yaml.safe_dump(CFG))
    if AXES["concurrency"].available():
        pytest.skip("workload.concurrency is available here: the closed-loop tests cover this axis")
    r = cli("--config", p, "--output-dir", tmp_path / "out", "--load-axis", "concurrency")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "workload.concurrency" in r.stderr
    assert not (tmp_path / "out").exists()


def test_concurrency_axis_bisects_whole_numbers():
    from vidur_specdec.tune.points import AXES

    ax = AXES["concurrency"]
    assert ax.norm(5.4) == 5.0 and ax.mid(4, 6) == 5.0 and ax.mid(4, 5) is None
    assert ax.converged(4, 5, 0.05) and not ax.converged(4, 8, 0.05)
    assert ax.overrides(8) == {"workload.arrival": "closed", "workload.concurrency": 8}
    q = AXES["qps"]
    assert q.mid(4.0, 8.0) == float(f"{math.sqrt(32):.4g}") and q.converged(5.0, 5.2, 0.05)


def test_tune_refuses_a_folder_in_use(tmp_path):
    p = tmp_path / "cfg.yaml"
    p.write_text(yaml.safe_dump(CFG))
    out = tmp_path / "out"
    out.mkdir()
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (out / ".vidur_specdec.lock").write_text(f"{holder.pid}\n")
        r = cli("--config", p, "--output-dir", out)
        assert r.returncode == 2 and r.stderr.count("\n") == 1 and f"pid {holder.pid}" in r.stderr
    finally:
        holder.kill()
        holder.wait()


def test_static_k_points_cut_position_and_histogram_inputs():
    from vidur_specdec.tune.points import Setting, build_config, setting_overrides

    for acc in ({"acceptance_per_position": [0.8, 0.7, 0.6]}, {"acceptance_histogram": [0.2, 0.2, 0.2, 0.4]}):
        spec = {**CFG["speculative"], "acceptance_rate": None, **acc}  # one acceptance input
        base = from_dict({**CFG, "speculative": spec})
        for k in (1, 2, 3):
            cfg = build_config(base, setting_overrides(base, Setting(k)))
            assert cfg.speculative.num_speculative_tokens == k
        h = build_config(base, setting_overrides(base, Setting(1))).speculative.acceptance_histogram
        if h is not None:
            assert h == [0.2, 0.8]
        sched = build_config(base, setting_overrides(base, Setting(2, ((1, 8, 2), (9, 128, 1)))))
        assert sched.speculative.num_speculative_tokens_per_batch_size == [[1, 8, 2], [9, 128, 1]]
    none = build_config(base, setting_overrides(base, Setting(0)))
    assert not none.speculative.enabled and none.speculative.method == "none"


def test_speculative_config_names_the_head_or_drafter_weights():
    """vLLM's ``model``: the EAGLE head (named or the known one for the target), the drafter, none for ngram."""
    from vidur_specdec.tune.points import Setting
    from vidur_specdec.tune.outputs import vllm_speculative_config

    def model(**spec):
        return vllm_speculative_config(from_dict({"model": "meta-llama/Llama-3.1-8B-Instruct", "device": "h100",
                                                  "speculative": spec}), Setting(3, ((1, 4096, 3),)))["model"]

    assert model(method="eagle3") == "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"
    assert model(method="eagle", model="yuhuili/EAGLE-LLaMA3.1-Instruct-8B") == "yuhuili/EAGLE-LLaMA3.1-Instruct-8B"
    assert model(method="draft_model", draft_model="meta-llama/Llama-3.2-1B-Instruct") == \
        "meta-llama/Llama-3.2-1B-Instruct"
    assert model(method="ngram") is None


def test_tune_from_python_gives_the_command_s_tables(tuned):
    import pandas as pd

    import vidur_specdec
    from vidur_specdec import tune

    d, _, _ = tuned
    assert tune is vidur_specdec.tune and callable(tune) and tune.__name__ == "vidur_specdec.tune"  # the package
    t = tune(CFG, output_dir=d / "j1", jobs=1)  # the command's folder: resumed from its journal, same files
    assert t.summary == json.loads((d / "j1" / "summary.json").read_text())
    pd.testing.assert_frame_equal(t.points, pd.read_csv(d / "j1" / "tune.csv"))
    assert t.schedule == [tuple(r) for r in t.summary["schedule"]] and t.output_dir == d / "j1"
    assert t.speculative_config == json.loads((d / "j1" / "speculative_config.json").read_text())
    with pytest.raises(vidur_specdec.ConfigError, match="objective"):
        tune(CFG, objective="fastest")


def test_sweep_from_python_gives_the_command_s_table(tmp_path):
    import pandas as pd

    from vidur_specdec import ConfigError, sweep

    spec = {"sweep": {"name": "api"}, "base": {**CFG, "workload": {**CFG["workload"], "num_requests": 12}},
            "grid": {"speculative.num_speculative_tokens": [0, 2]}}
    s = sweep(spec, jobs=1)  # a temporary folder, removed afterwards
    assert s.summary == {"name": "api", "rows": 2, "ran": 2, "skipped": 0, "csv": None}
    assert list(s.table["tpot_speedup"].round(6))[0] == 1.0 and len(s.table) == 2
    kept = sweep(spec, output_dir=tmp_path / "api", jobs=1)
    pd.testing.assert_frame_equal(kept.table, s.table)
    assert (tmp_path / "api" / "api.csv").is_file() and kept.summary["csv"] == str(tmp_path / "api" / "api.csv")
    with pytest.raises(ConfigError, match="run config"):
        sweep(CFG)


def test_a_point_simulated_ahead_leaves_no_trace_until_asked_for(tmp_path):
    """A bisection's likely next point runs on an idle worker; it is journalled, under the index it gets, only
    when the search asks for it, and its metrics are those of simulating it then."""
    import argparse

    from vidur_specdec.tune.cli import add_arguments, check_args
    from vidur_specdec.tune.points import Evaluator, Setting

    p = tmp_path / "cfg.yaml"
    p.write_text(yaml.safe_dump({**CFG, "workload": {**CFG["workload"], "num_requests": 12}}))
    ap = argparse.ArgumentParser()
    add_arguments(ap)
    base, _, axis, slo, options, _, _ = check_args(ap.parse_args(["--config", str(p), "--output-dir", str(tmp_path)]))

    def evaluator(name, jobs):
        ev = Evaluator(base, axis, tmp_path / name, slo, options, jobs, "local", None, False)
        ev.open()
        return ev

    ev = evaluator("ahead", 2)
    first = ev.point("capacity", 2.0, Setting(0))
    ev.run([first], [(3.0, Setting(0)), (5.0, Setting(0))])  # one idle worker: 3.0, then 5.0, on it
    assert [pt.load for pt in ev.points] == [2.0] and ev.simulated == 1  # 3.0 and 5.0 are no points yet
    assert len(ev._ahead) == 2
    assert len(ev.journal.path.read_text().splitlines()) == 2  # the header and the point asked for
    later = ev.point("capacity", 3.0, Setting(0))
    assert later.index == 1 and not later.done
    ev.run([later, ev.point("capacity", 5.0, Setting(0))])  # both taken from the ones simulated ahead
    assert ev.simulated == 3 and not ev._ahead

    plain = evaluator("plain", 1)
    for load in (2.0, 3.0, 5.0):
        plain.run([plain.point("capacity", load, Setting(0))])
    assert [(pt.index, pt.row_id, pt.metrics) for pt in ev.points] == \
        [(pt.index, pt.row_id, pt.metrics) for pt in plain.points]
