"""tune with every acceptance input, on both load axes, exits 0 (small, fast configs).

Also: a trace input tunes (it once ended in an AttributeError on the trace's pmf), and a mean acceptance
length L given at k_max is simulated at every smaller k with the alpha L implies at k_max (tune.csv's
``alpha_used``).
"""

import csv
import json
import random

import pytest
import yaml

from vidur_specdec.speculation.acceptance import expected_tokens_per_step

K_MAX = 2
SMALL = {
    "seed": 3,
    "scheduler": {"max_num_seqs": 4},
    "workload": {"num_requests": 8, "qps": 4.0, "requests_per_concurrency": 1,
                 "prompt_tokens": {"dist": "uniform", "min": 16, "max": 64},
                 "output_tokens": {"dist": "uniform", "min": 4, "max": 24}},
    "speculative": {"method": "ngram", "num_speculative_tokens": K_MAX, "verify_attention": "per_token"},
}


def _trace(path):
    rng = random.Random(0)
    with open(path, "w") as f:
        for _ in range(8):
            n = rng.randint(6, 20)
            f.write(json.dumps({"prompt_tokens": rng.randint(16, 64), "output_tokens": n,
                                "accept_run": [rng.randint(0, 3) for _ in range(n)]}) + "\n")
    return str(path)


INPUTS = {
    "rate": {"acceptance_rate": 0.6},
    "mean_length": {"mean_acceptance_length": 1.9},
    "per_position": {"acceptance_per_position": [0.8, 0.5]},
    "histogram": {"acceptance_histogram": [0.3, 0.3, 0.4]},
    "trace": None,  # written per test
}


def _tune(tmp_path, acc, axis, capsys):
    from vidur_specdec.tune.cli import main

    spec = {**SMALL["speculative"], **acc}
    p = tmp_path / "cfg.yaml"
    p.write_text(yaml.safe_dump({**SMALL, "speculative": spec}))
    out = tmp_path / "out"
    code = main(["--config", str(p), "--output-dir", str(out), "--jobs", "1", "--load-axis", axis,
                 "--loads", "1,2", "--tolerance", "0.5", "--slo-ttft-ms", "5000", "--slo-tpot-ms", "500"])
    err = capsys.readouterr().err
    assert code == 0, err
    return out


@pytest.mark.parametrize("axis", ["qps", "concurrency"])
@pytest.mark.parametrize("name", sorted(INPUTS))
def test_tune_exits_0_with_every_acceptance_input(tmp_path, capsys, name, axis):
    acc = INPUTS[name] if name != "trace" else {"method": "eagle", "acceptance_trace": _trace(tmp_path / "t.jsonl")}
    out = _tune(tmp_path, acc, axis, capsys)
    with open(out / "tune.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert {r["load"] for r in rows if r["phase"] == "loads"} == {"1", "2"}
    assert {int(r["k"]) for r in rows if r["setting"] != "schedule"} == set(range(K_MAX + 1))
    s = json.loads((out / "summary.json").read_text())
    assert s["load_unit"] == axis and s["speculative_config"]["num_speculative_tokens"] >= 1
    if name == "mean_length":
        alpha = {float(r["alpha_used"]) for r in rows if r["k"] != "0"}
        assert len(alpha) == 1  # the same alpha at every k ...
        (a,) = alpha
        assert expected_tokens_per_step(a, K_MAX) == pytest.approx(1.9, abs=1e-5)  # ... the one 1.9 implies at k_max
        for r in rows:
            if r["k"] not in ("0",) and r["setting"] != "schedule":
                k = int(r["k"])
                assert float(r["acceptance_length_used"]) == pytest.approx(expected_tokens_per_step(a, k), abs=1e-5)
