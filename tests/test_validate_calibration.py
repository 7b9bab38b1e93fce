"""Server counters and calibration (item 3): parsing, deltas, alpha inversion, the includable fragment."""

import json

import numpy as np
import pytest
import yaml
from prometheus_client import generate_latest

from vidur_specdec.config import ConfigError
from vidur_specdec.engine.resolve import load
from vidur_specdec.validate.calibrate import (
    alpha_from_mean_acceptance_length,
    calibrate,
    fragment,
    mean_acceptance_length,
    read_calibration,
    write_calibration,
)
from vidur_specdec.validate.cli import main
from vidur_specdec.validate.counters import Snapshot, cache_info, spec_counters
from vidur_specdec.validate.fake_engine import FakeEngineConfig, _Metrics


def _engine_metrics(k=4, blocks=1234, block_size=16):
    return _Metrics(FakeEngineConfig(k=k, num_gpu_blocks=blocks, block_size=block_size))


def _snap(m) -> Snapshot:
    return Snapshot.parse(generate_latest(m.registry).decode())


@pytest.mark.parametrize("k", [1, 2, 4, 7])
@pytest.mark.parametrize("alpha", [0.0, 0.3, 0.7, 0.95, 1.0])
def test_alpha_inversion_round_trip(alpha, k):
    mal = mean_acceptance_length(alpha, k)
    assert alpha_from_mean_acceptance_length(mal, k) == pytest.approx(alpha, abs=1e-9)


def test_mean_acceptance_length_formula():
    a, k = 0.6, 3
    assert mean_acceptance_length(a, k) == pytest.approx(1 + a + a ** 2 + a ** 3)
    assert alpha_from_mean_acceptance_length(0.5, 4) == 0.0
    assert alpha_from_mean_acceptance_length(99, 4) == 1.0


def test_counters_follow_vllm_names_and_semantics():
    m = _engine_metrics(k=3)
    m.observe_draft(3, 2)
    m.observe_draft(3, 0)
    m.observe_draft(3, 3)
    text = generate_latest(m.registry).decode()
    for name in ("vllm:spec_decode_num_drafts_total", "vllm:spec_decode_num_draft_tokens_total",
                 "vllm:spec_decode_num_accepted_tokens_total", "vllm:spec_decode_num_accepted_tokens_per_pos_total",
                 "vllm:cache_config_info"):
        assert name in text
    assert 'position="0"' in text and 'position="2"' in text and 'position="3"' not in text
    c = spec_counters(Snapshot.parse(text))
    assert (c.drafts, c.draft_tokens, c.accepted) == (3, 9, 5)
    assert c.per_pos == {0: 2, 1: 2, 2: 1}
    assert cache_info(Snapshot.parse(text)) == {"num_gpu_blocks": 1234, "block_size": 16}


def test_calibration_from_deltas_recovers_alpha_not_accepted_over_drafted():
    rng = np.random.default_rng(0)
    m = _engine_metrics(k=4)
    m.observe_draft(4, 4)  # before the replay: must not count
    before = _snap(m)
    alpha = 0.7
    for _ in range(20000):
        u = rng.random(4)
        a = 0
        while a < 4 and u[a] < alpha:
            a += 1
        m.observe_draft(4, a)
    cal = calibrate(before, _snap(m))
    assert cal.num_drafts == 20000 and cal.num_speculative_tokens == 4
    assert cal.alpha == pytest.approx(alpha, abs=0.01)
    assert np.allclose(cal.per_position, alpha, atol=0.02)
    assert cal.draft_acceptance_rate < alpha - 0.1  # accepted / drafted is a different, lower quantity
    assert cal.mean_acceptance_length == pytest.approx(mean_acceptance_length(alpha, 4), abs=0.03)
    assert cal.num_gpu_blocks == 1234 and cal.block_size == 16
    assert cal.warnings == []


def test_per_position_rates_are_conditional():
    m = _engine_metrics(k=2)
    before = _snap(m)
    for a in [0] * 50 + [1] * 30 + [2] * 20:  # P(>=1) = .5, P(>=2 | >=1) = .4
        m.observe_draft(2, a)
    cal = calibrate(before, _snap(m))
    assert cal.per_position == pytest.approx([0.5, 0.4])
    assert cal.per_position_unconditional == pytest.approx([0.5, 0.2])


def test_fragment_is_a_valid_config_and_overrides_other_inputs(tmp_path):
    m = _engine_metrics(k=2, blocks=777)
    before = _snap(m)
    for a in [0, 1, 2, 2]:
        m.observe_draft(2, a)
    cal = calibrate(before, _snap(m))
    frag = write_calibration(cal, tmp_path)
    data = json.loads((tmp_path / "calibration.json").read_text())
    for key in ("alpha", "mean_acceptance_length", "per_position", "num_gpu_blocks"):
        assert key in data
    assert yaml.safe_load((tmp_path / "calibration.yaml").read_text()) == frag
    base = {"speculative": {"method": "ngram", "num_speculative_tokens": 4,
                            "acceptance_histogram": [0.2, 0.2, 0.2, 0.2, 0.2]}}
    from vidur_specdec.validate.calibrate import merge

    cfg = load(merge(base, frag))
    assert cfg.speculative.acceptance_input() == "acceptance_per_position"
    assert cfg.speculative.num_speculative_tokens == 2 and cfg.scheduler.num_blocks == 777
    cfg = load(merge(base, fragment(cal, "alpha")))
    assert cfg.speculative.acceptance_input() == "acceptance_rate"
    assert read_calibration(tmp_path).per_position == pytest.approx(cal.per_position)


def test_no_drafts_means_no_speculation():
    m = _Metrics(FakeEngineConfig(k=0))
    cal = calibrate(_snap(m), _snap(m))
    assert cal.alpha is None and cal.num_speculative_tokens == 0
    assert fragment(cal)["speculative"] == {"method": "none"}
    assert any("no speculative drafts" in w for w in cal.warnings)


def test_counters_going_down_is_an_error():
    m1, m2 = _engine_metrics(), _engine_metrics()
    m1.observe_draft(4, 1)
    with pytest.raises(ConfigError, match="restart"):
        calibrate(_snap(m1), _snap(m2))


def test_short_drafts_warn():
    m = _engine_metrics(k=4)
    before = _snap(m)
    for _ in range(10):
        m.observe_draft(2, 1)
    cal = calibrate(before, _snap(m))
    assert cal.mean_draft_tokens == 2 and any("biased low" in w for w in cal.warnings)


def test_not_prometheus_text_is_an_error():
    with pytest.raises(ConfigError):
        Snapshot.parse("this is { not metrics")


def test_calibrate_cli(tmp_path, capsys):
    m = _engine_metrics(k=3)
    (tmp_path / "metrics_before.prom").write_text(generate_latest(m.registry).decode())
    for a in [3, 2, 1, 0, 3]:
        m.observe_draft(3, a)
    (tmp_path / "metrics_after.prom").write_text(generate_latest(m.registry).decode())
    assert main(["calibrate", "--dir", str(tmp_path), "--out", str(tmp_path / "cal")]) == 0
    assert (tmp_path / "cal" / "calibration.yaml").is_file()
    rc = main(["calibrate", "--dir", str(tmp_path / "nope"), "--out", str(tmp_path / "cal2")])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and not (tmp_path / "cal2").exists()
