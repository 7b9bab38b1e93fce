"""Bounded work announced up front: sweep grids, build sizes, request and trace counts, option ranges.

Past a documented bound (docs/config.md, "Bounds") the command stops with one ``error:`` line before
any work (exit 2, no traceback, within seconds); a large but allowed job says so, with its
memory estimate, before it starts. A killed run leaves nothing in the temp directory.
"""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import one_error_line as one_error
from vidur_specdec import cli

REPO = Path(__file__).resolve().parents[1]
DEFAULT = str(REPO / "configs/default.yaml")
def _env() -> dict:
    """The environment of a subprocess, read when it starts (the session's private predictor cache is set after
    this module is imported)."""
    return {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}


def _main(argv):
    """cli.main, with argparse's SystemExit (a bad option) turned into its exit status."""
    try:
        return cli.main(argv)
    except SystemExit as e:
        return e.code


def test_a_small_file_expanding_to_millions_of_rows_is_refused_at_once(tmp_path, capsys):
    sizes = {"seed": 20, "workload.num_requests": 20, "workload.qps": 40, "speculative.num_speculative_tokens": 40}
    sweep = tmp_path / "big.yaml"
    sweep.write_text(f"base: {DEFAULT}\nsweep: {{name: big}}\ngrid:\n"
                     + "".join(f"  {k}: {list(range(1, n + 1))}\n" for k, n in sizes.items())
                     + "  scheduler.chunk_size: [512, 1024, 2048, 4096, 8192, 256, 128, 64, 32, 16]\n")
    assert sweep.stat().st_size < 1000
    t0 = time.monotonic()
    rc = cli.main(["sweep", "--config", str(sweep), "--output-dir", str(tmp_path / "o")])
    assert time.monotonic() - t0 < 10
    one_error(capsys, rc, "6,400,000 rows", "10,000")
    assert not (tmp_path / "o").exists()


def test_profiles_build_sizes_are_bounded(tmp_path, capsys):
    t0 = time.monotonic()
    rc = cli.main(["profiles", "build", "--model", "meta-llama/Llama-2-7b-hf", "--device", "a100", "--tp", "1",
                   "--out", str(tmp_path / "o"), "--max-tokens", "10000000"])
    assert time.monotonic() - t0 < 10
    one_error(capsys, rc, "--max-tokens", "131,072")
    rc = cli.main(["profiles", "build", "--model", "meta-llama/Llama-3.1-8B", "--device", "h100", "--tp", "1", "2",
                   "4", "8", "--out", str(tmp_path / "o")])  # 128k context, four TP sizes: 17.8 million rows
    one_error(capsys, rc, "rows, more than 10,000,000")
    assert not (tmp_path / "o").exists()


def test_a_large_build_is_announced_with_its_estimate(monkeypatch):
    from vidur_specdec.architectures.models import get_model
    from vidur_specdec.costs import profiles
    from vidur_specdec.costs.profiles import vidur_tables

    lines = []
    monkeypatch.setattr(profiles, "build_mlp_df", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("built")))
    with pytest.raises(RuntimeError, match="built"):
        profiles.build_profile(get_model("meta-llama/Llama-3.1-8B"), "h100", 1, log=lines.append)
    assert len(lines) == 1 and "4,459,011 rows" in lines[0] and "GB of memory" in lines[0]
    assert vidur_tables.attention_grid_rows(4096) == len(vidur_tables.attention_grid(4096))
    assert vidur_tables.attention_grid_rows(8192, max_chunk=512) == len(vidur_tables.attention_grid(8192, max_chunk=512))


@pytest.mark.parametrize("argv,needle", [
    (["validate", "generate", "--config", DEFAULT, "--seed", "-1", "--out", "g.csv"], "--seed"),
    (["validate", "generate", "--config", DEFAULT, "--seed", str(2 ** 32), "--out", "g.csv"], "--seed"),
    (["validate", "fake-server", "--port", "0", "--alpha", "2"], "--alpha"),
    (["validate", "fake-server", "--port", "0", "--k", "-3"], "--k"),
    (["validate", "fake-server", "--port", "0", "--per-position", "0.5", "nan"], "--per-position"),
    (["validate", "fake-server", "--port", "0", "--base-ms", "-1"], "--base-ms"),
])
def test_option_ranges_are_checked_before_any_work(tmp_path, capsys, monkeypatch, argv, needle):
    monkeypatch.chdir(tmp_path)
    t0 = time.monotonic()
    rc = _main(argv)
    assert time.monotonic() - t0 < 10
    one_error(capsys, rc, needle)
    assert list(tmp_path.iterdir()) == []


def test_the_fake_engine_refuses_impossible_settings():
    from vidur_specdec.validate.fake_server import FakeEngineConfig

    for bad in ({"alpha": 2.0}, {"k": -3}, {"per_position": [0.5, 1.5], "k": 2}, {"base_ms": float("nan")}):
        with pytest.raises(ValueError):
            FakeEngineConfig(**bad)


def test_a_long_trace_is_bounded(tmp_path, monkeypatch):
    from vidur_specdec.config import ConfigError
    from vidur_specdec.engine import workload

    t = tmp_path / "t.csv"
    t.write_text("arrived_at_s,prompt_tokens,output_tokens\n" + "0,10,5\n" * 5)
    monkeypatch.setattr(workload, "MAX_TRACE_REQUESTS", 4)
    with pytest.raises(ConfigError, match="5 requests, more than 4"):
        workload.read_trace_frame(t)


def test_a_large_run_is_announced_before_it_starts(tmp_path, capsys, monkeypatch):
    import vidur_specdec.run as run_main

    monkeypatch.setattr(run_main, "ANNOUNCE_REQUESTS", 5)
    assert cli.main(["run", "--config", DEFAULT, "--set", "workload.num_requests=6",
                     "--output-dir", str(tmp_path / "o")]) == 0
    err = capsys.readouterr().err
    assert "run: 6 requests: about 0.0 GB of memory" in err


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_a_killed_run_leaves_nothing_in_the_temp_directory(tmp_path, sig):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    code = ("import sys, vidur_specdec.engine.simulation; print('ready', flush=True); "
            "from vidur_specdec import simulate; "
            "simulate(sys.argv[1], overrides=['workload.num_requests=200000', 'workload.qps=50'])")
    p = subprocess.Popen([sys.executable, "-c", code, DEFAULT], env={**_env(), "TMPDIR": str(tmp)},
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert p.stdout.readline().strip() == "ready"  # Vidur (and what it imports) is loaded
        time.sleep(0.5)
        p.send_signal(sig)
        p.wait(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == -sig
    assert list(tmp.iterdir()) == []
