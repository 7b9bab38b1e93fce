"""The recorded sweep results are current: sweeps/results/*.csv match what their sweep files produce now.

Each recorded CSV's sweep hash (rows' resolved configs, CSV columns, profile
file contents, package version) must equal its sweep file's, and a few cheap
rows (a baseline plus both verify-attention assumptions) re-run here must give
byte-identical CSV lines. The whole reference sweep re-run and compared byte for
byte (25-50 s on 2 cores) is the long check: SPECDEC_FULL_SWEEP=1 runs it (README, "Tests").
Regenerate with ``sweeps/results/regenerate.sh``.
"""

import csv
import os

import pytest

from conftest import REPO
from vidur_specdec.sweep import csv_text, load_sweep, run_row, run_sweep

RECORDED = {
    # sweep file -> rows re-run on every test run (the baseline they need is added)
    "specdec_39": [11, 33, 34],  # 2 req/s, k = 8, alpha 0.6, shared_kv; 12 req/s, k = 4, alpha 0.8, both verify modes
    "draft_model": [37],     # 12 req/s, k = 8, alpha = 0.8, shared_kv
    "deployments": [7, 34],  # n-gram at the top load: Llama-3.1-8B on an H100 (TP 1), Llama-3.1-70B on A100s (TP 8)
    "eagle": [30, 45],       # 12 req/s, k = 3: EAGLE and EAGLE-3
    "moe": [6, 12],          # one request in flight, n-gram k = 3: Qwen3-30B-A3B and the dense Llama-3.2-3B
    "disaggregation": [18],  # 1 req/s, Llama-3.1-70B EAGLE-3 on 1P1D, draft KV transferred
}
NUM_ROWS = {"specdec_39": 39, "draft_model": 39, "deployments": 36, "eagle": 48, "moe": 51, "disaggregation": 60}
STALE = "stale: run sweeps/results/regenerate.sh"
_RESULTS = {}  # row id -> metrics (baselines are shared between sweeps)


def _recorded(name):
    path = REPO / "sweeps" / "results" / f"{name}.csv"
    assert path.is_file(), f"{path} is missing: {STALE}"
    return path, path.read_text()


@pytest.mark.parametrize("name", sorted(RECORDED))
def test_recorded_csv_matches_sweep_file(name):
    sweep = load_sweep(REPO / "sweeps" / f"{name}.yaml")
    path, text = _recorded(name)
    rows = list(csv.DictReader(text.splitlines()))
    assert text.splitlines()[0].split(",") == sweep.columns, f"{path}: columns differ; {STALE}"
    assert {r["sweep_hash"] for r in rows} == {sweep.sweep_hash}, f"{path}: sweep hash differs; {STALE}"
    assert [r["row_id"] for r in rows] == [r.row_id for r in sweep.rows]
    assert len(rows) == NUM_ROWS[name] == len(sweep.rows)
    assert all(r["tpot_speedup"] == "1.000000" for r in rows if r["method"] == "none")

    # re-run a few rows and compare their CSV lines byte for byte
    only = set(RECORDED[name]) | {sweep.baseline_of[i] for i in RECORDED[name]}
    results = {}
    for i in sorted(only):
        row = sweep.rows[i]
        if row.row_id not in _RESULTS:
            _RESULTS[row.row_id] = run_row(row.config_dict)["metrics"]
        results[i] = _RESULTS[row.row_id]
    fresh = csv_text(sweep, results, only=only).splitlines()[1:]
    recorded = [line for line in text.splitlines()[1:] if int(line.split(",")[0]) in only]
    assert fresh == recorded, f"{path}: re-run rows {sorted(only)} differ from the recorded ones; {STALE}"


@pytest.mark.skipif(os.environ.get("SPECDEC_FULL_SWEEP") != "1", reason="the long check: SPECDEC_FULL_SWEEP=1")
def test_full_reference_sweep_reproduces_recorded_csv(tmp_path):
    sweep = load_sweep(REPO / "sweeps" / "specdec_39.yaml")
    run = run_sweep(sweep, tmp_path, progress=False)
    assert run.csv_path.read_text() == _recorded("specdec_39")[1], STALE
