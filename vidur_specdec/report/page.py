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
import html
import json
import os
import sys
from pathlib import Path
from typing import Dict, List, Optional

from vidur_specdec.config import ConfigError
from vidur_specdec.config.vllm_defaults import VLLM_VERSION
from vidur_specdec.costs.kernels import table_data as TD
from vidur_specdec.costs.kernels.tables import VLLM_VERSION as TABLES_VLLM
from vidur_specdec.report.answer import answer
from vidur_specdec.report.assets import CSS as _CSS, JS as _JS
from vidur_specdec.report.markdown import markdown_updated
from vidur_specdec.report.results import (ATTENTION_LABELS, KEEP, PP_COLUMN, _uniq, deployment_key,
                                          deployment_label, deployments, method_label, read_results,
                                          write_text_atomic)
import yaml
from vidur_specdec.outfolder import check_file
from vidur_specdec import console

PAGE_MARKER = b'<script type="application/json" id="specdec-data">'  # in every page build_page writes



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


def write_page(csv_paths, out_path: Path, title: Optional[str] = None) -> Path:
    out_path = Path(out_path)
    write_text_atomic(out_path, build_page(csv_paths, out_path, title))
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
        write_text_atomic(Path(args.output), page)
        print(f"wrote {args.output}")
    if args.markdown:
        if new != old:
            write_text_atomic(md, new)
        print(f"updated {args.markdown}")
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    """``python -m vidur_specdec report ...`` (kept for ``python -m vidur_specdec.report``)."""
    return console.run_subcommand("report", sys.modules[__name__], argv)


if __name__ == "__main__":
    sys.exit(main())
