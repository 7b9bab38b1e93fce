"""``validate generate --out``: the one output rule for a file, and the config's own trace when its arrivals
are a trace. No existing file is replaced without ``--overwrite``; with it, only a trace this command wrote,
never an input of the command and never another command's result."""

import hashlib
from pathlib import Path

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import run_command
from vidur_specdec.validate.workload import TRACE_COLUMNS, load_trace

TRACE = "arrived_at_s,prompt_tokens,output_tokens\n0.0,40,5\n0.25,60,7\n1.5,30,3\n"


def _generate(folder, *args):
    return run_command("validate", "generate", *args, module="vidur_specdec", cwd=folder)


def _digests(folder):
    return {p.relative_to(folder): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_trace_arrival_config_writes_its_own_trace_not_poisson(tmp_path):
    (tmp_path / "mine.csv").write_text(TRACE)
    (tmp_path / "c.yaml").write_text(yaml.safe_dump({"seed": 4, "workload": {"arrival": "trace",
                                                                             "trace_file": "mine.csv"}}))
    r = _generate(tmp_path, "--config", "c.yaml", "--out", "t.csv")
    assert r.returncode == 0 and "trace arrivals from" in r.stdout, r.stderr
    t = load_trace(tmp_path / "t.csv")
    assert t["arrival_offset_s"].tolist() == [0.0, 0.25, 1.5] and t["prompt_tokens"].tolist() == [40, 60, 30]
    assert [len(x) for x in t["prompt_token_ids"]] == [40, 60, 30]
    r = _generate(tmp_path, "--config", "c.yaml", "--out", "t2.csv", "--arrival", "poisson")
    assert r.returncode == 2 and r.stderr.startswith("error: --arrival: ") and not (tmp_path / "t2.csv").exists()


KINDS = ("missing", "own_trace", "own_jsonl", "user_file", "config", "config_trace", "run_result",
         "validate_run_trace", "folder")


@settings(max_examples=30)
@given(kind=st.sampled_from(KINDS), overwrite=st.booleans(), user=st.binary(max_size=300),
       suffix=st.sampled_from([".csv", ".jsonl"]), via_link=st.booleans())
def test_generate_never_replaces_what_it_must_not(tmp_path_factory, kind, overwrite, user, suffix, via_link):
    d = tmp_path_factory.mktemp("g")
    (d / "mine.csv").write_text(TRACE)
    (d / "c.yaml").write_text(yaml.safe_dump({"seed": 1, "workload": {"num_requests": 5, "qps": 2.0}}))
    (d / "tc.yaml").write_text(yaml.safe_dump({"workload": {"arrival": "trace", "trace_file": "mine.csv"}}))
    config, out = "c.yaml", f"out{suffix}"
    if kind in ("own_trace", "own_jsonl"):
        assert _generate(d, "--config", "c.yaml", "--out", out if kind == "own_trace" else "out.jsonl").returncode == 0
        out = out if kind == "own_trace" else "out.jsonl"
    elif kind == "user_file":
        (d / out).write_bytes(user)
    elif kind == "config":
        out = "c.yaml"
    elif kind == "config_trace":
        config, out = "tc.yaml", "mine.csv"
    elif kind == "run_result":
        (d / "run").mkdir()
        for name in ("requests.csv", "steps.csv", "summary.json"):
            (d / "run" / name).write_bytes(user + name.encode())
        out = "run/requests.csv"
    elif kind == "validate_run_trace":
        (d / "vr").mkdir()
        assert _generate(d, "--config", "c.yaml", "--out", "vr/trace.csv").returncode == 0
        (d / "vr" / "measured.csv").write_text("request_id\n")
        out = "vr/trace.csv"
    elif kind == "folder":
        (d / out).mkdir()
    if via_link and kind not in ("missing", "folder"):  # the same file by another name
        link = "link" + (d / out).suffix
        (d / link).symlink_to(d / out)
        out = link
    before = _digests(d)
    r = _generate(d, "--config", config, "--out", out, *(["--overwrite"] if overwrite else []))
    assert "Traceback" not in r.stderr
    after = _digests(d)
    allowed = kind == "missing" or (overwrite and kind in ("own_trace", "own_jsonl"))
    if allowed:
        assert r.returncode == 0, r.stderr
        assert set(TRACE_COLUMNS) <= set(load_trace(d / out).columns)
        assert {p for p in after if before.get(p) != after[p]} <= {Path(out)}  # only the file named
    else:
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert r.stderr.startswith("error: --out: ")
        assert after == before  # nothing replaced, nothing written
