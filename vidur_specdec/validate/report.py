"""The comparison report: one self-contained HTML page (plotly) beside ``comparison.csv``."""

from __future__ import annotations

import html
import math
import time
from pathlib import Path
from typing import Dict, Union

import pandas as pd

from vidur_specdec.validate.common import write_text
from vidur_specdec.validate.compare import METRICS

LABELS = {"ttft": "TTFT (ms)", "tpot": "TPOT (ms)", "e2e": "E2E (ms)"}


def _f(x, fmt="{:.3g}") -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    if isinstance(x, (list, tuple)):
        return "[" + ", ".join(_f(v, "{:.3f}") for v in x) + "]"
    if isinstance(x, float):
        return fmt.format(x)
    return html.escape(str(x))


def _table(rows, header) -> str:
    th = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"


def _figures(comp: pd.DataFrame, summary: Dict) -> list:
    # lazy: start-up cost of plotly
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    ok = comp[comp["compared"]]
    figs = []
    scatter = make_subplots(rows=1, cols=3, subplot_titles=[LABELS[m] for m in METRICS])
    for i, m in enumerate(METRICS, start=1):
        x, y = ok[f"measured_{m}_ms"], ok[f"simulated_{m}_ms"]
        scatter.add_trace(go.Scatter(x=x, y=y, mode="markers", name=m.upper(), marker={"size": 5, "opacity": 0.7},
                                     text=[f"request {r}" for r in ok["request_id"]],
                                     hovertemplate="%{text}<br>measured %{x:.2f}<br>simulated %{y:.2f}"),
                          row=1, col=i)
        both = pd.concat([x, y]).dropna()
        if len(both):
            lo, hi = float(both.min()), float(both.max())
            scatter.add_trace(go.Scatter(x=[lo, hi], y=[lo, hi], mode="lines", line={"dash": "dash", "color": "gray"},
                                         showlegend=False, hoverinfo="skip"), row=1, col=i)
        scatter.update_xaxes(title_text="measured", row=1, col=i)
        scatter.update_yaxes(title_text="simulated", row=1, col=i)
    scatter.update_layout(title="Per request: simulated vs measured (dashed: equal)", height=420, showlegend=False)
    figs.append(scatter)

    hist = make_subplots(rows=1, cols=3, subplot_titles=[f"{m.upper()} error (%)" for m in METRICS])
    for i, m in enumerate(METRICS, start=1):
        hist.add_trace(go.Histogram(x=ok[f"{m}_error_pct"], nbinsx=40, name=m.upper()), row=1, col=i)
        hist.update_xaxes(title_text="(simulated − measured) / measured × 100", row=1, col=i)
    hist.update_layout(title="Error distribution (signed, per request)", height=380, showlegend=False)
    figs.append(hist)

    acc = summary.get("acceptance", {})
    meas = (acc.get("measured") or {}).get("per_position") or []
    used = acc.get("used") or {}
    used_pp = None
    if used.get("input") == "acceptance_per_position":
        used_pp = used.get("value")
    elif used.get("input") == "acceptance_rate" and used.get("num_speculative_tokens"):
        used_pp = [used.get("value")] * int(used["num_speculative_tokens"])
    if meas or used_pp:
        bar = go.Figure()
        if meas:
            bar.add_trace(go.Bar(x=list(range(1, len(meas) + 1)), y=meas, name="measured (server counters)"))
        if used_pp:
            bar.add_trace(go.Bar(x=list(range(1, len(used_pp) + 1)), y=used_pp, name="used by the simulation"))
        bar.update_layout(title="Conditional acceptance per draft position", xaxis_title="position j",
                          yaxis_title="P(guess j accepted | guesses before it accepted)", barmode="group",
                          height=360, yaxis_range=[0, 1])
        figs.append(bar)
    return figs


def render(comp: pd.DataFrame, summary: Dict, title: str = "vidur_specdec validation report",
           plotlyjs: Union[bool, str] = True) -> str:
    """The report page as a string; ``plotlyjs``: True embeds plotly.js, ``"cdn"`` links it."""
    figs = _figures(comp, summary)
    parts = [fig.to_html(full_html=False, include_plotlyjs=(plotlyjs if i == 0 else False))
             for i, fig in enumerate(figs)]
    rows = []
    for m in METRICS:
        s = summary["metrics"][m]
        rows.append([m.upper(), s["n"], _f(s["median_abs_pct_error"], "{:.1f}"), _f(s["median_pct_error"], "{:+.1f}"),
                     _f(s["measured_p50_ms"], "{:.2f}"), _f(s["simulated_p50_ms"], "{:.2f}"), _f(s["ratio_p50"], "{:.3f}"),
                     _f(s["measured_p90_ms"], "{:.2f}"), _f(s["simulated_p90_ms"], "{:.2f}"), _f(s["ratio_p90"], "{:.3f}")])
    metrics_table = _table(rows, ["metric", "requests", "median |error| %", "median error %", "measured p50 ms",
                                  "simulated p50 ms", "p50 ratio", "measured p90 ms", "simulated p90 ms", "p90 ratio"])
    exc = summary["excluded"]
    exc_text = ("none" if not exc else ", ".join(f"{v} {html.escape(k)}" for k, v in exc.items()))
    exc_rows = [[_f(r["request_id"]), _f(r["status"]), _f(r["error"])] for r in summary["excluded_requests"]]
    acc = summary.get("acceptance", {})
    meas, used = acc.get("measured") or {}, acc.get("used") or {}
    acc_rows = [
        ["α (i.i.d., inverted from mean acceptance length)", _f(meas.get("alpha"), "{:.4f}"),
         _f(used.get("value") if used.get("input") == "acceptance_rate" else None, "{:.4f}")],
        ["per-position conditional rates", _f(meas.get("per_position")),
         _f(used.get("value") if used.get("input") == "acceptance_per_position" else None)],
        ["mean acceptance length (full-k draft)", _f(meas.get("mean_acceptance_length"), "{:.3f}"),
         _f(used.get("mean_acceptance_length"), "{:.3f}")],
        ["tokens per decode step (per-request tables)", _f(acc.get("measured_tokens_per_decode_chunk"), "{:.3f}"),
         _f(acc.get("simulated_tokens_per_verify_step"), "{:.3f}")],
        ["k (guesses per draft)", _f(meas.get("num_speculative_tokens")), _f(used.get("num_speculative_tokens"))],
        ["KV blocks", _f(meas.get("num_gpu_blocks")), _f(used.get("kv_blocks"))],
        ["vLLM draft acceptance rate (accepted / drafted)", _f(meas.get("draft_acceptance_rate"), "{:.4f}"), "–"],
    ]
    acc_table = _table(acc_rows, ["", "measured (server)", "used (simulation)"])
    css = ("body{font-family:system-ui,sans-serif;max-width:1200px;margin:2em auto;padding:0 1em;color:#222}"
           "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}"
           "th{background:#f4f4f4}td:first-child{text-align:left}.note{color:#555;font-size:0.92em}")
    return f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>{html.escape(title)}</title><style>{css}</style></head><body>
<h1>{html.escape(title)}</h1>
<p class="note">Generated {time.strftime('%Y-%m-%d %H:%M:%S')}. {summary['requests']} requests in the trace,
{summary['compared']} compared; excluded: {exc_text}. Errors are signed, (simulated − measured) / measured;
ratios are simulated / measured, of the two distributions' percentiles. See docs/validation.md for how to read this page.</p>
<h2>Latency</h2>{metrics_table}
{parts[0]}{parts[1]}
<h2>Acceptance: measured vs used</h2>{acc_table}
{''.join(parts[2:])}
<h2>Excluded requests</h2>
{_table(exc_rows, ['request', 'status', 'reason']) if exc_rows else '<p>None.</p>'}
</body></html>
"""


def write_report(path: Union[str, Path], comp: pd.DataFrame, summary: Dict, plotlyjs: Union[bool, str] = True) -> Path:
    return write_text(path, render(comp, summary, plotlyjs=plotlyjs))
