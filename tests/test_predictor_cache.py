"""The fitted-predictor cache: keyed by profile content, never stale, robust to a bad entry."""

import shutil

import pytest

from vidur_specdec.costs import operator_model as predictor
from vidur_specdec.costs.operator_model import OperatorTimeModel, clear_memory_cache, load_time_model, locate_profile

LLAMA7 = "meta-llama/Llama-2-7b-hf"


@pytest.fixture
def profile_copy(tmp_path):
    mlp, att = locate_profile("shipped", "a100", LLAMA7)
    d = tmp_path / "prof"
    d.mkdir()
    shutil.copy(mlp, d / "mlp.csv")
    shutil.copy(att, d / "attention.csv")
    return d


def _count_fits(monkeypatch):
    calls = []
    real = OperatorTimeModel.fit.__func__

    def counting(cls, *a, **k):
        calls.append(a)
        return real(cls, *a, **k)

    monkeypatch.setattr(OperatorTimeModel, "fit", classmethod(counting))
    return calls


def test_cold_then_warm_from_disk(tmp_path, profile_copy, monkeypatch):
    calls = _count_fits(monkeypatch)
    cache = tmp_path / "cache"
    clear_memory_cache()
    a = load_time_model(profile_copy / "mlp.csv", profile_copy / "attention.csv", cache_dir=cache)
    assert len(calls) == 1 and len(list(cache.glob("*.pkl"))) == 1
    clear_memory_cache()
    b = load_time_model(profile_copy / "mlp.csv", profile_copy / "attention.csv", cache_dir=cache)
    assert len(calls) == 1  # loaded from disk, not refitted
    assert b.linear == a.linear and b.decode.v == a.decode.v


def test_changed_profile_is_refitted(tmp_path, profile_copy, monkeypatch):
    calls = _count_fits(monkeypatch)
    cache = tmp_path / "cache"
    clear_memory_cache()
    before = load_time_model(profile_copy / "mlp.csv", profile_copy / "attention.csv", cache_dir=cache)
    # double every decode-attention time: only the attention file changes
    import pandas as pd

    att = pd.read_csv(profile_copy / "attention.csv")
    col = "time_stats.attn_decode.median"
    att[col] = att[col] * 2
    att.to_csv(profile_copy / "attention.csv", index=False)
    clear_memory_cache()
    after = load_time_model(profile_copy / "mlp.csv", profile_copy / "attention.csv", cache_dir=cache)
    assert len(calls) == 2
    assert after.decode_attention_ms(32, 1000) == pytest.approx(2 * before.decode_attention_ms(32, 1000))
    assert len(list(cache.glob("*.pkl"))) == 2


def test_corrupt_cache_entry_is_refitted(tmp_path, profile_copy, monkeypatch):
    cache = tmp_path / "cache"
    clear_memory_cache()
    load_time_model(profile_copy / "mlp.csv", profile_copy / "attention.csv", cache_dir=cache)
    (entry,) = cache.glob("*.pkl")
    entry.write_bytes(b"not a pickle")
    calls = _count_fits(monkeypatch)
    clear_memory_cache()
    m = load_time_model(profile_copy / "mlp.csv", profile_copy / "attention.csv", cache_dir=cache)
    assert len(calls) == 1 and m.decode_attention_ms(1, 100) > 0
    assert entry.read_bytes() != b"not a pickle"


def test_cache_dir_config_key(tmp_path):
    from vidur_specdec import simulate

    clear_memory_cache()
    cache = tmp_path / "c"
    simulate({"workload": {"num_requests": 5}, "predictor": {"cache_dir": str(cache)}})
    assert len(list(cache.glob("*.pkl"))) == 1
    assert predictor.default_cache_dir().name == "vidur_specdec"
