"""Every measured kernel table and every model config.json is read through one checked reader: a file that
does not parse, is empty, lacks a column, or holds a latency that is not a finite positive number is one
``error:`` line naming the file and the fault, never a pyarrow/numpy/JSON traceback and never negative times."""

import json
import shutil

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import one_error_line, run_command
from vidur_specdec.architectures.errors import ModelError
from vidur_specdec.config import ConfigError
from vidur_specdec.costs.kernels import table_data as TD

TABLES = [("gemm", "vllm", "0.24.0", "gemm_perf"), ("attention", "vllm", "0.24.0", "generation_attention_perf"),
          ("attention", "vllm", "0.24.0", "context_attention_perf"), ("moe", "vllm", "0.24.0", "moe_perf"),
          ("linear_attention", "vllm", "0.24.0", "gdn_perf"), ("comm", "vllm", "0.24.0", "custom_allreduce_perf"),
          ("mla", "vllm", "0.24.0", "mla_generation_module_perf"), ("comm", "vllm", "0.24.0", "moe_a2a_perf")]


def _rows(op, fw, ver, table, n=200):
    return TD.read_table(TD.table_path("h200_sxm", op, fw, ver, table), table).head(n).reset_index(drop=True)


FAULTS = ("truncate", "garbage", "empty_file", "no_rows", "drop_column", "nan", "negative", "zero", "inf",
          "text_in_number", "csv_not_parquet")


@settings(max_examples=40)
@given(which=st.sampled_from(TABLES), fault=st.sampled_from(FAULTS), data=st.data())
def test_a_bad_table_file_is_one_line_naming_the_file_and_the_fault(tmp_path_factory, which, fault, data):
    table = which[3]
    df = _rows(*which)
    keys, times = TD.SCHEMAS[table]
    path = tmp_path_factory.mktemp("t") / f"{table}.parquet"
    df.to_parquet(path)
    good = path.read_bytes()
    row = data.draw(st.integers(0, len(df) - 1))
    if fault == "truncate":
        path.write_bytes(good[:data.draw(st.integers(0, len(good) - 1))])
    elif fault == "garbage":
        path.write_bytes(data.draw(st.binary(max_size=2000)))
    elif fault == "empty_file":
        path.write_bytes(b"")
    elif fault == "no_rows":
        df.head(0).to_parquet(path)
    elif fault == "drop_column":
        df.drop(columns=[data.draw(st.sampled_from(keys + times))]).to_parquet(path)
    elif fault in ("nan", "negative", "zero", "inf"):
        col = data.draw(st.sampled_from(times))
        df.loc[row, col] = {"nan": np.nan, "negative": -data.draw(st.floats(1e-9, 1e6)), "zero": 0.0,
                            "inf": np.inf}[fault]
        df.to_parquet(path)
    elif fault == "text_in_number":
        col = data.draw(st.sampled_from([c for c in keys + times if pd.api.types.is_numeric_dtype(df[c])]))
        df[col] = df[col].astype(object)
        df.loc[row, col] = "x"
        df[col] = df[col].astype(str)
        df.to_parquet(path)
    else:
        path.write_text(df.to_csv(index=False))
    with pytest.raises(TD.TableFileError) as e:
        TD.read_table(path, table)
    msg = str(e.value)
    assert "\n" not in msg and str(path) in msg and msg.startswith("profiles: measured table ")


def test_the_shipped_tables_the_simulator_reads_pass_the_reader():
    for which in TABLES:
        assert len(_rows(*which, n=10)) == 10


@pytest.fixture
def doctored_tables(tmp_path, monkeypatch):
    """A copy of the h100 tables the default H100 run reads, under a data root the reader is pointed at."""
    root = tmp_path / "data"
    shutil.copytree(TD.data_root() / "h100_sxm", root / "h100_sxm", symlinks=True,
                    copy_function=lambda s, d: __import__("os").symlink(s, d))  # links; the doctored file is copied
    gemm = root / "h100_sxm/gemm/vllm/0.24.0/gemm_perf.parquet"
    target = gemm.resolve()
    gemm.unlink()
    shutil.copy(target, gemm)
    monkeypatch.setattr(TD, "data_root", lambda: root)
    monkeypatch.setattr(TD, "_CACHE", {})
    return root / "h100_sxm"


@pytest.mark.parametrize("fault", ["negative", "truncate"])
def test_a_run_on_a_doctored_table_ends_in_one_error_line(doctored_tables, tmp_path, capsys, fault):
    path = doctored_tables / "gemm/vllm/0.24.0/gemm_perf.parquet"
    if fault == "negative":
        df = pd.read_parquet(path)
        df["latency"] = -df["latency"]
        df.to_parquet(path)
    else:
        path.write_bytes(path.read_bytes()[:1000])
    from vidur_specdec.main import main

    rc = main(["--config", "configs/llama3.1-8b-h100.yaml", "--output-dir", str(tmp_path / "out"),
               "--set", f"predictor.cache_dir={tmp_path / 'cache'}", "--set", "workload.num_requests=5"])
    one_error_line(capsys, rc, "gemm_perf.parquet")
    assert not (tmp_path / "out").exists()


@settings(max_examples=40)
@given(content=st.one_of(st.binary(max_size=200), st.sampled_from([b"", b"[]", b"1", b'"x"', b"{", b"\xff\xfe",
                                                                   b'{"architectures": 5}', b"null"])))
def test_a_bad_config_json_is_one_line_naming_it(tmp_path_factory, content):
    from vidur_specdec.architectures.models import resolve_model

    path = tmp_path_factory.mktemp("m") / "config.json"
    path.write_bytes(content)
    try:
        resolve_model(str(path))
    except ModelError as e:
        assert "\n" not in str(e) and str(e).startswith("model: ")


@settings(max_examples=60)
@given(data=st.data())
def test_a_mistyped_shipped_config_is_one_line(data):
    """Any field of a shipped config.json (aiconfigurator-core's) set to a value of another type: a line
    naming the field, or a model whose sizes are sane; never a traceback."""
    import aiconfigurator_core

    from vidur_specdec.architectures.parse import model_from_hf_config
    from pathlib import Path

    files = sorted(p for p in (Path(aiconfigurator_core.__file__).parent / "model_configs").glob("*_config.json")
                   if "hf_quant" not in p.name)
    cfg = json.loads(data.draw(st.sampled_from(files)).read_text())
    node = cfg["text_config"] if isinstance(cfg.get("text_config"), dict) and data.draw(st.booleans()) else cfg
    key = data.draw(st.sampled_from(sorted(node)))
    node[key] = data.draw(st.sampled_from([None, True, 0, -1, 2.5, "x", [], [1], {}, 10 ** 12, "64"]))
    try:
        m = model_from_hf_config(cfg, "x", "model: x")
    except ConfigError as e:
        assert "\n" not in str(e)
        return
    assert m.kv_bytes_per_token(1) >= 0 and m.state_bytes_per_request(1, 2) >= 0


@settings(max_examples=20)
@given(table=st.sampled_from(["mlp", "attention"]), value=st.sampled_from(["-0.5", "nan", "inf", "x", ""]),
       data=st.data())
def test_a_measured_profile_time_that_is_not_a_finite_number_of_ms_is_refused(tmp_path_factory, table, value,
                                                                                data):
    from vidur_specdec.costs.operator_model import read_profile
    from vidur_specdec.costs.profile_files import locate_profile

    mlp, att = locate_profile("shipped", "a100", "meta-llama/Llama-2-7b-hf")
    df = pd.read_csv(mlp if table == "mlp" else att)
    if table == "mlp":
        col = data.draw(st.sampled_from([c for c in df.columns if c.startswith("time_stats.")
                                         and c != "time_stats.emb.median" and c.endswith(".median")]))
        rows = df.index
    else:
        col = data.draw(st.sampled_from(["time_stats.attn_decode.median", "time_stats.attn_prefill.median"]))
        pre = df["is_prefill"].astype(str).str.lower().isin(["true", "1"])
        rows = df.index[pre if "prefill" in col else ~pre]
    row = data.draw(st.sampled_from(list(rows)))
    df[col] = df[col].astype(object)
    df.loc[row, col] = value
    path = tmp_path_factory.mktemp("p") / f"{table}.csv"
    df.to_csv(path, index=False)
    with pytest.raises(ConfigError) as e:
        read_profile(path, table)
    assert "\n" not in str(e.value) and str(path) in str(e.value) and col in str(e.value)
