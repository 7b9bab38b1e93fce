"""The page scripts (results page, tune page) run under Node with a minimal DOM and a Plotly stub.

A cheaper check than the headless-Chromium tests (which skip where Chromium is
absent): the script runs without exceptions and draws what it should from the
embedded data. Skips where ``node`` is absent.
"""

import json
import re
import shutil
import subprocess

import pytest

from conftest import REPO

NODE = shutil.which("node")
pytestmark = pytest.mark.skipif(NODE is None, reason="node not installed")

DOM = r"""
const els = {};
function mk(tag, id) {
  const e = { tag, id, children: [], style: {}, textContent: '', className: '', listeners: {}, cells: [],
    appendChild(c) { this.children.push(c); if (this.tag === 'tr') this.cells.push(c); return c; },
    addEventListener(n, f) { (this.listeners[n] = this.listeners[n] || []).push(f); },
    dispatchEvent(ev) { (this.listeners[ev.type] || []).forEach((f) => f(ev)); },
    _sel: 0,
    get options() { return this.children; },
    get selectedIndex() { return this._sel; }, set selectedIndex(i) { this._sel = i; },
    get value() { return this.tag === 'select' ? (this.children[this._sel] || {}).value : this._value; },
    set value(v) { if (this.tag === 'select') { const i = this.children.findIndex((o) => o.value === v); if (i >= 0) this._sel = i; } else this._value = v; },
    set innerHTML(v) { this.children = []; this._sel = 0; },
  };
  return e;
}
global.Event = function (type) { this.type = type; };
global.document = {
  getElementById(id) {
    if (id === DATA_ID) return { textContent: DATA };
    if (!els[id]) els[id] = mk(SELECTS.includes(id) ? 'select' : 'div', id);
    return els[id];
  },
  createElement(t) { return mk(t); },
};
global.window = {};
const plots = {};
global.Plotly = { react(id, data, layout) { plots[id] = { data, layout }; }, newPlot(id, data, layout) { plots[id] = { data, layout }; } };
"""


def run_page(html: str, data_id: str, selects, after: str) -> dict:
    data = re.search(rf'<script type="application/json" id="{data_id}">(.*?)</script>', html, re.S).group(1)
    script = html.rsplit("<script>", 1)[1].split("</script>")[0]
    prog = (f"const DATA = {json.dumps(data)}; const DATA_ID = {json.dumps(data_id)}; "
            f"const SELECTS = {json.dumps(selects)};\n{DOM}\n{script}\n{after}")
    r = subprocess.run([NODE, "-e", prog], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_results_page_draws_speedup_against_load(tmp_path):
    from vidur_specdec.report import build_page

    html = build_page(REPO / "sweeps" / "results" / "specdec_39.csv", tmp_path / "p.html")
    out = run_page(html, "specdec-data", ["load", "alpha", "method"], """
      const first = plots['load-chart'];
      const sel = document.getElementById('load'); sel.selectedIndex = 1; sel.dispatchEvent(new Event('change'));
      console.log(JSON.stringify({ names: first.data.map((t) => t.name), xs: first.data.map((t) => t.x),
        marker: plots['load-chart'].layout.shapes[1].x0, loads: sel.options.map((o) => Number(o.value)) }));
    """)
    # one line per k and verify-attention assumption, each across every recorded load
    assert len(out["names"]) == 6 and all(n.startswith("k = ") for n in out["names"])
    assert all(xs == sorted(out["loads"]) for xs in out["xs"])
    assert out["marker"] == out["loads"][1]


def test_tune_page_draws_lines_crossings_and_schedule(tmp_path):
    import csv as _csv

    from vidur_specdec.tune.page import build_page

    # a hand-made tune.csv: k=1 never crosses, k=2 crosses between 2 and 4
    cols = ["point", "phase", "load_unit", "load", "setting", "k", "schedule", "tpot_ms_p50", "ttft_ms_p99",
            "tpot_ms_p99", "throughput_tok_s", "goodput_req_s", "k_flips", "tpot_speedup", "meets_slo"]
    rows = []
    sp = {1: [1.5, 1.3, 1.1], 2: [1.6, 1.05, 0.9]}
    for i, load in enumerate([1, 2, 4]):
        rows.append([len(rows), "grid", "qps", load, "k=0", 0, "", 10, 100, 12, 100, 1, 0, 1.0, "true"])
        for k in (1, 2):
            rows.append([len(rows), "grid", "qps", load, f"k={k}", k, "", 8, 100, 12, 100, 1, 0, sp[k][i], "true"])
    rows.append([len(rows), "check", "qps", 2, "schedule", 2, "[[1,4,2],[5,128,1]]", 8, 100, 12, 100, 1, 3, 1.2,
                 "true"])
    p = tmp_path / "tune.csv"
    with open(p, "w", newline="") as f:
        w = _csv.writer(f)
        w.writerow(cols)
        w.writerows(rows)
    out = run_page(build_page(p), "tune-data", [], """
      console.log(JSON.stringify({ names: plots['chart'].data.map((t) => t.name), state: window.specdecTune,
        shapes: plots['chart'].layout.shapes.length,
        table: document.getElementById('schedule-rows').children.map((tr) => tr.children.map((c) => c.textContent)) }));
    """)
    assert out["names"] == ["no speculation (k = 0)", "k = 1", "k = 2", "chosen schedule"]
    assert out["state"]["crossings"] == [{"k": 2, "lo": 2, "hi": 4, "x": 8 ** 0.5}]
    assert out["shapes"] == 2
    # range, k, width, and (from summary.json, absent here) the gain over the previous k and the change's price
    assert out["table"] == [["1\u20134", "2", "4", "\u2013", "\u2013"], ["5\u2013128", "1", "124", "\u2013", "\u2013"]]
