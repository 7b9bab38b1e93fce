"""A sweep's results CSV as rows (:func:`read_results`) and the labels the page and the Markdown tables share:
deployments, proposers, verify-attention assumptions."""

from __future__ import annotations

import csv
import os
from pathlib import Path
from typing import Dict, List

from vidur_specdec.config import ConfigError
from vidur_specdec.config.files import naming
from vidur_specdec.speculation.proposers import label, weights_columns

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


def write_text_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary sibling renamed into place (an error names the path)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        with naming(path, tmp):
            tmp.write_text(text, encoding="utf-8")
            os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
