"""Config validation, overrides and the command line (outputs, errors, determinism)."""

import json

import pandas as pd
import pytest
import yaml

from conftest import REPO, run_command
from vidur_specdec.config import ConfigError, apply_overrides
from vidur_specdec.engine.resolve import from_dict, load
from vidur_specdec.engine.metrics import REQUEST_COLUMNS, STEP_COLUMNS

BAD = [
    ({"speculative": {"acceptance_rate": 1.5}}, "speculative.acceptance_rate", "[0, 1]"),
    ({"speculative": {"acceptance_rate": -0.1}}, "speculative.acceptance_rate", "[0, 1]"),
    ({"speculative": {"num_speculative_tokens": -1}}, "speculative.num_speculative_tokens", "[0, 64]"),
    ({"speculative": {"num_speculative_tokens": 2.5}}, "speculative.num_speculative_tokens", "integer"),
    ({"speculative": {"method": "lookahead"}}, "speculative.method", "none, dflash, draft_model, dspark, eagle, eagle3, fixed, medusa, mtp, ngram"),
    ({"speculative": {"verify_attention": "x"}}, "speculative.verify_attention", "shared_kv"),
    ({"speculative": {"acceptance_per_position": [0.5]}}, "speculative.acceptance_per_position", "k = 4"),
    ({"speculative": {"acceptance_per_position": [0.5, 2, 0.1, 0.1]}}, "speculative.acceptance_per_position[1]", "[0, 1]"),
    ({"speculative": {"acceptance_histogram": [0.5, 0.5, 0.5, 0, 0]}}, "speculative.acceptance_histogram", "sum to 1"),
    ({"speculative": {"acceptance_rate": None}}, "speculative.acceptance_rate", "needs one of"),
    ({"speculative": {"bogus": 1}}, "speculative.bogus", "unknown key"),
    ({"bogus": 1}, "bogus", "unknown key"),
    ({"workload": {"qps": "fast"}}, "workload.qps", "number"),
    ({"workload": {"qps": 0}}, "workload.qps", "[1e-06"),
    ({"workload": {"num_requests": True}}, "workload.num_requests", "integer"),
    ({"workload": {"arrival": "bursty"}}, "workload.arrival", "poisson, static, trace"),
    ({"workload": {"arrival": "trace"}}, "workload.trace_file", "required"),
    ({"workload": {"prompt_tokens": {"dist": "uniform", "min": 10, "max": 5}}}, "workload.prompt_tokens.min", "<="),
    ({"workload": {"prompt_tokens": {"dist": "fixed", "value": 4000}}}, "workload.prompt_tokens", "max_model_len"),
    ({"workload": "many"}, "workload", "mapping"),
    ({"scheduler": {"chunk_size": 0}}, "scheduler.chunk_size", "[1,"),
    ({"scheduler": {"num_blocks": -5}}, "scheduler.num_blocks", "in [1, 100000000] or null"),
    ({"model": "gpt-5"}, "model", "one of"),
    ({"device": "tpu"}, "device", "one of a100"),
]


@pytest.mark.parametrize("data,key,allowed", BAD)
def test_bad_values_name_the_key_and_the_allowed_range(data, key, allowed):
    with pytest.raises(ConfigError) as e:
        from_dict(data)
    msg = str(e.value)
    assert msg.startswith(key + ":"), msg
    assert allowed in msg, msg
    assert "\n" not in msg


def test_partial_nested_override_keeps_other_defaults():
    cfg = from_dict({"workload": {"prompt_tokens": {"sigma": 0.3}}})
    assert cfg.workload.prompt_tokens.dist == "lognormal"
    assert cfg.workload.prompt_tokens.median == 512
    assert cfg.workload.prompt_tokens.sigma == 0.3


def test_set_overrides_parse_yaml_values():
    data = apply_overrides({"speculative": {"method": "ngram"}},
                           ["speculative.num_speculative_tokens=3",
                            "speculative.acceptance_per_position=[0.9, 0.8, 0.7]",
                            "speculative.acceptance_rate=null", "workload.qps=2.5"])
    cfg = from_dict(data)
    assert cfg.speculative.num_speculative_tokens == 3
    assert cfg.speculative.acceptance_per_position == [0.9, 0.8, 0.7]
    assert cfg.speculative.acceptance_input() == "acceptance_per_position"
    assert cfg.workload.qps == 2.5


def test_shipped_default_config_is_valid():
    cfg = load(REPO / "configs/default.yaml")
    assert cfg.workload.num_requests == 300
    assert cfg.model == "meta-llama/Llama-2-7b-hf"
    assert cfg.speculative.enabled


def _cli(*args, cwd=None):
    return run_command(*args, cwd=cwd)


SMALL = ["--set", "workload.num_requests=25", "--set", "workload.qps=5"]


def test_cli_writes_three_tables_and_is_byte_identical(tmp_path):
    outs = []
    for name in ("a", "b"):
        out = tmp_path / name
        p = _cli("--config", "configs/default.yaml", "--output-dir", str(out), *SMALL)
        assert p.returncode == 0, p.stderr
        outs.append(out)
    a, b = outs
    for f in ("requests.csv", "steps.csv", "summary.json", "config.yaml"):
        assert (a / f).read_bytes() == (b / f).read_bytes(), f
    req = pd.read_csv(a / "requests.csv")
    assert list(req.columns) == REQUEST_COLUMNS and len(req) == 25
    assert list(pd.read_csv(a / "steps.csv").columns) == STEP_COLUMNS
    summary = json.loads((a / "summary.json").read_text())
    for key in ("ttft_ms", "tpot_ms", "e2e_ms"):
        assert set(summary[key]) >= {"p50", "p90", "p99"}
    assert summary["kv_blocks_target"] > 0 and summary["restarts"] == 0
    assert yaml.safe_load((a / "config.yaml").read_text())["workload"]["num_requests"] == 25


def test_cli_default_output_folder_is_fresh(tmp_path):
    cfg = REPO / "configs/default.yaml"
    for _ in range(2):
        p = _cli("--config", str(cfg), *SMALL, cwd=tmp_path)
        assert p.returncode == 0, p.stderr
    runs = sorted((tmp_path / "runs").iterdir())
    assert len(runs) == 2 and all((r / "requests.csv").is_file() for r in runs)


@pytest.mark.parametrize("args,needle", [
    (["--set", "speculative.acceptance_rate=1.5"], "speculative.acceptance_rate: must be a number in [0, 1]"),
    (["--set", "speculative.num_speculative_tokens=-1"], "speculative.num_speculative_tokens"),
    (["--set", "speculative.method=lookahead"], "speculative.method"),
    (["--set", "nonsense.key=1"], "nonsense: unknown key"),
    (["--set", "profiles=/no/such/dir"], "profiles: no mlp.csv"),
    (["--set", "speculative.method=draft_model", "--set", "speculative.draft_profiles=/no/such"],
     "speculative.draft_profiles: no mlp.csv"),
    (["--set", "workload.arrival=trace", "--set", "workload.trace_file=/no/trace.csv"], "workload.trace_file"),
    (["--set", "broken"], "--set broken"),
])
def test_cli_bad_input_one_line_no_output(tmp_path, args, needle):
    out = tmp_path / "out"
    p = _cli("--config", "configs/default.yaml", "--output-dir", str(out), *args)
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], p.stderr
    assert "Traceback" not in p.stderr
    assert not out.exists()
    assert list(tmp_path.iterdir()) == []


def test_cli_missing_or_broken_config_file(tmp_path):
    p = _cli("--config", str(tmp_path / "nope.yaml"))
    assert p.returncode == 2 and "file not found" in p.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text("seed: [1,\n")
    p = _cli("--config", str(bad))
    assert p.returncode == 2 and "not valid YAML" in p.stderr and len(p.stderr.strip().splitlines()) == 1


def test_every_config_key_is_documented():
    import dataclasses

    from vidur_specdec.config import LengthDist, RunConfig

    doc = (REPO / "docs/config.md").read_text()

    def keys(cls):
        for f in dataclasses.fields(cls):
            if dataclasses.is_dataclass(f.default_factory()) if f.default_factory is not dataclasses.MISSING else False:
                sub = type(f.default_factory())
                if sub is not LengthDist:
                    yield from keys(sub)
                    continue
            yield f.name

    for name in list(keys(RunConfig)) + [f.name for f in dataclasses.fields(LengthDist)]:
        assert f"`{name}`" in doc, name


def test_the_example_config_lists_every_method():
    """configs/default.yaml's comment on speculative.method names every registered proposer (and none)."""
    import re

    from vidur_specdec.config.registry import choices
    from vidur_specdec.engine import resolve  # noqa: F401 (registers the methods)

    line = next(x for x in (REPO / "configs" / "default.yaml").read_text().splitlines()
                if x.strip().startswith("method:"))
    listed = set(re.findall(r"[a-z_0-9]+", line.split("#", 1)[1]))
    assert listed == set(choices("speculative.method")()), line
