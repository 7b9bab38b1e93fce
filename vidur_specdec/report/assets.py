"""The results page's stylesheet and script (vidur_specdec/report/page.py inlines both; no network).

The script reads the page data (``specdec-data``: ``datasets``, each with its
rows, ``deployments`` labels and ``method_labels``) and fills the Sweep,
Deployment, Load, Acceptance rate and Proposer selectors, showing only those
with more than one choice, then draws the speedup-vs-k chart, the
speedup-vs-load chart and the table of the selection. Times are in ms, loads
in requests/s.
"""

CSS = """
:root { --ink:#1d2330; --muted:#5b6475; --line:#d9dde5; --bg:#ffffff; --soft:#f5f7fa;
        --a:#1f5fbf; --b:#c2410c; --bracket:#8a93a3; }
* { box-sizing: border-box; }
body { margin:0; font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;
       color:var(--ink); background:var(--bg); }
main { max-width: 1040px; margin: 0 auto; padding: 28px 20px 48px; }
h1 { font-size: 26px; margin: 0 0 4px; }
h2 { font-size: 18px; margin: 28px 0 8px; }
p { margin: 6px 0; }
.muted { color: var(--muted); }
.source { background: var(--soft); border: 1px solid var(--line); border-radius: 8px; padding: 10px 14px;
          margin: 14px 0; }
.controls { display:flex; flex-wrap:wrap; gap: 18px; align-items:flex-end; margin: 16px 0 6px; }
.controls label { display:flex; flex-direction:column; font-size: 13px; color: var(--muted); gap: 4px; }
.controls select { font-size: 15px; padding: 5px 8px; border:1px solid var(--line); border-radius: 6px;
                   background: #fff; color: var(--ink); min-width: 190px; }
#baseline { font-size: 14px; margin: 6px 0 0; }
#chart { width: 100%; height: 430px; }
#load-chart { width: 100%; height: 400px; }
.note { font-size: 13px; color: var(--muted); }
table { border-collapse: collapse; width: 100%; margin-top: 8px; font-size: 14px; }
caption { text-align: left; color: var(--muted); font-size: 13px; padding-bottom: 6px; }
th, td { border-bottom: 1px solid var(--line); padding: 6px 8px; text-align: right; white-space: nowrap; }
th:nth-child(1), th:nth-child(2), td:nth-child(1), td:nth-child(2) { text-align: left; }
thead th { background: var(--soft); font-weight: 600; }
tr.baseline td { color: var(--muted); }
td.slower { color: var(--b); font-weight: 600; }
td.faster { color: var(--a); font-weight: 600; }
dl { display:grid; grid-template-columns: max-content 1fr; gap: 4px 16px; margin: 8px 0; }
dt { font-weight: 600; } dd { margin: 0; }
"""

JS = r"""
(function () {
  const D = JSON.parse(document.getElementById('specdec-data').textContent);
  const uniq = (xs) => Array.from(new Set(xs.filter((x) => x !== null))).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  const fmt = (x, d) => (x === null || x === undefined ? '\u2014' : x.toFixed(d));
  const num = (x) => String(x);
  const ATT = D.attention_labels;
  const COLORS = { shared_kv: '#1f5fbf', per_token: '#c2410c', interpolated: '#6b7280' };
  const SYMBOLS = { shared_kv: 'circle', per_token: 'diamond', interpolated: 'square' };
  const dsSel = document.getElementById('dataset');
  const depSel = document.getElementById('deployment');
  const loadSel = document.getElementById('load');
  const alphaSel = document.getElementById('alpha');
  const methodSel = document.getElementById('method');
  const show = (id, on) => { document.getElementById(id).style.display = on ? '' : 'none'; };
  function fill(sel, values, label) {
    sel.innerHTML = '';
    values.forEach((v) => { const o = document.createElement('option'); o.value = String(v); o.textContent = label(v); sel.appendChild(o); });
  }
  // the selected dataset (sweep) and deployment; rows, spec, methods follow them
  let DS = D.datasets[0], rows = [], spec = [], methods = [];
  const baselineAt = (q) => rows.find((r) => r.qps === q && r.method === 'none') || null;
  function loadLabel(q) {
    const b = baselineAt(q);
    if (!b || b.ttft_ms_mean_first50 === null || b.ttft_ms_mean_last50 === null) return num(q) + ' requests/s';
    const g = b.ttft_ms_mean_last50 / b.ttft_ms_mean_first50;
    return num(q) + ' requests/s' + (g >= 3 ? ' \u2014 overloaded' : '');
  }
  function keep(sel, value) { if (Array.from(sel.options).some((o) => o.value === value)) sel.value = value; }
  function setDeployment() {
    const j = Math.max(0, depSel.selectedIndex);
    rows = DS.rows.filter((r) => r.dep === j);
    spec = rows.filter((r) => r.method !== 'none');
    const q0 = loadSel.value, m0 = methodSel.value;
    fill(loadSel, uniq(rows.map((r) => r.qps)), loadLabel);
    keep(loadSel, q0);
    methods = uniq(spec.map((r) => r.method));
    fill(methodSel, methods, (m) => DS.method_labels[m] || m);
    keep(methodSel, m0);
    show('method-control', methods.length > 1);
    refillAlpha();
    draw();
  }
  function setDataset() {
    const i = Math.max(0, dsSel.selectedIndex);
    DS = D.datasets[i];
    D.datasets.forEach((d, n) => { document.getElementById('source-' + n).hidden = n !== i; });
    fill(depSel, DS.deployments.map((d, n) => n), (n) => DS.deployments[n]);
    show('deployment-control', DS.deployments.length > 1);
    setDeployment();
  }
  fill(dsSel, D.datasets.map((d, n) => n), (n) => D.datasets[n].name);
  Array.from(dsSel.options).forEach((o, n) => { o.title = D.datasets[n].description; });
  show('dataset-control', D.datasets.length > 1);
  function refillAlpha() {
    const m = methodSel.value, q = Number(loadSel.value);
    const keep = alphaSel.value;
    const alphas = uniq(spec.filter((r) => r.method === m && r.qps === q).map((r) => r.acceptance_rate));
    fill(alphaSel, alphas, (a) => '\u03b1 = ' + num(a));
    if (alphas.map(String).includes(keep)) alphaSel.value = keep;
  }
  function selection() {
    const q = Number(loadSel.value), a = Number(alphaSel.value), m = methodSel.value;
    const sel = spec.filter((r) => r.qps === q && r.method === m && r.acceptance_rate === a);
    return { q, a, m, base: baselineAt(q), sel };
  }
  function draw() {
    const s = selection();
    const ks = uniq(s.sel.map((r) => r.k));
    const cat = (k) => 'k = ' + k;
    const atts = uniq(s.sel.map((r) => r.verify_attention)).sort((x, y) => (x === 'shared_kv' ? -1 : y === 'shared_kv' ? 1 : x < y ? -1 : 1));
    const traces = [];
    const bx = [], by = [];
    ks.forEach((k) => {
      const ys = s.sel.filter((r) => r.k === k && r.tpot_speedup !== null).map((r) => r.tpot_speedup);
      if (ys.length > 1) { bx.push(cat(k), cat(k), null); by.push(Math.min(...ys), Math.max(...ys), null); }
    });
    traces.push({ type: 'scatter', mode: 'lines', x: bx, y: by, name: 'range between the two assumptions (not a confidence interval)',
                  line: { color: '#8a93a3', width: 6 }, hoverinfo: 'skip', showlegend: bx.length > 0, connectgaps: false });
    atts.forEach((att) => {
      const pts = ks.map((k) => s.sel.find((r) => r.k === k && r.verify_attention === att) || null);
      traces.push({
        type: 'scatter', mode: 'markers', name: ATT[att] || att,
        x: ks.map(cat), y: pts.map((r) => (r ? r.tpot_speedup : null)),
        marker: { size: 13, color: COLORS[att] || '#333', symbol: SYMBOLS[att] || 'circle', line: { color: '#fff', width: 1.5 } },
        customdata: pts.map((r) => (r ? [r.tpot_ms_p50, r.row] : [null, null])),
        hovertemplate: '%{x}: %{y:.2f}\u00d7 (TPOT p50 %{customdata[0]:.2f} ms, CSV row %{customdata[1]})<extra>' + (ATT[att] || att) + '</extra>',
      });
    });
    const ymax = Math.max(1.2, ...s.sel.map((r) => r.tpot_speedup || 0)) * 1.12;
    const layout = {
      margin: { l: 64, r: 20, t: 16, b: 48 }, font: { family: 'system-ui, sans-serif', size: 13, color: '#1d2330' },
      xaxis: { type: 'category', title: { text: 'guesses per decode step (k)' }, categoryorder: 'array', categoryarray: ks.map(cat) },
      yaxis: { title: { text: 'predicted median TPOT speedup (\u00d7)' }, range: [0, ymax], zeroline: false, gridcolor: '#e6e9ef' },
      shapes: [{ type: 'line', xref: 'paper', x0: 0, x1: 1, y0: 1, y1: 1, line: { color: '#1d2330', width: 1.5, dash: 'dash' } }],
      annotations: [{ xref: 'paper', x: 0, y: 1, yanchor: 'bottom', xanchor: 'left', showarrow: false, text: '1\u00d7 = no-speculation baseline', font: { size: 12, color: '#5b6475' } }],
      legend: { orientation: 'h', y: -0.2 }, plot_bgcolor: '#fff', paper_bgcolor: '#fff',
    };
    Plotly.react('chart', traces, layout, { displaylogo: false, responsive: true, modeBarButtonsToRemove: ['lasso2d', 'select2d'] });
    drawLoad(s);
    const b = s.base;
    const bl = document.getElementById('baseline');
    bl.textContent = b ? ('No-speculation baseline at ' + num(s.q) + ' requests/s: TPOT p50 ' + fmt(b.tpot_ms_p50, 2) + ' ms, TTFT p50 ' + fmt(b.ttft_ms_p50, 0) +
      ' ms, E2E p50 ' + fmt(b.e2e_ms_p50, 0) + ' ms; mean TTFT of the first 50 requests ' + fmt(b.ttft_ms_mean_first50, 0) + ' ms, of the last 50 ' + fmt(b.ttft_ms_mean_last50, 0) + ' ms.')
      : 'No baseline row at this load: speedups are not available.';
    const tb = document.getElementById('rows');
    tb.innerHTML = '';
    const add = (r, base) => {
      const tr = document.createElement('tr');
      if (base) tr.className = 'baseline';
      const cells = [base ? 'none (baseline)' : 'k = ' + r.k, base ? '\u2014' : (ATT[r.verify_attention] || r.verify_attention),
        fmt(r.tpot_ms_p50, 2), fmt(r.ttft_ms_p50, 0), fmt(r.e2e_ms_p50, 0), r.tpot_speedup === null ? '\u2014' : fmt(r.tpot_speedup, 2) + '\u00d7' + (r.speedup_above_acceptance === 1 ? ' \u2020' : '')];
      cells.forEach((c, i) => { const td = document.createElement('td'); td.textContent = c;
        if (i === 5 && !base && r.tpot_speedup !== null) td.className = r.tpot_speedup < 1 ? 'slower' : 'faster'; tr.appendChild(td); });
      tb.appendChild(tr);
    };
    if (b) add(b, true);
    ks.forEach((k) => atts.forEach((att) => { const r = s.sel.find((x) => x.k === k && x.verify_attention === att); if (r) add(r, false); }));
    const where = (D.datasets.length > 1 ? DS.name + ', ' : '') + (DS.deployments.length > 1 ? depSel.options[depSel.selectedIndex].textContent + ', ' : '');
    document.getElementById('caption').textContent = 'Recorded results (' + where + 'times in ms) at ' + num(s.q) + ' requests/s, acceptance rate \u03b1 = ' + num(s.a) +
      (methods.length > 1 ? ', proposer ' + (DS.method_labels[s.m] || s.m) : '') + ' (medians over the run\u2019s requests).';
  }
  function drawLoad(s) {
    // speedup against load: one line per k (per verify-attention assumption) at the selected alpha and proposer
    const sl = spec.filter((r) => r.method === s.m && r.acceptance_rate === s.a && r.tpot_speedup !== null);
    const atts = uniq(sl.map((r) => r.verify_attention)).sort((x, y) => (x === 'shared_kv' ? -1 : y === 'shared_kv' ? 1 : x < y ? -1 : 1));
    const lt = [];
    atts.forEach((att, ai) => uniq(sl.map((r) => r.k)).forEach((k) => {
      const pts = sl.filter((r) => r.k === k && r.verify_attention === att).sort((p, q) => p.qps - q.qps);
      if (!pts.length) return;
      lt.push({ type: 'scatter', mode: 'lines+markers', name: 'k = ' + k + (atts.length > 1 ? ' \u2014 ' + (ATT[att] || att) : ''),
                x: pts.map((r) => r.qps), y: pts.map((r) => r.tpot_speedup),
                line: { dash: ai === 0 ? 'solid' : ai === 1 ? 'dash' : 'dot' }, marker: { symbol: SYMBOLS[att] || 'circle', size: 8 },
                hovertemplate: '%{x} requests/s: %{y:.2f}\u00d7<extra>k = ' + k + ', ' + (ATT[att] || att) + '</extra>' });
    }));
    const ymax = Math.max(1.2, ...sl.map((r) => r.tpot_speedup)) * 1.12;
    Plotly.react('load-chart', lt, {
      margin: { l: 64, r: 20, t: 16, b: 48 }, font: { family: 'system-ui, sans-serif', size: 13, color: '#1d2330' },
      xaxis: { type: 'log', title: { text: 'load (requests/s, log scale)' } },
      yaxis: { title: { text: 'predicted median TPOT speedup (\u00d7)' }, range: [0, ymax], zeroline: false, gridcolor: '#e6e9ef' },
      shapes: [{ type: 'line', xref: 'paper', x0: 0, x1: 1, y0: 1, y1: 1, line: { color: '#1d2330', width: 1.5, dash: 'dash' } },
               { type: 'line', x0: s.q, x1: s.q, yref: 'paper', y0: 0, y1: 1, line: { color: '#8a93a3', width: 1, dash: 'dot' } }],
      legend: { orientation: 'h', y: -0.2 }, plot_bgcolor: '#fff', paper_bgcolor: '#fff',
    }, { displaylogo: false, responsive: true, modeBarButtonsToRemove: ['lasso2d', 'select2d'] });
  }
  dsSel.addEventListener('change', setDataset);
  depSel.addEventListener('change', setDeployment);
  loadSel.addEventListener('change', () => { refillAlpha(); draw(); });
  methodSel.addEventListener('change', () => { refillAlpha(); draw(); });
  alphaSel.addEventListener('change', draw);
  setDataset();
  window.specdecReport = { draw: draw, selection: selection, drawLoad: drawLoad, setDataset: setDataset };
})();
"""
