"""Shared fixtures: the measured Vidur profiles beside the checkout and small run configs."""

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
MEASURED = SHARED / "vidur-profiles"


@pytest.fixture(scope="session", autouse=True)
def _private_predictor_cache(tmp_path_factory):
    """Keep the tests' fitted-predictor cache out of the user's home (subprocesses inherit it)."""
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("xdg-cache"))


@pytest.fixture(scope="session")
def measured_profiles() -> str:
    if not (MEASURED / "a100/meta-llama/Llama-2-7b-hf/mlp.csv").is_file():
        pytest.skip("../shared/vidur-profiles is not beside this checkout")
    return str(MEASURED)


def one_error_line(capsys, rc, *needles, code=2) -> str:
    """The command ended with status ``code`` and one ``error:`` line on stderr holding every needle, no traceback."""
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert rc == code and "Traceback" not in err, err
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    for n in needles:
        assert n in lines[0], lines[0]
    return lines[0]


def small(num_requests=60, qps=4.0, method="ngram", k=4, alpha=0.7, **extra):
    """A small run config (shipped profiles) as a dict; ``extra`` merges top-level sections."""
    cfg = {
        "seed": 1,
        "workload": {
            "num_requests": num_requests,
            "qps": qps,
            "prompt_tokens": {"dist": "uniform", "min": 32, "max": 768},
            "output_tokens": {"dist": "uniform", "min": 8, "max": 256},
        },
        "speculative": {"method": method, "num_speculative_tokens": k, "acceptance_rate": alpha},
    }
    for section, values in extra.items():
        if isinstance(values, dict):
            cfg.setdefault(section, {}).update(values)
        else:
            cfg[section] = values
    return cfg
