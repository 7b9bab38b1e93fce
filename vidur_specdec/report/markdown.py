"""The recorded numbers of a sweep as Markdown tables (``report --markdown``): per deployment and proposer, one
line per load x acceptance rate x k, written between ``recorded-table:NAME`` markers (docs/sweep.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Optional

from vidur_specdec.config import ConfigError
from vidur_specdec.report.results import (_attentions, _num, _uniq, deployment_key, deployment_label, deployments,
                                          method_label, read_results, write_text_atomic)

MD_BEGIN = "<!-- recorded-table:{name}:begin -->"
MD_END = "<!-- recorded-table:{name}:end -->"


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
        write_text_atomic(md_path, new)
