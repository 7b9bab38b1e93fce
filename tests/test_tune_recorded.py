"""The tune figures in docs/tune.md and README.md are current: the marked blocks are what the recorded tunes give,
and the recorded tunes are what their commands give now.

The recorded tunes live in sweeps/results/tune/<name>/ (scripts/tune_figures.py runs the documented commands
and rewrites the blocks). Checked here, fast: every block equals its rendering from the recorded files; each
recorded tune's hash (config, options, SLOs, profiles, package version) equals the command's now; and two
light points per tune re-run here give the recorded metrics cell for cell.
Regenerate with ``python scripts/tune_figures.py``.
"""

import argparse
import csv
import importlib.util
import io
import json

import pytest

from conftest import REPO

STALE = "stale: run python scripts/tune_figures.py"
_spec = importlib.util.spec_from_file_location("tune_figures", REPO / "scripts" / "tune_figures.py")
figures = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(figures)


def test_every_tune_is_quoted_and_every_block_is_current():
    seen = set()
    for doc in figures.DOCS:
        for name, body in figures.blocks(doc.read_text()).items():
            assert name in figures.TUNES, f"{doc}: block {name} has no recorded tune"
            assert body == figures.render(name), f"{doc.name}: block {name} differs from the recorded tune; {STALE}"
            seen.add(name)
    assert seen == set(figures.TUNES)


def _parsed(name):
    from vidur_specdec.tune.cli import add_arguments

    ap = argparse.ArgumentParser()
    add_arguments(ap)
    return ap.parse_args(figures.TUNES[name] + ["--output-dir", "unused", "--jobs", "2"])


@pytest.mark.parametrize("name", sorted(figures.TUNES))
def test_recorded_tune_matches_its_command(name, tmp_path):
    from vidur_specdec.tune.cli import check_args
    from vidur_specdec.tune.points import Evaluator, run_point
    from vidur_specdec.tune.outputs import TUNE_METRICS, csv_cell  # the formatting of tune.csv

    summ, rows = figures.recorded(name)
    base, k_max, axis, slo, options, _, _ = check_args(_parsed(name))
    ev = Evaluator(base, axis, tmp_path / "t", slo, options, 1, "local", None, False)
    assert summ["tune_hash"] == ev.tune_hash, f"{name}: the command's tune hash differs; {STALE}"
    assert summ["options"] == json.loads(json.dumps(options))
    # the two lightest points (k = 0 and k = k_max at the lowest load) re-run bit for bit
    both = {float(r["load"]) for r in rows if r["setting"] == "k=0"} & \
        {float(r["load"]) for r in rows if r["setting"] == f"k={k_max}"}
    low = min(both)
    again = [r for r in rows if float(r["load"]) == low and r["setting"] in ("k=0", f"k={k_max}")]
    assert len(again) == 2
    for r in again:
        ov = json.loads(r["config"])
        from vidur_specdec.tune.points import build_config

        m = run_point(build_config(base, ov).to_dict(), slo["ttft_ms"], slo["tpot_ms"])["metrics"]
        for c in TUNE_METRICS:
            if c == "overloaded":
                continue  # the CSV column is the whole rule (queue or TTFT growth)
            assert csv_cell(m.get(c), c) == r[c], f"{name} point {r['point']} {c}: {STALE}"


def test_recorded_csv_is_complete():
    for name in figures.TUNES:
        summ, rows = figures.recorded(name)
        assert len(rows) == summ["simulated_points"]
        text = (REPO / "sweeps" / "results" / "tune" / name / "tune.csv").read_text()
        assert list(csv.reader(io.StringIO(text)))[0][:4] == ["point", "phase", "load_unit", "load"]


def test_the_documented_rules_are_the_code_s():
    from vidur_specdec.tune.cli import CHECK_MARGIN, DEFAULT_SLO_TPOT_MS, DEFAULT_SLO_TTFT_MS
    from vidur_specdec.tune.loads import (CONCURRENCY_BOUND_FACTOR, GROWTH_FACTOR, GROWTH_FLOOR_S,
                                          TTFT_GROWTH_FACTOR, WAIT_BOUND_S)

    text = " ".join((REPO / "docs" / "tune.md").read_text().split())
    assert (f"over {GROWTH_FACTOR:g}× that of the first third and over {GROWTH_FLOOR_S:g} s, or the median queue "
            f"wait is over {WAIT_BOUND_S:g} s, or its median TTFT is over {TTFT_GROWTH_FACTOR:g}×") in text
    assert f"concurrency ≤ {CONCURRENCY_BOUND_FACTOR:g} × `max_num_seqs`" in text
    assert f"| {DEFAULT_SLO_TTFT_MS:g}, {DEFAULT_SLO_TPOT_MS:g} |" in text
    assert f"more than {CHECK_MARGIN * 100:g} % worse than the best static k" in text
