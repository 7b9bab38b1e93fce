"""``plan.html``: the frontier plot and the table, self-contained (plotly.js inlined; works offline from a file).

Two charts drawn by the page's script from the embedded points (plan.csv's rows): output
tokens/s per GPU against tokens/s per user, every simulated point of each class
(colocated / disaggregated, with / without speculation) with its frontier as a line and
the TPOT SLO as a vertical line; and TTFT at the SLOs' percentile against tokens/s per
GPU with the TTFT SLO. Then the answer, the frontier table with each point's ``vllm
serve`` lines, and the screen's counts. The page is a pure function of the rows and
summary.json (same plan, same bytes).
"""

from __future__ import annotations

import html
import json
from typing import Dict, List

KEEP = ("point", "phase", "deployment", "class", "shape", "speculation", "concurrency", "tok_s_gpu", "tok_s_user",
        "ttft_ms_at_slo_percentile", "tpot_ms_at_slo_percentile", "meets_slo", "frontier", "frontier_all", "best")

CSS = """
:root { --ink:#1d2330; --muted:#5b6475; --line:#d9dde5; --soft:#f5f7fa; }
body { margin:0; font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,Arial,sans-serif; color:var(--ink); }
main { max-width: 1100px; margin: 0 auto; padding: 28px 20px 48px; }
h1 { font-size: 24px; margin: 0 0 6px; } h2 { font-size: 18px; margin: 26px 0 8px; }
.note { font-size: 13px; color: var(--muted); }
.chart { width: 100%; height: 440px; }
table { border-collapse: collapse; width: 100%; font-size: 13px; margin-top: 8px; }
th, td { border-bottom: 1px solid var(--line); padding: 5px 7px; text-align: right; vertical-align: top; }
th:nth-child(-n+3), td:nth-child(-n+3) { text-align: left; }
thead th { background: var(--soft); }
code, pre { font-size: 12px; } pre { white-space: pre-wrap; word-break: break-all; margin: 2px 0; text-align: left; }
#answer { background: var(--soft); border: 1px solid var(--line); border-radius: 8px; padding: 10px 14px; }
"""

JS = r"""
(function () {
  const D = JSON.parse(document.getElementById('plan-data').textContent);
  const COLORS = {'colocated, no speculation': '#6b7280', 'colocated, speculation': '#1f5fbf',
                  'disaggregated, no speculation': '#b45309', 'disaggregated, speculation': '#15803d'};
  const classes = Array.from(new Set(D.rows.map(r => r['class']))).sort();
  const slo = D.slo;
  const pts = D.rows.filter(r => r.phase !== 'check' && r.tok_s_gpu !== null && r.tok_s_user !== null);
  const hover = r => r.deployment + '<br>concurrency ' + r.concurrency + '<br>' + r.tok_s_gpu.toFixed(1) +
    ' tokens/s/GPU, ' + r.tok_s_user.toFixed(1) + ' tokens/s/user<br>TTFT p' + slo.percentile + ' ' +
    r.ttft_ms_at_slo_percentile.toFixed(0) + ' ms' + (r.meets_slo ? '' : ' (misses the SLOs)');
  const traces = [], ttft = [];
  classes.forEach(c => {
    const mine = pts.filter(r => r['class'] === c);
    const color = COLORS[c] || '#111827';
    traces.push({name: c, x: mine.map(r => r.tok_s_user), y: mine.map(r => r.tok_s_gpu), mode: 'markers',
                 type: 'scatter', marker: {color: color, size: mine.map(r => r.best ? 14 : 8),
                 symbol: mine.map(r => r.meets_slo ? 'circle' : 'circle-open')},
                 text: mine.map(hover), hoverinfo: 'text'});
    const front = mine.filter(r => r.frontier === c).sort((a, b) => a.tok_s_user - b.tok_s_user);
    if (front.length) {
      traces.push({name: c + ' frontier', x: front.map(r => r.tok_s_user), y: front.map(r => r.tok_s_gpu),
                   mode: 'lines', type: 'scatter', line: {color: color}, hoverinfo: 'skip'});
    }
    ttft.push({name: c, x: mine.map(r => r.tok_s_gpu), y: mine.map(r => r.ttft_ms_at_slo_percentile),
               mode: 'markers', type: 'scatter', marker: {color: color, size: 8}, text: mine.map(hover),
               hoverinfo: 'text'});
  });
  const userSlo = 1000 / slo.tpot_ms;
  Plotly.newPlot('chart-frontier', traces, {
    margin: {t: 20}, xaxis: {title: {text: 'output tokens/s per user (1000 / TPOT p50)'}},
    yaxis: {title: {text: 'output tokens/s per GPU'}}, legend: {orientation: 'h', y: -0.3},
    shapes: [{type: 'line', xref: 'x', yref: 'paper', x0: userSlo, x1: userSlo, y0: 0, y1: 1,
              line: {dash: 'dash', color: '#c2410c'}}],
    annotations: [{xref: 'x', yref: 'paper', x: userSlo, y: 1, text: 'TPOT SLO (' + userSlo.toFixed(1) +
                   ' tokens/s/user, on p' + slo.percentile + ')', showarrow: false, xanchor: 'left'}]},
    {displaylogo: false, responsive: true});
  Plotly.newPlot('chart-ttft', ttft, {
    margin: {t: 20}, xaxis: {title: {text: 'output tokens/s per GPU'}},
    yaxis: {title: {text: 'TTFT p' + slo.percentile + ' (ms)'}}, legend: {orientation: 'h', y: -0.3},
    shapes: [{type: 'line', xref: 'paper', yref: 'y', x0: 0, x1: 1, y0: slo.ttft_ms, y1: slo.ttft_ms,
              line: {dash: 'dash', color: '#c2410c'}}],
    annotations: [{xref: 'paper', yref: 'y', x: 0, y: slo.ttft_ms, text: 'TTFT SLO (p' + slo.percentile + ')',
                   showarrow: false, yanchor: 'bottom', xanchor: 'left'}]},
    {displaylogo: false, responsive: true});
  window.specdecPlan = {classes: classes, points: pts.length,
                        frontier: D.rows.filter(r => r.frontier_all).map(r => r.point)};
})();
"""


def _fmt(x, d=1) -> str:
    return "&ndash;" if x is None else f"{x:,.{d}f}"


def answer_text(summ: Dict) -> str:
    """The answer in one paragraph (also the command's headline)."""
    b = summ["best"]
    slo = summ["slo"]
    p = slo["percentile"]
    ru = b.get("runner_up")
    ns = b.get("no_speculation")
    parts = [f"Best at TTFT p{p} \u2264 {slo['ttft_ms']:g} ms and TPOT p{p} \u2264 {slo['tpot_ms']:g} ms: "
             f"{b['deployment']} at concurrency {b['concurrency']}, {b['tok_s_gpu']:.1f} output tokens/s per GPU and "
             f"{b['tok_s_user']:.1f} tokens/s per user (TTFT p{p} {b['ttft_ms_at_slo_percentile']:.0f} ms, TPOT p{p} "
             f"{b['tpot_ms_at_slo_percentile']:.1f} ms)."]
    if ru:
        parts.append(f"It is {100 * b['margin_over_runner_up']:+.1f} % against the runner-up, {ru['deployment']} "
                     f"({ru['tok_s_gpu']:.1f} tokens/s per GPU).")
    if ns:
        parts.append(f"Without speculation the best is {ns['deployment']} ({ns['tok_s_gpu']:.1f} tokens/s per GPU): "
                     f"{100 * b['margin_over_no_speculation']:+.1f} %.")
    return " ".join(parts)


def build_page(rows: List[Dict], summ: Dict) -> str:
    # lazy: start-up cost of plotly
    from plotly.offline import get_plotlyjs

    e = html.escape
    q = summ["question"]
    data = {"rows": [{k: r.get(k) for k in KEEP} for r in rows], "slo": summ["slo"]}
    blob = json.dumps(data, sort_keys=True, separators=(",", ":")).replace("</", "<\\/")
    sc = summ["screen"]
    front_rows = []
    for f in summ["frontier"].get("all", []):
        lines = "".join(f"<pre>{e(pl['pool'])} &times;{pl['instances']}: {e(pl['vllm_serve'])}</pre>"
                        for pl in f["pools"])
        front_rows.append(
            f"<tr><td>{e(f['class'])}</td><td>{e(f['deployment'])}</td><td>{lines}</td><td>{f['concurrency']}</td>"
            f"<td>{_fmt(f['tok_s_gpu'])}</td><td>{_fmt(f['tok_s_user'])}</td>"
            f"<td>{_fmt(f['ttft_ms_at_slo_percentile'], 0)}</td><td>{_fmt(f['tpot_ms_at_slo_percentile'])}</td>"
            f"<td>{'yes' if f['meets_slo'] else 'no'}</td></tr>")
    best_lines = "".join(f"<pre>{e(pl['pool'])} &times;{pl['instances']}: {e(pl['vllm_serve'])}</pre>"
                         for pl in summ["best"]["pools"])
    chk = sc["dropped_checked_summary"]
    checks = "".join(f"<li>{e(c['candidate'])} ({e(c['verdict'])}): "
                     + ((f"met the SLOs at {c['tok_s_gpu']:.1f} tokens/s/GPU" if c["meets_slo"] else
                         "missed the SLOs") + f" (concurrency {', '.join(map(str, c['concurrency']))})"
                        if c.get("simulated") else e(c.get("note", "")))
                     + "</li>" for c in sc["dropped_checked"])
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Plan: which deployment</title>
<link rel="icon" href="data:,">
<style>{CSS}</style>
<script>{get_plotlyjs()}</script>
</head>
<body><main>
<h1>Which deployment</h1>
<p id="question"><strong>{e(str(q['model']))}</strong> on {q['gpus']} &times; {e('/'.join(q['devices']).upper())};
prompts {e(str(q.get('isl') or 'as the base config'))} tokens, outputs {e(str(q.get('osl') or 'as the base config'))}
tokens; SLOs TTFT p{summ['slo']['percentile']} &le; {summ['slo']['ttft_ms']:g} ms, TPOT p{summ['slo']['percentile']}
&le; {summ['slo']['tpot_ms']:g} ms; vLLM {e(summ['vllm_version'])} semantics.</p>
<p id="answer">{e(answer_text(summ))}</p>
<div id="best-serve">{best_lines}</div>
<h2>Frontier: tokens/s per GPU against tokens/s per user</h2>
<p class="note">Every simulated point (closed loop; filled: meets both SLOs; large: the best); lines: each class's
frontier among the points whose TTFT meets its SLO.</p>
<div id="chart-frontier" class="chart"></div>
<h2>TTFT</h2>
<div id="chart-ttft" class="chart"></div>
<h2>The frontier's points</h2>
<table id="frontier-rows"><thead><tr><th>class</th><th>deployment</th><th>vllm serve</th><th>concurrency</th>
<th>tokens/s/GPU</th><th>tokens/s/user</th><th>TTFT p{summ['slo']['percentile']} (ms)</th>
<th>TPOT p{summ['slo']['percentile']} (ms)</th><th>meets SLOs</th></tr></thead>
<tbody>{''.join(front_rows)}</tbody></table>
<h2>The screen</h2>
<p id="screen">{sc['candidates']} candidates: {sc['survivor']} simulated under load, {sc['ranked']} ranked out,
{sc['estimate']} out by the static estimate, {sc['bound']} out by a bound on TTFT or TPOT, {sc['refused']} refused by
the simulator's own checks. {summ['simulated_points']} points simulated. Of the dropped candidates,
{chk['simulated']} were simulated to check the screen: {chk['met_slo']} met the SLOs, {chk['beat_best']} beat the
best.</p>
<ul id="screen-checks">{checks}</ul>
<script type="application/json" id="plan-data">{blob}</script>
<script>{JS}</script>
</main></body></html>
"""
