"""tune.html in a real headless browser (as tests/test_report_browser.py drives the results page).

Skips only where /usr/bin/chromium (or $CHROMIUM) is absent. A small tune is
run, its page loaded from the file: no console errors, one line per static k
plus the schedule, the crossover markers and the schedule table all drawn from
the CSV.
"""

import asyncio
import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import yaml

from conftest import REPO
from test_report_browser import CDP, CHROMIUM, FLAGS, _devtools_port
from test_tune import CFG

pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} not installed")


async def _drive(page: Path, shot: Path) -> dict:
    import aiohttp

    user_dir = Path(tempfile.mkdtemp(prefix="specdec-chromium-"))
    proc = subprocess.Popen([CHROMIUM, *FLAGS, f"--user-data-dir={user_dir}", "about:blank"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        port = _devtools_port(user_dir, proc)
        async with aiohttp.ClientSession() as http:
            async with http.get(f"http://127.0.0.1:{port}/json/list") as r:
                targets = await r.json()
            target = next(t for t in targets if t["type"] == "page")
            async with http.ws_connect(target["webSocketDebuggerUrl"], max_msg_size=0) as ws:
                cdp = CDP(ws)
                for domain in ("Runtime", "Log", "Page"):
                    await cdp.send(f"{domain}.enable")
                loaded = cdp.expect("Page.loadEventFired")
                await cdp.send("Page.navigate", url=page.resolve().as_uri())
                await asyncio.wait_for(loaded, 30)
                out = {
                    "names": await cdp.js("document.getElementById('chart').data.map(t => t.name)"),
                    "xs": await cdp.js("JSON.stringify(document.getElementById('chart').data.map(t => t.x))"),
                    "state": await cdp.js("JSON.stringify(window.specdecTune)"),
                    "schedule": await cdp.js("Array.from(document.querySelectorAll('#schedule-rows tr'))"
                                             ".map(tr => Array.from(tr.cells).map(c => c.textContent))"),
                    "shapes": await cdp.js("document.getElementById('chart').layout.shapes.length"),
                }
                shot_data = await cdp.send("Page.captureScreenshot", format="png", captureBeyondViewport=True)
                shot.write_bytes(base64.b64decode(shot_data["data"]))
                await asyncio.sleep(0.2)
                out["errors"] = cdp.errors()
                cdp.reader.cancel()
        return out
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(user_dir, ignore_errors=True)


def test_tune_page_in_chromium(tmp_path):
    p = tmp_path / "cfg.yaml"
    p.write_text(yaml.safe_dump(CFG))
    out_dir = tmp_path / "tune"
    r = subprocess.run([sys.executable, "-m", "vidur_specdec.main", "tune", "--config", str(p), "--output-dir",
                        str(out_dir), "--jobs", "2"], cwd=REPO, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    shot_dir = Path(os.environ.get("SPECDEC_SCREENSHOT_DIR", tmp_path))
    shot_dir.mkdir(parents=True, exist_ok=True)
    out = asyncio.run(asyncio.wait_for(_drive(out_dir / "tune.html", shot_dir / "tune-page.png"), 60))
    assert out["errors"] == [], out["errors"]
    summary = json.loads((out_dir / "summary.json").read_text())
    assert out["names"] == ["no speculation (k = 0)", "k = 1", "k = 2", "k = 3", "chosen schedule"]
    state = json.loads(out["state"])
    crossed = {str(c["k"]): [c["lo"], c["hi"]] for c in state["crossings"]}
    assert crossed == {k: v for k, v in summary["crossover_bracket"].items() if v is not None}
    assert out["shapes"] == 1 + len(crossed)  # the 1x line and one marker per crossover
    assert [[int(x) for x in row[0].split("\u2013")] + [int(row[1])] for row in out["schedule"]] == summary["schedule"]
    png = (shot_dir / "tune-page.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
