"""One path for every input: what ``run`` accepts, ``tune``, ``sweep`` and the Python API accept the same way.

Hypothesis draws an acceptance input (the file's rate, a mean length, a mean length at a stated k, per-position
rates, a histogram, the library by name), a method switch over a file that names an EAGLE-3 head, and a load
axis, and gives the same ``--set`` values to ``run`` (the command, in process), ``simulate()``, ``tune()`` and a
one-row sweep on a tiny workload. Each either runs, or refuses with the message ``run`` gives.
"""

import pytest
import yaml

from conftest import run_command
from vidur_specdec.config import ConfigError

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

BASE = {
    "seed": 2, "model": "meta-llama/Llama-3.1-8B-Instruct", "device": "h100",
    "scheduler": {"max_num_seqs": 4},
    "workload": {"num_requests": 4, "qps": 4.0, "requests_per_concurrency": 1,
                 "prompt_tokens": {"dist": "uniform", "min": 16, "max": 48},
                 "output_tokens": {"dist": "uniform", "min": 4, "max": 12}},
    "speculative": {"method": "eagle3", "model": "RedHatAI/Llama-3.1-8B-Instruct-speculator.eagle3",
                    "num_speculative_tokens": 2, "acceptance_rate": 0.6},
}
ACCEPTANCE = {
    "file's rate": [],
    "mean length": ["speculative.mean_acceptance_length=1.8"],
    "mean length at k": ["speculative.mean_acceptance_length=2.4", "speculative.acceptance_at_k=3"],
    "per position": ["speculative.acceptance_per_position=[0.7,0.5]"],
    "histogram": ["speculative.acceptance_histogram=[0.3,0.3,0.4]"],
    "library": ["speculative.acceptance_source=published"],
}
SWITCH = {
    "none": [],
    "ngram": ["speculative.method=ngram"],
    "draft model": ["speculative.method=draft_model", "speculative.draft_model=meta-llama/Llama-3.2-1B-Instruct"],
}
AXIS = {"qps": ["workload.qps=2.0"], "concurrency": ["workload.arrival=closed", "workload.concurrency=2"]}


def _refusal(fn):
    """None when ``fn()`` runs, else the ConfigError's message."""
    try:
        fn()
    except ConfigError as e:
        return str(e)
    return None


@pytest.fixture(scope="module")
def config_file(tmp_path_factory):
    p = tmp_path_factory.mktemp("one-path") / "cfg.yaml"
    p.write_text(yaml.safe_dump(BASE))
    return p


@settings(max_examples=3, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(acc=st.sampled_from(sorted(ACCEPTANCE)), switch=st.sampled_from(sorted(SWITCH)),
       axis=st.sampled_from(sorted(AXIS)))
@example(acc="mean length at k", switch="draft model", axis="concurrency")  # the three inputs tune once refused
def test_run_tune_sweep_and_the_api_accept_the_same_inputs(tmp_path_factory, config_file, acc, switch, axis):
    from vidur_specdec import simulate, tune
    from vidur_specdec.sweep.definition import load_sweep
    from vidur_specdec.sweep.runner import run_sweep

    sets = SWITCH[switch] + ACCEPTANCE[acc]
    out = tmp_path_factory.mktemp("out")
    p = run_command("run", "--config", config_file, "--output-dir", out / "run",
                    *[a for s in sets + AXIS[axis] for a in ("--set", s)], module="vidur_specdec")
    run_error = p.stderr.strip().splitlines()[-1][len("error: "):] if p.returncode else None
    assert p.returncode in (0, 2), p.stderr

    api = _refusal(lambda: simulate(str(config_file), sets + AXIS[axis]))
    load_axis = "qps" if axis == "qps" else "concurrency"
    tuned = _refusal(lambda: tune(str(config_file), sets, load_axis=load_axis, loads="1,2", k_max=2,
                                  tolerance=0.5, jobs=1, slo_ttft_ms=5000, slo_tpot_ms=500))
    row = {s.split("=", 1)[0]: yaml.safe_load(s.split("=", 1)[1]) for s in AXIS[axis]}
    swept = _refusal(lambda: run_sweep(load_sweep({"sweep": {"name": "one"}, "base": str(config_file),
                                                   "rows": [row]}, sets), out / "sweep", jobs=1, progress=False))
    for name, err in (("simulate()", api), ("tune()", tuned), ("sweep", swept)):
        if run_error is None:
            assert err is None, f"run accepts {sets} on {axis}, {name} refuses: {err}"
        else:
            assert err is not None and run_error in err, f"run refuses {sets} ({run_error}); {name}: {err}"


def test_loads_as_the_command_writes_them_from_python():
    from vidur_specdec.console import api_loads

    assert api_loads("loads", "1,8,32") == "1,8,32" and api_loads("loads", [1, 8.0, 32]) == "1.0,8.0,32.0"
    with pytest.raises(ConfigError, match="^loads: "):
        api_loads("loads", [1, "x"])