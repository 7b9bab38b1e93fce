"""docs/sweep.md's reading paragraphs (the ``sweep-reading:*`` blocks) are what scripts/sweep_readings.py
renders from the recorded CSVs, and its earlier-recording constants are what git holds for their commits.

Regenerate with ``PYTHONPATH=. python scripts/sweep_readings.py --write`` (sweeps/results/regenerate.sh runs it).
No simulation: CSV to text.
"""

import csv
import io
import subprocess
import sys

import pytest

from conftest import REPO

sys.path.insert(0, str(REPO))  # scripts/ as a package

from scripts import sweep_readings, sweep_readings_before  # noqa: E402
from scripts.docblock import block  # noqa: E402


@pytest.mark.parametrize("name", sorted(sweep_readings.BLOCKS))
def test_sweep_reading_block_is_current(name):
    assert block(sweep_readings.DOC, f"sweep-reading:{name}") == sweep_readings.text(name), \
        f"docs/sweep.md's sweep-reading:{name} block is stale: run PYTHONPATH=. python scripts/sweep_readings.py --write"


def test_every_sweep_reading_block_in_the_doc_is_rendered():
    import re

    found = set(re.findall(r"<!-- sweep-reading:([\w.-]+):begin -->", sweep_readings.DOC.read_text()))
    assert found == set(sweep_readings.BLOCKS)


def test_a_contradicted_claim_stops_rendering(monkeypatch, tmp_path):
    """A CSV whose numbers no longer support the prose (here: the light-load MoE speedup of Qwen3-30B-A3B above
    the dense model's) is refused, not rendered with new figures in old sentences."""
    text = (REPO / "sweeps" / "results" / "moe.csv").read_text()
    rows = list(csv.DictReader(io.StringIO(text)))
    for r in rows:
        if r["model"] == "Qwen/Qwen3-30B-A3B" and r["method"] == "ngram" and r["qps"] == "0.5":
            r["tpot_speedup"] = "9.000000"
    out = io.StringIO()
    w = csv.DictWriter(out, fieldnames=list(rows[0]), lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    (tmp_path / "moe.csv").write_text(out.getvalue())
    monkeypatch.setattr(sweep_readings, "RESULTS", tmp_path)
    with pytest.raises(sweep_readings.Contradicted, match="pays less than dense"):
        sweep_readings.text("moe")


@pytest.mark.parametrize("const,commit,name", [
    ("ROOFLINE", sweep_readings_before.ROOFLINE_COMMIT, "moe"),
    ("BEFORE_MLA", sweep_readings_before.BEFORE_MLA_COMMIT, "moe"),
    ("BEFORE_ROUTING", sweep_readings_before.BEFORE_ROUTING_COMMIT, "moe"),
    ("DEPLOYMENTS_ROOFLINE", sweep_readings_before.ROOFLINE_COMMIT, "deployments"),
    ("EAGLE_ROOFLINE", sweep_readings_before.ROOFLINE_COMMIT, "eagle")])
def test_earlier_recordings_are_what_git_holds(const, commit, name):
    try:
        got = subprocess.run(["git", "show", f"{commit}:sweeps/results/{name}.csv"], cwd=REPO, capture_output=True,
                             text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        pytest.skip("no git")
    if got.returncode:
        pytest.skip(f"commit {commit} not in this checkout's history")
    want = {(r["model"], *([r["device"]] if name != "moe" else []), float(r["qps"]), r["method"], int(r["k"] or 0)):
            tuple(round(float(r[c]), 4) for c in ("tpot_ms_p50", "ttft_ms_p50", "tpot_speedup"))
            for r in csv.DictReader(io.StringIO(got.stdout))}
    assert getattr(sweep_readings_before, const) == want
