"""The reading paragraphs of docs/sweep.md that quote the recorded sweeps, written from their CSVs.

Each block ``sweep-reading:NAME`` of docs/sweep.md (scripts/docblock.py markers) is rendered here from
``sweeps/results/*.csv``; what moved against an earlier recording reads that recording from the constants
below, each named by the commit whose ``sweeps/results/moe.csv`` it copies (tests/test_sweep_readings.py
checks them against git where the history is there)::

    PYTHONPATH=. python scripts/sweep_readings.py [--write]

No simulation: the recorded sweeps are the measurement (``sweeps/results/regenerate.sh`` re-runs them, then
this). Where the CSV no longer supports a sentence's claim (an order, a sign, a best k), rendering stops with
one line naming it (exit status 2): the prose must be rewritten, not the figure swapped in.
"""

import csv
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scripts.docblock import REPO, main, markers  # noqa: E402

DOC = REPO / "docs" / "sweep.md"
RESULTS = REPO / "sweeps" / "results"
PREFIX = "sweep-reading"

# (model, qps, method, k): (TPOT p50 ms, TTFT p50 ms, TPOT speedup), 4 decimals.
from scripts.sweep_readings_before import (BEFORE_MLA, BEFORE_MLA_COMMIT, BEFORE_ROUTING,  # noqa: E402
                                          BEFORE_ROUTING_COMMIT, DEPLOYMENTS_ROOFLINE, EAGLE_ROOFLINE, ROOFLINE,
                                          ROOFLINE_COMMIT)

QWEN3, LLAMA3B, GPTOSS = "Qwen/Qwen3-30B-A3B", "meta-llama/Llama-3.2-3B-Instruct", "openai/gpt-oss-120b"
DSV3, DSV32, MIXTRAL, QWEN35 = ("deepseek-ai/DeepSeek-V3", "deepseek-ai/DeepSeek-V3.2",
                                "mistralai/Mixtral-8x7B-Instruct-v0.1", "Qwen/Qwen3.5-122B-A10B")


VERIFY = {"shared_kv": "KV read once", "per_token": "per-token KV reads"}


class Contradicted(Exception):
    """A claim of the prose that the recorded CSV no longer supports."""


def claim(ok: bool, what: str):
    """Stop rendering when the CSV contradicts ``what``."""
    if not ok:
        raise Contradicted(f"docs/sweep.md: the recorded CSVs no longer support '{what}'; rewrite that reading")


def read(name: str):
    """``{(model, qps, method, k): row}`` of ``sweeps/results/NAME.csv`` (+ (alpha, verify) for the reference
    and draft-model sweeps; (model, device, qps, ...) for deployments)."""
    out = {}
    with open(RESULTS / f"{name}.csv", newline="") as f:
        for r in csv.DictReader(f):
            key = (r["model"], float(r["qps"]), r["method"], int(r["k"] or 0))
            if name in ("specdec_39", "draft_model"):
                key += (float(r["acceptance_rate"] or 0), r["verify_attention"])
            if name == "deployments":
                key = (r["model"], r["device"]) + key[1:]
            assert key not in out, key
            out[key] = r
    return out


def f(r, col):
    """Column ``col`` of row ``r`` as a float."""
    return float(r[col])

def x2(v):
    """A speedup or ratio: ``1.23×``."""
    return f"{v:.2f}×"


def signed(v):
    """A signed change of a speedup, the docs' minus sign: ``−0.12×``, ``+0.20×``."""
    return f"{v:+.2f}×".replace("-", "−")


def loads(rows, model):
    """The arrival rates (req/s) of ``model``'s baselines, ascending."""
    return sorted(k[1] for k in rows if k[0] == model and k[2] == "none")


def q(v):
    """A load in req/s as the tables print it."""
    return f"{v:g}"

def spd(rows, model, method, k):
    """``model``'s speedups with ``method`` at ``k`` by load, ascending load."""
    return [f(rows[(model, qps, method, k)], "tpot_speedup") for qps in loads(rows, model)]


def moe_reading() -> str:
    """The MoE sweep's "What it says" paragraphs."""
    m = read("moe")
    ql, ll = loads(m, QWEN3), loads(m, LLAMA3B)
    claim(ql == ll, "Qwen3-30B-A3B and Llama-3.2-3B run at the same loads")
    qn, ln, qe = spd(m, QWEN3, "ngram", 3), spd(m, LLAMA3B, "ngram", 3), spd(m, QWEN3, "eagle3", 3)
    claim(qn[0] < ln[0], "at the light load MoE speculation pays less than dense speculation")
    claim(all(a > b for a, b in zip(qn[1:], ln[1:])), "under load the order turns")
    spec = [f(r, "tpot_speedup") for key, r in m.items() if key[2] != "none" and key[0] != LLAMA3B]
    claim(min(spec) > 1, "MoE speculation does not stop paying at any load")
    models = [GPTOSS, DSV3, DSV32, MIXTRAL, QWEN3]
    best_of = {mod: [max(f(r, "tpot_speedup") for key, r in m.items() if key[0] == mod and key[1] == qps
                         and key[2] != "none") for qps in loads(m, mod)] for mod in models + [QWEN35]}
    least_light = [mod for mod, s in best_of.items() if s[0] == min(s)]
    others = [mod for mod in best_of if mod not in least_light]
    claim(len(least_light) > len(others), "MoE speculation pays least at low load")
    short = {GPTOSS: "gpt-oss-120b", DSV3: "DeepSeek-V3", DSV32: "DeepSeek-V3.2", MIXTRAL: "Mixtral",
             QWEN3: "Qwen3-30B-A3B", QWEN35: "Qwen3.5-122B-A10B"}
    exc = "; ".join(f"{short[mod]}, lowest at {q(loads(m, mod)[best_of[mod].index(min(best_of[mod]))])} "
                    f"requests/s ({', '.join(x2(v) for v in best_of[mod])})" for mod in others)
    mx = spd(m, MIXTRAL, "ngram", 3)
    claim(mx[0] < min(mx[1:]), "Mixtral at α 0.4: the low-load penalty decides")
    go, dv, dv2 = spd(m, GPTOSS, "eagle3", 3), spd(m, DSV3, "mtp", 1), spd(m, DSV32, "mtp", 1)
    claim(qe[0] < qn[0], "EAGLE-3 on Qwen3-30B-A3B gains less than n-gram at the same α")
    base = lambda mod: [f(m[(mod, qps, "none", 0)], "tpot_ms_p50") for qps in loads(m, mod)]  # noqa: E731
    b3, b32 = base(DSV3), base(DSV32)
    claim(all(a > b for a, b in zip(b32, b3)), "DeepSeek-V3.2's baselines are dearer than DeepSeek-V3's")
    v32_verify = {r["verify_attention"] for key, r in m.items() if key[0] == DSV32 and key[2] != "none"}
    v3_verify = {r["verify_attention"] for key, r in m.items() if key[0] == DSV3 and key[2] != "none"}
    claim(len(v32_verify) == len(v3_verify) == 1, "one verify assumption per DeepSeek target")
    q35 = loads(m, QWEN35)
    ks = sorted({key[3] for key in m if key[0] == QWEN35 and key[2] == "mtp"})
    by_load = []
    for qps in q35:
        s = {k: f(m[(QWEN35, qps, "mtp", k)], "tpot_speedup") for k in ks}
        best = max(s, key=s.get)
        by_load.append((qps, s, best))
    bests = {b for _, _, b in by_load}
    best_txt = (f"k {bests.pop()} is the best at every load" if len(bests) == 1 else
                "the best k is " + ", ".join(f"{b} at {q(qps)}" for qps, _, b in by_load) + " requests/s")
    gain = [round(s[ks[-1]], 2) - round(s[ks[-2]], 2) for _, s, _ in by_load]
    claim(all(s[ks[0]] > 1 for _, s, _ in by_load), "Qwen3.5's MTP pays at every k")
    lines = [
        "**What it says** (figures from the tables above; step costs from the",
        "step-ratio table in docs/model.md, \"Mixture-of-experts targets\"). At the light",
        "load MoE speculation pays less than dense speculation with the same",
        f"acceptance input: n-gram k 3 gives Qwen3-30B-A3B {x2(qn[0])} against {x2(ln[0])} for",
        "Llama-3.2-3B, because a verify block of 4 tokens wakes more than twice the",
        "experts one token does (8 → 17.8 of 128 per layer), so the MoE step at batch 1",
        "grows by about a third where a dense step grows by a few per cent. Under load",
        f"the order turns: at {q(ql[1])} requests/s Qwen3-30B-A3B gains {x2(qn[1])} (Llama-3.2-3B",
        f"{x2(ln[1])}), at {q(ql[2])} {x2(qn[2])} ({x2(ln[2])}). There the MoE baseline's batch already wakes most",
        "experts (16 plain decodes wake 82 of 128 per layer, 16 verify blocks 116), so verify blocks add",
        "FLOPs but few new weight bytes, and the fewer steps per token that speculation",
        "buys save more time per step. So in this sweep MoE speculation does not stop",
        f"paying at any load (the least: {x2(min(spec))}); for most targets it pays least at low load, the",
        "opposite of the dense case, where verification is nearly free at batch 1 and costs more",
        "as the batch grows (the eagle and deployments sweeps)" + (f"; the exception: {exc}" if exc else "") + ".",
        "Where acceptance is low the low-load penalty decides: Mixtral with n-gram at α 0.4",
        f"gains {x2(mx[0])} at {q(loads(m, MIXTRAL)[0])} requests/s and {x2(mx[1])}, {x2(mx[2])} at the busier loads.",
        "The model-based drafters pay their draft passes on top (docs/model.md, \"Proposers\"):",
        f"gpt-oss-120b with EAGLE-3 gains {', '.join(x2(v) for v in go)} and DeepSeek-V3 with MTP (k 1)",
        f"{', '.join(x2(v) for v in dv)} from light to near capacity, and EAGLE-3 on Qwen3-30B-A3B gains",
        f"less than n-gram at the same α ({x2(qe[0])} against {x2(qn[0])} at the light load).",
        "",
        f"DeepSeek-V3.2 with its MTP module (k 1, α 0.85, {VERIFY[v32_verify.pop()]}; DeepSeek-V3's",
        f"rows {VERIFY[v3_verify.pop()]}) gains {', '.join(x2(v) for v in dv2)} from light to near",
        f"capacity, close to DeepSeek-V3's, on baselines ×{b32[0] / b3[0]:.2f}, ×{b32[1] / b3[1]:.2f},",
        f"×{b32[2] / b3[2]:.2f} DeepSeek-V3's (TPOT p50 {b32[0]:.2f} against {b3[0]:.2f} ms at the light load): with",
        "prompts of a median 512 tokens nearly every context is under the 2048 tokens its indexer keeps,",
        "so the sparse attention skips nothing and adds the indexer and the sparse-attention module's",
        "fixed cost (docs/model.md, \"DeepSeek sparse attention\"). Qwen3.5-122B-A10B with its MTP module",
        f"(α 0.77) gains, for k = {', '.join(str(k) for k in ks)}: "
        + "; ".join(f"{', '.join(x2(s[k]) for k in ks)} at {q(qps)} requests/s" for qps, s, _ in by_load) + f"; {best_txt}",
        f"(k {ks[-1]} over k {ks[-2]}: " + ", ".join(signed(g) for g in gain) + " from light to near capacity).",
        "",
        "Caveat: the routing model's default",
        "locality (ρ 0.55) was fitted to one Qwen3-30B-A3B measurement; with",
        "independent tokens (ρ 0) a verify block wakes more experts and the low-load",
        "penalty is larger (docs/model.md). `python -m vidur_specdec tune` on an MoE",
        "target answers the per-batch-size question for one deployment (docs/tune.md).",
    ]
    return _block("moe", lines)


def _ratio(before, after, model, qps, method, k, i=0):
    """Column ``i`` (0 TPOT, 1 TTFT, 2 speedup) of the row after ÷ before."""
    return after[(model, qps, method, k)][i] / before[(model, qps, method, k)][i]


def _now(m):
    """The recorded moe.csv in the constants' shape."""
    return {key: (f(r, "tpot_ms_p50"), f(r, "ttft_ms_p50"), f(r, "tpot_speedup")) for key, r in m.items()}


def moe_moved() -> str:
    """What moved the MoE rows: the measured kernel tables, then MLA from the measured MLA module tables, then
    this round's routing model, all-reduce order and block pool."""
    current = _now(read("moe"))
    old, mid, now = ROOFLINE, BEFORE_MLA, BEFORE_ROUTING  # each paragraph: one recording to the next
    bl = lambda mod: sorted(key[1] for key in old if key[0] == mod and key[2] == "none")  # noqa: E731
    r = lambda mod: ", ".join(f"×{_ratio(old, mid, mod, qps, 'none', 0):.2f}" for qps in bl(mod))  # noqa: E731
    ttft = [_ratio(old, mid, *key, i=1) for key in old if key[2] == "none"]
    ds = {key: mid[key][2] - old[key][2] for key in old if key[2] != "none"}
    go = [ds[(GPTOSS, qps, "eagle3", 3)] for qps in bl(GPTOSS)[1:]]
    qe = [ds[(QWEN3, qps, "eagle3", 3)] for qps in bl(QWEN3)[1:]]
    qn = [ds[(QWEN3, qps, "ngram", 3)] for qps in bl(QWEN3)[1:]]
    claim(max(go) < 0, "gpt-oss-120b's cheaper busy steps leave less for speculation to save")
    d3 = bl(DSV3)
    mla_b = [(mid[(DSV3, qps, "none", 0)][0], now[(DSV3, qps, "none", 0)][0]) for qps in d3]
    mla_s = [(mid[(DSV3, qps, "mtp", 1)][2], now[(DSV3, qps, "mtp", 1)][2]) for qps in d3]
    mla_m = [now[(DSV3, qps, "mtp", 1)][0] / mid[(DSV3, qps, "mtp", 1)][0] for qps in d3]
    mla_t = [now[(DSV3, qps, "none", 0)][1] / mid[(DSV3, qps, "none", 0)][1] for qps in d3]
    moved = sorted({key[0] for key in mid if key[0] != DSV3 and mid[key] != tuple(round(v, 4) for v in now[key])})
    claim(not moved, "every row but DeepSeek-V3's is unchanged by MLA from the measured tables")
    claim(all(b > a for a, b in mla_s), "MLA from the measured tables raised DeepSeek-V3's MTP speedup")
    sp = lambda v: ", ".join(signed(x) for x in v)  # noqa: E731
    lines = [
        "**Measured kernel tables: what moved.** Every row here prices its dense GEMMs,",
        "attention, LM head, all-reduces and the MoE layer's routed experts from vLLM's measured",
        "kernel tables (docs/profiles.md; the elementwise ops stay on the roofline); DeepSeek's latent",
        "attention joined them later (next paragraph). Against the recording before the tables",
        f"(commit {ROOFLINE_COMMIT}'s sweeps/results/moe.csv; after: commit {BEFORE_MLA_COMMIT}'s), the baselines'",
        "TPOT p50 moved by load (light, middle, near capacity): gpt-oss-120b " + r(GPTOSS) + " (the roofline",
        "over-priced its MXFP4 experts, which vLLM runs with OpenAI's Triton kernel: builder ÷",
        "measured 1.55 at the median); DeepSeek-V3 " + r(DSV3) + " (its latent attention still on the",
        "roofline); Qwen3-30B-A3B " + r(QWEN3) + " (builder ÷ measured for its bf16 Triton experts:",
        "0.77–1.14, docs/profiles.md); Mixtral at TP 2 " + r(MIXTRAL) + "; the dense Llama-3.2-3B " + r(LLAMA3B) + ".",
        f"The baselines' TTFT p50 moved ×{min(ttft):.2f}–{max(ttft):.2f}. Speedups moved by {signed(min(ds.values()))} to",
        f"{signed(max(ds.values()))}: most for gpt-oss-120b, whose cheaper busy steps leave less for speculation to",
        f"save ({sp(go)} at the two busier loads), and Qwen3-30B-A3B at the two busier loads",
        f"(EAGLE-3 {sp(qe)}, n-gram {sp(qn)}), where a small change of step time moves the queue; its",
        "verify blocks read the table at as many unrelated tokens as wake their experts (docs/model.md,",
        "\"MoE layer from measurement\").",
        "",
        "**MLA from the measured tables: what moved.** DeepSeek-V3's latent attention is now priced",
        "from vLLM's measured MLA module tables (docs/profiles.md, \"Measured kernel tables\"; docs/model.md),",
        "where the roofline priced the MLA decode block at a third to a half of vLLM's measured module",
        f"(docs/profiles.md, \"The builder against the tables\"). Against the recording before (commit {BEFORE_MLA_COMMIT}'s",
        "sweeps/results/moe.csv), DeepSeek-V3's baseline TPOT p50 moved "
        + ", ".join(f"×{b / a:.2f}" for a, b in mla_b) + " ("
        + ", ".join(f"{a:.2f} → {b:.2f}" for a, b in mla_b) + " ms), its MTP rows'",
        ", ".join(f"×{v:.2f}" for v in mla_m) + ", so the MTP speedup rose from " + ", ".join(x2(a) for a, _ in mla_s)
        + " to " + ", ".join(x2(b) for _, b in mla_s) + ":",
        "dearer attention is a larger share of every step, and speculation, which takes fewer steps per",
        f"token, saves more of it. The baselines' TTFT p50 moved ×{min(mla_t):.2f}–{max(mla_t):.2f}. Every other row of",
        "that recording is unchanged to the digit; the DeepSeek-V3.2 and Qwen3.5-122B-A10B rows are new.",
    ]
    lines += [""] + _routing_moved(now, current)
    return _block("moe-moved", lines)


def _routing_moved(before, now) -> list:
    """This round's paragraph: every MoE step's routed experts read by the experts it wakes (and vLLM 0.33's
    all-reduce order, the hybrid block pool), against the recording before (BEFORE_ROUTING)."""
    keys = [key for key in before if key in now]
    moe = sorted({key[0] for key in keys if key[0] != LLAMA3B})
    base = {key: now[key][0] / before[key][0] for key in keys if key[2] == "none"}
    claim(all(base[key] < 1 for key in base if key[0] != LLAMA3B), "every MoE baseline's TPOT p50 fell")
    claim(all(tuple(round(v, 4) for v in now[key]) == before[key] for key in keys if key[0] == LLAMA3B),
          "the dense Llama-3.2-3B rows are unchanged")
    ds = {key: now[key][2] - before[key][2] for key in keys if key[2] != "none"}
    worst = min(ds, key=ds.get)
    best = max(ds, key=ds.get)
    claim(worst[0] == QWEN3 and worst[2] == "eagle3", "Qwen3-30B-A3B's EAGLE-3 lost the most speedup")

    def by_model(m):
        return ", ".join(f"×{base[key]:.2f}" for key in sorted(k for k in base if k[0] == m))

    return [
        "**One routing model for every step: what moved.** Every MoE step's routed experts are now read",
        "from vLLM's fused-MoE tables by the experts it wakes, decodes included (docs/model.md, \"MoE layer from",
        "measurement\"): a plain decode step of unrelated requests wakes fewer experts than the tables'",
        "balanced rows at its token count, where before only verify blocks and prefill chunks were read that way;",
        "tensor-parallel all-reduces follow vLLM 0.33's order (FlashInfer's first), and Qwen3.5's state comes from",
        f"the KV block pool. Against the recording before (commit {BEFORE_ROUTING_COMMIT}'s sweeps/results/moe.csv), the",
        "baselines' TPOT p50 fell by load (light, middle, busiest): "
        + "; ".join(f"{m.split('/')[1]} {by_model(m)}" for m in moe) + ";",
        "the dense Llama-3.2-3B rows are unchanged. A cheaper plain decode is the baseline speculation is judged",
        f"against, so speedups moved by {signed(ds[worst])} to {signed(ds[best])}: most down for Qwen3-30B-A3B's",
        f"EAGLE-3 at the busiest load ({x2(before[worst][2])} → {x2(now[worst][2])}), whose verify blocks were",
        "already read by the experts they wake; most up where n-gram's cheaper verify steps gained more than",
        f"the baseline ({best[0].split('/')[1]} at {q(best[1])} requests/s: {x2(before[best][2])} → {x2(now[best][2])}).",
    ]


def specdec_loads() -> str:
    """The reference sweep's reading by load (light, busy, overload)."""
    s = read("specdec_39")
    la = sorted({key[1] for key in s})
    sp = lambda qps, a, k, v: f(s[("meta-llama/Llama-2-7b-hf", qps, "ngram", k, a, v)], "tpot_speedup")  # noqa
    tt = lambda qps, a, k, v: f(s[("meta-llama/Llama-2-7b-hf", qps, "ngram", k, a, v)], "ttft_ms_p50") / 1000  # noqa
    base_tt = lambda qps: f(s[("meta-llama/Llama-2-7b-hf", qps, "none", 0, 0.0, "")], "ttft_ms_p50") / 1000  # noqa
    ks, alphas = (2, 4, 8), (0.6, 0.8)
    light, busy, over = la
    claim(all(sp(light, a, k, v) > 1 for a in alphas for k in ks for v in ("shared_kv", "per_token")),
          "light load: speculation pays in every configuration")
    claim(all(sp(light, a, k2, "shared_kv") > sp(light, a, k1, "shared_kv") for a in alphas for k1, k2 in
              zip(ks, ks[1:])), "with the KV read once the speedup grows with k")
    claim(sp(light, 0.6, 8, "per_token") < sp(light, 0.6, 4, "per_token"), "per-token reads: k 8 buys less than k 4")
    busy_kv = [sp(busy, a, k, "shared_kv") for a in alphas for k in ks]
    claim(sp(busy, 0.6, 4, "per_token") < 1 and sp(busy, 0.6, 8, "per_token") < 1,
          "busy load, per-token reads at α 0.6: k 4 and k 8 are slower than no speculation")
    claim(all(sp(over, a, k, v) > 1 for a in alphas for k in ks for v in ("shared_kv", "per_token")),
          "overload: ratios are above 1×")
    lines = [
        "* **Light load: speculation pays in every configuration.** With the KV read",
        f"  once, the speedup grows with k and α ({x2(sp(light, 0.6, 2, 'shared_kv'))} at k = 2, α = 0.6 up to",
        f"  {x2(sp(light, 0.8, 8, 'shared_kv'))} at k = 8, α = 0.8). With per-token reads it stays above 1× but",
        f"  shrinks, and at α = 0.6 k = 8 buys less than k = 4 ({x2(sp(light, 0.6, 8, 'per_token'))} against",
        f"  {x2(sp(light, 0.6, 4, 'per_token'))}): the wasted guesses cost attention.",
        "* **Busy load: the verify-attention assumption decides.** With the KV read",
        f"  once, speculation still gives {min(busy_kv):.2f}–{max(busy_kv):.2f}×, because each step advances more",
        "  tokens and the system carries less load. With per-token reads at α = 0.6,",
        "  k = 4 and k = 8 are **slower than no speculation** "
        f"({x2(sp(busy, 0.6, 4, 'per_token'))} and {x2(sp(busy, 0.6, 8, 'per_token'))}):",
        "  the extra verify work pushes the replica past its capacity and the queue",
        f"  builds (TTFT p50 from {base_tt(busy):.2f} s to {tt(busy, 0.6, 4, 'per_token'):.2f} s and "
        f"{tt(busy, 0.6, 8, 'per_token'):.1f} s). This is where",
        "  speculation stops paying, and whether it does depends on a kernel property",
        "  the simulator only brackets.",
        "* **Overload: ratios are above 1× but depend on run length.** The baseline's",
        "  queue grows through the run, so its TPOT and TTFT depend on how many",
        "  requests arrive; every ratio at this load changes with `num_requests`.",
        "  Speculation raises the throughput ceiling, so TPOT improves, but TTFT can",
        f"  still get far worse (k = 8, α = 0.6: TTFT p50 {tt(over, 0.6, 8, 'shared_kv'):.1f} s with `shared_kv`,",
        f"  {tt(over, 0.6, 8, 'per_token'):.1f} s with `per_token`, against {base_tt(over):.2f} s without speculation):",
        "  read the TTFT column too.",
    ]
    return _block("specdec_39", lines)


def _dense_now(name):
    """``sweeps/results/NAME.csv`` in the shape of the constants keyed (model, device, qps, method, k)."""
    with open(RESULTS / f"{name}.csv", newline="") as fh:
        return {(r["model"], r["device"], float(r["qps"]), r["method"], int(r["k"] or 0)):
                (f(r, "tpot_ms_p50"), f(r, "ttft_ms_p50"), f(r, "tpot_speedup")) for r in csv.DictReader(fh)}


L8, L70 = "meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-70B-Instruct"


def _arrow(old, new, keys, fmt="{:.2f}"):
    """``a → b`` TPOT p50 pairs for ``keys``."""
    return [f"{fmt.format(old[k][0])} → {fmt.format(new[k][0])}" for k in keys]


def deployments_moved() -> str:
    """What the measured kernel tables moved in the deployments sweep."""
    old, new = DEPLOYMENTS_ROOFLINE, _dense_now("deployments")
    claim(set(old) == set(new), "the deployments sweep has the same rows as before the measured tables")
    a100 = [k for k in new if k[1] == "a100"]
    claim(all(tuple(round(v, 4) for v in new[k]) == old[k] for k in a100), "the A100 rows are unchanged")
    deps = [(L8, "h100"), (L8, "h200"), (L70, "h100")]
    med = lambda i, d: statistics.median(new[k][i] / old[k][i] for k in new if k[:2] == d)  # noqa: E731
    base = lambda d: sorted(k for k in new if k[:2] == d and k[3] == "none")  # noqa: E731
    for d in deps:
        r = [new[k][0] / old[k][0] for k in base(d)]
        claim(abs(1 - r[0]) == min(abs(1 - v) for v in r), "the light load barely moves")
    ch = [new[k][2] / old[k][2] - 1 for k in new if k[1] != "a100" and k[3] != "none"]
    within = sum(abs(c) <= 0.05 for c in ch)
    claim(within > len(ch) / 2, "speedups move little (most within ±5 %)")
    o70 = base((L70, "h100"))[-1]
    lines = [
        "**Measured kernel tables: what moved.** The H100 and H200 rows are priced from",
        "vLLM's measured kernel tables since they became the default (docs/profiles.md,",
        "\"Measured kernel tables\"); the A100 rows are unchanged to the byte. Against the recording",
        f"before (commit {ROOFLINE_COMMIT}'s sweeps/results/deployments.csv), median over each deployment's rows,",
        f"new ÷ old: TPOT p50 ×{med(0, deps[0]):.2f} (8B on H100), ×{med(0, deps[1]):.2f} (8B on H200),",
        f"×{med(0, deps[2]):.2f} (70B at TP 4 on H100); TTFT p50 ×{med(1, deps[0]):.2f}, ×{med(1, deps[1]):.2f}, "
        f"×{med(1, deps[2]):.2f}. The",
        "dense H100 baselines: 8B TPOT p50 " + ", ".join(
            f"{a} ms ({q(k[2])} req/s)" for a, k in zip(_arrow(old, new, base(deps[0])), base(deps[0])))
        + "; 70B at TP 4 " + ", ".join(_arrow(old, new, base(deps[2]))) + " ms. The light load barely",
        "moves (small decode batches, where the builder's GEMMs and decode attention were within ~10 % of the",
        "tables); the busy and overloaded loads move most, because the builder priced the",
        "128–1024-token GEMMs of batched steps ~30 % slow, prefill attention 2–3× slow",
        "and the all-reduces ~2× slow on Hopper (docs/profiles.md, \"The builder against",
        "the tables\"), so queues drained sooner (the overloaded 70B TTFT p50",
        f"{old[o70][1] / 1000:.2f} s → {new[o70][1] / 1000:.2f} s). Speedups move little ({within} of the {len(ch)} "
        f"speculative H100 and H200 rows within ±5 %, all within {min(ch) * 100:+.0f} % to "
        f"{max(ch) * 100:+.0f} %):".replace("-", "−"),
        "verify steps and plain steps are sped up alike.",
    ]
    return _block("deployments-moved", lines)


def eagle_moved() -> str:
    """What the measured kernel tables moved in the EAGLE sweep."""
    old, new = EAGLE_ROOFLINE, _dense_now("eagle")
    claim(set(old) == set(new), "the EAGLE sweep has the same rows as before the measured tables")
    base = sorted(k for k in new if k[3] == "none")
    light, *busier = [k[2] for k in base]
    e3 = sorted(k for k in new if k[3] == "eagle3" and k[2] == light)
    sp = lambda d, ks: f"{min(d[k][2] for k in ks):.2f}–{max(d[k][2] for k in ks):.2f}×"  # noqa: E731
    fast = [1 - new[k][0] / old[k][0] for k in new if k[2] in busier]
    claim(min(fast) > 0, "at the busy and overloaded loads every row got faster")
    longest = max(k[4] for k in new)
    e3k = ("meta-llama/Llama-3.1-8B-Instruct", "h100", busier[-1], "eagle3", longest)
    claim(new[e3k][2] < old[e3k][2], "the speedups of the long drafts fell at the overloaded load")
    lines = [
        "**Measured kernel tables: what moved.** The whole sweep runs on one H100, now priced from vLLM's",
        f"measured kernel tables: against the recording before (commit {ROOFLINE_COMMIT}'s sweeps/results/eagle.csv)",
        "the baselines' TPOT p50 moved " + ", ".join(
            f"{a} ms ({q(k[2])} req/s)" for a, k in zip(_arrow(old, new, base), base)) + ".",
        "EAGLE-3 by k at the light load: TPOT p50 " + " / ".join(f"{old[k][0]:.2f}" for k in e3) + " ms → "
        + " / ".join(f"{new[k][0]:.2f}" for k in e3) + " ms",
        f"for k = {e3[0][4]}..{e3[-1][4]} (speedups {sp(old, e3)} → {sp(new, e3)}). At the busy and overloaded "
        f"loads every row got faster by {min(fast) * 100:.0f}–{max(fast) * 100:.0f} % and the",
        f"speedups of the long drafts fell at the overloaded load (EAGLE-3 k {longest} {x2(old[e3k][2])} → "
        f"{x2(new[e3k][2])}): the tables make the",
        "baseline's batched steps cheaper than the roofline did, which leaves verification less to save.",
    ]
    return _block("eagle-moved", lines)


def _block(name: str, lines) -> str:
    begin, end = markers(f"{PREFIX}:{name}")
    return "\n".join([begin, *lines, end])


BLOCKS = {"specdec_39": specdec_loads, "deployments-moved": deployments_moved, "eagle-moved": eagle_moved,
          "moe": moe_reading, "moe-moved": moe_moved}


def text(name: str) -> str:
    """Block ``sweep-reading:NAME``, markers included."""
    return BLOCKS[name]()


def cli(argv=None) -> int:
    """Print every block; ``--write`` puts each in place in docs/sweep.md."""
    try:
        texts = [text(name) for name in BLOCKS]
    except Contradicted as e:
        print(e, file=sys.stderr)
        return 2
    for t in texts:
        main(DOC, t, argv)
    return 0


if __name__ == "__main__":
    sys.exit(cli())
