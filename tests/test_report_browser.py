"""The results explorer in a real headless browser (Debian's chromium), driven over the DevTools protocol.

Skips only where /usr/bin/chromium (or $CHROMIUM) is absent. Checks that the
recorded page (docs/results.html) loads without console errors or exceptions,
that changing the load and acceptance-rate controls changes the chart and the
table, and that a screenshot is produced (kept in $SPECDEC_SCREENSHOT_DIR when
set, else in pytest's tmp_path). A second page, built here from the reference
CSV and a small deployment sweep run here, checks the sweep and deployment
selectors: switching either redraws the chart and the table, without errors.
"""

import asyncio
import base64
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from conftest import REPO

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
PAGE = REPO / "docs" / "results.html"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-extensions", "--disable-default-apps", "--mute-audio", "--hide-scrollbars",
         "--window-size=1200,1500", "--remote-debugging-port=0", "--remote-allow-origins=*"]

pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} not installed")


class CDP:
    """A minimal Chrome DevTools Protocol client over one page's websocket."""

    def __init__(self, ws):
        self.ws = ws
        self.next_id = 0
        self.pending = {}
        self.events = []
        self.waiters = []
        self.reader = asyncio.create_task(self._read())

    async def _read(self):
        import aiohttp

        async for msg in self.ws:
            if msg.type != aiohttp.WSMsgType.TEXT:
                continue
            data = json.loads(msg.data)
            if "id" in data and data["id"] in self.pending:
                self.pending.pop(data["id"]).set_result(data)
            elif "method" in data:
                self.events.append(data)
                for name, fut in list(self.waiters):
                    if name == data["method"] and not fut.done():
                        fut.set_result(data)

    async def send(self, method, **params):
        self.next_id += 1
        fut = asyncio.get_running_loop().create_future()
        self.pending[self.next_id] = fut
        await self.ws.send_str(json.dumps({"id": self.next_id, "method": method, "params": params}))
        reply = await asyncio.wait_for(fut, 20)
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply["result"]

    def expect(self, method):
        fut = asyncio.get_running_loop().create_future()
        self.waiters.append((method, fut))
        return fut

    async def js(self, expr):
        res = await self.send("Runtime.evaluate", expression=expr, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in res:
            raise AssertionError(f"page script failed: {res['exceptionDetails']}")
        return res["result"].get("value")

    def errors(self):
        out = []
        for ev in self.events:
            m, p = ev["method"], ev.get("params", {})
            if m == "Runtime.exceptionThrown":
                out.append(p["exceptionDetails"].get("exception", {}).get("description")
                           or p["exceptionDetails"].get("text"))
            elif m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                out.append(" ".join(str(a.get("value", a.get("description"))) for a in p.get("args", [])))
            elif m == "Log.entryAdded" and p["entry"].get("level") == "error":
                out.append(p["entry"].get("text"))
        return out


def _devtools_port(user_dir: Path, proc, timeout=60.0) -> int:
    f = user_dir / "DevToolsActivePort"
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if proc.poll() is not None:
            raise RuntimeError(f"chromium exited with status {proc.returncode}")
        if f.is_file():
            lines = f.read_text().split()
            if lines:
                return int(lines[0])
        time.sleep(0.05)
    raise RuntimeError("chromium did not open its DevTools port")


CHART_Y = "JSON.stringify(document.getElementById('chart').data.map(t => t.y))"
TABLE = "Array.from(document.querySelectorAll('#rows tr')).map(tr => Array.from(tr.cells).map(c => c.textContent))"


def _select(sel_id, index):
    return (f"(() => {{ const s = document.getElementById('{sel_id}'); s.selectedIndex = {index}; "
            "s.dispatchEvent(new Event('change')); return s.value; })()")


def _options(sel_id):
    return f"Array.from(document.getElementById('{sel_id}').options).map(o => o.textContent)"


def _shown(el_id):
    return f"getComputedStyle(document.getElementById('{el_id}')).display !== 'none'"


VISIBLE_SOURCE = ("Array.from(document.querySelectorAll('#source > div')).filter(d => !d.hidden)"
                  ".map(d => d.textContent).join('')")
_RECORDED_STEPS = [
    ("title", "document.title"),
    ("source", VISIBLE_SOURCE),
    ("datasets", _options("dataset")),
    ("loads", "Array.from(document.getElementById('load').options).map(o => o.value)"),
    ("alphas", "Array.from(document.getElementById('alpha').options).map(o => o.value)"),
    ("chart0", CHART_Y),
    ("table0", TABLE),
    ("load_value", _select("load", 1)),
    ("chart1", CHART_Y),
    ("table1", TABLE),
    ("alpha_value", _select("alpha", 1)),
    ("chart2", CHART_Y),
    ("caption", "document.getElementById('caption').textContent"),
    ("shape_y", "document.getElementById('chart').layout.shapes[0].y0"),
]
_SWITCH_STEPS = [
    ("datasets", _options("dataset")),
    ("dataset_shown", _shown("dataset-control")),
    ("deployment_shown0", _shown("deployment-control")),
    ("source0", VISIBLE_SOURCE),
    ("chart0", CHART_Y),
    ("table0", TABLE),
    ("dataset_value", _select("dataset", 1)),
    ("source1", VISIBLE_SOURCE),
    ("deployment_shown1", _shown("deployment-control")),
    ("deployments", _options("deployment")),
    ("chart1", CHART_Y),
    ("table1", TABLE),
    ("caption1", "document.getElementById('caption').textContent"),
    ("deployment_value", _select("deployment", 1)),
    ("chart2", CHART_Y),
    ("table2", TABLE),
    ("caption2", "document.getElementById('caption').textContent"),
    ("back", _select("dataset", 0)),
    ("chart3", CHART_Y),
]


async def _drive(page: Path, shot: Path, steps=None) -> dict:
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
                out = {}
                for key, expr in (steps or _RECORDED_STEPS):
                    out[key] = await cdp.js(expr)
                shot_data = await cdp.send("Page.captureScreenshot", format="png", captureBeyondViewport=True)
                shot.write_bytes(base64.b64decode(shot_data["data"]))
                await asyncio.sleep(0.2)  # let late console messages arrive
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


def test_results_page_in_chromium(tmp_path):
    assert PAGE.is_file(), "docs/results.html is missing: regenerate it (docs/sweep.md)"
    shot_dir = Path(os.environ.get("SPECDEC_SCREENSHOT_DIR", tmp_path))
    shot_dir.mkdir(parents=True, exist_ok=True)
    shot = shot_dir / "results-page.png"
    out = asyncio.run(asyncio.wait_for(_drive(PAGE, shot), 60))

    assert out["errors"] == [], out["errors"]
    assert "Llama-2-7b-hf" in out["source"] and "300 requests per run" in out["source"]
    assert "acceptance rate is an input" in out["source"].lower()
    # docs/results.html holds every recorded sweep, the reference sweep first (sweeps/results/regenerate.sh)
    assert out["datasets"] == ["specdec_39", "draft_model", "deployments", "eagle", "moe"]
    assert len(out["loads"]) == 3 and len(out["alphas"]) == 2
    # chart: a bracket trace plus one trace per attention assumption, one point per k
    assert len(json.loads(out["chart0"])) == 3
    assert out["shape_y"] == 1
    # 1 baseline + 3 k x 2 attention assumptions
    assert len(out["table0"]) == 7 and out["table0"][0][0].startswith("none")
    assert out["table0"][0][5] == "1.00\u00d7"
    # the controls change the chart and the table
    assert out["load_value"] == out["loads"][1]
    assert out["chart1"] != out["chart0"] and out["table1"] != out["table0"]
    assert out["chart2"] != out["chart1"]
    assert f"\u03b1 = {float(out['alpha_value']):g}" in out["caption"]
    png = shot.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000


TINY_DEPLOYMENTS = """
sweep:
  name: tiny_deployments
  description: Two deployments (Llama-2-7B on an A100, Llama-3.1-8B-Instruct on an H100), ten requests per run.
base:
  seed: 0
  profiles: shipped
  workload:
    num_requests: 10
    arrival: poisson
    prompt_tokens: {dist: lognormal, median: 256, sigma: 0.5, min: 16, max: 1024}
    output_tokens: {dist: lognormal, median: 32, sigma: 0.5, min: 8, max: 128}
  speculative: {num_speculative_tokens: 3, acceptance_rate: 0.7}
grid:
  - model: [meta-llama/Llama-2-7b-hf]
    device: [a100]
    workload.qps: [2.0, 6.0]
    speculative.method: [none, ngram]
  - model: [meta-llama/Llama-3.1-8B-Instruct]
    device: [h100]
    workload.qps: [2.0, 6.0]
    speculative.method: [none, ngram]
    speculative.acceptance_rate: [0.5]
"""


def test_results_page_switches_sweeps_and_deployments(tmp_path):
    from vidur_specdec.report import write_page
    from vidur_specdec.sweep import load_sweep, run_sweep

    (tmp_path / "tiny_deployments.yaml").write_text(TINY_DEPLOYMENTS)
    run = run_sweep(load_sweep(tmp_path / "tiny_deployments.yaml"), tmp_path / "results", progress=False)
    page = write_page([REPO / "sweeps" / "results" / "specdec_39.csv", run.csv_path], tmp_path / "page.html")
    out = asyncio.run(asyncio.wait_for(_drive(page, tmp_path / "switch.png", _SWITCH_STEPS), 60))

    assert out["errors"] == [], out["errors"]
    assert out["datasets"] == ["specdec_39", "tiny_deployments"] and out["dataset_shown"]
    # the reference sweep has one deployment: no deployment control; its source is the one shown
    assert not out["deployment_shown0"] and "Llama-2-7b-hf" in out["source0"]
    assert "tiny_deployments" not in out["source0"]
    # the second sweep: its own description and source, a deployment control, a different chart and table
    assert out["dataset_value"] == "1"
    assert "Two deployments" in out["source1"] and "tiny_deployments.csv" in out["source1"]
    assert "specdec_39.csv" not in out["source1"]
    assert out["deployment_shown1"]
    assert out["deployments"] == ["Llama-2-7b-hf on A100, TP 1", "Llama-3.1-8B-Instruct on H100, TP 1"]
    assert out["chart1"] != out["chart0"] and out["table1"] != out["table0"]
    assert "Llama-2-7b-hf on A100" in out["caption1"] and "0.7" in out["caption1"]
    # the other deployment: its own baseline and acceptance rate
    assert out["chart2"] != out["chart1"] and out["table2"] != out["table1"]
    assert "Llama-3.1-8B-Instruct on H100" in out["caption2"] and "\u03b1 = 0.5" in out["caption2"]
    assert len(out["table2"]) == 2 and out["table2"][0][0].startswith("none")
    # back to the first sweep: the first chart again
    assert out["chart3"] == out["chart0"]
