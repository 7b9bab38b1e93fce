"""Every file reader is defensive: profiles, measured CSVs, step logs, traces, journals and ``.prom`` scrapes.

An empty file, wrong columns, wrong types, a huge number or a non-UTF-8 file is one ``error:`` line
naming the file (and the column or line), exit 2, no traceback. (Edited journals: tests/test_sweep.py.)
"""

import shutil
import time
from pathlib import Path

import pytest
from validate_fixtures import write_steplog_tree

from conftest import one_error_line as one_error
from vidur_specdec import cli
from vidur_specdec.config import ConfigError
from vidur_specdec.costs.operator_model import OperatorTimeModel, read_profile

REPO = Path(__file__).resolve().parents[1]
SHIPPED = REPO / "profiles/a100/meta-llama/Llama-2-7b-hf"
DEFAULT = str(REPO / "configs/default.yaml")
LATIN1 = "prompt,caf\xe9\n1,2\n".encode("latin-1")


def _profile_root(tmp_path: Path, **texts) -> Path:
    d = tmp_path / "prof/a100/meta-llama/Llama-2-7b-hf"
    d.mkdir(parents=True)
    for table in ("mlp", "attention"):
        body = texts.get(table)
        if body is None:
            shutil.copy(SHIPPED / f"{table}.csv", d / f"{table}.csv")
        else:
            (d / f"{table}.csv").write_bytes(body if isinstance(body, bytes) else body.encode())
    return tmp_path / "prof"


def _head(table: str, n: int = 3) -> str:
    return "".join((SHIPPED / f"{table}.csv").read_text().splitlines(keepends=True)[:n])


def _with_cell(table: str, column: str, value: str) -> str:
    """The shipped table's header and first row, with ``column`` set to ``value``."""
    header, row = _head(table, 2).splitlines()
    cells = row.split(",")
    cells[header.split(",").index(column)] = value
    return f"{header}\n{','.join(cells)}\n"


@pytest.mark.parametrize("table,body,words", [
    ("mlp", "", "is empty"),
    ("mlp", "a,b\n1,2\n", "lacks columns num_tokens"),
    ("attention", "a,b\n1,2\n", "lacks columns batch_size"),
    ("attention", LATIN1, "not UTF-8"),
    ("mlp", None, "has a header but no rows"),
    ("attention", "huge", "column batch_size"),
    ("attention", "flag", "column is_prefill"),
])
def test_a_bad_profile_table_is_one_line(tmp_path, table, body, words):
    if body is None:
        body = _head(table, 1)
    elif body == "huge":
        body = _with_cell(table, "batch_size", "1e400")
    elif body == "flag":
        body = _with_cell(table, "is_prefill", "maybe")
    root = _profile_root(tmp_path, **{table: body})
    path = root / "a100/meta-llama/Llama-2-7b-hf" / f"{table}.csv"
    with pytest.raises(ConfigError, match=words) as e:
        read_profile(path, table)
    assert str(path) in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(ConfigError, match=words):
        OperatorTimeModel.fit(path.with_name("mlp.csv"), path.with_name("attention.csv"))


def test_the_shipped_profile_reads_unchanged():
    import pandas as pd

    for table in ("mlp", "attention"):
        assert read_profile(SHIPPED / f"{table}.csv", table).equals(pd.read_csv(SHIPPED / f"{table}.csv"))


def test_a_run_on_an_empty_measured_profile_is_one_line(tmp_path, capsys):
    root = _profile_root(tmp_path, mlp="")
    t0 = time.monotonic()
    rc = cli.main(["run", "--config", DEFAULT, "--set", "workload.num_requests=20", "--set", f"profiles={root}",
                   "--output-dir", str(tmp_path / "o")])
    one_error(capsys, rc, "mlp.csv is empty")
    assert time.monotonic() - t0 < 10 and not (tmp_path / "o").exists()


def test_profiles_compare_on_an_empty_measured_profile(tmp_path, capsys):
    root = _profile_root(tmp_path, mlp="")
    rc = cli.main(["profiles", "compare", "--model", "meta-llama/Llama-2-7b-hf", "--device", "a100", "--tp", "1",
                   "--measured", str(root / "a100/meta-llama/Llama-2-7b-hf")])
    one_error(capsys, rc, "is empty")


@pytest.fixture
def trace(tmp_path) -> Path:
    t = tmp_path / "trace.csv"
    t.write_text("request_id,arrival_offset_s,prompt_tokens,output_tokens\n0,0,8,4\n1,0.1,8,4\n")
    return t


@pytest.mark.parametrize("body,words", [
    ("", "is empty"),
    ("request_id,ttft_ms\n0,1\n", "no tpot_ms"),
    ("request_id,ttft_ms,tpot_ms,e2e_ms,accepted_tokens,decode_steps\n0,abc,1,2,1,1\n", "line 2, column ttft_ms"),
    ("request_id,ttft_ms,tpot_ms,e2e_ms,accepted_tokens,decode_steps\n0,1,1e400,2,1,1\n", "column tpot_ms"),
    (LATIN1, "not UTF-8"),
])
def test_a_bad_measured_csv_is_one_line(tmp_path, trace, capsys, body, words):
    m = tmp_path / "measured.csv"
    m.write_bytes(body if isinstance(body, bytes) else body.encode())
    rc = cli.main(["validate", "compare", "--config", DEFAULT, "--trace", str(trace), "--measured", str(m),
                   "--out", str(tmp_path / "o")])
    one_error(capsys, rc, "--measured", words)
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("name,body,words", [
    ("t.csv", "", "is empty"),
    ("t.csv", LATIN1, "not UTF-8"),
    ("t.csv", "arrived_at_s,prompt_tokens,output_tokens\n0,1e400,5\n", "prompt_tokens"),
    ("t.jsonl", "arrived_at_s,prompt_tokens\n", "line 1 is not a JSON object"),
    ("t.jsonl", "", "is empty"),
])
def test_a_bad_trace_is_one_line(tmp_path, capsys, name, body, words):
    t = tmp_path / name
    t.write_bytes(body if isinstance(body, bytes) else body.encode())
    rc = cli.main(["run", "--config", DEFAULT, "--set", "workload.arrival=trace", "--set", f"workload.trace_file={t}",
                   "--output-dir", str(tmp_path / "o")])
    one_error(capsys, rc, "workload.trace_file", words)


@pytest.mark.parametrize("body,words", [("", "is empty"), (LATIN1, "not UTF-8"), ("a,b\n1,2\n", "lacks columns")])
def test_a_bad_step_log_is_one_line(tmp_path, capsys, body, words):
    root = tmp_path / "logs"
    write_steplog_tree(root, steps_n=5)
    victim = sorted((root / "steps").rglob("*.csv"))[0]
    victim.write_bytes(body if isinstance(body, bytes) else body.encode())
    rc = cli.main(["validate", "steps", "--root", str(root), "--out", str(tmp_path / "o")])
    one_error(capsys, rc, "--root", words)
    assert not (tmp_path / "o").exists()


COUNTERS = ("vllm:spec_decode_num_drafts_total {d}\nvllm:spec_decode_num_draft_tokens_total {t}\n"
            "vllm:spec_decode_num_accepted_tokens_total {a}\n")


@pytest.mark.parametrize("after,words", [
    ("", "holds no metrics"),
    ("# only a comment\n", "holds no metrics"),
    (COUNTERS.format(d=10, t=40, a="NaN"), "accepted_tokens_total is nan"),
    (COUNTERS.format(d=10, t=40, a="-5"), "is -5.0"),
    (COUNTERS.format(d=10, t="+Inf", a=3), "is inf"),
    ("caf\xe9 1\n".encode("latin-1"), "not UTF-8"),
])
def test_a_bad_scrape_is_one_line_not_alpha_zero(tmp_path, capsys, after, words):
    before = tmp_path / "before.prom"
    before.write_text(COUNTERS.format(d=0, t=0, a=0))
    a = tmp_path / "after.prom"
    a.write_bytes(after if isinstance(after, bytes) else after.encode())
    rc = cli.main(["validate", "calibrate", "--before", str(before), "--after", str(a), "--out", str(tmp_path / "o")])
    one_error(capsys, rc, "--after", words)
    assert not (tmp_path / "o").exists()
