"""The fitted-predictor and built-profile caches: data only, keyed by content, checked on every read, never
stale, robust to a bad entry, and not trusted inside a config's own folder."""

import functools
import io
import shutil
import zipfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vidur_specdec.costs import cache_entries as CE

from vidur_specdec.costs import cache_entries
from vidur_specdec.costs.fit_cache import clear_memory_cache, load_time_model
from vidur_specdec.costs.operator_model import OperatorTimeModel
from vidur_specdec.costs.profile_files import locate_profile

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
    assert len(calls) == 1 and len(list(cache.glob("*.npz"))) == 1 and len(list(cache.glob("*.npz.sha256"))) == 1
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
    assert len(list(cache.glob("*.npz"))) == 2


def test_corrupt_cache_entry_is_refitted_with_one_warning(tmp_path, profile_copy, monkeypatch, capsys):
    cache = tmp_path / "cache"
    clear_memory_cache()
    load_time_model(profile_copy / "mlp.csv", profile_copy / "attention.csv", cache_dir=cache)
    (entry,) = cache.glob("*.npz")
    entry.write_bytes(b"not an npz")
    calls = _count_fits(monkeypatch)
    clear_memory_cache()
    capsys.readouterr()
    m = load_time_model(profile_copy / "mlp.csv", profile_copy / "attention.csv", cache_dir=cache)
    assert len(calls) == 1 and m.decode_attention_ms(1, 100) > 0
    assert entry.read_bytes() != b"not an npz"
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("warning: predictor.cache_dir: ") and str(entry) in err[0]


class _Payload:
    """Unpickling this object creates the file it names: the proof that a cache entry's code ran."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def _pickled_npz(marker) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        member = io.BytesIO()
        np.lib.format.write_array(member, np.array([_Payload(marker)], dtype=object), allow_pickle=True)
        z.writestr("linear.npy", member.getvalue())
    return buf.getvalue()


def test_an_entry_holding_pickled_code_is_never_run_even_with_a_matching_digest(tmp_path, profile_copy, capsys):
    cache = tmp_path / "cache"
    clear_memory_cache()
    load_time_model(profile_copy / "mlp.csv", profile_copy / "attention.csv", cache_dir=cache)
    (entry,) = cache.glob("*.npz")
    marker = tmp_path / "code-ran"
    CE.write_entry(entry, _pickled_npz(marker))  # the digest beside it matches the doctored bytes
    (tmp_path / "old.pkl").write_bytes(__import__("pickle").dumps(_Payload(marker)))
    clear_memory_cache()
    m = load_time_model(profile_copy / "mlp.csv", profile_copy / "attention.csv", cache_dir=cache)
    assert not marker.exists() and m.decode_attention_ms(4, 500) > 0
    assert "does not hold a fitted model" in capsys.readouterr().err


@functools.lru_cache(maxsize=1)
def _fresh_fit():

    return OperatorTimeModel.fit(*locate_profile("shipped", "a100", LLAMA7))


@settings(max_examples=20)
@given(data=st.data())
def test_any_doctored_entry_is_refitted_or_read_as_the_fit_never_run(tmp_path_factory, data):

    from vidur_specdec.costs import fit_cache as OM

    mlp, att = locate_profile("shipped", "a100", LLAMA7)
    cache = tmp_path_factory.mktemp("cache")
    fresh = _fresh_fit()
    entry = cache / f"operator-model-{OM.fit_key(mlp, att)[:32]}.npz"
    good = CE.npz_bytes(OM._to_arrays(fresh))
    CE.write_entry(entry, good)
    how = data.draw(st.sampled_from(["flip", "truncate", "random", "arrays", "digest"]))
    if how == "flip":
        i = data.draw(st.integers(0, len(good) - 1))
        bad = good[:i] + bytes([good[i] ^ data.draw(st.integers(1, 255))]) + good[i + 1:]
    elif how == "truncate":
        bad = good[:data.draw(st.integers(0, len(good) - 1))]
    elif how == "random":
        bad = data.draw(st.binary(max_size=4096))
    elif how == "arrays":  # a well-formed npz of other arrays
        shape = data.draw(st.tuples(st.integers(0, 4), st.integers(0, 4)))
        value = data.draw(st.sampled_from([np.nan, -1.0, 1.0, np.inf]))
        names = data.draw(st.lists(st.sampled_from(["linear", "linear_sum", "decode_axes", "decode_values",
                                                    "prefill_axes", "prefill_values", "max_decode_batch",
                                                    "source"]), unique=True))
        bad = CE.npz_bytes({n: np.full(shape, value) for n in names})
    else:
        bad = good
    entry.write_bytes(bad)
    if how != "digest" and data.draw(st.booleans()):
        CE.write_entry(entry, bad)  # doctored with its digest fixed
    elif how == "digest":
        CE.digest_path(entry).write_text("0" * 64)
    clear_memory_cache()
    with pytest.MonkeyPatch.context() as mp:  # a refit gives the same model; reuse it (the test is about the read)
        mp.setattr(OperatorTimeModel, "fit", classmethod(lambda cls, *a, **k: fresh))
        m = load_time_model(mlp, att, cache_dir=cache)
    for b, kv in ((1, 100), (32, 1500), (300, 4000)):
        assert m.decode_attention_ms(b, kv) == fresh.decode_attention_ms(b, kv)
    assert m.linear_sum_ms(777) == fresh.linear_sum_ms(777) and m.prefill_attention_ms(64, 256) > 0
    assert CE.read_verified(entry)[0] is not None  # rewritten, verified


def test_cache_dir_config_key(tmp_path):
    from vidur_specdec import simulate

    clear_memory_cache()
    cache = tmp_path / "c"
    simulate({"workload": {"num_requests": 5}, "predictor": {"cache_dir": str(cache)}})
    assert len(list(cache.glob("*.npz"))) == 1
    assert cache_entries.default_cache_dir().name == "vidur_specdec"


def _built_run(tmp_path, cache):
    """A config whose target profile is built on demand (Llama-3.2-1B on an H100), with its own cache."""
    return {"model": "meta-llama/Llama-3.2-1B", "device": "h100", "profiles": "built", "seed": 1,
            "workload": {"num_requests": 6}, "predictor": {"cache_dir": str(cache)}}


def test_a_doctored_built_profile_is_rebuilt_not_used(tmp_path, capsys):
    from vidur_specdec import simulate

    cache = tmp_path / "c"
    clear_memory_cache()
    before = simulate(_built_run(tmp_path, cache)).summary["ttft_ms"]["p50"]
    (mlp,) = cache.glob("profiles/*/mlp.csv")
    good = mlp.read_bytes()
    lines = good.decode().splitlines()
    head, rows = lines[0], lines[1:]
    cols = head.split(",")
    times = {i for i, c in enumerate(cols) if c.startswith("time_stats.")}
    mlp.write_text("\n".join([head] + [",".join(str(float(v) * 10) if i in times else v
                                                for i, v in enumerate(r.split(","))) for r in rows]) + "\n")
    clear_memory_cache()
    capsys.readouterr()
    after = simulate(_built_run(tmp_path, cache)).summary["ttft_ms"]["p50"]
    assert after == before and mlp.read_bytes() == good
    err = capsys.readouterr().err
    assert "warning: predictor.cache_dir: cache entry" in err and "does not match its stored digest" in err


def test_a_digest_without_its_data_is_a_cold_cache_but_data_without_its_digest_is_damage(tmp_path, capsys):
    """An entry's digest is written before its data: a reader between the two (another process building the
    same entry) finds no data and builds it again without a warning; data without a digest is never written
    so, found, it is said and rebuilt."""
    from vidur_specdec import simulate

    cache = tmp_path / "c"
    clear_memory_cache()
    simulate(_built_run(tmp_path, cache))
    (mlp,) = cache.glob("profiles/*/mlp.csv")
    good = mlp.read_bytes()
    mlp.unlink()  # the digest is left: the state between an entry's two writes
    clear_memory_cache()
    capsys.readouterr()
    simulate(_built_run(tmp_path, cache))
    assert mlp.read_bytes() == good and capsys.readouterr().err == ""
    CE.digest_path(mlp).unlink()
    clear_memory_cache()
    simulate(_built_run(tmp_path, cache))
    err = capsys.readouterr().err
    assert "warning: predictor.cache_dir: cache entry" in err and "has no stored digest" in err
    assert CE.digest_path(mlp).is_file()


def test_a_cache_folder_inside_the_configs_folder_is_not_trusted(tmp_path, capsys):
    import yaml

    from vidur_specdec.engine.resolve import load

    folder = tmp_path / "someone-elses-config"
    folder.mkdir()
    (folder / "run.yaml").write_text(yaml.safe_dump({"workload": {"num_requests": 5},
                                                     "predictor": {"cache_dir": "cache"}}))
    cfg = load(folder / "run.yaml")
    assert cfg.predictor.cache_dir is None  # the per-user cache
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("warning: predictor.cache_dir: ") and "not trusted" in err[0]
    (folder / "outside.yaml").write_text(yaml.safe_dump({"predictor": {"cache_dir": "../shared-cache"}}))
    assert load(folder / "outside.yaml").predictor.cache_dir == str(folder / "../shared-cache")
    assert load(folder / "run.yaml", ["predictor.cache_dir=" + str(folder / "c2")]).predictor.cache_dir == \
        str(folder / "c2")  # --set is the user's own choice


@settings(max_examples=25)
@given(parts=st.lists(st.sampled_from(["cache", "..", ".", "a", "b"]), min_size=0, max_size=4),
       absolute=st.booleans())
def test_a_cache_folder_is_untrusted_exactly_when_it_resolves_inside_the_config_folder(tmp_path_factory, parts,
                                                                                      absolute):
    import os

    from vidur_specdec.config.paths import resolve_paths

    folder = tmp_path_factory.mktemp("cfg")
    value = os.path.join(*parts) if parts else "."
    if absolute:
        value = str(folder / value)
    data = {"predictor": {"cache_dir": value}}
    resolve_paths(data, folder)
    inside = os.path.realpath(os.path.join(folder, value)).startswith(os.path.realpath(folder))
    assert (data["predictor"]["cache_dir"] is None) == inside


def test_checking_an_entry_reads_each_file_once_and_names_the_first_damaged_one(tmp_path, monkeypatch):
    """One pass over an entry's files: whether all verify, and the first file that is there but does not (an
    absent one is a cold cache); a file verified before is not read again until it changes on disk."""
    a, b, c = tmp_path / "a.csv", tmp_path / "b.csv", tmp_path / "c.csv"
    CE.write_entry(b, b"x,y\n1,2\n")
    c.write_bytes(b"no digest\n")
    reads = []
    real = CE.read_verified
    monkeypatch.setattr(CE, "read_verified", lambda p: reads.append(Path(p).name) or real(p))
    ok, why = CE.check_files((a, b, c))
    assert not ok and why == f"{c} has no stored digest (c.csv.sha256)" and reads == ["a.csv", "b.csv", "c.csv"]
    assert CE.check_files((a,)) == (False, None)
    reads.clear()
    assert CE.check_files((b,)) == (True, None) and reads == []  # verified above, unchanged since
    CE.write_entry(b, b"x,y\n3,4\n")
    assert CE.check_files((b,)) == (True, None) and reads == ["b.csv"]
