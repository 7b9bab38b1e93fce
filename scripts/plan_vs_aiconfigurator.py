"""The same question through NVIDIA's AIConfigurator and through ``plan``: the block ``plan-vs-aiconfigurator`` of
docs/plan.md.

For each case (DeepSeek-V3 on 16 H200 with and without MTP, Qwen3-235B-A22B on 8 H200, Llama-3.1-70B on 8
H100; ISL 4000, OSL 500, TTFT <= 1 s, >= 20 tokens/s per user)::

    PYTHONPATH=. python scripts/plan_vs_aiconfigurator.py --record [--aiconfigurator PATH] [--write]

runs ``aiconfigurator cli default`` (PyPI ``aiconfigurator==0.12.0``, the optional extra
``pip install -e '.[aic]'``, or any install named by ``--aiconfigurator`` / ``$AICONFIGURATOR``) with
``--backend vllm`` and reads its pick (the better of its aggregated and disaggregated top configurations,
as its own "Best Experiment Chosen" line says) and the tokens/s per GPU it predicts; runs ``plan`` on the same
question; and simulates each tool's pick under load with this simulator (closed loop at the pick's
concurrency, the first wave left out): its SLO attainment (the share of measured requests whose TTFT <= 1 s
and TPOT <= 50 ms) and its simulated tokens/s per GPU. Everything is recorded in
``sweeps/results/figures/plan_vs_aiconfigurator.json``; the block is always written from that file (printed;
``--write`` puts it in place). When AIConfigurator cannot be run, its cells say why: its answer is never
made up. tests/test_plan_vs_aiconfigurator.py re-renders the block from the record and checks the record's
simulated configs against the current code (their run ids, the package version and profiles).
"""

import argparse
import csv
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, List, Optional

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scripts.docblock import REPO, main as write_block, markers  # noqa: E402

NAME = "plan-vs-aiconfigurator"
DOC = REPO / "docs" / "plan.md"
RECORD = REPO / "sweeps" / "results" / "figures" / "plan_vs_aiconfigurator.json"
ISL, OSL, TTFT_MS, TPOT_MS = 4000, 500, 1000.0, 50.0
AIC_VERSION = "0.12.0"
# the run config every simulated pick starts from: plan's base for these questions (--isl/--osl, no speculation
# of the user's), so plan's pick reproduces its own point exactly
BASE = {"workload": {"prompt_tokens": {"dist": "fixed", "value": ISL}, "output_tokens": {"dist": "fixed", "value": OSL}},
        "speculative": {"method": "none", "num_speculative_tokens": 0}}
# MTP acceptance for AIConfigurator's --nextn-accepted: the library's DeepSeek-V3 row (the technical report,
# arXiv 2412.19437, sec. 5.4.3: mean acceptance length 1.875 at k = 1), the figure plan uses for mtp
MTP_ACCEPTED = 0.875
CASES = [
    {"case": "DeepSeek-V3, 16 H200, MTP", "model": "deepseek-ai/DeepSeek-V3", "device": "h200", "system": "h200_sxm",
     "gpus": 16, "methods": "none,mtp", "nextn": 1},
    {"case": "DeepSeek-V3, 16 H200, no MTP", "model": "deepseek-ai/DeepSeek-V3", "device": "h200",
     "system": "h200_sxm", "gpus": 16, "methods": "none", "nextn": 0},
    {"case": "Qwen3-235B-A22B, 8 H200", "model": "Qwen/Qwen3-235B-A22B", "device": "h200", "system": "h200_sxm",
     "gpus": 8, "methods": None, "nextn": 0},
    # AIConfigurator 0.12.0 ships Meta-Llama-3.1-70B's config (the same architecture) and reads no other
    # without downloading it from Hugging Face
    {"case": "Llama-3.1-70B, 8 H100", "model": "meta-llama/Llama-3.1-70B-Instruct", "device": "h100",
     "system": "h100_sxm", "gpus": 8, "methods": None, "nextn": 0, "aic_model": "meta-llama/Meta-Llama-3.1-70B"},
]


# --------------------------------------------------------------------------- AIConfigurator


def aic_command(path: str, case: Dict, save_dir: str) -> List[str]:
    cmd = [path, "cli", "default", "--model", case.get("aic_model", case["model"]), "--total-gpus", str(case["gpus"]), "--system",
           case["system"], "--backend", "vllm", "--isl", str(ISL), "--osl", str(OSL), "--ttft", f"{TTFT_MS:g}",
           "--tpot", f"{TPOT_MS:g}", "--save-dir", save_dir]
    if case["nextn"]:
        cmd += ["--nextn", str(case["nextn"]), "--nextn-accepted", f"{MTP_ACCEPTED:g}"]
    return cmd


def find_aic(given: Optional[str]) -> Optional[str]:
    return given or os.environ.get("AICONFIGURATOR") or shutil.which("aiconfigurator")


def _top(path: Path) -> Optional[Dict[str, str]]:
    if not path.is_file():
        return None
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    return rows[0] if rows else None


def parse_aic(save_dir: Path, log: str) -> Dict:
    """AIConfigurator's pick from its saved top configurations (rank 1 of agg and of disagg) and its log."""
    agg = _top(next(save_dir.rglob("agg/best_config_topn.csv"), Path("-")))
    dis = _top(next(save_dir.rglob("disagg/best_config_topn.csv"), Path("-")))
    m = re.search(r"Best Experiment Chosen: (\w+) at ([\d.]+) tokens/s/gpu", log)
    if m is None or (agg is None and dis is None):
        raise RuntimeError("no pick in aiconfigurator's output")
    mode = m.group(1)
    top = agg if mode == "agg" else dis
    out = {"mode": mode, "tokens_per_s_gpu": float(top["tokens/s/gpu"]), "tokens_per_s_user":
           float(top["tokens/s/user"]), "ttft_ms": float(top["ttft"]), "tpot_ms": float(top["tpot"]),
           "concurrency": int(float(top["concurrency"])), "total_gpus": top["num_total_gpus"]}
    if mode == "agg":
        out.update(parallel=top["parallel"], batch=int(float(top["bs"])), kvcache=top["kvcache"],
                   tp=int(top["tp"]), pp=int(top["pp"]), dp=int(top["dp"]), moe_tp=int(top["moe_tp"]),
                   moe_ep=int(top["moe_ep"]))
    else:
        for side in ("p", "d"):
            out[side] = {"workers": int(top[f"({side})workers"]), "parallel": top[f"({side})parallel"],
                         "batch": int(float(top[f"({side})bs"])), "tp": int(top[f"({side})tp"]),
                         "dp": int(top[f"({side})dp"]), "moe_tp": int(top[f"({side})moe_tp"]),
                         "moe_ep": int(top[f"({side})moe_ep"]), "kvcache": top[f"({side})kvcache"]}
    return out


def run_aic(path: Optional[str], case: Dict) -> Dict:
    if path is None:
        return {"error": "aiconfigurator is not installed here (pip install 'vidur_specdec[aic]' or give "
                         "--aiconfigurator PATH)"}
    with tempfile.TemporaryDirectory(prefix="aic-") as d:
        cmd = aic_command(path, case, d)
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
        except (OSError, subprocess.TimeoutExpired) as e:
            return {"error": f"aiconfigurator did not run: {e}"}
        log = r.stdout + r.stderr
        if r.returncode != 0:
            last = [x for x in log.strip().splitlines() if x.strip()][-1:] or [""]
            return {"error": f"aiconfigurator exited with status {r.returncode}: {last[0][:300]}"}
        try:
            pick = parse_aic(Path(d), log)
        except (RuntimeError, KeyError, ValueError) as e:
            return {"error": f"aiconfigurator's output not understood: {e}"}
    pick["command"] = " ".join(["aiconfigurator"] + cmd[1:-2])  # without the temporary --save-dir
    pick["version"] = AIC_VERSION
    return pick


# --------------------------------------------------------------------------- AIConfigurator's pick in this simulator


def aic_overrides(pick: Dict, case: Dict) -> (Optional[List[str]], str):
    """``--set`` lines that run AIConfigurator's pick here, and what could not be kept as it is."""
    notes = []
    ov = [f"model={case['model']}", f"device={case['device']}"]
    if pick["mode"] == "agg":
        tp, pp, dp = pick["tp"], pick["pp"], pick["dp"]
        per_worker = tp * pp * dp
        ep = pick["moe_ep"] > 1 or dp > 1
        if dp > 1 and pick["moe_tp"] > 1:
            notes.append(f"its experts are tensor-parallel ({pick['parallel']}); data-parallel attention runs here only "
                         f"with expert parallel, so EP{tp * dp}")
        ov += [f"parallel.tensor_parallel_size={tp}", f"parallel.pipeline_parallel_size={pp}",
               f"parallel.data_parallel_size={dp}", f"parallel.enable_expert_parallel={'true' if ep else 'false'}",
               f"parallel.num_replicas={case['gpus'] // per_worker}"]
        if case["gpus"] // per_worker > 1:
            ov.append("parallel.global_scheduler=lor")
        if pick.get("kvcache") == "fp8":
            ov.append("kv_cache_dtype=fp8")
        ov.append(f"scheduler.max_num_seqs={max(pick['batch'], 1)}")
    else:
        p, d = pick["p"], pick["d"]
        if p["dp"] > 1 or d["dp"] > 1:
            return None, "its pools run data-parallel attention, which this build's pools do not model"
        ov += [f"parallel.tensor_parallel_size={d['tp']}", f"disaggregation.prefill_instances={p['workers']}",
               f"disaggregation.decode_instances={d['workers']}", f"disaggregation.prefill.tensor_parallel_size={p['tp']}",
               f"disaggregation.decode.tensor_parallel_size={d['tp']}", "disaggregation.router=least_loaded",
               f"disaggregation.prefill.enable_expert_parallel={'true' if p['moe_ep'] > 1 else 'false'}",
               f"disaggregation.decode.enable_expert_parallel={'true' if d['moe_ep'] > 1 else 'false'}",
               f"disaggregation.decode.max_num_seqs={max(d['batch'], 1)}"]
        if d.get("kvcache") == "fp8":
            ov.append("kv_cache_dtype=fp8")
    if case["nextn"]:
        ov += ["speculative.method=mtp", f"speculative.num_speculative_tokens={case['nextn']}",
               f"speculative.acceptance_rate={MTP_ACCEPTED / case['nextn']:g}"]
    return ov, "; ".join(notes)


def under_load(base_overrides: List[str], concurrency: int) -> Dict:
    """A config simulated closed-loop at ``concurrency`` as plan's points are: its figures and SLO attainment."""
    from scripts import recorded_runs
    from vidur_specdec import simulate
    from vidur_specdec.plan.points import load_overrides

    ov = list(base_overrides) + [f"{k}={json.dumps(v)}" for k, v in load_overrides(concurrency).items()]
    base = BASE
    try:
        res = simulate(base, ov)
    except Exception as e:  # noqa: BLE001 - the simulator's own refusal, recorded as is
        return {"error": str(e).splitlines()[0], "overrides": ov}
    req = res.requests.sort_values(["arrived_at_s", "request_id"]).iloc[res.config.workload.warmup_requests:]
    ok = (req["ttft_ms"] <= TTFT_MS) & ~(req["tpot_ms"] > TPOT_MS)
    s = res.summary
    gpus = s["num_gpus"] if "pools" not in s else sum(p["num_gpus"] for p in s["pools"].values())
    stamp = recorded_runs.stamp(base, ov)
    return {"overrides": ov, "attainment": round(float(ok.mean()), 6), "tokens_per_s_gpu":
            round(s["throughput_tok_s"] / gpus, 3), "ttft_ms_p90": round(s["ttft_ms"]["p90"], 3),
            "tpot_ms_p90": round(s["tpot_ms"]["p90"], 3), "tokens_per_s_user": round(1e3 / s["tpot_ms"]["p50"], 3),
            "gpus": gpus, **stamp}


def run_plan(case: Dict) -> Dict:
    from vidur_specdec import plan

    kw = dict(model=case["model"], devices=case["device"], gpus=case["gpus"], isl=ISL, osl=OSL, slo_ttft_ms=TTFT_MS,
              min_tokens_per_user=1e3 / TPOT_MS, jobs=2)
    if case["methods"]:
        kw["methods"] = case["methods"]
    with tempfile.TemporaryDirectory(prefix="plan-") as d:
        p = plan(output_dir=Path(d) / "plan", **kw)
        best = p.best
        ov = json.loads(p.points[p.points["best"]].iloc[0]["overrides"])
    sets = [f"model={case['model']}"] + [f"{k}={json.dumps(v)}" for k, v in ov.items() if not k.startswith("workload.")]
    return {"deployment": best["deployment"], "tokens_per_s_gpu": round(best["tok_s_gpu"], 3),
            "tokens_per_s_user": round(best["tok_s_user"], 3), "concurrency": best["concurrency"],
            "ttft_ms_p90": round(best["ttft_ms_at_slo_percentile"], 3),
            "tpot_ms_p90": round(best["tpot_ms_at_slo_percentile"], 3),
            "vllm_serve": [x["vllm_serve"] for x in best["pools"]], "overrides": sets,
            "screened": p.summary["screen"]["candidates"], "simulated": p.summary["simulated_points"],
            "plan_hash": p.summary["plan_hash"]}


def record(aic_path: Optional[str], only: Optional[str] = None) -> None:
    from vidur_specdec import __version__

    out = {"isl": ISL, "osl": OSL, "slo": {"ttft_ms": TTFT_MS, "tpot_ms": TPOT_MS, "percentile": 90},
           "vidur_specdec_version": __version__, "cases": []}
    for i, case in enumerate(c for c in CASES if only is None or only in c["case"]):
        print(f"[{i + 1}/{len(CASES)}] {case['case']}", file=sys.stderr)
        entry = {"case": case["case"]}
        entry["aiconfigurator"] = aic = run_aic(aic_path, case)
        entry["plan"] = pl = run_plan(case)
        entry["plan_under_load"] = under_load(pl["overrides"], pl["concurrency"])
        if "error" not in aic:
            ov, note = aic_overrides(aic, case)
            entry["aiconfigurator_under_load"] = (under_load(ov, aic["concurrency"]) if ov is not None
                                                  else {"error": note})
            if note and ov is not None:
                entry["aiconfigurator_under_load"]["note"] = note
        out["cases"].append(entry)
    RECORD.parent.mkdir(parents=True, exist_ok=True)
    RECORD.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")


# --------------------------------------------------------------------------- the block


def _aic_config(a: Dict) -> str:
    if "error" in a:
        return f"not run: {a['error']}"
    if a["mode"] == "agg":
        return f"aggregated {a['parallel']} (batch {a['batch']}), {a['concurrency']} in flight"
    p, d = a["p"], a["d"]
    return (f"disaggregated {p['workers']} x {p['parallel']} prefill + {d['workers']} x {d['parallel']} decode "
            f"(decode batch {d['batch']}), {a['concurrency']} in flight")


def _load_cell(u: Optional[Dict]) -> str:
    if not u:
        return "–"
    if "error" in u:
        return f"not simulated: {u['error']}"
    txt = (f"{100 * u['attainment']:.0f} % ({u['tokens_per_s_gpu']:.0f} tok/s/GPU, TTFT p90 {u['ttft_ms_p90']:.0f} ms, "
           f"TPOT p90 {u['tpot_ms_p90']:.1f} ms)")
    return txt + (f"; {u['note']}" if u.get("note") else "")


def text(rec: Optional[Dict] = None) -> str:
    rec = rec or json.loads(RECORD.read_text())
    begin, end = markers(NAME)
    lines = [begin, "<!-- generated by scripts/plan_vs_aiconfigurator.py from "
             "sweeps/results/figures/plan_vs_aiconfigurator.json; do not edit -->", "",
             f"ISL {rec['isl']}, OSL {rec['osl']}, TTFT <= {rec['slo']['ttft_ms']:g} ms, TPOT <= "
             f"{rec['slo']['tpot_ms']:g} ms (>= {1000 / rec['slo']['tpot_ms']:g} tokens/s per user); plan's SLOs at "
             f"p{rec['slo']['percentile']}. *Attainment*: the share of measured requests meeting both SLOs when the "
             "pick runs in this simulator, closed loop at its own concurrency (first wave left out).", "",
             "| case | tool | configuration picked | tokens/s/GPU predicted | tokens/s/user predicted | "
             "simulated SLO attainment under load |", "|---|---|---|---:|---:|---|"]
    for c in rec["cases"]:
        a, p = c["aiconfigurator"], c["plan"]
        a_pred = "–" if "error" in a else f"{a['tokens_per_s_gpu']:.1f}"
        a_user = "–" if "error" in a else f"{a['tokens_per_s_user']:.1f}"
        lines.append(f"| {c['case']} | AIConfigurator {a.get('version', AIC_VERSION)} | {_aic_config(a)} | {a_pred} | "
                     f"{a_user} | {_load_cell(c.get('aiconfigurator_under_load'))} |")
        lines.append(f"| | plan | {p['deployment']}, {p['concurrency']} in flight ({p['screened']} screened, "
                     f"{p['simulated']} simulated) | {p['tokens_per_s_gpu']:.1f} | {p['tokens_per_s_user']:.1f} | "
                     f"{_load_cell(c.get('plan_under_load'))} |")
    lines += ["", end]
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--record", action="store_true", help="run both tools and the simulations, then write the record")
    ap.add_argument("--aiconfigurator", default=None, help="the aiconfigurator executable (default: $AICONFIGURATOR, "
                                                           "then PATH)")
    ap.add_argument("--write", action="store_true", help="put the block in docs/plan.md")
    ap.add_argument("--only", default=None, help="record only the cases whose name holds this text (a trial)")
    args = ap.parse_args(argv)
    if args.record:
        record(find_aic(args.aiconfigurator), args.only)
    return write_block(DOC, text(), ["--write"] if args.write else [])


if __name__ == "__main__":
    sys.exit(main())
