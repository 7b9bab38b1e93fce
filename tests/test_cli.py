"""The command line's pieces in-process: the error path, output folders, config reading helpers."""

from __future__ import annotations

from pathlib import Path

import pytest

from vidur_specdec import cli
from vidur_specdec.config import ConfigError, resolve_path, resolve_paths, set_dotted
from vidur_specdec.run import RUN_FILES, RunFolder


def _raise(exc):
    def fn():
        raise exc
    return fn


@pytest.mark.parametrize("exc,code,needle", [
    (ConfigError("workload.qps: must be > 0"), 2, "error: workload.qps: must be > 0"),
    (cli.ServiceError("--url: cannot scrape"), 3, "error: --url: cannot scrape"),
    (KeyboardInterrupt(), 130, "interrupted"),
    (PermissionError(13, "Permission denied", "/x/y"), 2, "error: /x/y: Permission denied"),
    (UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte"), 2, "not UTF-8"),
])
def test_guarded_maps_each_failure_to_one_line_and_its_status(capsys, exc, code, needle):
    assert cli.guarded(_raise(exc)) == code
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle in err[0]


def test_guarded_lets_a_bug_show_its_traceback():
    with pytest.raises(ZeroDivisionError):
        cli.guarded(lambda: 1 / 0)


def test_multiline_messages_become_one_line(capsys):
    assert cli.guarded(_raise(ConfigError("a\nb"))) == 2
    assert capsys.readouterr().err == "error: a b\n"


def test_subcommand_table_is_complete():
    assert [n for n, _, _ in cli.SUBCOMMANDS] == ["run", "sweep", "report", "tune", "plan", "profiles", "validate",
                                                  "acceptance"]
    assert dict((n, m) for n, m, _ in cli.SUBCOMMANDS)["tune"] == "vidur_specdec.tune.cli"
    assert dict((n, m) for n, m, _ in cli.SUBCOMMANDS)["plan"] == "vidur_specdec.plan.cli"


def test_tune_subcommand_when_present():
    tune = pytest.importorskip("vidur_specdec.tune.cli")
    assert callable(tune.add_arguments) and callable(tune.run)


def test_resolve_path():
    assert resolve_path("t.csv", "/base") == "/base/t.csv"
    assert resolve_path("/abs/t.csv", "/base") == "/abs/t.csv"
    assert resolve_path("shipped", "/base", keywords=("shipped",)) == "shipped"
    assert resolve_path(None, "/base") is None
    assert resolve_path("t.csv", None) == "t.csv"
    assert resolve_path("~/t.csv", "/base") == str(Path("~/t.csv").expanduser())
    assert resolve_path("meta-llama/Llama-2-7b-hf", "/b", suffixes=(".yaml",)) == "meta-llama/Llama-2-7b-hf"
    assert resolve_path("models/m.yaml", "/b", suffixes=(".yaml",)) == "/b/models/m.yaml"
    data = {"profiles": "shipped", "model": "m.yml", "workload": {"trace_file": "t.csv"},
            "speculative": {"draft_profiles": "p"}}
    assert resolve_paths(data, "/b") == {"profiles": "shipped", "model": "/b/m.yml",
                                         "workload": {"trace_file": "/b/t.csv"},
                                         "speculative": {"draft_profiles": "/b/p"}}


def test_set_dotted_merges_mappings_and_replaces_values():
    d = {"workload": {"qps": 1.0, "num_requests": 5}}
    set_dotted(d, "workload", {"qps": 2.0})
    assert d == {"workload": {"qps": 2.0, "num_requests": 5}}
    set_dotted(d, "workload.prompt_tokens", {"dist": "fixed"})
    set_dotted(d, "workload.qps", 3.0)
    assert d["workload"] == {"qps": 3.0, "num_requests": 5, "prompt_tokens": {"dist": "fixed"}}
    with pytest.raises(ConfigError, match="workload.qps: is a value"):
        set_dotted(d, "workload.qps.x", 1)


def _fill(tmp: Path, text: str = "x"):
    for name in RUN_FILES:
        (tmp / name).write_text(text)


def test_default_folders_are_unique_and_removed_when_unused(tmp_path):
    a = RunFolder(None, default_parent=str(tmp_path / "runs"))
    b = RunFolder(None, default_parent=str(tmp_path / "runs"))
    pa, pb = a.reserve(), b.reserve()
    assert pa != pb and pa.is_dir() and pb.is_dir()
    a.write(_fill)
    b.discard()
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == [pa.name]
    assert sorted(p.name for p in pa.iterdir()) == sorted(RUN_FILES)


def test_overwrite_replaces_a_run_and_only_a_run(tmp_path):
    out = tmp_path / "out"
    RunFolder(str(out)).write(_fill)
    with pytest.raises(ConfigError, match="is not empty"):
        RunFolder(str(out)).check()
    RunFolder(str(out), overwrite=True).write(lambda t: _fill(t, "new"))
    assert (out / "steps.csv").read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # no temporary folders left
    (out / "mine.txt").write_text("keep")
    with pytest.raises(ConfigError, match="mine.txt"):
        RunFolder(str(out), overwrite=True).check()


def test_a_failed_write_leaves_nothing(tmp_path):
    out = tmp_path / "out"

    def boom(tmp: Path):
        (tmp / "requests.csv").write_text("half")
        raise OSError(28, "No space left on device", str(tmp / "steps.csv"))

    with pytest.raises(OSError):
        RunFolder(str(out)).write(boom)
    assert list(tmp_path.iterdir()) == []
