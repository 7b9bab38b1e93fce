"""No command deletes or replaces a file it did not write, with or without ``--overwrite``.

Each refusal is one ``error:`` line (exit 2, no traceback) given before anything in the folder is
touched, and every file a user put there is still there, byte for byte.
"""

import os
import shutil
import time
from pathlib import Path

import pytest
from validate_fixtures import small_config, small_profiles, write_yaml  # noqa: F401

from conftest import one_error_line as one_error
from conftest import unwritable_folder
from vidur_specdec import cli, outfolder
from vidur_specdec.config import ConfigError

REPO = Path(__file__).resolve().parents[1]
SWEEP_CSV = REPO / "sweeps/results/specdec_39.csv"
RUN_FILES = ("requests.csv", "steps.csv", "summary.json", "config.yaml")


def snapshot(folder: Path) -> dict:
    return {p.name: p.read_bytes() for p in folder.iterdir()}


@pytest.fixture
def cfg(tmp_path, small_profiles):  # noqa: F811
    return write_yaml(tmp_path / "cfg.yaml", small_config(small_profiles, num_requests=4))


def _argv(command: str, cfg: Path, out: Path) -> list:
    if command == "run":
        return ["run", "--config", str(cfg), "--output-dir", str(out), "--overwrite"]
    if command == "tune":
        return ["tune", "--config", str(cfg), "--output-dir", str(out), "--overwrite", "--k-max", "1"]
    return ["profiles", "build", "--model", "meta-llama/Llama-2-7b-hf", "--device", "a100", "--tp", "1",
            "--out", str(out), "--overwrite"]


@pytest.mark.parametrize("command,results", [("run", RUN_FILES), ("tune", ("tune.csv", "summary.json")),
                                             ("profiles build", ("mlp.csv", "attention.csv"))])
def test_overwrite_never_removes_a_users_csv(tmp_path, cfg, capsys, command, results):
    out = tmp_path / "out"
    out.mkdir()
    for name in results:
        (out / name).write_text("an earlier result\n")
    (out / "my_analysis.csv").write_text("qps,tpot\n1,2\n")  # a CSV name, but not a sweep's table
    before = snapshot(out)
    t0 = time.monotonic()
    rc = cli.main(_argv(command, cfg, out))
    assert time.monotonic() - t0 < 10
    one_error(capsys, rc, "my_analysis.csv")
    assert snapshot(out) == before


def test_a_sweep_table_copied_in_counts_as_a_result_a_look_alike_does_not(tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    shutil.copy(SWEEP_CSV, d / "old.csv")
    for name in RUN_FILES:
        (d / name).write_text("x")
    assert outfolder.check(d, "run", True) is True  # another command's results: replaced
    (d / "mine.csv").write_text("row,row_id,qps\n0,a,1\n")  # starts like one, is not one
    with pytest.raises(ConfigError, match="mine.csv"):
        outfolder.check(d, "run", True)


def test_profiles_build_checks_everything_before_clearing(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    for name in ("summary.json", "requests.csv"):  # another command's results, replaceable with --overwrite
        (out / name).write_text("x\n")
    before = snapshot(out)
    rc = cli.main(["profiles", "build", "--model", "meta-llama/Llama-2-7b-hf", "--device", "a100", "--tp", "3",
                   "--out", str(out), "--overwrite"])
    one_error(capsys, rc, "tp=3")
    assert snapshot(out) == before


def test_profiles_build_onto_a_read_only_folder_fails_before_building(tmp_path, capsys, monkeypatch):
    import vidur_specdec.profiles.cli as pcli

    def never(*a, **k):
        raise AssertionError("built before the folder was checked")

    monkeypatch.setattr(pcli, "build_profile", never)
    target = unwritable_folder(tmp_path, "vidur-specdec-profiles")
    rc = cli.main(["profiles", "build", "--model", "meta-llama/Llama-2-7b-hf", "--device", "a100", "--tp", "1",
                   "--out", str(target)])
    one_error(capsys, rc, "cannot write in")


def test_a_file_added_during_a_run_survives_the_swap(tmp_path):
    from vidur_specdec.run import RunFolder

    out = tmp_path / "out"
    out.mkdir()
    for name in RUN_FILES:
        (out / name).write_text("old\n")
    folder = RunFolder(str(out), overwrite=True)
    folder.check()

    def fill(tmp: Path) -> None:  # the simulation is running: a user drops a file in the folder
        (out / "added.txt").write_text("mine")
        for name in RUN_FILES:
            (tmp / name).write_text("new\n")

    with pytest.raises(ConfigError, match="added.txt"):
        folder.write(fill)
    assert (out / "added.txt").read_text() == "mine" and (out / "summary.json").read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # no temporary folder left


def test_clear_removes_only_results(tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    for name in RUN_FILES:
        (d / name).write_text("x")
    assert outfolder.check(d, "tune", True) is True
    (d / "late.txt").write_text("appeared after the check")
    (d / "late.csv").write_text("a\n1\n")
    assert sorted(outfolder.clear(d)) == sorted(RUN_FILES)
    assert sorted(p.name for p in d.iterdir()) == ["late.csv", "late.txt"]


def test_report_never_replaces_an_input_or_a_result(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    shutil.copy(SWEEP_CSV, "med.csv")
    shutil.copy(SWEEP_CSV, "other.csv")
    before = snapshot(tmp_path)
    one_error(capsys, cli.main(["report", "med.csv", "-o", "med.csv"]), "also an input")
    os.symlink("med.csv", "alias.html")
    one_error(capsys, cli.main(["report", "med.csv", "-o", "alias.html"]), "also an input")
    one_error(capsys, cli.main(["report", "med.csv", "-o", "other.csv"]), "not written by this command")
    (tmp_path / "notes.html").write_text("<html>mine</html>")
    one_error(capsys, cli.main(["report", "med.csv", "-o", "notes.html"]), "notes.html")
    one_error(capsys, cli.main(["report", "med.csv", "--markdown", "med.csv"]), "also an input")
    os.unlink("alias.html")
    assert snapshot(tmp_path) == {**before, "notes.html": b"<html>mine</html>"}
    assert cli.main(["report", "med.csv", "-o", "page.html"]) == 0
    assert cli.main(["report", "other.csv", "-o", "page.html"]) == 0  # its own page: replaced
