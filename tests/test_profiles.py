"""Analytical profile builder: schema, reproducibility, monotonicity, calibration, CLI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from vidur_specdec.architectures.models import get_model
from vidur_specdec.costs.profiles import (
    ATTENTION_COLUMNS,
    DEVICES,
    MLP_COLUMNS,
    SHIPPED,
    build_profile,
    build_shipped,
    compare_profile,
    profile_dir,
)
from vidur_specdec.costs.profiles import calibrate as cal
from vidur_specdec.costs.profiles import calibration_report as report
from vidur_specdec.costs.profiles.params_block import render_block
from vidur_specdec.costs.profiles import params
from vidur_specdec.profiles.__main__ import main

REPO = Path(__file__).resolve().parents[1]
SHIPPED_ROOT = REPO / "profiles"
SHARED_PROFILES = REPO.parent / "shared" / "vidur-profiles"
MEASURED = SHARED_PROFILES / "a100" / "meta-llama"
LLAMA7B = "meta-llama/Llama-2-7b-hf"
SMALL = "JackFram/llama-160m"


def _header(path: Path) -> list:
    with open(path, encoding="utf-8") as fh:
        return fh.readline().rstrip("\n").split(",")


@pytest.fixture(scope="module")
def small_profile():
    return build_profile(get_model(SMALL), "a100", 1)


@pytest.mark.skipif(not MEASURED.is_dir(), reason="measured Vidur profiles not present")
def test_columns_and_encoding_match_measured():
    shipped = profile_dir(SHIPPED_ROOT, "a100", LLAMA7B)
    assert _header(shipped / "mlp.csv") == _header(MEASURED / "Llama-2-7b-hf" / "mlp.csv") == MLP_COLUMNS
    assert _header(shipped / "attention.csv") == _header(MEASURED / "Llama-2-7b-hf" / "attention.sample.csv")
    assert _header(shipped / "attention.csv") == ATTENTION_COLUMNS
    # The 70B file has one extra trailing column (profile_method); the rest is the same.
    assert _header(MEASURED / "Llama-2-70b-hf" / "attention.csv")[: len(ATTENTION_COLUMNS)] == ATTENTION_COLUMNS

    ours = pd.read_csv(shipped / "attention.csv", keep_default_na=False, dtype=str)
    theirs = pd.read_csv(MEASURED / "Llama-2-7b-hf" / "attention.sample.csv", keep_default_na=False, dtype=str)
    for df in (ours, theirs):
        dec = df[df["is_prefill"] == "False"]
        pre = df[df["is_prefill"] == "True"]
        assert len(dec) + len(pre) == len(df)
        assert (dec["prefill_chunk_size"] == "0").all() and (dec["time_stats.attn_prefill.median"] == "").all()
        assert (pre["batch_size"] == "1").all() and (pre["time_stats.attn_decode.median"] == "").all()
    assert set(ours["attention_backend"]) == set(theirs["attention_backend"])
    assert set(ours["block_size"]) == set(theirs["block_size"])
    assert set(pd.read_csv(shipped / "mlp.csv", dtype=str)["use_gated_mlp"]) == {"True"}


@pytest.mark.skipif(not MEASURED.is_dir(), reason="measured Vidur profiles not present")
def test_sanity_error_against_measured_llama7b_tp1():
    table = compare_profile(get_model(LLAMA7B), "a100", 1, MEASURED / "Llama-2-7b-hf").set_index("op")
    for group in ("gemm", "elementwise", "attn_decode", "attn_prefill"):
        assert table.loc[group, "median_abs_pct_error"] < 25.0, table


# Held-out (Llama-2-70B) median |% error| the calibrated parameters reach, with a small
# margin; every bound is within the calibration target (calibrate.TARGETS). A change to the
# model or the parameters that loses accuracy fails here.
HELD_OUT_BOUNDS = {"gemm": 5.5, "elementwise": 7.0, "attn_decode": 9.0, "attn_prefill": 9.0,
                   "layer_decode": 6.5, "layer_prefill": 4.5}
FIT_BOUNDS = {"gemm": 6.0, "elementwise": 6.5, "attn_decode": 6.5, "attn_prefill": 7.0,
              "layer_decode": 4.0, "layer_prefill": 7.0}


@pytest.mark.skipif(not MEASURED.is_dir(), reason="measured Vidur profiles not present")
def test_calibration_error_table_meets_held_out_targets():
    """The calibration's evaluation (not the fit) on the current parameters."""
    measured = cal.load_measured(SHARED_PROFILES)
    errors = report.error_table(measured)
    layers = report.layer_table(measured)
    s = report.summary(errors, layers).set_index("group")
    for group, bound in HELD_OUT_BOUNDS.items():
        assert bound <= report.TARGETS[group]
        assert s.loc[group, "held_out"] <= bound, s
        assert s.loc[group, "fit"] <= FIT_BOUNDS[group], s
    # every tp of the held-out linear ops, and attention at tp 2, is in the table
    held = errors[(errors["role"] == "held-out") & (errors["op"] == "(all)")]
    assert set(held[held["group"] == "gemm"]["tp"]) == {0, 1, 2, 4, 8}
    assert set(held[held["group"] == "attn_decode"]["tp"]) == {2}
    text = report.format_report(errors, layers)
    assert "Whole-layer check" in text and "Summary" in text and " NO" not in text


@pytest.mark.skipif(not MEASURED.is_dir(), reason="measured Vidur profiles not present")
def test_calibration_recorded_the_files_it_was_fitted_on():
    measured = cal.load_measured(SHARED_PROFILES)
    assert params.CALIBRATION["files"] == measured["fit"].files
    assert all("Llama-2-7b-hf" in f for f in params.CALIBRATION["files"])


def test_params_block_is_the_generated_text():
    """params.py's calibrated block is exactly what `calibrate --write` renders (no hand edits)."""
    block = render_block(params.EFFICIENCY, params.CALIBRATION["rows"], params.CALIBRATION["files"])
    assert block in Path(params.__file__).read_text(encoding="utf-8")
    fitted = {p.key for p in cal.ALL_PARAMS}
    present = {f"{g}.{k}" for g, d in params.EFFICIENCY.items() for k in d}
    assert fitted == present


def test_calibrate_cli_bad_shared_path(tmp_path, capsys):
    assert main(["calibrate", "--shared", str(tmp_path / "nowhere")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:") and "nowhere" in err[0]


def test_eagle_style_one_layer_head_from_the_target_dims(tmp_path):
    """A one-layer head with the target's dimensions has the target's per-layer profile."""
    import yaml

    head = dict(get_model(LLAMA7B).to_dict(), name="eagle/llama-2-7b-head", num_layers=1)
    cfg = tmp_path / "head.yaml"
    cfg.write_text(yaml.safe_dump(head))
    out = tmp_path / "head"
    assert main(["build", "--model", str(cfg), "--device", "a100", "--tp", "1", "--out", str(out)]) == 0
    shipped = profile_dir(SHIPPED_ROOT, "a100", LLAMA7B)
    for name in ("mlp.csv", "attention.csv"):
        assert (out / name).read_bytes() == (shipped / name).read_bytes()
    # a GQA head (70B dims, tp 2) and a drafter nobody profiled, on the other devices
    head70 = dict(get_model("meta-llama/Llama-2-70b-hf").to_dict(), name="eagle/llama-2-70b-head", num_layers=1)
    odd = {"name": "my/drafter-350m", "num_layers": 6, "hidden_size": 1024, "num_heads": 16, "num_kv_heads": 4,
           "ffn_size": 2816, "vocab_size": 32000, "max_model_len": 1024}
    for i, (spec, device, tp) in enumerate(((head70, "h200", 2), (odd, "h100", 4))):
        cfg = tmp_path / f"m{i}.yaml"
        cfg.write_text(yaml.safe_dump(spec))
        assert main(["build", "--model", str(cfg), "--device", device, "--tp", str(tp),
                     "--out", str(tmp_path / f"o{i}"), "--max-tokens", "256"]) == 0
        mlp = pd.read_csv(tmp_path / f"o{i}" / "mlp.csv")
        att = pd.read_csv(tmp_path / f"o{i}" / "attention.csv")
        assert (mlp["num_tensor_parallel_workers"] == tp).all() and mlp["num_tokens"].max() == 256
        assert (att["max_model_len"] == spec["max_model_len"]).all()
        assert (mlp["time_stats.mlp_up_proj.median"] > 0).all()


def test_rebuild_reproduces_shipped_files_byte_for_byte(tmp_path):
    written = build_shipped(tmp_path)
    assert len(written) == 2 * len(SHIPPED)
    for path in written:
        rel = path.relative_to(tmp_path)
        assert path.read_bytes() == (SHIPPED_ROOT / rel).read_bytes(), rel


def test_grid(small_profile):
    mlp, att = small_profile
    tokens = mlp["num_tokens"].tolist()
    assert tokens[:4] == [1, 2, 4, 8] and tokens[-1] == 4096
    assert np.all(np.diff(tokens[3:]) == 8)
    spec = get_model(SMALL)
    dec = att[~att["is_prefill"]]
    pre = att[att["is_prefill"]]
    assert sorted(dec["batch_size"].unique()) == list(range(1, 129))
    assert sorted(dec["kv_cache_size"].unique()) == list(range(64, spec.max_model_len + 1, 64))
    assert sorted(pre["prefill_chunk_size"].unique()) == list(range(32, spec.max_model_len + 1, 32))
    assert (pre["kv_cache_size"] + pre["prefill_chunk_size"] <= spec.max_model_len).all()
    assert (pre["kv_cache_size"] % 64 == 0).all()
    # no spread in an analytical profile
    for op in ("attn_decode", "attn_prefill"):
        d = att.dropna(subset=[f"time_stats.{op}.median"])
        for s in ("min", "max", "mean"):
            assert (d[f"time_stats.{op}.{s}"] == d[f"time_stats.{op}.median"]).all()
        assert (d[f"time_stats.{op}.std"] == 0).all()


@pytest.mark.parametrize("model,device,tp", [(SMALL, "a100", 1), (LLAMA7B, "h100", 2), ("meta-llama/Llama-2-70b-hf", "h200", 8)])
def test_monotone_and_positive(model, device, tp):
    mlp, att = build_profile(get_model(model), device, tp, max_tokens=1024 if tp > 1 else None)
    for op in [c for c in MLP_COLUMNS if c.endswith(".median")]:
        t = mlp.sort_values("num_tokens")[op].to_numpy()
        assert (t > 0).all() and (np.diff(t) >= 0).all(), op

    dec = att[~att["is_prefill"]].pivot(index="batch_size", columns="kv_cache_size", values="time_stats.attn_decode.median")
    assert not dec.isna().any().any() and (dec.to_numpy() > 0).all()
    assert (np.diff(dec.to_numpy(), axis=0) >= 0).all()  # bigger batch never cheaper
    assert (np.diff(dec.to_numpy(), axis=1) >= 0).all()  # more context never cheaper

    pre = att[att["is_prefill"]].pivot(index="prefill_chunk_size", columns="kv_cache_size", values="time_stats.attn_prefill.median")
    vals = pre.to_numpy()  # NaN where chunk + kv > max_model_len
    assert (vals[~np.isnan(vals)] > 0).all()
    with np.errstate(invalid="ignore"):
        assert not (np.diff(vals, axis=0) < 0).any()  # longer chunk never cheaper
        assert not (np.diff(vals, axis=1) < 0).any()  # more context never cheaper
    assert (att["time_stats.attn_output_reshape.median"] > 0).all()


def test_devices_and_faster_hardware_is_not_slower():
    assert DEVICES["a100"]["peak_flops"] == 312e12 and DEVICES["a100"]["mem_bw"] == 2039e9
    assert DEVICES["h100"]["peak_flops"] == 989e12 and DEVICES["h100"]["mem_bw"] == 3350e9
    assert DEVICES["h200"]["mem_bw"] == 4800e9 and DEVICES["h200"]["mem_bytes"] == 143771 * 2**20
    assert DEVICES["a100"]["sms"] == 108 and DEVICES["h100"]["sms"] == DEVICES["h200"]["sms"] == 132
    spec = get_model(SMALL)
    a = build_profile(spec, "a100", 1, max_tokens=256)
    h = build_profile(spec, "h200", 1, max_tokens=256)
    for x, y in zip(a, h):
        cols = [c for c in x.columns if c.startswith("time_stats.") and c.endswith(".median")]
        assert (y[cols].fillna(0).to_numpy() <= x[cols].fillna(0).to_numpy()).all()


def test_cli_error_path_exits_2_with_one_line(tmp_path):
    """The real ``python -m`` entry point (one subprocess: importing the package is slow)."""
    never = tmp_path / "never"
    r = subprocess.run(
        [sys.executable, "-m", "vidur_specdec.profiles", "build", "--model", "no/such-model",
         "--device", "a100", "--tp", "1", "--out", str(never)],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )
    assert r.returncode == 2
    assert r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and "no/such-model" in lines[0]
    assert not never.exists()


def test_cli_build_writes_both_files(tmp_path, capsys):
    out = tmp_path / "p"
    assert main(["build", "--model", SMALL, "--device", "a100", "--tp", "1", "--out", str(out)]) == 0
    assert capsys.readouterr().out.split() == [str(out / "mlp.csv"), str(out / "attention.csv")]
    shipped = profile_dir(SHIPPED_ROOT, "a100", SMALL)
    for name in ("mlp.csv", "attention.csv"):
        assert (out / name).read_bytes() == (shipped / name).read_bytes()
    assert sorted(p.name for p in out.iterdir()) == ["attention.csv", "mlp.csv"]  # no temp files left


def test_cli_yaml_model(tmp_path):
    import yaml

    cfg = tmp_path / "m.yaml"
    cfg.write_text(yaml.safe_dump(get_model(SMALL).to_dict()))
    assert main(["build", "--model", str(cfg), "--device", "a100", "--tp", "1", "--out", str(tmp_path / "o")]) == 0
    shipped = profile_dir(SHIPPED_ROOT, "a100", SMALL)
    assert (tmp_path / "o" / "mlp.csv").read_bytes() == (shipped / "mlp.csv").read_bytes()


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--model", SMALL, "--device", "tpu", "--tp", "1"], "unknown device"),
        (["--model", LLAMA7B, "--device", "a100", "--tp", "3"], "tp=3"),
        (["--model", SMALL, "--device", "a100", "--tp", "1", "2", "5"], "tp=5"),
    ],
)
def test_cli_errors_in_process(tmp_path, capsys, args, needle):
    out = tmp_path / "never"
    assert main(["build", *args, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:") and needle in err[0]
    assert not out.exists()


def test_cli_bad_yaml(tmp_path, capsys):
    cfg = tmp_path / "bad.yaml"
    cfg.write_text("name: x\nhidden_size: 8\nbogus: 1\n")
    assert main(["build", "--model", str(cfg), "--device", "a100", "--tp", "1", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "bogus" in err[0]


def test_csv_text_is_what_pandas_writes():
    """The built tables' CSV writer: pandas' text, byte for byte, on a built profile and on the cells it special-cases
    (repeated and constant columns, NaN, -0.0, booleans, integers)."""
    from vidur_specdec.costs.profiles.csv_text import to_csv_text

    def pandas_text(df):
        return df.to_csv(index=False, float_format=f"%.{params.TIME_DECIMALS}f", lineterminator="\n")

    mlp, att = build_profile(get_model("meta-llama/Llama-2-7b-hf"), "a100", 1, max_tokens=64, max_chunk=256)
    for df in (mlp, att):
        assert to_csv_text(df) == pandas_text(df)
    odd = pd.DataFrame({"zeros": [0.0, -0.0, 0.0], "neg_zeros": [-0.0, -0.0, -0.0], "nan": [np.nan] * 3,
                        "some_nan": [np.nan, 1.5, np.nan], "same": [2.25, 2.25, 2.25], "again": [2.25, 2.25, 2.25],
                        "ints": [1, 1, 1], "flags": [True, False, True], "label": ["a", "a", "b"]})
    assert to_csv_text(odd) == pandas_text(odd)
