"""Sweeps: expansion, validation, determinism across --jobs and executors, resume after a kill."""

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from conftest import REPO, run_command
from vidur_specdec.config import ConfigError
from vidur_specdec.sweep.journal import line_sum
from vidur_specdec.sweep import is_sweep, load_sweep, run_sweep

BASE = {
    "seed": 1,
    "workload": {"num_requests": 30, "qps": 4.0,
                 "prompt_tokens": {"dist": "uniform", "min": 32, "max": 768},
                 "output_tokens": {"dist": "uniform", "min": 8, "max": 256}},
    "speculative": {"method": "ngram"},
}


def small_sweep(num_requests=30, **extra):
    """6 rows: a baseline and 2 speculative rows at two loads."""
    base = json.loads(json.dumps(BASE))
    base["workload"]["num_requests"] = num_requests
    d = {"sweep": {"name": "tiny"}, "base": base,
         "grid": [{"workload.qps": [3.0, 9.0], "speculative.method": ["none"]},
                  {"workload.qps": [3.0, 9.0], "speculative.num_speculative_tokens": [4],
                   "speculative.acceptance_rate": [0.7], "speculative.verify_attention": ["shared_kv", "per_token"]}]}
    d.update(extra)
    return d


def write(tmp_path, data, name="tiny.yaml") -> Path:
    p = tmp_path / name
    p.write_text(yaml.safe_dump(data, sort_keys=False))
    return p


def cli(*args, **kw):
    return run_command(*args, **kw)


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


# --------------------------------------------------------------------------- definition


def test_expansion_order_ids_and_baselines():
    sw = load_sweep(small_sweep())
    assert [(r.config.workload.qps, r.config.speculative.method, r.config.speculative.verify_attention)
            for r in sw.rows] == [(3.0, "none", "shared_kv"), (9.0, "none", "shared_kv"),
                                  (3.0, "ngram", "shared_kv"), (3.0, "ngram", "per_token"),
                                  (9.0, "ngram", "shared_kv"), (9.0, "ngram", "per_token")]
    # baselines are normalised: k = 0, method none
    assert sw.rows[0].config.speculative.num_speculative_tokens == 0
    # same load = same config outside speculative.*
    assert sw.baseline_of == {0: 0, 1: 1, 2: 0, 3: 0, 4: 1, 5: 1}
    assert len({r.row_id for r in sw.rows}) == 6
    # the identity is stable and depends on the rows
    assert load_sweep(small_sweep()).sweep_hash == sw.sweep_hash
    other = small_sweep()
    other["base"]["seed"] = 2
    assert load_sweep(other).sweep_hash != sw.sweep_hash
    assert sw.columns[:2] == ["row", "row_id"]
    assert sw.columns[-4:] == ["tpot_speedup", "speedup_above_acceptance", "baseline_row", "sweep_hash"]


def test_grid_plus_rows_and_extra_columns():
    d = {"base": BASE, "grid": {"speculative.num_speculative_tokens": [2, 4]},
         "rows": [{"speculative.method": "none"}, {"scheduler.chunk_size": 256}]}
    sw = load_sweep(d)
    assert [r.overrides for r in sw.rows] == [{"speculative.num_speculative_tokens": 2},
                                              {"speculative.num_speculative_tokens": 4},
                                              {"speculative.method": "none"}, {"scheduler.chunk_size": 256}]
    assert "scheduler.chunk_size" in sw.columns
    # the chunk-256 row is another load: it has no baseline in this sweep
    assert sw.baseline_of[3] is None and sw.baseline_of[0] == 2
    assert is_sweep(d) and is_sweep({"grid": {}}) and not is_sweep(BASE)


@pytest.mark.parametrize("data, words", [
    ({"base": BASE, "grid": {}}, ["grid", "empty"]),
    ({"base": BASE, "grid": {"workload.qps": []}}, ["grid.workload.qps", "empty"]),
    ({"base": BASE, "grid": []}, ["grid", "empty"]),
    ({"base": BASE, "rows": []}, ["rows", "empty"]),
    ({"base": BASE, "sweep": {"name": "x"}}, ["grid", "rows"]),
    ({"base": BASE, "grid": {"workload.qps": 2.0}}, ["grid.workload.qps", "list"]),
    ({"base": BASE, "grid": {"speculative.bogus": [1, 2]}}, ["speculative.bogus", "unknown key"]),
    ({"base": BASE, "grid": {"bogus.key": [1]}}, ["bogus", "unknown key"]),
    ({"base": BASE, "rows": [{"workload.qps": "fast"}]}, ["rows[0]", "workload.qps", "number"]),
    ({"base": BASE, "rows": [{"workload.qps": 2.0}, {"workload.qps": 2.0}]}, ["rows[1]", "sweep rows 0 and 1",
                                                                             "same run"]),
    # two baselines that differ only in speculative keys are the same run
    ({"base": BASE, "grid": {"speculative.method": ["none"], "speculative.verify_attention": ["shared_kv",
                                                                                               "per_token"]}},
     ["same run", "speculation is off"]),
    ({"base": BASE, "grid": {"workload.qps": [1.0]}, "runs": 3}, ["runs", "unknown top-level key"]),
    ({"base": {"workload": {"qps": -1}}, "grid": {"seed": [1]}}, ["base", "workload.qps"]),
    ({"base": BASE, "grid": {"seed": [1]}, "sweep": {"name": "a/b"}}, ["sweep.name"]),
])
def test_bad_sweeps_are_one_line_errors(data, words):
    with pytest.raises(ConfigError) as e:
        load_sweep(data)
    msg = str(e.value)
    assert "\n" not in msg
    for w in words:
        assert w in msg, msg


def test_cli_bad_sweep_exit_2_nothing_written(tmp_path):
    p = write(tmp_path, {"base": BASE, "grid": {"speculative.acceptance": [0.5, 0.6]}})
    out = tmp_path / "out"
    r = cli("--config", p, "--output-dir", out)
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0 and "speculative.acceptance: unknown key" in r.stderr
    assert not out.exists()


# --------------------------------------------------------------------------- running


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The tiny sweep run uninterrupted with one job (in-process)."""
    out = tmp_path_factory.mktemp("ref")
    run = run_sweep(load_sweep(small_sweep()), out, jobs=1, progress=False)
    return run.csv_path.read_bytes()


def test_csv_shape_and_speedups(reference, tmp_path):
    p = tmp_path / "x.csv"
    p.write_bytes(reference)
    rows = read_csv(p)
    assert len(rows) == 6 and [int(r["row"]) for r in rows] == list(range(6))
    for r in rows:
        for c in ("tpot_ms_p50", "tpot_ms_p90", "tpot_ms_p99", "ttft_ms_p50", "ttft_ms_p90", "ttft_ms_p99",
                  "e2e_ms_p50", "e2e_ms_p90", "e2e_ms_p99", "throughput_tok_s", "mean_acceptance_length"):
            assert len(r[c].split(".")[1]) == 6  # fixed %.6f
        base = rows[int(r["baseline_row"])]
        if r["method"] == "none":
            assert r["tpot_speedup"] == "1.000000" and r["mean_acceptance_length"] == "1.000000"
            assert r["acceptance_rate"] == "" and r["verify_attention"] == "" and r["k"] == "0"
        else:
            assert float(r["tpot_speedup"]) == pytest.approx(float(base["tpot_ms_p50"]) / float(r["tpot_ms_p50"]),
                                                             rel=1e-5)
            assert float(r["mean_acceptance_length"]) > 1
    assert len({r["sweep_hash"] for r in rows}) == 1


def test_jobs_1_and_2_identical_and_rerun_idempotent(reference, tmp_path):
    sw = load_sweep(small_sweep())
    run = run_sweep(sw, tmp_path, jobs=2, progress=False)
    assert run.ran == 6
    assert run.csv_path.read_bytes() == reference
    again = run_sweep(sw, tmp_path, jobs=2, progress=False)
    assert again.ran == 0 and again.skipped == 6
    assert again.csv_path.read_bytes() == reference


def test_cli_sweep_dispatch(reference, tmp_path):
    p = write(tmp_path, small_sweep())
    r = cli("--config", p, "--output-dir", tmp_path / "o", "--jobs", "2")
    assert r.returncode == 0, r.stderr
    assert "wrote" in r.stdout and "6 rows" in r.stdout
    assert (tmp_path / "o" / "tiny.csv").read_bytes() == reference
    assert (tmp_path / "o" / ".tiny.journal.jsonl").is_file()


def _journal_rows(path: Path) -> int:
    if not path.exists():
        return 0
    return sum(1 for line in path.read_bytes().split(b"\n")[1:] if line.strip())


def test_resume_after_kill_gives_identical_csv(tmp_path):
    """SIGKILL the CLI once rows have landed in the journal, add a torn line, rerun: same CSV as uninterrupted."""
    data = small_sweep(num_requests=60)
    data["grid"][1]["speculative.num_speculative_tokens"] = [2, 4, 8]  # 14 rows
    p = write(tmp_path, data)
    full = run_sweep(load_sweep(p), tmp_path / "full", jobs=1, progress=False).csv_path.read_bytes()
    out = tmp_path / "killed"
    journal = out / ".tiny.journal.jsonl"
    proc = subprocess.Popen([sys.executable, "-m", "vidur_specdec.main", "--config", str(p), "--output-dir", str(out),
                             "--jobs", "2"], cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        t0 = time.monotonic()
        while _journal_rows(journal) < 2 and proc.poll() is None and time.monotonic() - t0 < 120:
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
    done = _journal_rows(journal)
    assert proc.returncode == -signal.SIGKILL
    assert 2 <= done < 14, "the sweep finished before it could be killed"
    assert not (out / "tiny.csv").exists()
    time.sleep(0.5)  # the workers die with the parent: nothing more lands in the journal
    assert _journal_rows(journal) == done
    with open(journal, "ab") as f:  # a half-written last line, as a kill mid-write would leave
        f.write(b'{"metrics": {"tpot_ms_p50": 1.0')
    r = cli("--config", p, "--output-dir", out, "--jobs", "2")
    assert r.returncode == 0, r.stderr
    assert f"{14 - done} run" in r.stdout and f"{done} already done" in r.stdout
    assert (out / "tiny.csv").read_bytes() == full


def test_changed_config_and_foreign_csv_are_refused(reference, tmp_path):
    sw = load_sweep(small_sweep())
    run_sweep(sw, tmp_path, jobs=1, progress=False)
    before = {f.name: f.read_bytes() for f in tmp_path.iterdir()}
    changed = small_sweep()
    changed["base"]["seed"] = 7
    with pytest.raises(ConfigError) as e:
        run_sweep(load_sweep(changed), tmp_path, jobs=1, progress=False)
    assert str(tmp_path) in str(e.value) and "different sweep" in str(e.value)
    assert {f.name: f.read_bytes() for f in tmp_path.iterdir()} == before

    # a user's CSV under the sweep's name: not a sweep table, so never replaced, even with --overwrite
    other = tmp_path / "other"
    other.mkdir()
    (other / "tiny.csv").write_text("a,b\n1,2\n")
    for overwrite in (False, True):
        with pytest.raises(ConfigError, match="tiny.csv"):
            run_sweep(sw, other, jobs=1, progress=False, overwrite=overwrite)
    assert (other / "tiny.csv").read_text() == "a,b\n1,2\n"
    assert sorted(f.name for f in other.iterdir()) == ["tiny.csv"]

    # the CLI: one line, exit 2; --overwrite replaces (the sweep file lives outside the output folder:
    # a folder holding files a sweep did not write is refused)
    import shutil

    shutil.rmtree(other)
    cfg_dir = tmp_path.parent / f"{tmp_path.name}-cfg"
    cfg_dir.mkdir(exist_ok=True)
    p = write(cfg_dir, changed, "tiny.yaml")
    r = cli("--config", p, "--output-dir", tmp_path)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "different sweep" in r.stderr
    r = cli("--config", p, "--output-dir", tmp_path, "--overwrite")
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "tiny.csv").read_bytes() != reference


def test_journal_from_other_code_is_refused(tmp_path):
    sw = load_sweep(small_sweep())
    run_sweep(sw, tmp_path, jobs=1, progress=False)
    j = tmp_path / ".tiny.journal.jsonl"
    lines = j.read_text().splitlines(keepends=True)
    header = json.loads(lines[0])
    header["code"] = "0" * 16
    header["sum"] = line_sum(header)  # a consistent line of other code, not an edit
    j.write_text(json.dumps(header, sort_keys=True) + "\n" + "".join(lines[1:]))
    with pytest.raises(ConfigError, match="different simulator code"):
        run_sweep(sw, tmp_path, jobs=1, progress=False)


def test_an_edited_or_unchecksummed_journal_is_refused(tmp_path, monkeypatch):
    """A changed metric (checksum kept) or a journal without checksums: refused, never resumed into a CSV."""
    sw = load_sweep(small_sweep())
    first = run_sweep(sw, tmp_path, jobs=1, progress=False).csv_path.read_bytes()
    j = tmp_path / ".tiny.journal.jsonl"
    good = j.read_text()
    lines = good.splitlines(keepends=True)
    assert all("sum" in json.loads(ln) for ln in lines)
    edited = lines[2].replace('"tpot_ms_p50": ', '"tpot_ms_p50": 1', 1)
    assert edited != lines[2]
    from vidur_specdec.sweep import executors

    monkeypatch.setattr(executors, "run_row", lambda *a, **k: (_ for _ in ()).throw(AssertionError("simulated")))
    (tmp_path / "tiny.csv").unlink()
    for text, words in (("".join(lines[:2]) + edited + "".join(lines[3:]), "line 3 does not match its checksum"),
                        ("".join(json.dumps({k: v for k, v in json.loads(ln).items() if k != "sum"},
                                            sort_keys=True) + "\n" for ln in lines), "line 1 has no checksum")):
        j.write_text(text)
        with pytest.raises(ConfigError, match=words):
            run_sweep(sw, tmp_path, jobs=1, progress=False)
        assert j.read_text() == text and not (tmp_path / "tiny.csv").exists()
    j.write_text(good)  # the untouched journal resumes into the same bytes
    assert run_sweep(sw, tmp_path, jobs=1, progress=False).csv_path.read_bytes() == first


def test_ray_executor_identical(reference, tmp_path):
    pytest.importorskip("ray")
    run = run_sweep(load_sweep(small_sweep()), tmp_path, jobs=2, executor="ray", progress=False)
    assert run.ran == 6
    assert run.csv_path.read_bytes() == reference


# --------------------------------------------------------------------------- engine guards


def test_row_metrics_code_is_in_the_code_digest():
    """A change to the code that computes a row's metrics must change the digest that guards a journal."""
    import inspect

    from vidur_specdec.sweep import digest, row_metrics

    src = Path(inspect.getsourcefile(row_metrics)).resolve()
    pkg = Path(digest.__file__).resolve().parent.parent
    assert str(src.relative_to(pkg)) in digest.ROW_CODE
    hashed = digest.model_code_files()
    assert src.relative_to(pkg).as_posix() in hashed
    # code in subpackages that decides results is hashed too (a proposer, the profile builder) ...
    assert {"speculation/proposers/eagle.py", "costs/profiles/builder.py", "engine/core/sarathi.py",
            "engine/reference/scheduler.py", "pricing/pricer.py"} <= set(hashed)
    # ... and the command line, pages, engines and validation harness are not
    assert not any(f in hashed for f in ("cli.py", "console.py", "report/page.py", "sweep/runner.py", "tune/cli.py",
                                         "validate/cli.py", "profiles/cli.py"))


def test_journal_line_with_bad_metrics_is_refused_before_any_simulation(tmp_path, monkeypatch):
    sw = load_sweep(small_sweep())
    run_sweep(sw, tmp_path, jobs=1, progress=False)
    j = tmp_path / ".tiny.journal.jsonl"
    lines = j.read_text().splitlines(keepends=True)
    obj = json.loads(lines[3])
    obj["metrics"]["tpot_ms_p50"] = "fast"
    obj["sum"] = line_sum(obj)  # checksummed: the metrics check below, not the checksum, refuses it
    lines[3] = json.dumps(obj, sort_keys=True) + "\n"
    obj5 = json.loads(lines[5])
    j.write_text("".join(lines[:5]))  # row of line 5 onwards is pending again
    from vidur_specdec.sweep import executors

    def no_run(*a, **k):
        raise AssertionError("a row was simulated")

    monkeypatch.setattr(executors, "run_row", no_run)
    with pytest.raises(ConfigError) as e:
        run_sweep(sw, tmp_path, jobs=1, progress=False)
    msg = str(e.value)
    assert "\n" not in msg and f"sweep row {obj['row']}" in msg and "tpot_ms_p50" in msg and "line 4" in msg
    del obj5["metrics"]["restarts"]
    obj5["sum"] = line_sum(obj5)
    j.write_text("".join(lines[:3]) + json.dumps(obj5, sort_keys=True) + "\n")
    with pytest.raises(ConfigError, match=f"sweep row {obj5['row']}.*restarts is missing"):
        run_sweep(sw, tmp_path, jobs=1, progress=False)


def test_second_run_on_a_held_folder_is_refused_and_a_stale_lock_is_taken_over(tmp_path):
    p = write(tmp_path, small_sweep(num_requests=10))
    out = tmp_path / "out"
    out.mkdir()
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (out / ".vidur_specdec.lock").write_text(f"{holder.pid}\n")
        r = cli("--config", p, "--output-dir", out, "--jobs", "1")
        assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
        assert f"pid {holder.pid}" in r.stderr and "in use" in r.stderr
        assert sorted(x.name for x in out.iterdir()) == [".vidur_specdec.lock"]
    finally:
        holder.kill()
        holder.wait()
    # the holder is gone: its lock is stale, taken over, and removed at the end
    r = cli("--config", p, "--output-dir", out, "--jobs", "1")
    assert r.returncode == 0, r.stderr
    assert (out / "tiny.csv").is_file() and not (out / ".vidur_specdec.lock").exists()


def test_ray_with_unreachable_address_fails_fast_without_a_journal(tmp_path):
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    p = write(tmp_path, small_sweep(num_requests=10))
    out = tmp_path / "out"
    t0 = time.monotonic()
    r = cli("--config", p, "--output-dir", out, "--executor", "ray", "--address", f"127.0.0.1:{port}")
    assert time.monotonic() - t0 < 30
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "--address" in r.stderr, r.stderr
    assert not out.exists()
