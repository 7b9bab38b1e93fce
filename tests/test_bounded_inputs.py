"""Nothing overwritten, nothing hangs: output folders, bounded config reading, dead workers, the validation client.

Each case ends with one ``error:`` line (no traceback), its documented exit status (2 bad input,
3 a failed service), within seconds, and nothing of the user's lost or mixed.
"""

import json
import os
import time
from pathlib import Path

import pytest
import yaml
from test_sweep import BASE, small_sweep
from validate_fixtures import small_config, small_profiles, write_steplog_tree, write_yaml  # noqa: F401

from vidur_specdec import cli, outfolder
from vidur_specdec.engine.resolve import load
from vidur_specdec.config.files import parse_set
from vidur_specdec.sweep.definition import load_sweep
from vidur_specdec.sweep.executors import run_local
from vidur_specdec.validate import steplog_read, steplogs
from vidur_specdec.validate.fake_server import FakeEngineConfig, FakeServer

REPO = Path(__file__).resolve().parents[1]


def one_error(capsys, rc, code, needle=""):
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert rc == code, err
    assert "Traceback" not in err and len(lines) == 1 and lines[0].startswith("error: "), err
    assert needle in lines[0], lines[0]
    assert len(lines[0]) < 2000
    return lines[0]


def snapshot(folder: Path) -> dict:
    return {p.name: p.read_bytes() for p in folder.iterdir()}


@pytest.fixture
def cfg(tmp_path, small_profiles):  # noqa: F811
    return write_yaml(tmp_path / "cfg.yaml", small_config(small_profiles, num_requests=4))


# --------------------------------------------------------------------------- output folders


def test_tune_refuses_a_run_folder(tmp_path, cfg, capsys):
    d = tmp_path / "d"
    d.mkdir()
    for name in ("summary.json", "requests.csv", "steps.csv"):
        (d / name).write_text(name)
    before = snapshot(d)
    rc = cli.main(["tune", "--config", str(cfg), "--output-dir", str(d)])
    one_error(capsys, rc, 2, "requests.csv")
    assert snapshot(d) == before


@pytest.mark.parametrize("files", [{"measured.csv": "a\n1\n", "notes.txt": "mine"},
                                   {"measured.csv": "a\n1\n", "replay.json": "{}", "report.html": "x"}])
def test_validate_run_refuses_a_used_folder(tmp_path, cfg, capsys, files):
    d = tmp_path / "d"
    d.mkdir()
    for name, text in files.items():
        (d / name).write_text(text)
    rc = cli.main(["validate", "run", "--url", "http://127.0.0.1:9", "--config", str(cfg), "--out", str(d)])
    one_error(capsys, rc, 2, "--overwrite")
    assert snapshot(d) == {k: v.encode() for k, v in files.items()}
    if "notes.txt" in files:  # --overwrite never removes a user's files
        rc = cli.main(["validate", "run", "--url", "http://127.0.0.1:9", "--config", str(cfg), "--out", str(d),
                       "--overwrite"])
        one_error(capsys, rc, 2, "notes.txt")
        assert snapshot(d) == {k: v.encode() for k, v in files.items()}


def test_a_sweep_named_tune_replaces_a_tune_folder_whole(tmp_path, capsys):
    d = tmp_path / "d"
    d.mkdir()
    for name in ("tune.csv", ".tune.journal.jsonl", "summary.json", "tune.html", "speculative_config.json"):
        (d / name).write_text("tune")
    data = small_sweep(num_requests=6)
    data["sweep"]["name"] = "tune"
    data["grid"] = data["grid"][:1]
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    rc = cli.main(["sweep", "--config", str(tmp_path / "s.yaml"), "--output-dir", str(d), "--jobs", "1"])
    one_error(capsys, rc, 2, "summary.json")
    rc = cli.main(["sweep", "--config", str(tmp_path / "s.yaml"), "--output-dir", str(d), "--jobs", "1",
                   "--overwrite"])
    assert rc == 0, capsys.readouterr().err
    assert sorted(p.name for p in d.iterdir()) == [".tune.journal.jsonl", "tune.csv", "tune.provenance.json"]
    assert "summary" not in (d / "tune.csv").read_text()[:10]


def test_the_rule_in_one_place(tmp_path):
    d = tmp_path / "d"
    assert outfolder.check(d, "tune", False) is False  # missing
    d.mkdir()
    (d / ".tune.journal.jsonl").write_text("x")
    assert outfolder.check(d, "tune", False) is False  # its own: resumes
    (d / "requests.csv").write_text("x")
    with pytest.raises(Exception, match="requests.csv"):
        outfolder.check(d, "tune", False)
    assert outfolder.check(d, "tune", True) is True
    outfolder.clear(d)
    assert list(d.iterdir()) == []


# --------------------------------------------------------------------------- config reading


def _bomb(path: Path) -> Path:
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    names = "abcdefghij"
    for i in range(1, 10):
        n, m = names[i], names[i - 1]
        lines.append(f"{n}: &{n} [" + ",".join([f"*{m}"] * 9) + "]")
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("text", ["bomb", "model: " + "[" * 100_000, "{a: " * 5000 + "1" + "}" * 5000])
def test_config_reading_is_bounded(tmp_path, capsys, text):
    p = _bomb(tmp_path / "c.yaml") if text == "bomb" else tmp_path / "c.yaml"
    if text != "bomb":
        p.write_text(text)
    assert len(p.read_bytes()) < 400 or text != "bomb"  # ten levels of aliases in under 400 bytes
    t0 = time.monotonic()
    rc = cli.main(["run", "--config", str(p), "--output-dir", str(tmp_path / "out")])
    assert time.monotonic() - t0 < 10
    one_error(capsys, rc, 2, str(p))
    assert not (tmp_path / "out").exists()


def test_exponent_numbers_read_as_numbers(cfg):
    assert parse_set("workload.qps=1e6") == ("workload.qps", 1e6)
    assert parse_set("workload.qps=5e-1") == ("workload.qps", 0.5)
    assert parse_set("model=abc") == ("model", "abc")
    assert load(str(cfg), ["workload.qps=5e-1"]).workload.qps == 0.5
    assert load(str(cfg), ["workload.qps=1e6"]).workload.qps == 1e6


def test_a_huge_value_gives_a_short_line(tmp_path, capsys):
    p = tmp_path / "c.yaml"
    p.write_text("model: " + "x" * 10_000_000 + "\n")
    t0 = time.monotonic()
    rc = cli.main(["run", "--config", str(p)])
    assert time.monotonic() - t0 < 10
    one_error(capsys, rc, 2, "--config")
    p.write_text("model: " + "x" * 100_000 + "\n")
    line = one_error(capsys, cli.main(["run", "--config", str(p)]), 2, "model:")
    assert len(line) < 2000


def test_output_paths_checked_before_any_work(tmp_path, cfg, capsys):
    loop = tmp_path / "loop"
    os.symlink(loop, loop)
    rc = cli.main(["run", "--config", str(cfg), "--output-dir", str(loop)])
    line = one_error(capsys, rc, 2, str(loop))
    assert f".{loop.name}." not in line
    rc = cli.main(["report", str(REPO / "sweeps/results/specdec_39.csv"), "-o", str(tmp_path)])
    line = one_error(capsys, rc, 2, str(tmp_path))
    assert ".tmp" not in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cfg.yaml", "loop"]


# --------------------------------------------------------------------------- a dead worker


def _die(config_dict):
    os.kill(os.getpid(), 9)


def _fail_on_a_worker(config_dict):
    if config_dict["seed"] == 99:
        raise ValueError("this row fails")
    return {"seed": config_dict["seed"], "pid": os.getpid()}


def test_an_optional_row_that_fails_is_dropped_and_inline_rows_run_here():
    """A row with a negative index (a point simulated ahead of its asking) is dropped when it fails; the rows
    asked to run inline run in this process while the others run on a worker."""
    import dataclasses

    rows = load_sweep(small_sweep(num_requests=6)).rows[:2]
    bad = dataclasses.replace(rows[1], index=-1, config=dataclasses.replace(rows[1].config, seed=99))
    done = []
    run_local([rows[0], bad], 2, [], lambda r, res: done.append((r.index, res["pid"])), fn=_fail_on_a_worker,
              inline=1)
    assert done == [(0, os.getpid())]
    with pytest.raises(ValueError):
        run_local([rows[0], dataclasses.replace(bad, index=1)], 2, [], lambda r, res: None, fn=_fail_on_a_worker,
                  inline=1)


def test_a_dead_worker_is_one_line_naming_the_row(capsys):
    rows = load_sweep(small_sweep(num_requests=6)).rows[:2]
    rc = cli.guarded(lambda: run_local(rows, 2, [], lambda r, res: None, fn=_die))
    one_error(capsys, rc, 3, "rerun the same command to resume")
    assert BASE  # the sweep fixture's base config


# --------------------------------------------------------------------------- the validation client


@pytest.mark.parametrize("fault,code", [("trickle", 3), ("garbage", 3)])
def test_a_bad_metrics_endpoint_is_a_failed_service(tmp_path, cfg, capsys, fault, code):
    out = tmp_path / "out"
    with FakeServer(FakeEngineConfig(metrics_fault=fault)) as srv:
        t0 = time.monotonic()
        rc = cli.main(["validate", "run", "--url", srv.url, "--config", str(cfg), "--out", str(out),
                       "--deadline-s", "2"])
        assert time.monotonic() - t0 < 10
    one_error(capsys, rc, code, "--url")
    assert not out.exists()


def test_an_impossible_port_is_bad_input(tmp_path, cfg, capsys):
    rc = cli.main(["validate", "run", "--url", "http://127.0.0.1:99999", "--config", str(cfg),
                   "--out", str(tmp_path / "o")])
    one_error(capsys, rc, 2, "99999")


def test_replay_against_nothing_is_a_failed_service(tmp_path, capsys):
    trace = tmp_path / "t.csv"
    trace.write_text("request_id,arrival_offset_s,prompt_tokens,output_tokens\n"
                     + "".join(f"{i},0,8,4\n" for i in range(4)))
    rc = cli.main(["validate", "replay", "--no-scrape", "--model", "m", "--url", "http://127.0.0.1:9",
                   "--trace", str(trace), "--out", str(tmp_path / "o"), "--timeout-s", "5"])
    one_error(capsys, rc, 3, "answered 0 of 4")
    assert not (tmp_path / "o").exists()


# --------------------------------------------------------------------------- step logs as the card has them


def _card_tree(root: Path, fmt: str) -> dict:
    """Key columns dropped (the path gives them), a slashed target and drafter, accuracy steps at start 0."""
    truth = write_steplog_tree(root / "tmp", fmt=fmt, steps_n=40)
    import pandas as pd

    for table in ("steps", "runs"):
        files = sorted((root / "tmp" / table).rglob("*.*"))
        for f in files:
            df = pd.read_parquet(f) if f.suffix == ".parquet" else pd.read_csv(f)
            df = df.drop(columns=["gpu", "target", "split", "drafter", "k", "c", "start"])
            if table == "steps":
                if fmt == "parquet":
                    df["hist"] = [json.loads(h) for h in df["hist"]]  # a native list column
                for mode, start in (("load", 0), ("accuracy", 0)):
                    d = root / table / "H100" / "meta-llama" / "Llama-3.1-8B" / "qualitative" / "yuhuili" / "EAGLE3-8B-k3"
                    d.mkdir(parents=True, exist_ok=True)
                    name = f"{mode}-c1-s{start}{f.suffix}"
                    (df.to_parquet(d / name, index=False) if fmt == "parquet" else df.to_csv(d / name, index=False))
    return truth


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_steplogs_keep_accuracy_and_load_runs_apart(tmp_path, fmt):
    if fmt == "parquet":
        pytest.importorskip("pyarrow")
    _card_tree(tmp_path, fmt)
    steps = steplog_read.read_table(tmp_path, "steps")
    row = steps.iloc[0]
    assert (row["gpu"], row["target"], row["split"], row["drafter"], int(row["k"]), int(row["c"])) == (
        "H100", "meta-llama/Llama-3.1-8B", "qualitative", "yuhuili/EAGLE3-8B", 3, 1)
    assert sorted(set(steps["mode"])) == ["accuracy", "load"]
    _, summ = steplogs.acceptance_from_hist(steps)
    assert len(summ) == 2 and set(summ["mode"]) == {"accuracy", "load"}
    assert len(steplog_read.read_table(tmp_path, "steps", {"gpu": "h100"})) == len(steps)


def test_steps_filter_matching_nothing_and_k_mismatch(tmp_path, cfg, capsys):
    root = tmp_path / "root"
    write_steplog_tree(root, steps_n=20)
    rc = cli.main(["validate", "steps", "--root", str(root), "--out", str(tmp_path / "o"), "--gpu", "nosuchgpu"])
    one_error(capsys, rc, 2, "--gpu nosuchgpu")
    assert not (tmp_path / "o").exists()
    data = yaml.safe_load(cfg.read_text())
    data["speculative"]["num_speculative_tokens"] = 3
    cfg2 = write_yaml(tmp_path / "k3.yaml", data)
    rc = cli.main(["validate", "steps", "--root", str(root), "--out", str(tmp_path / "o"), "--config", str(cfg2)])
    err = capsys.readouterr().err
    assert rc == 0 and any("k 4 vs speculative.num_speculative_tokens 3" in ln for ln in err.splitlines()), err
