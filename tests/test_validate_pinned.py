"""Pinned acceptance: the vLLM launch arguments that make a server accept guesses as the simulation does
(vLLM 0.33's synthetic rejection sampler), and calibration reading the server's per-position counters back."""

import json

import numpy as np
import pytest
from prometheus_client import generate_latest

from conftest import REPO, run_command
from vidur_specdec.engine.resolve import load
from vidur_specdec.speculation.acceptance import AcceptanceModel
from vidur_specdec.validate.calibrate import calibrate
from vidur_specdec.validate.common import ValidateError
from vidur_specdec.validate.counters import Snapshot
from vidur_specdec.validate.fake_engine import FakeEngineConfig, _Metrics
from vidur_specdec.validate.pinned import pinned, synthetic_rates

EAGLE3_8B = ["device=h100", "model=meta-llama/Llama-3.1-8B-Instruct", "speculative.method=eagle3",
             "speculative.num_speculative_tokens=3"]


def _vllm_accepts(rates, n):
    """vLLM 0.33's own check (vllm/config/speculative.py, _resolve_synthetic_acceptance_rates)."""
    return len(rates) == n and all(0.0 <= r <= 1.0 for r in rates) and all(
        rates[i] <= rates[i - 1] for i in range(1, n))


@pytest.mark.parametrize("acceptance", [
    ["speculative.acceptance_per_position=[0.73,0.7123,0.6731]"],  # vLLM's test: .73/.52/.35 unconditional
    ["speculative.acceptance_rate=0.7"],
    ["speculative.mean_acceptance_length=2.6"],
    ["speculative.acceptance_histogram=[0.2,0.3,0.3,0.2]"],
])
def test_rates_are_the_simulated_tails_and_pass_vllm_s_check(acceptance):
    cfg = load(REPO / "configs" / "default.yaml", EAGLE3_8B + acceptance)
    rates = synthetic_rates(cfg)
    assert _vllm_accepts(rates, 3)
    pmf = AcceptanceModel.from_config(cfg.speculative, cfg.seed).pmf
    assert rates == pytest.approx([pmf[i:].sum() for i in (1, 2, 3)], abs=1e-6)
    body = pinned(cfg)
    sc = body["speculative_config"]
    assert sc["rejection_sample_method"] == "synthetic" and sc["synthetic_acceptance_rates"] == rates
    assert "synthetic_acceptance_length" not in sc  # exactly one of the two (vLLM refuses both)
    assert body["mean_acceptance_length"] == pytest.approx(1 + float(np.dot(np.arange(4), pmf)), abs=1e-5)
    assert json.loads(body["vllm_serve"].split("--speculative-config '")[1][:-1]) == sc


def test_vllm_s_published_per_position_figures_pin_as_published():
    cfg = load(REPO / "configs" / "default.yaml", EAGLE3_8B + ["speculative.acceptance_per_position=[0.73,0.7123,0.6731]"])
    assert synthetic_rates(cfg) == pytest.approx([0.73, 0.52, 0.35], abs=1e-4)


def test_what_cannot_be_pinned_is_refused_or_said(tmp_path):
    with pytest.raises(ValidateError, match="speculative.method"):
        synthetic_rates(load(REPO / "configs" / "default.yaml", ["speculative.method=none"]))
    cfg = load(REPO / "configs" / "default.yaml", EAGLE3_8B + ["speculative.acceptance_rate=0.7",
                                                                "speculative.acceptance_spread=0.1"])
    assert "acceptance_spread" in pinned(cfg)["warnings"][0]


def test_calibration_reads_the_pinned_server_s_counters_back_into_the_rates():
    cfg = load(REPO / "configs" / "default.yaml", EAGLE3_8B + ["speculative.acceptance_per_position=[0.73,0.7123,0.6731]"])
    rates = synthetic_rates(cfg)
    m = _Metrics(FakeEngineConfig(k=3))
    before = Snapshot.parse(generate_latest(m.registry).decode())
    tails = [1.0] + rates + [0.0]
    counts = {a: int(round(10000 * (tails[a] - tails[a + 1]))) for a in range(4)}  # drafts accepting exactly a
    for a, n in counts.items():
        for _ in range(n):
            m.observe_draft(3, a)
    cal = calibrate(before, Snapshot.parse(generate_latest(m.registry).decode()))
    assert cal.per_position_unconditional == pytest.approx(rates, abs=1e-4)
    assert cal.per_position == pytest.approx([0.73, 0.7123, 0.6731], abs=1e-3)  # the conditional input again


def test_the_pin_command_writes_once(tmp_path):
    def pin(*extra):
        return run_command("validate", "pin", "--config",
                               "configs/default.yaml", *sum((["--set", s] for s in EAGLE3_8B), []),
                               "--set", "speculative.acceptance_rate=0.6", "--out", str(tmp_path / "p"), *extra, module="vidur_specdec")

    r = pin()
    assert r.returncode == 0, r.stderr
    body = json.loads((tmp_path / "p" / "vllm_pinned.json").read_text())
    assert body["speculative_config"]["synthetic_acceptance_rates"] == pytest.approx([0.6, 0.36, 0.216])
    again = pin()
    assert again.returncode == 2 and again.stderr.strip().startswith("error: --out") and "--overwrite" in again.stderr
    assert pin("--overwrite").returncode == 0


def test_published_acceptance_pins_as_the_library_row():
    cfg = load(REPO / "configs" / "default.yaml", EAGLE3_8B + [
        "speculative.acceptance_source=published", "speculative.model=RedHatAI/Llama-3.1-8B-Instruct-speculator.eagle3",
        "workload.dataset=mt-bench"])
    body = pinned(cfg)
    assert body["speculative_config"]["synthetic_acceptance_rates"] == pytest.approx([0.7296, 0.5208, 0.3545], abs=1e-4)
    assert body["mean_acceptance_length"] == pytest.approx(2.60, abs=0.01)
    assert body["speculative_config"]["model"] == "RedHatAI/Llama-3.1-8B-Instruct-speculator.eagle3"
