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
from typing import Dict, List, Optional

from vidur_specdec.config import ConfigError
from vidur_specdec.speculation import proposers

KEEP = ["point", "phase", "load_unit", "load", "setting", "k", "schedule", "tpot_ms_p50", "ttft_ms_p50",
        "ttft_ms_p90", "tpot_ms_p90", "ttft_ms_p99", "tpot_ms_p99", "throughput_tok_s", "goodput_req_s", "k_flips",
        "tpot_speedup", "ttft_speedup", "throughput_speedup", "overloaded", "meets_slo", "batch_size_p50"]
NUMERIC = {"point", "load", "k", "tpot_ms_p50", "ttft_ms_p50", "ttft_ms_p90", "tpot_ms_p90", "ttft_ms_p99",
           "tpot_ms_p99", "throughput_tok_s", "goodput_req_s", "k_flips", "tpot_speedup", "ttft_speedup",
           "throughput_speedup", "overloaded", "batch_size_p50"}

# absent from older tune.csv files
OPTIONAL = {"ttft_ms_p50", "ttft_ms_p90", "tpot_ms_p90", "ttft_speedup", "throughput_speedup", "overloaded",
            "batch_size_p50"}


def read_points(path: Path) -> List[Dict]:
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"tune page: file not found: {path}")
    with open(path, newline="") as f:
        rd = csv.DictReader(f)
        missing = [c for c in KEEP if c not in (rd.fieldnames or []) and c not in OPTIONAL]
        if missing:
            raise ConfigError(f"tune page: {path} is not a tune.csv (no column {missing[0]})")
        rows = []
        for r in rd:
            row = {}
            for c in KEEP:
                v = r.get(c, "")
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
.chart { width: 100%; height: 400px; }
.answer { font-size: 18px; font-weight: 600; margin: 12px 0; } .warn { color: #b45309; font-size: 13px; }
pre { background: #f5f7fa; padding: 10px; white-space: pre-wrap; word-break: break-all; font-size: 13px; }
table { border-collapse: collapse; margin-top: 8px; font-size: 14px; }
th, td { border-bottom: 1px solid #d9dde5; padding: 6px 10px; text-align: right; white-space: nowrap; }
thead th { background:#f5f7fa; }
"""

_JS = r"""
(function () {
  const D = JSON.parse(document.getElementById('tune-data').textContent);
  const rows = D.rows, unit = D.unit, S = D.summary || {};
  const uniq = (xs) => Array.from(new Set(xs)).sort((a, b) => a - b);
  const statics = rows.filter((r) => r.schedule === null && r.tpot_speedup !== null && r.phase !== 'drafters');
  const ks = uniq(statics.map((r) => r.k));
  const sched = rows.filter((r) => r.schedule !== null).sort((a, b) => a.load - b.load);
  const crossings = [];
  ks.filter((k) => k > 0).forEach((k) => {
    const live = statics.filter((r) => r.k === k && !r.overloaded).sort((a, b) => a.load - b.load);
    const base = new Map(statics.filter((r) => r.k === 0 && !r.overloaded).map((r) => [r.load, r]));
    const pts = live.filter((r) => base.has(r.load));
    for (let i = 1; i < pts.length; i++) {
      if (i === 1 && pts[0].tpot_speedup < 1) break;
      if (pts[i - 1].tpot_speedup >= 1 && pts[i].tpot_speedup < 1) {
        crossings.push({ k: k, lo: pts[i - 1].load, hi: pts[i].load, x: Math.sqrt(pts[i - 1].load * pts[i].load) }); break; }
    }
  });
  // 1-2-5 ticks across the simulated loads, labelled in full (a log axis' default minor labels read 20 as "2")
  const loadsAll = uniq(rows.map((r) => r.load)), ticks = [];
  for (let d = Math.pow(10, Math.floor(Math.log10(loadsAll[0]))); d <= loadsAll[loadsAll.length - 1] * 10; d *= 10) {
    [1, 2, 5].forEach((m) => { const t = +(m * d).toPrecision(6);
      if (t >= loadsAll[0] / 1.5 && t <= loadsAll[loadsAll.length - 1] * 1.5) ticks.push(t); }); }
  const cap = S.capacity || {};
  const slo = S.slo || {};
  function vline(x, color, dash) { return { type: 'line', x0: x, x1: x, yref: 'paper', y0: 0, y1: 1, line: { color: color, width: 1.5, dash: dash } }; }
  function hline(y, color) { return { type: 'line', xref: 'paper', x0: 0, x1: 1, y0: y, y1: y, line: { color: color, width: 1.5, dash: 'dash' } }; }
  function series(col, name) {
    const traces = [];
    ks.forEach((k) => {
      const pts = statics.filter((r) => r.k === k && r[col] !== null).sort((a, b) => a.load - b.load);
      const byLoad = new Map(); pts.forEach((r) => byLoad.set(r.load, r));
      const xs = uniq(Array.from(byLoad.keys())); const rs = xs.map((x) => byLoad.get(x));
      traces.push({ type: 'scatter', mode: 'lines+markers', name: k === 0 ? 'no speculation (k = 0)' : 'k = ' + k,
        x: xs, y: rs.map((r) => r[col]), marker: { symbol: rs.map((r) => r.overloaded ? 'x' : 'circle'), size: rs.map((r) => r.overloaded ? 11 : 7) },
        hovertemplate: unit + ' %{x}: %{y:.3f}<extra>k = ' + k + '</extra>' });
    });
    const ss = sched.filter((r) => r[col] !== null);
    traces.push({ type: 'scatter', mode: 'lines+markers', name: 'chosen schedule', x: ss.map((r) => r.load), y: ss.map((r) => r[col]),
      line: { color: '#111', width: 3, dash: 'dot' },
      marker: { size: 12, symbol: ss.map((r) => r.overloaded ? 'x' : 'star'), color: '#111' },
      hovertemplate: unit + ' %{x}: %{y:.3f}<extra>schedule</extra>' });
    return traces;
  }
  const pct = 'p' + (slo.percentile != null ? slo.percentile : 99);  // the CLI's default percentile
  function sloNote(y, what) { return { xref: 'paper', x: 1, y: y, yref: 'y', xanchor: 'right', yanchor: 'bottom', showarrow: false,
    text: what + ' SLO (on ' + pct + ', as this chart): ' + y + ' ms', font: { color: '#9333ea', size: 11 } }; }
  function capNotes() {
    const a = [];
    if (cap.none != null) a.push({ x: cap.none, xref: 'x', y: 1, yref: 'paper', xanchor: 'left', yanchor: 'top', showarrow: false,
      text: ' capacity without: ' + cap.none, font: { color: '#2563eb', size: 11 } });
    if (cap.speculative != null) a.push({ x: cap.speculative, xref: 'x', y: 0.92, yref: 'paper', xanchor: 'left', yanchor: 'top',
      showarrow: false, text: ' with the schedule: ' + cap.speculative, font: { color: '#16a34a', size: 11 } });
    a.forEach((n) => { n.x = Math.log10(n.x); });
    return a;
  }
  function capShapes() {
    const sh = [];
    if (cap.none != null) sh.push(vline(cap.none, '#2563eb', 'dash'));
    if (cap.speculative != null) sh.push(vline(cap.speculative, '#16a34a', 'dash'));
    crossings.forEach((c) => sh.push(vline(c.x, '#c2410c', 'dot')));
    return sh;
  }
  const layout = (ytitle, extra) => Object.assign({ margin: { l: 64, r: 20, t: 30, b: 52 }, font: { family: 'system-ui, sans-serif', size: 13 },
    xaxis: { type: 'log', title: { text: D.unit_label }, tickvals: ticks, ticktext: ticks.map(String) }, yaxis: { title: { text: ytitle }, rangemode: 'tozero', gridcolor: '#e6e9ef' },
    legend: { orientation: 'h', y: -0.25 }, plot_bgcolor: '#fff', paper_bgcolor: '#fff' }, extra);
  const cfg = { displaylogo: false, responsive: true };
  // the SLOs' percentile: capacity is read from these two (the SLO lines belong here, not on the medians)
  Plotly.newPlot('chart-ttft-slo', series('ttft_ms_' + pct, 'TTFT'), layout('TTFT ' + pct + ' (ms), the SLO\'s percentile',
    { shapes: capShapes().concat(slo.ttft_ms != null ? [hline(slo.ttft_ms, '#9333ea')] : []),
      annotations: capNotes().concat(slo.ttft_ms != null ? [sloNote(slo.ttft_ms, 'TTFT')] : []) }), cfg);
  Plotly.newPlot('chart-tpot-slo', series('tpot_ms_' + pct, 'TPOT'), layout('TPOT ' + pct + ' (ms), the SLO\'s percentile',
    { shapes: capShapes().concat(slo.tpot_ms != null ? [hline(slo.tpot_ms, '#9333ea')] : []),
      annotations: capNotes().concat(slo.tpot_ms != null ? [sloNote(slo.tpot_ms, 'TPOT')] : []) }), cfg);
  Plotly.newPlot('chart-tpot', series('tpot_ms_p50', 'TPOT'), layout('median TPOT (ms)',
    { shapes: capShapes(), annotations: capNotes() }), cfg);
  Plotly.newPlot('chart-ttft', series('ttft_ms_p50', 'TTFT'), layout('median TTFT (ms)',
    { shapes: capShapes(), annotations: capNotes() }), cfg);
  Plotly.newPlot('chart-throughput', series('throughput_tok_s', 'throughput'), layout('output throughput (tokens/s)',
    { shapes: capShapes(), annotations: capNotes() }), cfg);
  Plotly.newPlot('chart', series('tpot_speedup', 'speedup'), layout('median TPOT speedup over no speculation (\u00d7)',
    { shapes: [hline(1, '#1d2330')].concat(crossings.map((c) => vline(c.x, '#c2410c', 'dot'))) }), cfg);
  const tb = document.getElementById('schedule-rows');
  const s = sched.length ? sched[0].schedule : [];
  const gains = S.ranges || [];
  s.forEach((r, i) => { const tr = document.createElement('tr'); const g = gains[i] || {};
    const pc = (v) => v == null ? '\u2013' : v.toFixed(3);
    [r[0] + '\u2013' + r[1], String(r[2]), String(r[1] - r[0] + 1), pc(g.gain_over_previous_k), pc(g.change_price)].forEach((c) => {
      const td = document.createElement('td'); td.textContent = c; tr.appendChild(td); });
    tb.appendChild(tr); });
  const cb = document.getElementById('crossing-rows');
  ks.filter((k) => k > 0).forEach((k) => { const c = crossings.find((x) => x.k === k); const tr = document.createElement('tr');
    ['k = ' + k, c ? c.lo + ' \u2013 ' + c.hi : 'none: ' + ((S.crossover_note || {})[String(k)] || 'not in the searched range')].forEach((t) => { const td = document.createElement('td'); td.textContent = t; tr.appendChild(td); });
    cb.appendChild(tr); });
  const lt = document.getElementById('load-rows');
  uniq(rows.map((r) => r.load)).forEach((x) => {
    const at = rows.filter((r) => r.load === x && r.schedule === null && r.phase !== 'drafters');
    const b = at.find((r) => r.k === 0); if (!b) return;
    at.filter((r) => r.k > 0).sort((a, c) => a.k - c.k).forEach((r) => { const tr = document.createElement('tr');
      const f = (v, d) => v === null ? '\u2013' : v.toFixed(d);
      [String(x), 'k = ' + r.k, f(r.tpot_speedup, 2) + '\u00d7', f(r.ttft_speedup, 2) + '\u00d7', f(r.throughput_speedup, 2) + '\u00d7',
       f(r.throughput_tok_s, 0), f(r.goodput_req_s, 2), (r.overloaded || b.overloaded) ? 'overloaded' : ''].forEach((t) => {
        const td = document.createElement('td'); td.textContent = t; tr.appendChild(td); });
      lt.appendChild(tr); });
  });
  window.specdecTune = { crossings: crossings, ks: ks, schedule: s };
})();
"""


def _span(xs: List[str]) -> str:
    return xs[0] if len(xs) == 1 or xs[0] == xs[-1] else f"{xs[0]}\u2013{xs[-1]}"


def answer(summ: Dict, unit: str) -> str:
    """The decision in one sentence, from summary.json: the schedule's k at each checked load and the capacity.

    At each load the schedule was simulated (the checks), the k named is the schedule's k at the median
    batch size of that run (requests scheduled per step, what vLLM looks k up by); where the best static k
    at that load differs, the sentence says so and by how much the schedule trails it.
    """
    if not summ:
        return ""
    d = summ.get("deployment", {})
    name = d.get("method")
    method = ("A " if name == "draft_model" else "") + proposers.label(name)  # the sentence's subject
    fmt = (lambda x: str(int(float(x)))) if unit == "concurrency" else (lambda x: f"{float(x):g}")
    where = (lambda xs: f"concurrency {_span(xs)}") if unit == "concurrency" else (lambda xs: f"{_span(xs)} requests/s")
    groups: List[Dict] = []
    differ: List[str] = []
    for c in sorted(summ.get("checks") or [], key=lambda c: float(c["load"])):
        k, b = c.get("schedule_k"), c.get("batch_size_p50")
        if k is None or b is None:
            continue
        if groups and groups[-1]["k"] == k:
            groups[-1]["loads"].append(fmt(c["load"]))
            groups[-1]["batches"].append(f"{b:g}")
        else:
            groups.append({"k": k, "loads": [fmt(c["load"])], "batches": [f"{b:g}"]})
        best = c.get("best_static_k")
        if best is not None and best != k:
            short = c.get("shortfall_vs_best")
            by = f", the schedule {100 * short:.1f} % behind it" if short is not None and short > 0 else (
                f", the schedule {100 * -short:.1f} % ahead of it" if short is not None and short < 0 else "")
            over = " (the schedule's run is overloaded there)" if c.get("overloaded") else ""
            differ.append(f"at {where([fmt(c['load'])])} the best static k is {best}{by}{over}")
    if groups:
        runs = "; ".join(f"k = {g['k']} at {where(g['loads'])} (median batch {_span(g['batches'])})"
                         if g["k"] else f"off at {where(g['loads'])} (median batch {_span(g['batches'])})"
                         for g in groups)
        head = f"{method}: the schedule runs {runs}"
        if differ:
            head += ("; " + "; ".join(differ) + " (the schedule is chosen from priced decode steps, "
                     "docs/tune.md)")
        else:
            head += ", the best static k at each of these loads"
    else:
        head = f"{method}: no schedule run was checked"
    cap = summ.get("capacity") or {}
    slo = summ.get("slo") or {}
    words = "concurrent requests" if unit == "concurrency" else "requests/s"
    bound = (f" (TTFT p{slo['percentile']} \u2264 {slo['ttft_ms']:g} ms, TPOT p{slo['percentile']} \u2264 "
             f"{slo['tpot_ms']:g} ms)") if slo.get("percentile") is not None else ""
    capt = (f"capacity under the SLOs{bound}: "
            f"{fmt(cap['speculative']) if cap.get('speculative') is not None else 'none'} "
            f"{words} with the schedule, {fmt(cap['none']) if cap.get('none') is not None else 'none'} without")
    return f"{head}; {capt}."


def drafters_html(summ: Dict, unit: str) -> str:
    """The drafter comparison (summary.json ``drafters``): the winner at each load, each drafter's acceptance."""
    d = summ.get("drafters")
    if not d:
        return ""
    e = html.escape
    obj = (d.get("loads") or [{}])[0].get("objective", "tpot")
    rows = []
    for entry in d.get("loads", []):
        for i, r in enumerate(entry["ranking"]):
            gap = ("winner" + (f", ahead by {100 * entry['ahead_by']:.1f} %" if entry.get("ahead_by") is not None
                               else "")) if i == 0 and r["value"] is not None else ""
            val = "overloaded" if r["value"] is None else f"{r['value']:g}"
            sp = "" if r.get("tpot_speedup") is None else f"{r['tpot_speedup']:.2f}&times;"
            rows.append(f"<tr><td>{e(entry['load'])}</td><td>{e(r['drafter'])}</td><td>{e(r['method'])}</td>"
                        f"<td>{r['k'] if r['k'] is not None else '&ndash;'}</td><td>{val}</td><td>{sp}</td>"
                        f"<td>{gap}</td></tr>")
    cands = []
    for c in d.get("candidates", []):
        src = "; ".join(f"{r['source']} (line {r['line']}: {r['dataset']}, k = {r['k']}, "
                        f"L = {r['mean_acceptance_length']:g})" for r in c["rows"]) or "your input"
        rates = ' '.join(f'{x:.3f}' for x in c.get("acceptance_per_position") or [])
        length = c.get("mean_acceptance_length_at_k_max")
        cands.append(f"<tr><td>{e(c.get('label', c['drafter']))}</td><td>{e(c['method'])}</td>"
                     f"<td>{e(rates) or '&ndash;'}</td><td>{'&ndash;' if length is None else f'{length:g}'}</td>"
                     f"<td>{e(c['acceptance_rule'])}</td><td style=\"text-align:left\">{e(src)}</td></tr>")
    skipped = "".join(f"<p class=\"note\">{e(x['drafter'])} ({e(x['method'])}) {e(x['reason'])}</p>"
                      for x in d.get("skipped", []))
    return f"""<h2>Which drafter ({e(d['dataset'])})</h2>
<p class="note">Every drafter with published acceptance of its own for this target on {e(d['dataset'])} (and the
config's drafter at your input), on this deployment and workload, each at its best static k at each load
(objective: {e(obj)}; lower is better for TPOT). A drafter without such rows is not ranked.</p>
<table id="drafter-rows"><thead><tr><th>{e(unit)}</th><th>drafter</th><th>method</th><th>k</th><th>{e(obj)}</th>
<th>TPOT speedup</th><th></th></tr></thead><tbody>{''.join(rows)}</tbody></table>
<table id="drafter-acceptance"><thead><tr><th>drafter</th><th>method</th><th>conditional rates used (k_max)</th>
<th>mean acceptance length</th><th>from</th><th>source</th></tr></thead><tbody>{''.join(cands)}</tbody></table>
{skipped}"""


def acceptance_html(acc: Dict) -> str:
    """Where the tune's acceptance came from (published rows with their sources, the across-k model, a default)."""
    e = html.escape
    src = acc.get("acceptance_source")
    if not src:
        return ""
    model = acc.get("acceptance_model") or {}
    rates = ", ".join(f"{x:.3f}" for x in model.get("per_position") or [])
    if src == "published":
        cites = "; ".join(e(str(r.get("source", r))) if isinstance(r, dict) else e(str(r))
                          for r in acc.get("acceptance_rows") or [])
        return (f"<p id=\"acceptance\">Acceptance: published ({e(str(model.get('how', '')))}), per-position rates "
                f"{rates}; source: {cites}.</p>")
    if src == "default":
        return ("<p id=\"acceptance\" class=\"warn\">Acceptance: a default (acceptance rate "
                f"{e(str((acc.get('acceptance_default') or {}).get('acceptance_rate')))}), not given and not "
                "published for this pair.</p>")
    return (f"<p id=\"acceptance\">Acceptance: mean length {e(str(model.get('mean_acceptance_length')))} given at "
            f"k = {e(str(model.get('acceptance_at_k')))}, carried across k by the {e(str(model.get('family')))} "
            f"per-position model: {rates}.</p>")


def build_page(csv_path: Path, summ: Optional[Dict] = None) -> str:
    # lazy: start-up cost of plotly
    from plotly.offline import get_plotlyjs

    rows = read_points(csv_path)
    summ = summ or {}
    unit = rows[0]["load_unit"]
    label = {"qps": "load (requests/s, open loop)", "concurrency": "load (concurrent requests, closed loop)"}.get(
        unit, unit)
    data = {"rows": rows, "unit": unit, "unit_label": label,
            "summary": {"capacity": summ.get("capacity"), "slo": summ.get("slo"),
                        "crossover_note": summ.get("crossover_note"),
                        "ranges": (summ.get("schedule_choice") or {}).get("ranges")}}
    blob = json.dumps(data, sort_keys=True, separators=(",", ":")).replace("</", "<\\/")
    e = html.escape
    d = summ.get("deployment") or {}
    dep = ""
    if d:
        acc = d.get("acceptance_input") or "none"
        dep = (f"<p id=\"deployment\"><strong>{e(str(d.get('model')))}</strong> on {e(str(d.get('device')).upper())} "
               f"&times; TP {d.get('tensor_parallel_size')}"
               + (f" &times; PP {d.get('pipeline_parallel_size')}" if (d.get("pipeline_parallel_size") or 1) > 1 else "")
               + (f" &times; DP {d.get('data_parallel_size')} (expert parallel; batch sizes per rank)"
                  if (d.get("data_parallel_size") or 1) > 1 else "")
               + (f" &times; {d.get('num_replicas')} replicas" if (d.get("num_replicas") or 1) > 1 else "")
               + f", method <code>{e(str(d.get('method')))}</code>, k = {d.get('k')}, acceptance "
               f"<code>{e(acc)}</code> = {e(json.dumps(d.get('acceptance_value')))}"
               + (f", weights <code>{e(str((summ.get('proposer') or {}).get('proposer_weights')))}</code>"
                  if (summ.get("proposer") or {}).get("proposer_weights") else "")
               + f"; vLLM {e(str(summ.get('vllm_version', '')))} semantics"
               + (f" (kernel times measured on {e(str((summ.get('versions') or {}).get('kernel_tables')))})"
                  if (summ.get("versions") or {}).get("kernel_tables") else "")
               + ", "
               f"max_num_batched_tokens {(summ.get('engine_args') or {}).get('max_num_batched_tokens')}, "
               f"max_num_seqs {(summ.get('engine_args') or {}).get('max_num_seqs')}.</p>")
    dep += acceptance_html(summ.get("acceptance") or {})
    warn = "".join(f"<p class=\"warn\">{e(w)}</p>" for w in summ.get("warnings") or [])
    ext = summ.get("schedule_extrapolated_batch_sizes")
    ext_txt = (f"<p class=\"note\" id=\"extrapolated\">The schedule ends at batch size {ext[0] - 1}, the largest a "
               f"simulated load reached without overload; batch sizes {ext[0]}&ndash;{ext[1]} take its last range's k "
               "(vLLM's rule past the last range), which no simulation backs.</p>") if ext else ""
    spec_txt = json.dumps(summ.get("speculative_config"), separators=(", ", ": ")) if summ else ""
    from vidur_specdec.tune.capacity import sentence

    slo_pct = (summ.get("slo") or {}).get("percentile", "")
    unit_words = ((lambda x: f"concurrency {x}") if unit == "concurrency" else (lambda x: f"{x} requests/s"))
    why = sentence(summ.get("capacity_explained") or {}, unit_words, unit == "concurrency")
    width = (summ.get("schedule_choice") or {}).get("min_range_width")
    sched_how = (f"No range is narrower than {width} batch sizes, and the ranges maximise the value of the "
                 "schedule less a price for each change of k: half the value difference of the two k over the "
                 f"batch sizes within {width // 2} of the change, as vLLM runs the step after a crossing at the k it "
                 "looked up one step earlier (docs/tune.md, \"The schedule\"). Both columns are sums over batch "
                 "sizes of the value relative to the best k at each size (1 = one batch size at its best k).") \
        if width else ""
    over = summ.get("overloaded_loads") or []
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
{dep}
<p id="answer" class="answer">{e(answer(summ, unit))}</p>
{warn}
<p class="muted" id="source">Simulated points of one tune ({len(rows)} points, from <a href="{e(Path(csv_path).name)}">{e(Path(csv_path).name)}</a>),
for each static k and the chosen per-batch-size schedule (stars). Simulator predictions, not GPU measurements.
Crosses mark overloaded runs ({e(", ".join(over)) or "none"}): queues grow, requests wait past the bound, or median TTFT grows past 10&times; its light-load value (docs/tune.md);
they are left out of the crossovers and the best k.</p>
<noscript><p><strong>This page needs JavaScript to draw the charts and the tables.</strong></p></noscript>
<p class="note">Dashed vertical lines: capacity under the SLOs without speculation (blue) and with the schedule (green);
dotted vertical lines: where a k's TPOT speedup first falls below 1 (orange); dashed horizontal lines: the SLOs (purple).</p>
<h2>Capacity, at the SLOs' percentile (p{e(str(slo_pct))})</h2>
<p id="capacity-why">{e(why)}</p>
<h2>TTFT p{e(str(slo_pct))} against load (the SLO's percentile)</h2>
<div id="chart-ttft-slo" class="chart" role="img" aria-label="TTFT at the SLO percentile against load"></div>
<h2>TPOT p{e(str(slo_pct))} against load (the SLO's percentile)</h2>
<div id="chart-tpot-slo" class="chart" role="img" aria-label="TPOT at the SLO percentile against load"></div>
<h2>Median TPOT against load</h2>
<div id="chart-tpot" class="chart" role="img" aria-label="Median TPOT against load"></div>
<h2>Median TTFT against load</h2>
<div id="chart-ttft" class="chart" role="img" aria-label="Median TTFT against load"></div>
<h2>Output throughput against load</h2>
<div id="chart-throughput" class="chart" role="img" aria-label="Output throughput against load"></div>
<h2>TPOT speedup over no speculation</h2>
<div id="chart" class="chart" role="img" aria-label="Speedup against load for each k and for the schedule"></div>
<h2>Speedups, throughput and goodput at each load</h2>
<table><thead><tr><th>{e(unit)}</th><th>k</th><th>TPOT speedup</th><th>TTFT speedup</th><th>throughput speedup</th>
<th>throughput (tok/s)</th><th>goodput (req/s)</th><th>overloaded</th></tr></thead><tbody id="load-rows"></tbody></table>
<h2>The chosen schedule (vLLM <code>num_speculative_tokens_per_batch_size</code>)</h2>
<p class="note" id="schedule-how">{e(sched_how)}</p>
<table><thead><tr><th>Batch size (requests scheduled in a step)</th><th>k</th><th>width</th>
<th>gain over the previous range's k</th><th>price of the change</th></tr></thead>
<tbody id="schedule-rows"></tbody></table>
{ext_txt}
{drafters_html(summ, unit)}
<h2>Crossovers</h2>
<table><thead><tr><th>Static k</th><th>Speedup falls below 1 between</th></tr></thead>
<tbody id="crossing-rows"></tbody></table>
<h2><code>speculative_config.json</code> (vLLM {e(str(summ.get("vllm_version", "")))})</h2>
<pre id="speculative-config">{e(spec_txt)}</pre>
<p class="note">With the engine keys the tune simulated:</p>
<pre id="vllm-serve">{e(str(summ.get("vllm_serve", "")))}</pre>
</main>
<script type="application/json" id="tune-data">{blob}</script>
<script>{_JS}</script>
</body>
</html>
"""
