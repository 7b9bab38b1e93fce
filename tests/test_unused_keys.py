"""Every key is read or refused; a model or device the simulator cannot represent is refused.

One test per example of each class (a key a mode does not read, two inputs for
one quantity, a sweep or tune axis that cannot change the run, an unmodelled
model or device field), the table's agreement with the schema, the registry and
docs/config.md, and a property test: random key subsets per method, arrival and
setting, each set key either changes what the run records or is refused.
"""

import json
import os
import sys

import pytest
import yaml

from conftest import REPO, run_command
from vidur_specdec.config import ConfigError, RunConfig
from vidur_specdec.config import unused
from vidur_specdec.engine.resolve import load
from vidur_specdec.sweep.definition import load_sweep

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, Phase, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

DEFAULT = str(REPO / "configs/default.yaml")
SMALL = ["--set", "workload.num_requests=20"]


def _cli(*args, cwd=None):
    return run_command(*args, module="vidur_specdec", cwd=cwd)


def _refused(p, needle):
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 2, p.stderr
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], p.stderr
    assert "Traceback" not in p.stderr


# --------------------------------------------------------------------------- the table itself

def test_table_names_schema_keys_and_registered_methods():
    load(DEFAULT)  # registers the methods
    from vidur_specdec.speculation.proposers import REGISTRY, method_names

    cfg = RunConfig()
    for row in unused.USES:
        unused.get(cfg, row.key)  # AttributeError on a key the schema does not have
        if row.axis is not None:
            unused.get(cfg, row.axis)
        if row.axis == unused.METHOD:
            assert set(row.values) <= set(method_names()), row
    for _, keys in unused.ONE_OF:
        for k in keys:
            unused.get(cfg, k)
    variable = {n for n, c in REGISTRY.items() if c.variable_proposals}
    rows = {r.key: set(r.values) for r in unused.USES}
    assert rows["speculative.proposal_rate"] == variable
    assert rows["speculative.speculative_token_tree"] == {n for n, c in REGISTRY.items() if c.supports_tree}
    assert rows["speculative.model"] == {n for n, c in REGISTRY.items() if c.weights_key == "speculative.model"}


def test_docs_table_is_the_code_table():
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        import config_tables
    finally:
        sys.path.remove(str(REPO / "scripts"))
    from docblock import block

    assert block(REPO / "docs/config.md", config_tables.NAME) == config_tables.text(), \
        "docs/config.md is stale: python scripts/config_tables.py --write"


def test_shipped_configs_and_sweeps_load(monkeypatch):
    import vidur_specdec.sweep.definition as definition

    monkeypatch.setattr(definition, "profile_digests", lambda cfg: {})  # every key check runs before the digests
    for f in sorted((REPO / "configs").rglob("*.yaml")):
        data = yaml.safe_load(f.read_text())
        if "method" in data and "hidden_size" in data:
            continue  # a head file (speculative.model), not a run config
        load(f)
    for f in sorted((REPO / "sweeps").glob("*.yaml")):
        load_sweep(f)


def test_a_written_config_loads_again(tmp_path):
    cfg = load(DEFAULT, ["speculative.mean_acceptance_length=2", "speculative.acceptance_rate=null"])
    p = tmp_path / "config.yaml"
    p.write_text(yaml.safe_dump(cfg.to_dict(), sort_keys=False))
    assert load(p).speculative.mean_acceptance_length == 2
    # a template key a --set of the mode left in place is written too, and named when the file is loaded alone
    cfg = load(DEFAULT, ["workload.arrival=closed", "workload.concurrency=4"])
    p.write_text(yaml.safe_dump(cfg.to_dict(), sort_keys=False))
    with pytest.raises(ConfigError, match="^workload.qps: does nothing with workload.arrival closed"):
        load(p)


# --------------------------------------------------------------------------- keys a mode does not read

@pytest.mark.parametrize("sets, needle", [
    (["speculative.model=yuhuili/EAGLE-llama2-chat-7B"], "speculative.model: does nothing with speculative.method "
                                                         "ngram; read only with speculative.method eagle, eagle3"),
    (["workload.trace_file=t.csv"], "workload.trace_file: does nothing with workload.arrival poisson"),
    (["speculative.acceptance_rate=0.95", "speculative.mean_acceptance_length=1.2"],
     "speculative.acceptance_rate: given with speculative.mean_acceptance_length, two inputs"),
    (["speculative.suffix_decoding_min_token_prob=0.3", "speculative.method=suffix"],
     "speculative.suffix_decoding_min_token_prob: not modelled"),
])
def test_a_key_the_run_does_not_read_is_one_error_line(tmp_path, sets, needle):
    out = tmp_path / "out"
    p = _cli("run", "--config", DEFAULT, "--output-dir", out, *SMALL, *[a for x in sets for a in ("--set", x)])
    _refused(p, needle)
    assert not out.exists()


def test_a_file_key_its_own_mode_does_not_read(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("workload: {arrival: closed, concurrency: 4, qps: 3}\n")
    with pytest.raises(ConfigError, match=r"^workload.qps: does nothing with workload.arrival closed"):
        load(f)
    # a --set of the mode keeps the file as a template (README: default.yaml under arrival=closed)
    assert load(DEFAULT, ["workload.arrival=closed", "workload.concurrency=8"]).workload.arrival == "closed"
    with pytest.raises(ConfigError, match=r"^workload.qps: does nothing"):
        load(DEFAULT, ["workload.arrival=closed", "workload.concurrency=8", "workload.qps=5"])


def test_speculation_off_keeps_its_section():
    assert not load(DEFAULT, ["speculative.method=none"]).speculative.enabled


def test_a_sweep_axis_that_cannot_change_the_run_is_refused_before_running(tmp_path):
    f = tmp_path / "s.yaml"
    f.write_text(yaml.safe_dump({"base": {"workload": {"arrival": "closed", "concurrency": 4, "num_requests": 10}},
                                 "grid": {"workload.qps": [1.0, 2.0]}}))
    out = tmp_path / "out"
    p = _cli("sweep", "--config", f, "--output-dir", out)
    _refused(p, "workload.qps: does nothing with workload.arrival closed")
    assert not out.exists()
    f.write_text(yaml.safe_dump({"base": {"workload": {"arrival": "static", "num_requests": 10}},
                                 "grid": {"workload.qps": [1.0, 2.0]}}))
    with pytest.raises(ConfigError, match="workload.qps: does nothing with workload.arrival static"):
        load_sweep(f)
    # a base key some row reads is fine; one no row reads is refused
    f.write_text(yaml.safe_dump({"base": {"speculative": {"draft_model": "meta-llama/Llama-3.2-1B"}},
                                 "grid": {"speculative.method": ["none", "ngram"]}}))
    with pytest.raises(ConfigError, match="^base: no row of this sweep reads it: speculative.draft_model"):
        load_sweep(f)


def test_tune_on_qps_with_a_trace_is_refused_before_running(tmp_path):
    trace = tmp_path / "t.csv"
    trace.write_text("arrived_at_s,prompt_tokens,output_tokens\n0,10,5\n0.1,12,6\n")
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump({"workload": {"arrival": "trace", "trace_file": str(trace)}}))
    out = tmp_path / "out"
    p = _cli("tune", "--config", cfg, "--output-dir", out, "--slo-tpot-ms", "50")
    _refused(p, "--load-axis qps: every load would run the same: workload.qps: does nothing with "
                   "workload.arrival trace")
    assert not out.exists()


# --------------------------------------------------------------------------- models and devices

def _hf(tmp_path, **extra):
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "num_hidden_layers": 4, "hidden_size": 512,
           "num_attention_heads": 8, "num_key_value_heads": 8, "intermediate_size": 1024, "vocab_size": 32000,
           "max_position_embeddings": 4096, **extra}
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg))
    return p


@pytest.mark.parametrize("extra, needle", [
    ({"sliding_window": 4096, "use_sliding_window": True}, "config.json field 'sliding_window' is used"),
    ({"sliding_window": 512, "layer_types": ["sliding_attention", "full_attention"] * 2},
     "config.json field 'sliding_window' is used"),
    ({"quantization_config": {"quant_method": "awq", "bits": 4, "group_size": 128}},
     "config.json field 'quantization_config' quant_method 'awq' is not modeled"),
    ({"num_key_value_heads": 0}, "config.json field 'num_key_value_heads' must be an integer >= 1, got 0"),
    ({"num_attention_heads": 8.5}, "config.json field 'num_attention_heads' must be an integer >= 1, got 8.5"),
    ({"tie_word_embeddings": "false"}, "config.json field 'tie_word_embeddings' must be true or false, got 'false'"),
])
def test_an_unrepresentable_model_is_refused(tmp_path, extra, needle):
    with pytest.raises(ConfigError, match="^model: .*" + needle.replace("(", r"\(").replace(")", r"\)")):
        load(DEFAULT, [f"model={_hf(tmp_path, **extra)}"])


def test_a_model_the_simulator_can_represent_still_loads(tmp_path):
    ok = load(DEFAULT, [f"model={_hf(tmp_path, sliding_window=4096, use_sliding_window=False, tie_word_embeddings=False)}"])
    assert ok.model.endswith("config.json")


def test_an_unrepresentable_model_is_one_error_line(tmp_path):
    p = _cli("run", "--config", DEFAULT, "--output-dir", tmp_path / "o", *SMALL,
                "--set", f"model={_hf(tmp_path, tie_word_embeddings='false')}")
    _refused(p, "tie_word_embeddings")


@pytest.mark.parametrize("field, value", [("sms", 0.5), ("sms", "108"), ("l2_bytes", True), ("memory_bytes", 1.5),
                                          ("fp8_flops", -1.0), ("hbm_bandwidth", 1e30)])
def test_device_fields_are_typed_and_range_checked(tmp_path, field, value):
    dev = {"memory_bytes": 48 * 2**30, "hbm_bandwidth": 864e9, "bf16_flops": 362e12, "nvlink_bandwidth": 1e11,
           field: value}
    p = tmp_path / "gpu.yaml"
    p.write_text(yaml.safe_dump(dev))
    with pytest.raises(ConfigError, match=f"^device: .*gpu.yaml: {field} must be a"):
        load(DEFAULT, [f"device={p}"])


def test_a_draft_model_with_another_vocabulary_is_refused():
    # vLLM 0.33 vllm/config/speculative.py, SpeculativeConfig.verify_equal_vocab_size_if_draft_model
    with pytest.raises(ConfigError, match="^speculative.draft_model: JackFram/llama-160m has a 32000-token "
                                          "vocabulary and the target meta-llama/Llama-3.1-8B 128256"):
        load({"model": "meta-llama/Llama-3.1-8B", "device": "h100",
              "speculative": {"method": "draft_model", "draft_model": "JackFram/llama-160m"}})


# --------------------------------------------------------------------------- the property

settings.register_profile("unused-ci", max_examples=10, deadline=None, derandomize=True, database=None,
                          phases=[Phase.explicit, Phase.generate],
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
settings.register_profile("unused-nightly", max_examples=300, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
PROFILE = "unused-nightly" if os.environ.get("HYPOTHESIS_PROFILE") == "nightly" else "unused-ci"

# key -> (a value that, where the key is read, changes what a tiny run records; another such value).
POOL = {
    "speculative.ngram_cost_ms": (5.0, 0.1),
    "speculative.fixed_cost_ms": (5.0, 0.5),
    "speculative.suffix_cost_ms": (5.0, 0.1),
    "speculative.proposal_rate": (0.5, 1.0),
    "speculative.draft_sample_method": ("probabilistic", "greedy"),
    "speculative.acceptance_rate": (0.2, 0.9),
    "speculative.mean_acceptance_length": (1.5, 2.5),
    "engine.draft_pass_ms": (5.0, 0.05),
    "engine.eager_ms_per_layer": (5.0, 0.32),
    "workload.qps": (50.0, 0.5),
    "workload.num_requests": (3, 2),
    "workload.prompt_tokens.median": (40.0, 60.0),
    "workload.prompt_tokens.value": (40, 60),
}


def _tiny(method, arrival, eager, dist, trace):
    prompt = {"fixed": {"dist": "fixed", "value": 32}, "uniform": {"dist": "uniform", "min": 16, "max": 64},
              "lognormal": {"dist": "lognormal", "median": 30.0, "sigma": 0.5, "min": 16, "max": 64}}[dist]
    w = {"arrival": arrival, "num_requests": 2, "prompt_tokens": prompt, "output_tokens": {"dist": "fixed", "value": 6}}
    if arrival == "closed":
        w["concurrency"] = 1
    if arrival == "trace":
        w = {"arrival": "trace", "trace_file": str(trace)}
    return {"seed": 1, "workload": w, "engine": {"enforce_eager": eager},
            "speculative": {"method": method, "num_speculative_tokens": 2, "acceptance_rate": None}}


def _set(d, key, value):
    *path, name = key.split(".")
    for part in path:
        d = d.setdefault(part, {})
    d[name] = value


def _records(cfg):
    from vidur_specdec.engine.simulation import simulate

    r = simulate(cfg)
    return r.requests.to_csv(index=False) + r.steps.to_csv(index=False)


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    p = tmp_path_factory.mktemp("trace") / "t.csv"
    p.write_text("arrived_at_s,prompt_tokens,output_tokens\n0,20,6\n0.01,30,6\n")
    return p


@settings(settings.get_profile(PROFILE))
@given(method=st.sampled_from(["none", "ngram", "fixed", "suffix", "eagle"]),
       arrival=st.sampled_from(["poisson", "static", "closed", "trace"]),
       eager=st.booleans(), dist=st.sampled_from(["fixed", "uniform", "lognormal"]),
       keys=st.lists(st.sampled_from(sorted(POOL)), min_size=1, max_size=3, unique=True))
def test_every_set_key_changes_the_run_or_is_refused(trace, method, arrival, eager, dist, keys):
    base = _tiny(method, arrival, eager, dist, trace)
    if "speculative.mean_acceptance_length" not in keys:
        base["speculative"]["acceptance_rate"] = 0.7  # some acceptance input (at its default: not "set")
    data = json.loads(json.dumps(base))
    for k in keys:
        _set(data, k, POOL[k][0])
    try:
        cfg = load(data)
    except ConfigError as e:
        assert any(str(e).startswith(k + ":") or f" {k}," in str(e) for k in keys), (keys, str(e))
        return
    if not cfg.speculative.enabled:  # the section and the method's keys are off (docs/config.md)
        keys = [k for k in keys if not k.startswith("speculative.") and unused.refusal(k, cfg, off_exempt=False) is None]
    for k in keys:
        other = json.loads(json.dumps(data))
        _set(other, k, POOL[k][1])
        assert _records(data) != _records(other), f"{k} is set, not refused, and changes nothing the run records"


def test_template_keys_of_a_sweep_run_in_its_workers():
    """A base key some rows read stays in the other rows' configs; the worker runs them as checked."""
    from vidur_specdec.sweep.worker import run_row

    sweep = load_sweep({"base": {"seed": 1, "workload": {"num_requests": 2, "qps": 3.0,
                                                          "prompt_tokens": {"dist": "fixed", "value": 32},
                                                          "output_tokens": {"dist": "fixed", "value": 4}}},
                        "grid": {"workload.arrival": ["poisson", "static"]}})
    static = sweep.rows[1].config_dict
    assert static["workload"]["qps"] == 3.0
    with pytest.raises(ConfigError, match="workload.qps: does nothing"):
        load(static)  # loaded alone, as a user's file, it is refused
    assert run_row(static)["metrics"]["num_steps"] > 0


def test_a_method_switch_drops_the_old_method_s_keys_in_every_command():
    """A row (or --set, or a tune point) switching the method drops what only the old method read: the row's
    config loads alone, and the key stays in the rows whose method reads it."""
    sweep = load_sweep({"base": {"seed": 1, "workload": {"num_requests": 2, "arrival": "static",
                                                          "prompt_tokens": {"dist": "fixed", "value": 32},
                                                          "output_tokens": {"dist": "fixed", "value": 4}},
                                 "speculative": {"method": "fixed", "fixed_cost_ms": 2.0}},
                        "grid": {"speculative.method": ["fixed", "ngram"]}})
    fixed, ngram = (r.config_dict for r in sweep.rows)
    assert fixed["speculative"]["fixed_cost_ms"] == 2.0
    assert ngram["speculative"]["fixed_cost_ms"] == 0.5  # the schema's default: the base's value was dropped
    assert load(ngram).speculative.method == "ngram"
    cfg = load({"speculative": {"method": "fixed", "fixed_cost_ms": 2.0}}, ["speculative.method=ngram"])
    assert cfg.speculative.fixed_cost_ms == 0.5
    p = yaml.safe_dump(cfg.to_input())
    assert load(yaml.safe_load(p)).speculative.method == "ngram"  # a written config loads again
