"""``tune.html``: a self-contained page drawn from ``tune.csv`` alone.

Speedup (TPOT p50 against no speculation at the same load) against load, one
line per static k and markers for the chosen schedule; a dashed marker where
each k's speedup first falls below 1 (from the bracketing points in the CSV);
the schedule as a table. plotly.js and the data are inlined (works offline from
a file), and the page is a pure function of the CSV (same CSV, same bytes).
"""

from __future__ import annotations

import csv
import html
import json
from pathlib import Path
from typing import Dict, List

from vidur_specdec.config import ConfigError

KEEP = ["point", "phase", "load_unit", "load", "setting", "k", "schedule", "tpot_ms_p50", "ttft_ms_p99",
        "tpot_ms_p99", "throughput_tok_s", "goodput_req_s", "k_flips", "tpot_speedup", "meets_slo"]
NUMERIC = {"point", "load", "k", "tpot_ms_p50", "ttft_ms_p99", "tpot_ms_p99", "throughput_tok_s", "goodput_req_s",
           "k_flips", "tpot_speedup"}


def read_points(path: Path) -> List[Dict]:
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"tune page: file not found: {path}")
    with open(path, newline="") as f:
        rd = csv.DictReader(f)
        missing = [c for c in KEEP if c not in (rd.fieldnames or [])]
        if missing:
            raise ConfigError(f"tune page: {path} is not a tune.csv (no column {missing[0]})")
        rows = []
        for r in rd:
            row = {}
            for c in KEEP:
                v = r[c]
                if c in NUMERIC:
                    row[c] = float(v) if v != "" else None
                elif c == "schedule":
                    row[c] = json.loads(v) if v else None
                elif c == "meets_slo":
                    row[c] = v == "true"
                else:
                    row[c] = v
            rows.append(row)
    if not rows:
        raise ConfigError(f"tune page: {path} has no points")
    return rows


_CSS = """
body { margin:0; font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,Arial,sans-serif; color:#1d2330; }
main { max-width: 1040px; margin: 0 auto; padding: 28px 20px 48px; }
h1 { font-size: 26px; margin: 0 0 4px; } h2 { font-size: 18px; margin: 28px 0 8px; }
.muted, .note { color:#5b6475; } .note { font-size: 13px; }
#chart { width: 100%; height: 460px; }
table { border-collapse: collapse; margin-top: 8px; font-size: 14px; }
th, td { border-bottom: 1px solid #d9dde5; padding: 6px 10px; text-align: right; white-space: nowrap; }
thead th { background:#f5f7fa; }
"""

_JS = r"""
(function () {
  const D = JSON.parse(document.getElementById('tune-data').textContent);
  const rows = D.rows, unit = D.unit;
  const uniq = (xs) => Array.from(new Set(xs)).sort((a, b) => a - b);
  const statics = rows.filter((r) => r.schedule === null && r.tpot_speedup !== null);
  const ks = uniq(statics.map((r) => r.k));
  const traces = [];
  const crossings = [];
  ks.forEach((k) => {
    const byLoad = new Map();
    statics.filter((r) => r.k === k).forEach((r) => byLoad.set(r.load, r.tpot_speedup));
    const xs = uniq(Array.from(byLoad.keys()));
    const ys = xs.map((x) => byLoad.get(x));
    traces.push({ type: 'scatter', mode: 'lines+markers', name: k === 0 ? 'no speculation (k = 0)' : 'k = ' + k,
                  x: xs, y: ys, hovertemplate: unit + ' %{x}: %{y:.3f}\u00d7<extra>k = ' + k + '</extra>' });
    if (k > 0) {
      for (let i = 1; i < xs.length; i++) {
        if (ys[i - 1] >= 1 && ys[i] < 1) { crossings.push({ k: k, lo: xs[i - 1], hi: xs[i], x: Math.sqrt(xs[i - 1] * xs[i]) }); break; }
        if (i === 1 && ys[0] < 1) break;
      }
    }
  });
  const sched = rows.filter((r) => r.schedule !== null && r.tpot_speedup !== null).sort((a, b) => a.load - b.load);
  traces.push({ type: 'scatter', mode: 'lines+markers', name: 'chosen schedule', x: sched.map((r) => r.load),
                y: sched.map((r) => r.tpot_speedup), line: { color: '#111', width: 3, dash: 'dot' },
                marker: { size: 12, symbol: 'star', color: '#111' },
                hovertemplate: unit + ' %{x}: %{y:.3f}\u00d7<extra>schedule</extra>' });
  const shapes = [{ type: 'line', xref: 'paper', x0: 0, x1: 1, y0: 1, y1: 1, line: { color: '#1d2330', width: 1.5, dash: 'dash' } }];
  const annotations = [];
  crossings.forEach((c) => {
    shapes.push({ type: 'line', x0: c.x, x1: c.x, yref: 'paper', y0: 0, y1: 1, line: { color: '#c2410c', width: 1, dash: 'dot' } });
    annotations.push({ x: Math.log10(c.x), yref: 'paper', y: 1, yanchor: 'bottom', showarrow: false,
                       text: 'k=' + c.k + ' crosses 1\u00d7', font: { size: 11, color: '#c2410c' }, textangle: -30 });
  });
  Plotly.newPlot('chart', traces, {
    margin: { l: 64, r: 20, t: 40, b: 52 }, font: { family: 'system-ui, sans-serif', size: 13 },
    xaxis: { type: 'log', title: { text: D.unit_label } },
    yaxis: { title: { text: 'median TPOT speedup over no speculation (\u00d7)' }, rangemode: 'tozero', gridcolor: '#e6e9ef' },
    shapes: shapes, annotations: annotations, legend: { orientation: 'h', y: -0.22 },
    plot_bgcolor: '#fff', paper_bgcolor: '#fff' }, { displaylogo: false, responsive: true });
  const tb = document.getElementById('schedule-rows');
  const s = sched.length ? sched[0].schedule : [];
  s.forEach((r) => { const tr = document.createElement('tr');
    [r[0] + '\u2013' + r[1], String(r[2])].forEach((c) => { const td = document.createElement('td'); td.textContent = c; tr.appendChild(td); });
    tb.appendChild(tr); });
  const cb = document.getElementById('crossing-rows');
  ks.filter((k) => k > 0).forEach((k) => { const c = crossings.find((x) => x.k === k); const tr = document.createElement('tr');
    ['k = ' + k, c ? c.lo + ' \u2013 ' + c.hi : 'not in the searched range'].forEach((t) => { const td = document.createElement('td'); td.textContent = t; tr.appendChild(td); });
    cb.appendChild(tr); });
  window.specdecTune = { crossings: crossings, ks: ks, schedule: s };
})();
"""


def build_page(csv_path: Path) -> str:
    from plotly.offline import get_plotlyjs

    rows = read_points(csv_path)
    unit = rows[0]["load_unit"]
    label = {"qps": "load (requests/s, open loop)", "concurrency": "load (concurrent requests, closed loop)"}.get(
        unit, unit)
    data = {"rows": rows, "unit": unit, "unit_label": label}
    blob = json.dumps(data, sort_keys=True, separators=(",", ":")).replace("</", "<\\/")
    e = html.escape
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Tune: where speculation stops paying</title>
<link rel="icon" href="data:,">
<style>{_CSS}</style>
<script>{get_plotlyjs()}</script>
</head>
<body>
<main>
<h1>Tune: where speculation stops paying</h1>
<p class="muted" id="source">Simulated points of one tune ({len(rows)} points, from <a href="{e(Path(csv_path).name)}">{e(Path(csv_path).name)}</a>):
median TPOT speedup over no speculation at the same {e(unit)}, for each static k and for the chosen per-batch-size
schedule. Simulator predictions, not GPU measurements.</p>
<noscript><p><strong>This page needs JavaScript to draw the chart and the tables.</strong></p></noscript>
<div id="chart" role="img" aria-label="Speedup against load for each k and for the schedule"></div>
<p class="note">Above the dashed 1&times; line speculation is faster. A dotted vertical line marks where a k's
speedup first falls below 1: the geometric middle of the two simulated loads that straddle it.</p>
<h2>The chosen schedule (vLLM <code>num_speculative_tokens_per_batch_size</code>)</h2>
<table><thead><tr><th>Batch size (requests scheduled in a step)</th><th>k</th></tr></thead>
<tbody id="schedule-rows"></tbody></table>
<h2>Crossovers</h2>
<table><thead><tr><th>Static k</th><th>Speedup falls below 1 between</th></tr></thead>
<tbody id="crossing-rows"></tbody></table>
</main>
<script type="application/json" id="tune-data">{blob}</script>
<script>{_JS}</script>
</body>
</html>
"""
