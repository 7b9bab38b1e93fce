"""Every reported failure case of the command line and the run config, as a test: where it failed, a non-zero exit, one line on
stderr, no ``Traceback`` and no partial output; where it surprised, the documented behaviour.

The command-line cases run the real command (``python -m vidur_specdec ...``) in a subprocess.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import yaml
from validate_fixtures import small_config, small_profiles, write_steplog_tree, write_yaml  # noqa: F401

from conftest import REPO, unwritable_folder, run_command

def _env() -> dict:
    """The environment of a subprocess, read when it starts (the session's private predictor cache is set after
    this module is imported)."""
    return {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
TINY = ["--set", "workload.num_requests=12", "--set", "workload.qps=8"]


def _cli(*args, cwd=None, module="vidur_specdec"):
    if module in ("vidur_specdec", "vidur_specdec.main"):
        return run_command(*args, module=module, cwd=cwd)
    return subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True,
                          cwd=cwd or REPO, env=_env(), timeout=300)


def _one_error_line(p, code=2, needle=""):
    assert p.returncode == code, (p.returncode, p.stderr)
    assert "Traceback" not in p.stderr, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), p.stderr
    assert needle in lines[0], lines[0]


def _config(tmp_path: Path, **extra) -> Path:
    data = yaml.safe_load((REPO / "configs/default.yaml").read_text())
    data["workload"]["num_requests"] = 12
    data.update(extra)
    return write_yaml(tmp_path / "c.yaml", data)


# --------------------------------------------------------------------------- data loss


def test_simultaneous_default_folder_runs_all_survive(tmp_path):
    cfg = _config(tmp_path)
    procs = [subprocess.Popen([sys.executable, "-m", "vidur_specdec", "run", "--config", str(cfg),
                               "--set", f"speculative.num_speculative_tokens={k}"],
                              cwd=tmp_path, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for k in (2, 4, 8)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    runs = sorted((tmp_path / "runs").iterdir())
    assert len(runs) == 3, runs
    ks = sorted(yaml.safe_load((r / "config.yaml").read_text())["speculative"]["num_speculative_tokens"]
                for r in runs)
    assert ks == [2, 4, 8]
    for r in runs:
        assert sorted(f.name for f in r.iterdir()) == ["config.yaml", "requests.csv", "steps.csv", "summary.json"]
        assert stat.S_IMODE(r.stat().st_mode) == 0o777 & ~_umask()  # normal permissions, not 0700
    assert not [p for p in tmp_path.rglob(".*") if p.is_dir()]  # no temporary folders left


def _umask() -> int:
    m = os.umask(0o022)
    os.umask(m)
    return m


def test_existing_folder_is_refused_unless_overwrite_and_never_mixed(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    p = _cli("run", "--config", "configs/default.yaml", "--output-dir", str(out), *TINY)
    _one_error_line(p, needle="is not empty")
    p = _cli("run", "--config", "configs/default.yaml", "--output-dir", str(out), "--overwrite", *TINY)
    _one_error_line(p, needle="notes.txt")
    assert [f.name for f in out.iterdir()] == ["notes.txt"]
    # a run folder may be replaced with --overwrite; the classic form behaves the same
    run_dir = tmp_path / "run"
    assert _cli("--config", "configs/default.yaml", "--output-dir", str(run_dir), *TINY,
                module="vidur_specdec.main").returncode == 0
    p = _cli("--config", "configs/default.yaml", "--output-dir", str(run_dir), *TINY, module="vidur_specdec.main")
    _one_error_line(p, needle="--overwrite")
    p = _cli("run", "--config", "configs/default.yaml", "--output-dir", str(run_dir), "--overwrite",
             "--set", "workload.num_requests=7")
    assert p.returncode == 0, p.stderr
    assert len((run_dir / "requests.csv").read_text().splitlines()) == 8


# --------------------------------------------------------------------------- tracebacks


def test_unwritable_output_folder_fails_before_the_simulation(tmp_path, monkeypatch, capsys):
    from vidur_specdec.engine import simulation
    from vidur_specdec.cli import main

    def no_simulation(*_a, **_k):
        raise AssertionError("the run was prepared before the output folder was checked")

    monkeypatch.setattr(simulation, "prepare", no_simulation)  # refused up front: nothing is prepared
    target = unwritable_folder(tmp_path, "vidur-specdec-out")
    rc = main(["run", "--config", str(REPO / "configs/default.yaml"), "--output-dir", str(target),
               "--set", "workload.num_requests=3000"])
    err = capsys.readouterr().err
    assert rc == 2 and "Traceback" not in err and err.count("\n") == 1, err
    assert err.startswith("error: --output-dir: cannot write in"), err
    assert not target.exists()


def test_output_path_under_a_file(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    p = _cli("run", "--config", "configs/default.yaml", "--output-dir", str(f / "out"), *TINY)
    _one_error_line(p, needle="which is a file")
    assert f.read_text() == "x" and list(tmp_path.iterdir()) == [f]


def test_non_utf8_config(tmp_path):
    bad = tmp_path / "latin1.yaml"
    bad.write_bytes("seed: 1  # café\n".encode("latin-1"))
    _one_error_line(_cli("run", "--config", str(bad)), needle="not UTF-8")
    _one_error_line(_cli("--config", str(bad), module="vidur_specdec.main"), needle="not UTF-8")


def test_ctrl_c_during_a_run_is_one_line_and_leaves_nothing(tmp_path):
    cfg = _config(tmp_path)
    p = subprocess.Popen([sys.executable, "-m", "vidur_specdec", "run", "--config", str(cfg),
                          "--set", "workload.num_requests=20000", "--set", "workload.qps=50"],
                         cwd=tmp_path, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         # Ctrl-C's default action, even where this test runs in a background job (which ignores it)
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    runs = tmp_path / "runs"
    deadline = time.time() + 120
    while not (runs.is_dir() and any(runs.iterdir())) and time.time() < deadline and p.poll() is None:
        time.sleep(0.05)  # the run folder is reserved just before the simulation starts
    time.sleep(0.5)
    assert p.poll() is None, "the run ended before it could be interrupted"
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=120)
    assert p.returncode == 130, err
    assert "Traceback" not in err and err.strip().splitlines() == ["interrupted: nothing was written"], err
    assert list(runs.iterdir()) == []


def test_fake_server_bad_port():
    _one_error_line(_cli("validate", "fake-server", "--port", "99999"), needle="--port")
    _one_error_line(_cli("fake-server", "--port", "99999", module="vidur_specdec.validate"), needle="--port")


def test_validate_run_accepts_the_simulators_own_trace_format(small_profiles, tmp_path, capsys):  # noqa: F811
    from vidur_specdec.validate.cli import main
    from vidur_specdec.validate.fake_server import FakeEngineConfig, FakeServer

    cfg_path = write_yaml(tmp_path / "c.yaml", small_config(small_profiles, num_requests=6))
    trace = tmp_path / "sim_trace.csv"
    trace.write_text("arrived_at_s,prompt_tokens,output_tokens\n0.0,20,17\n0.05,40,20\n0.1,33,18\n0.2,50,30\n")
    with FakeServer(FakeEngineConfig(k=4, alpha=0.7)) as srv:
        rc = main(["run", "--url", srv.url, "--config", str(cfg_path), "--trace", str(trace), "--out",
                   str(tmp_path / "o"), "--settle-s", "0", "--plotlyjs", "cdn"])
    err = capsys.readouterr().err
    assert rc == 0 and "Traceback" not in err, err
    comp = json.loads((tmp_path / "o/comparison.json").read_text())
    assert comp["requests"] == 4 and comp["compared"] == 4


# --------------------------------------------------------------------------- success that is not


def test_validate_run_fails_when_too_few_requests_are_measured(small_profiles, tmp_path, capsys):  # noqa: F811
    from vidur_specdec.validate.cli import main
    from vidur_specdec.validate.fake_server import FakeEngineConfig, FakeServer

    n = 10
    cfg_path = write_yaml(tmp_path / "c.yaml", small_config(small_profiles, num_requests=n))
    out = tmp_path / "o"
    with FakeServer(FakeEngineConfig(faults={str(i): "fail" for i in range(n)})) as srv:
        rc = main(["run", "--url", srv.url, "--config", str(cfg_path), "--out", str(out), "--settle-s", "0"])
    err = capsys.readouterr().err
    assert rc == 3 and "Traceback" not in err and err.count("\n") == 1, err
    assert "answered 0 of 10 requests" in err and "10 error" in err and "HTTP 500" in err
    assert not out.exists()


# --------------------------------------------------------------------------- surprises


def test_duplicate_yaml_keys_are_an_error(tmp_path):
    cfg = tmp_path / "dup.yaml"
    cfg.write_text("seed: 1\nworkload:\n  qps: 2\n  num_requests: 5\n  qps: 3\n")
    _one_error_line(_cli("run", "--config", str(cfg)), needle="workload.qps: duplicate key")
    assert "line 5" in _cli("run", "--config", str(cfg)).stderr


def test_relative_paths_resolve_against_the_naming_file(tmp_path):
    from vidur_specdec.engine.resolve import load
    from vidur_specdec.sweep import load_sweep

    (tmp_path / "data").mkdir()
    trace = tmp_path / "data/t.csv"
    trace.write_text("arrived_at_s,prompt_tokens,output_tokens\n0,10,5\n0.1,12,6\n")
    cfg = write_yaml(tmp_path / "data/c.yaml", {"workload": {"arrival": "trace", "trace_file": "t.csv"}})
    assert load(cfg).workload.trace_file == str(trace)
    assert load(cfg).base_dir == trace.parent
    p = _cli("run", "--config", str(cfg), "--output-dir", str(tmp_path / "o"), cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    sweep = write_yaml(tmp_path / "data/s.yaml", {"base": "c.yaml", "rows": [{"seed": 1}, {"seed": 2}]})
    assert {r.config.workload.trace_file for r in load_sweep(sweep).rows} == {str(trace)}
    sweep = write_yaml(tmp_path / "data/s2.yaml", {"base": {"seed": 1}, "rows": [
        {"workload.arrival": "trace", "workload.trace_file": "t.csv"}]})
    assert load_sweep(sweep).rows[0].config.workload.trace_file == str(trace)


def test_sweep_grid_mapping_merges_into_the_section(tmp_path):
    from vidur_specdec.sweep import load_sweep

    sweep = load_sweep({"base": {"workload": {"num_requests": 7, "qps": 3.0}},
                        "grid": {"workload": [{"qps": 1.0}, {"qps": 2.0}]}})
    assert [(r.config.workload.num_requests, r.config.workload.qps) for r in sweep.rows] == [(7, 1.0), (7, 2.0)]


def test_overrides_accept_a_string_or_a_list_and_numpy_scalars():
    from vidur_specdec.config import ConfigError
    from vidur_specdec.engine.resolve import load

    assert load({}, "workload.num_requests=5").workload.num_requests == 5
    assert load({}, ["workload.num_requests=6", "seed=2"]).seed == 2
    with pytest.raises(ConfigError, match="overrides"):
        load({}, {"seed": 1})
    cfg = load({"seed": np.int64(3), "workload": {"num_requests": np.int32(4), "qps": np.float64(2.5)},
                "speculative": {"num_speculative_tokens": np.int64(2), "acceptance_rate": None,
                                "acceptance_per_position": np.array([0.5, 0.25])},
                "engine": {"step_overhead_ms": np.float32(0.5)}})
    assert (cfg.seed, cfg.workload.num_requests, cfg.speculative.num_speculative_tokens) == (3, 4, 2)
    assert type(cfg.seed) is int and cfg.speculative.acceptance_per_position == [0.5, 0.25]


def test_probably_wrong_values_warn(tmp_path):
    out = tmp_path / "o"
    p = _cli("run", "--config", "configs/default.yaml", "--output-dir", str(out), *TINY,
             "--set", "scheduler.num_blocks=1000000", "--set", "scheduler.chunk_size=3")
    assert p.returncode == 0, p.stderr
    warnings = [ln for ln in p.stderr.splitlines() if ln.startswith("warning: ")]
    assert len(warnings) == 2 and "scheduler.num_blocks" in warnings[0] and "scheduler.chunk_size" in warnings[1]
    summary = json.loads((out / "summary.json").read_text())
    assert [w.split(":")[0] for w in summary["warnings"]] == ["scheduler.num_blocks", "scheduler.chunk_size"]


def test_step_logs_of_another_gpu_model_or_method_are_flagged(tmp_path):
    from vidur_specdec.validate.cli import main

    write_steplog_tree(tmp_path / "logs")  # H100, Llama-2-7B, EAGLE
    cfg = _config(tmp_path)  # A100, Llama-2-7B, n-gram
    out = tmp_path / "o"
    assert main(["steps", "--root", str(tmp_path / "logs"), "--out", str(out), "--config", str(cfg),
                 "--max-steps", "20"]) == 0
    notes = json.loads((out / "steps_summary.json").read_text())
    assert len(notes["warnings"]) == 1
    assert "GPU H100 vs device a100" in notes["warnings"][0] and "drafter eagle vs speculative.method ngram" in \
        notes["warnings"][0]
    import pandas as pd

    assert pd.read_csv(out / "step_check_summary.csv")["config_mismatch"].str.contains("GPU H100").all()


# --------------------------------------------------------------------------- four command-line styles


def test_one_help_lists_every_subcommand():
    p = _cli("--help")
    assert p.returncode == 0
    for name in ("run", "sweep", "report", "tune", "profiles", "validate"):
        assert f"    {name} " in p.stdout, name
    assert _cli("--help", module="vidur_specdec.main").returncode == 0
    _one_error_line(_cli(), needle="COMMAND")


def test_no_import_cycle_between_the_cli_modules():
    code = ("import sys, vidur_specdec.sweep, vidur_specdec.report, vidur_specdec.validate.cli; "
            "print('vidur_specdec.main' in sys.modules)")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_env(), cwd=REPO)
    assert p.returncode == 0 and p.stdout.strip() == "False", p.stderr


def test_each_subcommand_module_follows_the_contract():
    import importlib

    from vidur_specdec.cli import SUBCOMMANDS

    for name, module, _ in SUBCOMMANDS:
        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError:
            assert name == "tune", module  # the only subcommand allowed to be absent
            continue
        assert callable(mod.add_arguments) and callable(mod.run), module


def test_report_works_in_both_forms(tmp_path):
    csv = REPO / "sweeps/results/specdec_39.csv"
    for i, argv in enumerate((["report", str(csv), "-o", str(tmp_path / "a.html")],)):
        assert _cli(*argv).returncode == 0
        assert _cli(*argv[:-1], str(tmp_path / "b.html"), module="vidur_specdec.main").returncode == 0
    _one_error_line(_cli("report", str(csv)), needle="-o PAGE.html")
