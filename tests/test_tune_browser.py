"""tune.html in a real headless browser (as tests/test_report_browser.py drives the results page).

Skips only where /usr/bin/chromium (or $CHROMIUM) is absent. A small tune is
run, its page loaded from the file: no console errors, one line per static k
plus the schedule, the crossover markers and the schedule table all drawn from
the CSV.
"""

import asyncio
import csv
import json
import os
from pathlib import Path

import pytest
import yaml

from conftest import run_command
from test_report_browser import CHROMIUM, _drive
from test_tune import CFG

pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} not installed")


# what the test reads off the page, in order (key, JavaScript expression)
TUNE_STEPS = [
    ("names", "document.getElementById('chart').data.map(t => t.name)"),
    ("xs", "JSON.stringify(document.getElementById('chart').data.map(t => t.x))"),
    ("state", "JSON.stringify(window.specdecTune)"),
    ("schedule", "Array.from(document.querySelectorAll('#schedule-rows tr'))"
                 ".map(tr => Array.from(tr.cells).map(c => c.textContent))"),
    ("shapes", "document.getElementById('chart').layout.shapes.length"),
    ("deployment", "document.getElementById('deployment').textContent"),
    ("answer", "document.getElementById('answer').textContent"),
    ("spec", "document.getElementById('speculative-config').textContent"),
    ("ttft", "document.getElementById('chart-ttft').data.map(t => t.name)"),
    ("throughput", "document.getElementById('chart-throughput').data.map(t => t.name)"),
    ("slo_notes", "document.getElementById('chart-ttft-slo').layout.annotations.map(a => a.text).join('|')"),
    ("slo_traces", "JSON.stringify(document.getElementById('chart-ttft-slo').data.map(t => t.y))"),
    ("median_notes", "document.getElementById('chart-ttft').layout.annotations.map(a => a.text).join('|')"),
    ("capacity_why", "document.getElementById('capacity-why').textContent"),
    ("schedule_cols", "document.querySelectorAll('#schedule-rows tr')[0].cells.length"),
]


def test_tune_page_in_chromium(tmp_path):
    p = tmp_path / "cfg.yaml"
    p.write_text(yaml.safe_dump(CFG))
    out_dir = tmp_path / "tune"
    r = run_command("tune", "--config", str(p), "--output-dir",
                        str(out_dir), "--jobs", "2", module="vidur_specdec.main")
    assert r.returncode == 0, r.stderr
    shot_dir = Path(os.environ.get("SPECDEC_SCREENSHOT_DIR", tmp_path))
    shot_dir.mkdir(parents=True, exist_ok=True)
    out = asyncio.run(asyncio.wait_for(_drive(out_dir / "tune.html", shot_dir / "tune-page.png", TUNE_STEPS), 60))
    assert out["errors"] == [], out["errors"]
    summary = json.loads((out_dir / "summary.json").read_text())
    assert out["names"] == ["no speculation (k = 0)", "k = 1", "k = 2", "k = 3", "chosen schedule"]
    state = json.loads(out["state"])
    crossed = {str(c["k"]): [c["lo"], c["hi"]] for c in state["crossings"]}
    assert crossed == {k: v for k, v in summary["crossover_bracket"].items() if v is not None}
    assert out["shapes"] == 1 + len(crossed)  # the 1x line and one marker per crossover
    assert [[int(x) for x in row[0].split("\u2013")] + [int(row[1])] for row in out["schedule"]] == summary["schedule"]
    assert out["schedule_cols"] == 5  # range, k, width, gain over the previous k, price of the change
    # the page opens with the deployment and the answer, and holds the speculative_config as written
    assert out["deployment"].startswith(CFG.get("model", "meta-llama/Llama-2-7b-hf")) and "k = 3" in out["deployment"]
    assert out["answer"].startswith("n-gram: the schedule runs") and "capacity under the SLOs (TTFT p99" in out["answer"]
    assert json.loads(out["spec"]) == json.loads((out_dir / "speculative_config.json").read_text())
    assert out["ttft"] == out["names"] and out["throughput"] == out["names"]
    assert "TTFT SLO (on p99" in out["slo_notes"] and "capacity without" in out["slo_notes"]
    assert "SLO" not in out["median_notes"]  # the SLO lines are drawn on the percentile they apply to only
    rows = [r for r in csv.DictReader(open(out_dir / "tune.csv")) if r["setting"] == "k=0"]
    p99 = sorted({float(r["load"]): float(r["ttft_ms_p99"]) for r in rows}.items())
    assert [round(y, 6) for y in json.loads(out["slo_traces"])[0]] == [round(y, 6) for _, y in p99]
    assert out["capacity_why"].startswith("Capacity is the highest load whose TTFT p99")
    png = (shot_dir / "tune-page.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
