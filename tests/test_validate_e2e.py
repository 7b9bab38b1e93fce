"""The whole loop against a fake vLLM server (items 6 and 7): generate → replay → scrape → calibrate →
simulate → compare, with every request accounted for and failures reported, not lost.

The fake engine prices its steps with the simulator's own cost model, so a
matched simulation must land close to the measurement: that checks the
alignment of the whole pipeline (ids, time bases, units), not the model.
"""

import json

import pandas as pd
import pytest
from validate_fixtures import cost_step_fn, small_config, small_profiles, write_yaml  # noqa: F401

from vidur_specdec.engine.metrics import REQUEST_COLUMNS
from vidur_specdec.validate.cli import main
from vidur_specdec.validate.fake_server import FakeEngineConfig, FakeServer

ALPHA, K, BLOCKS = 0.65, 4, 4321


@pytest.fixture(scope="module")
def loop_run(small_profiles, tmp_path_factory):  # noqa: F811
    tmp = tmp_path_factory.mktemp("e2e")
    cfg = small_config(small_profiles, num_requests=24, qps=12.0, alpha=0.3)  # config alpha is overridden
    cfg_path = write_yaml(tmp / "config.yaml", cfg)
    fake = FakeEngineConfig(k=K, alpha=ALPHA, step_time_fn=cost_step_fn(cfg), max_num_batched_tokens=512,
                            num_gpu_blocks=BLOCKS, seed=7, faults={"5": "fail", "9": "abort"})
    out = tmp / "out"
    with FakeServer(fake) as srv:
        rc = main(["run", "--url", srv.url, "--config", str(cfg_path), "--out", str(out), "--settle-s", "0",
                   "--timeout-s", "20", "--plotlyjs", "cdn"])
    return rc, out, cfg


def test_run_writes_every_output(loop_run):
    rc, out, _ = loop_run
    assert rc == 0
    for name in ("trace.csv", "measured.csv", "simulated.csv", "comparison.csv", "calibration.json",
                 "calibration.yaml", "comparison.json", "report.html", "metrics_before.prom", "metrics_after.prom",
                 "chunks.jsonl", "replay.json"):
        assert (out / name).is_file(), name
    assert not [p for p in out.iterdir() if p.name.startswith(".")]  # no temporary files left
    html = (out / "report.html").read_text()
    assert "plotly" in html.lower() and "Acceptance: measured vs used" in html


def test_calibration_recovers_the_servers_acceptance_and_kv_budget(loop_run):
    _, out, _ = loop_run
    cal = json.loads((out / "calibration.json").read_text())
    assert cal["num_speculative_tokens"] == K
    assert cal["alpha"] == pytest.approx(ALPHA, abs=0.06)
    assert len(cal["per_position"]) == K
    assert all(abs(a - ALPHA) < 0.15 for a in cal["per_position"])
    assert cal["num_gpu_blocks"] == BLOCKS
    assert cal["mean_acceptance_length"] == pytest.approx((1 - ALPHA ** (K + 1)) / (1 - ALPHA), abs=0.25)


def test_every_request_is_accounted_for(loop_run):
    _, out, cfg = loop_run
    trace = pd.read_csv(out / "trace.csv")
    measured = pd.read_csv(out / "measured.csv")
    simulated = pd.read_csv(out / "simulated.csv")
    comp = pd.read_csv(out / "comparison.csv")
    n = cfg["workload"]["num_requests"]
    for df in (trace, measured, simulated, comp):
        assert sorted(df["request_id"]) == list(range(n))
    assert list(measured.columns[:len(REQUEST_COLUMNS)]) == REQUEST_COLUMNS
    assert list(simulated.columns) == REQUEST_COLUMNS
    st = comp.set_index("request_id")["status"]
    assert st[5] == "error" and st[9] == "error" and (st.drop([5, 9]) == "ok").all()
    summary = json.loads((out / "comparison.json").read_text())
    assert summary["requests"] == n and summary["compared"] == n - 2
    assert summary["excluded"] == {"error": 2}
    assert {r["request_id"] for r in summary["excluded_requests"]} == {5, 9}
    assert comp.loc[~comp["compared"], "ttft_error_pct"].isna().all()


def test_matched_simulation_lands_near_the_fake_engine(loop_run):
    _, out, _ = loop_run
    summary = json.loads((out / "comparison.json").read_text())
    m = summary["metrics"]
    assert 0.75 < m["tpot"]["ratio_p50"] < 1.3
    assert 0.75 < m["e2e"]["ratio_p50"] < 1.3
    assert m["tpot"]["median_abs_pct_error"] < 35
    acc = summary["acceptance"]
    assert acc["used"]["input"] == "acceptance_per_position"
    assert acc["used"]["kv_blocks"] == BLOCKS
    assert abs(acc["measured_tokens_per_decode_chunk"] - acc["simulated_tokens_per_verify_step"]) < 0.5


def test_subcommands_chain(small_profiles, tmp_path):  # noqa: F811
    cfg_path = write_yaml(tmp_path / "c.yaml", small_config(small_profiles, num_requests=8, qps=20.0))
    trace = tmp_path / "trace.jsonl"
    assert main(["generate", "--config", str(cfg_path), "--out", str(trace)]) == 0
    with FakeServer(FakeEngineConfig(k=3, alpha=0.8, faults={"2": "hang"})) as srv:
        assert main(["replay", "--url", srv.url + "/v1", "--trace", str(trace), "--out", str(tmp_path / "r"),
                     "--settle-s", "0", "--timeout-s", "2"]) == 0
    assert main(["calibrate", "--dir", str(tmp_path / "r"), "--out", str(tmp_path / "cal")]) == 0
    assert main(["compare", "--config", str(cfg_path), "--trace", str(trace), "--measured",
                 str(tmp_path / "r" / "measured.csv"), "--calibration", str(tmp_path / "cal"),
                 "--out", str(tmp_path / "cmp"), "--plotlyjs", "cdn", "--acceptance", "alpha"]) == 0
    comp = pd.read_csv(tmp_path / "cmp" / "comparison.csv")
    assert len(comp) == 8 and comp.set_index("request_id").loc[2, "status"] == "timeout"
    summary = json.loads((tmp_path / "cmp" / "comparison.json").read_text())
    assert summary["excluded"] == {"timeout": 1}
    assert summary["acceptance"]["used"]["input"] == "acceptance_rate"


def test_bad_input_exits_2_or_3_with_one_line_and_writes_nothing(small_profiles, tmp_path, capsys):  # noqa: F811
    import socket

    cfg_path = write_yaml(tmp_path / "c.yaml", small_config(small_profiles, num_requests=4))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
    cases = [
        ["run", "--url", dead, "--config", str(cfg_path), "--out", str(tmp_path / "o1")],
        ["run", "--url", "localhost:8000", "--config", str(cfg_path), "--out", str(tmp_path / "o2")],
        ["run", "--url", dead, "--config", str(tmp_path / "missing.yaml"), "--out", str(tmp_path / "o3")],
        ["run", "--url", dead, "--config", str(cfg_path), "--set", "speculative.acceptance_rate=2",
         "--out", str(tmp_path / "o4")],
        ["compare", "--config", str(cfg_path), "--trace", str(tmp_path / "nope.csv"), "--measured", "x.csv",
         "--out", str(tmp_path / "o5")],
    ]
    for argv in cases:
        capsys.readouterr()
        # a dead server is a failed external service (3); the rest are bad input (2)
        assert main(argv) == (3 if argv is cases[0] else 2), argv
        err = capsys.readouterr().err
        assert err.startswith("error: ") and err.count("\n") == 1, err
        assert not (tmp_path / argv[argv.index("--out") + 1]).exists()


def test_run_refuses_a_trace_the_server_cannot_hold(small_profiles, tmp_path, capsys):  # noqa: F811
    cfg_path = write_yaml(tmp_path / "c.yaml", small_config(small_profiles, num_requests=4))
    with FakeServer(FakeEngineConfig(num_gpu_blocks=2)) as srv:
        rc = main(["run", "--url", srv.url, "--config", str(cfg_path), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert rc == 2 and "scheduler.num_blocks" in err and err.count("\n") == 1
    assert not (tmp_path / "o").exists()
