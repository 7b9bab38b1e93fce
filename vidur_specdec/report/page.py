"""Results explorer: one self-contained HTML page for one or more sweep CSVs.

``python -m vidur_specdec.main report A.csv [B.csv ...] -o page.html`` writes a page
that works offline from a file (plotly.js and the data are inlined; no server,
no network). With several CSVs a dataset selector picks the sweep (labelled by
the sweep's name and description, read from the sweep file ``<stem>.yaml``
next to the CSV's folder, e.g. sweeps/eagle.yaml for sweeps/results/eagle.csv;
the CSV's stem when there is none). Controls only show what varies in the
chosen sweep: the deployment (model, device, tensor_parallel_size,
num_replicas), the load, the acceptance rate and the proposer; the chart shows the predicted
median TPOT speedup at each k under each verify-attention assumption, the two
joined by a line (a bracket between two modelling assumptions, not a
confidence interval), with the 1x line of the no-speculation baseline; a
second chart shows the speedup against load, one line per k (the load axis);
the table lists the selection. The page is a pure function of the CSVs and
their sweep files (no timestamps), so the same inputs give the same bytes.

``--markdown FILE`` also rewrites the block between ``<!-- recorded-table:NAME:begin -->``
and ``<!-- recorded-table:NAME:end -->`` in FILE (NAME: the CSV's file name without
``.csv``) with the CSV's speedup table (one per deployment when the sweep has
several); docs/sweep.md holds such blocks. Every input is read and checked
before any file is written.
"""

from __future__ import annotations

import argparse
import csv
import html
import json
import os
import sys
from pathlib import Path
from typing import Dict, List, Optional

from vidur_specdec.config.files import naming
from vidur_specdec.config import ConfigError
from vidur_specdec.config.vllm_defaults import VLLM_VERSION
from vidur_specdec.costs.kernels import table_data as TD
from vidur_specdec.costs.kernels.tables import VLLM_VERSION as TABLES_VLLM
from vidur_specdec.report.answer import answer
from vidur_specdec.report.assets import CSS as _CSS, JS as _JS
import yaml
from vidur_specdec.speculation.proposers import label, weights_columns
from vidur_specdec.outfolder import check_file
from vidur_specdec import console

REQUIRED = ["model", "device", "profiles", "num_requests", "qps", "method", "k", "acceptance_rate",
            "verify_attention", "tpot_ms_p50", "ttft_ms_p50", "e2e_ms_p50", "tpot_speedup"]
NUMERIC = {"num_requests", "qps", "k", "acceptance_rate", "tpot_ms_p50", "tpot_ms_p90", "tpot_ms_p99",
           "ttft_ms_p50", "ttft_ms_p90", "ttft_ms_p99", "e2e_ms_p50", "e2e_ms_p90", "e2e_ms_p99",
           "throughput_tok_s", "mean_acceptance_length", "accepted_per_guess", "ttft_ms_mean_first50",
           "ttft_ms_mean_last50", "tpot_speedup", "row", "baseline_row", "makespan_s", "restarts",
           "tensor_parallel_size", "num_replicas", "speedup_above_acceptance"}
INTEGER = {"k", "row", "baseline_row", "num_requests", "restarts", "tensor_parallel_size", "num_replicas",
           "speedup_above_acceptance"}
# the columns that name a deployment (sweeps/deployments.yaml varies them); older CSVs lack the last two
DEPLOYMENT = ["model", "device", "tensor_parallel_size", "num_replicas"]
PP_COLUMN = "parallel.pipeline_parallel_size"  # a sweep that varies it has this column; a stage count > 1 joins the key
KEEP = ["row", "qps", "method", "k", "acceptance_rate", "verify_attention", "tpot_ms_p50", "tpot_ms_p90",
        "ttft_ms_p50", "ttft_ms_p90", "e2e_ms_p50", "e2e_ms_p90", "throughput_tok_s", "mean_acceptance_length",
        "ttft_ms_mean_first50", "ttft_ms_mean_last50", "tpot_speedup", "draft_model", "restarts",
        "speedup_above_acceptance"]
ATTENTION_LABELS = {
    "shared_kv": "KV read once (shared_kv, lower bound)",
    "per_token": "Per-token KV reads (per_token, upper bound)",
    "interpolated": "Interpolated",
}
PAGE_MARKER = b'<script type="application/json" id="specdec-data">'  # in every page build_page writes
MD_BEGIN = "<!-- recorded-table:{name}:begin -->"
MD_END = "<!-- recorded-table:{name}:end -->"


def read_results(path: Path) -> List[Dict]:
    """Rows of a sweep CSV, numbers parsed (empty cells -> None); raises ConfigError naming the problem."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"report: file not found: {path}")
    try:
        with open(path, newline="") as f:
            rd = csv.DictReader(f)
            cols = rd.fieldnames or []
            rows = list(rd)
    except (UnicodeDecodeError, csv.Error) as e:
        raise ConfigError(f"report: {path} is not a CSV ({e})") from None
    missing = [c for c in REQUIRED if c not in cols]
    if missing:
        raise ConfigError(f"report: {path} is not a sweep results CSV (missing column {missing[0]})")
    if not rows:
        raise ConfigError(f"report: {path} has no rows")
    out = []
    for i, r in enumerate(rows):
        rec = {}
        for c in KEEP + DEPLOYMENT + ["profiles", "num_requests", "sweep_hash", "speculative.model"]:
            v = r.get(c)
            if v is None or v == "":
                rec[c] = None
            elif c in NUMERIC:
                try:
                    x = float(v)
                except ValueError:
                    raise ConfigError(f"report: {path} row {i + 1}: {c} is not a number: {v!r}") from None
                rec[c] = int(x) if c in INTEGER else x
            else:
                rec[c] = v
        pp = r.get(PP_COLUMN)
        if pp not in (None, ""):
            rec[PP_COLUMN] = int(float(pp))
        out.append(rec)
    return out


def _uniq(values):
    return sorted({v for v in values if v is not None})


def _num(x: float) -> str:
    return f"{x:g}"


def deployment_key(row: Dict) -> tuple:
    """The row's deployment: (model, device, tensor_parallel_size, num_replicas[, pipeline stages when > 1]);
    None where the CSV lacks one."""
    key = tuple(row.get(c) for c in DEPLOYMENT)
    pp = row.get(PP_COLUMN)
    return key + (pp,) if pp not in (None, 1) else key


def deployments(rows: List[Dict]) -> List[tuple]:
    """The distinct deployments of ``rows`` in order of first appearance (the sweep file's order)."""
    return list(dict.fromkeys(deployment_key(r) for r in rows))


def deployment_label(key: tuple) -> str:
    """``Llama-3.1-8B-Instruct on H100, TP 1`` (replicas named only when more than one)."""
    model, device, tp, replicas = key[:4]
    text = f"{str(model).split('/')[-1]} on {str(device).upper()}"
    if tp is not None:
        text += f", TP {tp}"
    if len(key) > 4:
        text += f", PP {key[4]}"
    if replicas is not None and replicas > 1:
        text += f", {replicas} replicas"
    return text


def sweep_info(csv_path: Path) -> Dict[str, str]:
    """The sweep's name and description from its sweep file (``../<stem>.yaml`` or ``<stem>.yaml`` beside the CSV).

    Only the ``sweep`` section is read (no validation of the rest), so a page can
    be built for a recorded CSV whatever the state of the models it names. Without
    a sweep file the name is the CSV's stem and the description is empty.
    """
    csv_path = Path(csv_path)
    for cand in (csv_path.parent.parent / f"{csv_path.stem}.yaml", csv_path.parent / f"{csv_path.stem}.yaml"):
        if not cand.is_file():
            continue
        try:
            data = yaml.safe_load(cand.read_text())
        except yaml.YAMLError as e:
            raise ConfigError(f"report: {cand} (the sweep file of {csv_path.name}) is not YAML: "
                              f"{str(e).splitlines()[0]}") from None
        sw = data.get("sweep") if isinstance(data, dict) else None
        if isinstance(sw, dict):
            return {"name": str(sw.get("name") or csv_path.stem),
                    "description": " ".join(str(sw.get("description") or "").split())}
    return {"name": csv_path.stem, "description": ""}


def _meta(rows: List[Dict], csv_path: Path, out_path: Path) -> Dict:
    def one(col):
        vals = _uniq(r.get(col) for r in rows)
        return ", ".join(str(v) for v in vals)

    profiles = one("profiles")
    if profiles == "shipped":
        devs = _uniq(r.get("device") for r in rows)
        parts = []
        if "a100" in devs:
            parts.append("analytical (roofline) operator times for A100: shipped (Llama-2-7B and llama-160m) or "
                         "built on demand by the same builder, whose efficiencies were calibrated on measured A100 "
                         "Llama-2-7B profiles and checked on Llama-2-70B; not measurements")
        others = [str(d).upper() for d in devs if d != "a100"]
        if others:
            parts.append(f"operator times for {', '.join(others)} from vLLM's measured kernel tables "
                         f"({TD.PACKAGE} {TD.PACKAGE_VERSION}, measured on vLLM {TABLES_VLLM}, while scheduling and "
                         f"speculation follow vLLM {VLLM_VERSION}) wherever a table covers the op, the "
                         "calibrated roofline for the rest (a run's summary.json names the source per op family; "
                         "docs/profiles.md)")
        prof = "; ".join(parts)
    else:
        prof = f"operator profiles from {profiles} ({one('device').upper()})"
    try:
        href = os.path.relpath(Path(csv_path).resolve(), Path(out_path).resolve().parent)
    except ValueError:  # pragma: no cover - different drives
        href = Path(csv_path).name
    nreq = _uniq(r["num_requests"] for r in rows)
    return {
        "model": one("model"),
        "profile": prof,
        "tensor_parallel_size": one("tensor_parallel_size") or "1",
        **({"pipeline_parallel_size": one(PP_COLUMN)} if one(PP_COLUMN) not in ("", "1") else {}),
        "num_requests": ", ".join(str(n) for n in nreq),
        "csv_name": Path(csv_path).name,
        "csv_href": Path(href).as_posix(),
        "sweep_hash": one("sweep_hash"),
        "num_rows": len(rows),
        "draft_model": one("draft_model"),
    }


def method_label(method: str, rows: List[Dict]) -> str:
    """A proposer's label from the proposer registry (a draft model or an EAGLE head also names its weights)."""
    text = label(method)
    key = weights_columns().get(method)  # the sweep CSV names the drafter's column draft_model
    col = "draft_model" if key == "speculative.draft_model" else key
    drafters = _uniq(r.get(col) for r in rows if col and r["method"] == method)
    return f"{text} ({', '.join(drafters)})" if drafters else text


def _attentions(rows: List[Dict]) -> List[str]:
    order = list(ATTENTION_LABELS)
    return sorted(_uniq(r["verify_attention"] for r in rows if r["method"] != "none"),
                  key=lambda a: (order.index(a) if a in order else len(order), a))


def _markdown_deployment(rows: List[Dict]) -> List[str]:
    lines = ["No-speculation baselines (times in ms; the first and last 50 requests by arrival):", "",
             "| load (req/s) | TTFT p50 | mean TTFT, first 50 | mean TTFT, last 50 | TPOT p50 | E2E p50 "
             "| throughput (tok/s) |",
             "|---:|---:|---:|---:|---:|---:|---:|"]
    f = (lambda x, d: "-" if x is None else f"{x:.{d}f}")
    for r in rows:
        if r["method"] == "none":
            lines.append(f"| {_num(r['qps'])} | {f(r['ttft_ms_p50'], 0)} | {f(r['ttft_ms_mean_first50'], 0)} | "
                         f"{f(r['ttft_ms_mean_last50'], 0)} | {f(r['tpot_ms_p50'], 2)} | {f(r['e2e_ms_p50'], 0)} | "
                         f"{f(r['throughput_tok_s'], 0)} |")
    lines.append("")
    atts = _attentions(rows)
    for method in _uniq(r["method"] for r in rows if r["method"] != "none"):
        lines += [f"Proposer: {method_label(method, rows)}. TPOT p50 in ms; speedup = baseline TPOT p50 / TPOT p50.", "",
                  "| load (req/s) | baseline TPOT p50 | alpha | k | "
                  + " | ".join(f"TPOT p50, {a} | speedup, {a}" for a in atts) + " |",
                  "|---:|---:|---:|---:|" + "---:|---:|" * len(atts)]
        for q in _uniq(r["qps"] for r in rows):
            base = next((r for r in rows if r["qps"] == q and r["method"] == "none"), None)
            bt = f"{base['tpot_ms_p50']:.2f}" if base and base["tpot_ms_p50"] is not None else "-"
            sel = [r for r in rows if r["method"] == method and r["qps"] == q]
            for a in _uniq(r["acceptance_rate"] for r in sel):
                for k in _uniq(r["k"] for r in sel if r["acceptance_rate"] == a):
                    cells = []
                    for att in atts:
                        r = next((r for r in sel if r["k"] == k and r["acceptance_rate"] == a
                                  and r["verify_attention"] == att), None)
                        cells.append(f"{r['tpot_ms_p50']:.2f}" if r and r["tpot_ms_p50"] is not None else "-")
                        mark = "†" if r and r.get("speedup_above_acceptance") == 1 else ""
                        cells.append(f"{r['tpot_speedup']:.2f}x{mark}" if r and r["tpot_speedup"] is not None
                                     else "-")
                    lines.append(f"| {_num(q)} | {bt} | {_num(a)} | {k} | " + " | ".join(cells) + " |")
        lines.append("")
    return lines


def markdown_table(rows: List[Dict]) -> str:
    """The recorded numbers as Markdown: per deployment and proposer, one line per load x acceptance rate x k.

    A sweep with one deployment gets no deployment headings; the columns are the
    verify-attention assumptions the sweep holds.
    """
    deps = deployments(rows)
    if len(deps) == 1:
        lines = _markdown_deployment(rows)
    else:
        lines = []
        for d in deps:
            lines += [f"**{deployment_label(d)}**", ""]
            lines += _markdown_deployment([r for r in rows if deployment_key(r) == d])
    if any(r.get("speedup_above_acceptance") == 1 for r in rows):
        lines += ["", "† speedup above the row's mean acceptance length: a lighter load than the baseline's "
                      "(fewer requests per step), not a faster step (see \"Speedups above the acceptance length\")."]
    return "\n".join(lines).rstrip() + "\n"


def markdown_block(md_text: str, name: str) -> Optional[str]:
    """The text between the ``recorded-table:NAME`` markers, or None when absent."""
    begin, end = MD_BEGIN.format(name=name), MD_END.format(name=name)
    if begin not in md_text or end not in md_text:
        return None
    return md_text.split(begin, 1)[1].split(end, 1)[0].strip("\n") + "\n"


def markdown_updated(md_text: str, md_path: Path, csv_path: Path) -> str:
    """``md_text`` with its ``recorded-table:<csv stem>`` block rewritten from the CSV; ConfigError if absent."""
    name = Path(csv_path).stem
    begin, end = MD_BEGIN.format(name=name), MD_END.format(name=name)
    if markdown_block(md_text, name) is None:
        raise ConfigError(f"report --markdown: {md_path} has no {begin} ... {end} block")
    head, rest = md_text.split(begin, 1)
    _, tail = rest.split(end, 1)
    return head + begin + "\n" + markdown_table(read_results(csv_path)) + end + tail


def update_markdown(md_path: Path, csv_path) -> None:
    """Rewrite the ``recorded-table:<csv stem>`` blocks of ``md_path`` (one CSV path or several)."""
    md_path = Path(md_path)
    paths = [csv_path] if isinstance(csv_path, (str, Path)) else list(csv_path)
    text = md_path.read_text() if md_path.is_file() else ""
    new = text
    for p in paths:
        new = markdown_updated(new, md_path, Path(p))
    if new != text:
        _atomic_write(md_path, new)


def _dataset(csv_path: Path, out_path: Path) -> Dict:
    """One sweep's entry in the page data: its rows (``dep``: index into ``deployments``), labels and metadata."""
    rows = read_results(csv_path)
    if not any(r["method"] != "none" for r in rows):
        raise ConfigError(f"report: {csv_path} has no speculative rows to compare")
    deps = deployments(rows)
    methods = _uniq(r["method"] for r in rows if r["method"] != "none")
    info = sweep_info(csv_path)
    labels = {m: method_label(m, rows) for m in methods}
    return {"name": info["name"], "description": info["description"], "meta": _meta(rows, csv_path, out_path),
            "answer": answer(rows, lambda m: labels[m], deployment_key, deployment_label),
            "deployments": [deployment_label(d) for d in deps],
            "rows": [dict({c: r.get(c) for c in KEEP}, dep=deps.index(deployment_key(r))) for r in rows],
            "method_labels": labels,
            "proposers": ", ".join(labels[m] for m in methods)}


def _source_html(i: int, ds: Dict) -> str:
    e, meta = html.escape, ds["meta"]
    desc = f"<p><strong>{e(ds['name'])}</strong>: {e(ds['description'])}</p>\n" if ds["description"] else ""
    ans = "".join(f"<li>{e(s)}</li>" for s in ds.get("answer", []))
    if ans:
        desc += ("<p><strong>The answer</strong> (best setting by TPOT speedup under the conservative per-token "
                 f"verify cost where recorded; loads in requests/s):</p><ul class=\"answer\">{ans}</ul>\n")
    return f"""<div class="source" id="source-{i}"{'' if i == 0 else ' hidden'}>
{desc}<strong>Where the numbers come from.</strong>
Model {e(meta['model'])} on {e(meta['profile'])}; Sarathi scheduler, tensor parallelism
{e(meta['tensor_parallel_size'])}, pipeline parallelism {e(meta.get('pipeline_parallel_size', '1'))}; {e(meta['num_requests'])} requests per run with
Poisson arrivals; proposer: {e(ds['proposers'])}.
Source: <a href="{e(meta['csv_href'])}">{e(meta['csv_name'])}</a> ({meta['num_rows']} rows, sweep hash
<code>{e(meta['sweep_hash'])}</code>).
<strong>The acceptance rate is an input</strong> to the simulator (each guess accepted independently with
probability &alpha;), not a prediction: pick the rate you expect from your drafter and workload.
</div>"""


def build_page(csv_paths, out_path: Path, title: Optional[str] = None) -> str:
    """The page's HTML text for one sweep CSV or a list of them (links to each CSV relative to ``out_path``)."""
    # lazy: start-up cost of plotly
    from plotly.offline import get_plotlyjs

    paths = [Path(csv_paths)] if isinstance(csv_paths, (str, Path)) else [Path(p) for p in csv_paths]
    if not paths:
        raise ConfigError("report: give at least one sweep CSV")
    stems = [p.stem for p in paths]
    dup = next((s for s in stems if stems.count(s) > 1), None)
    if dup is not None:
        raise ConfigError(f"report: two CSVs are named {dup}.csv; each sweep appears once on the page")
    datasets = [_dataset(p, out_path) for p in paths]
    data = {"datasets": datasets, "attention_labels": ATTENTION_LABELS}
    blob = json.dumps(data, sort_keys=True, separators=(",", ":")).replace("</", "<\\/")
    e = html.escape
    title = title or "Speculative decoding: predicted TPOT speedup"
    sources = "\n".join(_source_html(i, ds) for i, ds in enumerate(datasets))
    js = get_plotlyjs()
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{e(title)}</title>
<link rel="icon" href="data:,">
<style>{_CSS}</style>
<script>{js}</script>
</head>
<body>
<main>
<h1>{e(title)}</h1>
<p class="muted">Where does speculation stop paying? Recorded predictions of the vidur_specdec simulator
(Microsoft Vidur with a speculative Sarathi scheduler). Nothing is simulated in your browser.</p>
<div class="controls">
<label for="dataset" id="dataset-control">Sweep<select id="dataset"></select></label>
<label for="deployment" id="deployment-control">Deployment<select id="deployment"></select></label>
</div>
<div id="source">
{sources}
</div>
<noscript><p><strong>This page needs JavaScript to draw the chart and the table.</strong></p></noscript>
<div class="controls">
<label for="load">Load (arrival rate)<select id="load"></select></label>
<label for="alpha">Acceptance rate (input)<select id="alpha"></select></label>
<label for="method" id="method-control">Proposer<select id="method"></select></label>
</div>
<p id="baseline" class="muted"></p>
<h2>Predicted median TPOT speedup</h2>
<div id="chart" role="img" aria-label="Predicted median TPOT speedup for each k under two verify-attention assumptions"></div>
<p class="note">Speedup = the no-speculation baseline&rsquo;s median time per output token (TPOT) at the same load
&divide; this configuration&rsquo;s. Above the dashed 1&times; line speculation is predicted to be faster. For each k,
the grey line joins the two verify-attention assumptions: KV read once for all k+1 verify tokens (a lower
bound on verify cost) and KV read per verify token (an upper bound). It brackets the modelling uncertainty; it
is <strong>not a confidence interval</strong>.</p>
<h2>Speedup against load</h2>
<div id="load-chart" role="img" aria-label="Predicted median TPOT speedup against load, one line per k"></div>
<p class="note">The same speedup at every recorded load, for the selected acceptance rate and proposer: one line
per k (solid: KV read once; dashed: KV read per verify token). Where a line crosses the dashed 1&times; line,
that k stops paying; the dotted vertical line marks the load selected above. <code>python -m vidur_specdec.main
tune</code> finds that crossing by a bracketing search (docs/tune.md).</p>
<h2>The selected results</h2>
<table>
<caption id="caption"></caption>
<thead><tr><th>Proposals</th><th>Attention assumption</th><th>TPOT p50 (ms)</th><th>TTFT p50 (ms)</th>
<th>E2E p50 (ms)</th><th>TPOT speedup</th></tr></thead>
<tbody id="rows"></tbody>
</table>
<p class="note">&dagger; TPOT speedup above the row&rsquo;s mean acceptance length (tokens advanced per decode
step). At the same batch a verify step advances at most that many tokens and costs at least a plain step, so such a
speedup is not a faster step: with arrivals at a fixed rate, requests that finish sooner leave fewer requests in
each step, so every step is cheaper than the baseline&rsquo;s (docs/sweep.md, &ldquo;Speedups above the acceptance
length&rdquo;).</p>
<h2>How to read it</h2>
<dl>
<dt>Verify step</dt><dd>With k proposals the target model computes k+1 tokens per request and keeps the accepted
prefix plus one token of its own: cost grows with k, progress with the accepted prefix.</dd>
<dt>Load</dt><dd>The same workload at each arrival rate. Under overload (the queue grows through the run) every
ratio depends on how long the run is, so read it as a direction, not a size.</dd>
<dt>Times</dt><dd>TPOT: time per output token after the first; TTFT: time to first token (includes queueing);
E2E: arrival to last token. All are medians over the run&rsquo;s requests, in simulated milliseconds.</dd>
<dt>Limits</dt><dd>The profiles are analytical, not measured; the LM head, the (rejection) sampler and the
engine&rsquo;s per-step overhead are priced by models with cited defaults (docs/model.md, &ldquo;One step&rdquo;),
not measured; results are simulator predictions, not GPU measurements.</dd>
</dl>
</main>
<script type="application/json" id="specdec-data">{blob}</script>
<script>{_JS}</script>
</body>
</html>
"""


def _atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        with naming(path, tmp):
            tmp.write_text(text, encoding="utf-8")
            os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def write_page(csv_paths, out_path: Path, title: Optional[str] = None) -> Path:
    out_path = Path(out_path)
    _atomic_write(out_path, build_page(csv_paths, out_path, title))
    return out_path


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """Options of ``python -m vidur_specdec report``."""
    ap.add_argument("csv", nargs="+", help="sweep results CSVs (e.g. sweeps/results/specdec_39.csv); "
                                           "several give one page with a sweep selector")
    ap.add_argument("-o", "--output", default=None, help="HTML page to write")
    ap.add_argument("--title", default=None, help="page title")
    ap.add_argument("--markdown", default=None, metavar="FILE",
                    help="also refresh each CSV's recorded-table block in this Markdown file (docs/sweep.md)")


def run(args: argparse.Namespace) -> int:
    """Write the page and/or the Markdown blocks; everything is read and checked before anything is written."""
    if not args.output and not args.markdown:
        raise ConfigError("report: give -o PAGE.html (and/or --markdown FILE)")

    if args.output:  # a folder, a symlink loop, an input or a file that is not a results page: refused first
        check_file(args.output, "-o", inputs=args.csv, marker=PAGE_MARKER)
    if args.markdown:  # edited in place (only its marked blocks), never one of the CSVs
        check_file(args.markdown, "--markdown", inputs=args.csv)
    paths = [Path(p) for p in args.csv]
    page = build_page(paths, Path(args.output), args.title) if args.output else None
    if args.markdown:
        md = Path(args.markdown)
        old = md.read_text() if md.is_file() else ""
        new = old
        for p in paths:
            new = markdown_updated(new, md, p)
    if page is not None:
        _atomic_write(Path(args.output), page)
        print(f"wrote {args.output}")
    if args.markdown:
        if new != old:
            _atomic_write(md, new)
        print(f"updated {args.markdown}")
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    """``python -m vidur_specdec report ...`` (kept for ``python -m vidur_specdec.report``)."""
    return console.run_subcommand("report", sys.modules[__name__], argv)


if __name__ == "__main__":
    sys.exit(main())
