"""The results explorer in a real headless browser (Debian's chromium), driven over the DevTools protocol.

Skips only where /usr/bin/chromium (or $CHROMIUM) is absent. Checks that the
recorded page (docs/results.html) loads without console errors or exceptions,
that changing the load and acceptance-rate controls changes the chart and the
table, and that a screenshot is produced (kept in $SPECDEC_SCREENSHOT_DIR when
set, else in pytest's tmp_path).
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


def _devtools_port(user_dir: Path, proc, timeout=20.0) -> int:
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
                out = {"title": await cdp.js("document.title"),
                       "source": await cdp.js("document.getElementById('source').textContent")}
                out["loads"] = await cdp.js("Array.from(document.getElementById('load').options).map(o => o.value)")
                out["alphas"] = await cdp.js("Array.from(document.getElementById('alpha').options).map(o => o.value)")
                out["chart0"] = await cdp.js(CHART_Y)
                out["table0"] = await cdp.js(TABLE)
                out["load_value"] = await cdp.js(_select("load", 1))
                out["chart1"] = await cdp.js(CHART_Y)
                out["table1"] = await cdp.js(TABLE)
                out["alpha_value"] = await cdp.js(_select("alpha", 1))
                out["chart2"] = await cdp.js(CHART_Y)
                out["caption"] = await cdp.js("document.getElementById('caption').textContent")
                out["shape_y"] = await cdp.js("document.getElementById('chart').layout.shapes[0].y0")
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
