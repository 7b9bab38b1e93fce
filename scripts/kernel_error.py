"""The analytical builder's error against vLLM's measured kernel tables, per op family and GPU (docs/profiles.md).

Usage: python scripts/kernel_error.py [--write] | --mla-verify
For every GPU the tables cover (vidur_specdec.costs.kernels.tables.SYSTEMS) the builder's own
functions (the ``built`` kernel source) are called at the tables' measured points and divided by
the measured latency. Families and the rows taken (bf16, window 0, vLLM's kernel on that GPU):

* GEMM bf16 at three bands of m (tokens), n and k in 1024..16384 (the projections of 1-70 B models);
  GEMM fp8 (W8A8 per-tensor) at every m;
* decode attention: batch 1-128, 1k-16k cached tokens; prefill attention: batch 1, 128-16k tokens;
  both at the per-GPU heads of Llama-3.1-8B (32 q / 8 KV), 70B at TP 4 (16 / 2) and Qwen3-30B-A3B (32 / 4);
* vLLM's custom all-reduce (CUDA graphs, below its 8 MiB limit) and NCCL's, at 2, 4 and 8 GPUs.
* MLA (DeepSeek-V3 at TP 4 and 8: 32 and 16 heads, fp8 block projections, bf16 KV): the attention
  block (``attn_pre_proj`` + ``attn_rope`` + ``attn_post_proj`` + the attention op) against vLLM's MLA
  module rows, with the kernel the ``tables`` source reads on that GPU (``costs/kernels/mla_table.py``);
  decode batch 1-128, 1k-16k cached tokens; prefill batch 1, 128-16k tokens. ``–``: no such rows.

``--mla-verify`` prints docs/model.md's bound on a verify block's MLA under-price instead.

Each cell: median builder / measured (min-max). Prints the markdown table; ``--write`` puts it
between the ``kernel-error`` markers of docs/profiles.md (tests/test_kernel_error_doc.py fails while
that block is stale).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import docblock  # noqa: E402  (scripts/docblock.py)

import numpy as np  # noqa: E402

from vidur_specdec.architectures.models import get_model  # noqa: E402
from vidur_specdec.costs.kernels import mla_table as MLA  # noqa: E402
from vidur_specdec.costs.kernels import table_data as TD  # noqa: E402
from vidur_specdec.costs.kernels.roofline import RooflineKernels  # noqa: E402
from vidur_specdec.costs.kernels.tables import ATTENTION_KERNELS, GEMM_DTYPES, SYSTEMS, VLLM_VERSION, TableKernels  # noqa: E402
from vidur_specdec.hardware import collectives  # noqa: E402
from vidur_specdec.hardware import custom_all_reduce as CUSTOM_AR  # noqa: E402
from vidur_specdec.hardware.devices import get_device  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "profiles.md"
BEGIN, END = docblock.markers("kernel-error")
SIZES = (1024, 2048, 4096, 8192, 16384)
HEADS = ((32, 8), (16, 2), (32, 4))
GEMM_BANDS = (("GEMM bf16, m ≤ 64", 1, 64), ("GEMM bf16, m 128–1024", 128, 1024),
              ("GEMM bf16, m 2048–8192", 2048, 8192))


def _heads(df):
    return np.logical_or.reduce([(df.num_heads == q) & (df.num_key_value_heads == kv) for q, kv in HEADS])


def ratios(name: str) -> dict:
    """{family: builder / measured ratios} for device ``name``."""
    dev = get_device(name)
    b, t = RooflineKernels(dev), TableKernels(dev)
    out = {}
    gemm = TD.load(t.system, "gemm", "vllm", VLLM_VERSION, "gemm_perf")
    gemm = gemm[gemm.n.isin(SIZES) & gemm.k.isin(SIZES)]
    for dtype, (gd, kernel) in GEMM_DTYPES.items():
        rows = gemm[(gemm.gemm_dtype == gd) & (gemm.kernel_source == kernel)]
        bands = GEMM_BANDS if dtype == "bf16" else (("GEMM fp8, every m", 1, 1 << 30),)
        for label, lo, hi in bands:
            r = rows[(rows.m >= lo) & (rows.m <= hi)]
            out[label] = np.array([b.gemm_ms(x.m, x.k, x.n, dtype) for x in r.itertuples()]) / r.latency.to_numpy()
    dec_kernel, pre_kernel = ATTENTION_KERNELS[name]
    gen = TD.load(t.system, "attention", "vllm", VLLM_VERSION, "generation_attention_perf")
    gen = gen[(gen.kernel_source == dec_kernel) & (gen.window_size == 0) & (gen.head_dim == 128)
              & (gen.kv_cache_dtype == "bfloat16") & _heads(gen) & (gen.batch_size <= 128)
              & (gen.step >= 1023) & (gen.step <= 16383)]
    out["decode attention"] = np.array([float(b.decode_attention_ms(x.batch_size, x.step, x.num_heads,
                                                                     x.num_key_value_heads, 128))
                                        for x in gen.itertuples()]) / gen.latency.to_numpy()
    ctx = TD.load(t.system, "attention", "vllm", VLLM_VERSION, "context_attention_perf")
    ctx = ctx[(ctx.kernel_source == pre_kernel) & (ctx.window_size == 0) & (ctx.head_dim == 128)
              & (ctx.kv_cache_dtype == "bfloat16") & _heads(ctx) & (ctx.batch_size == 1) & (ctx.isl >= 128)]
    out["prefill attention"] = np.array([float(b.prefill_attention_ms(x.isl, 0, x.num_heads,
                                                                       x.num_key_value_heads, 128))
                                         for x in ctx.itertuples()]) / ctx.latency.to_numpy()
    ar = TD.load(t.system, "comm", "vllm", t.ar_version, "custom_allreduce_perf")
    ar = ar[(ar.kernel_source == "vLLM_custom_graph") & (ar.message_size * 2 < CUSTOM_AR.MAX_BYTES)]
    out["custom all-reduce, 2/4/8 GPUs"] = np.array([CUSTOM_AR.custom_all_reduce_ms(dev, x.num_gpus, x.message_size * 2)
                                                     for x in ar.itertuples()]) / ar.latency.to_numpy()
    nccl = TD.load(t.system, "comm", "nccl", t.nccl_version, "nccl_perf")
    nccl = nccl[(nccl.op_name == "all_reduce") & (nccl.nccl_dtype == "half")]
    out["NCCL all-reduce, 2/4/8 GPUs"] = np.array([collectives.all_reduce_ms(dev, x.num_gpus, x.message_size * 2)
                                                   for x in nccl.itertuples()]) / nccl.latency.to_numpy()
    out.update(mla_ratios(name, b, t))
    return out


MLA_OPS = ("attn_pre_proj", "attn_rope", "attn_post_proj")


def mla_ratios(name: str, b: RooflineKernels, t: TableKernels) -> dict:
    """{MLA family: builder block / measured module ratios} for device ``name`` (empty where no rows)."""
    ds = get_model(MLA.TABLE_MODEL)
    out = {"MLA decode block": [], "MLA prefill block": []}
    for tp in (4, 8):
        rows = MLA.try_table(t.system, name, ds, tp)[0]
        if rows is None:
            continue
        gen = rows.measured("mla_generation_module_perf")
        gen = gen[(gen.kernel_source == rows.decode_kernel) & (gen.batch_size <= 128) & (gen.step >= 1023)
                  & (gen.step <= 16383)]
        bs, kv = gen.batch_size.to_numpy(float), gen.step.to_numpy(float)
        ops = b.mlp_op_times(ds, tp, bs)
        pred = sum(ops[o] for o in MLA_OPS) + b.attention_op_times(ds, tp, bs, kv, 0)["attn_decode"]
        out["MLA decode block"].append(pred / gen.latency.to_numpy())
        isl, lat = rows.ctx
        keep = (isl >= 128) & (isl <= 16384)
        isl, lat = isl[keep], lat[keep]
        ops = b.mlp_op_times(ds, tp, isl)
        pred = sum(ops[o] for o in MLA_OPS) + b.attention_op_times(ds, tp, 1, 0, isl)["attn_prefill"]
        out["MLA prefill block"].append(pred / lat)
    return {k: np.concatenate(v) if v else np.array([]) for k, v in out.items()}


def _cell(r: np.ndarray) -> str:
    if len(r) == 0:
        return "–"
    return f"{np.median(r):.2f} ({r.min():.2f}–{r.max():.2f})"


def table() -> str:
    names = sorted(SYSTEMS, key=list(SYSTEMS).index)
    per = {n: ratios(n) for n in names}
    families = list(per[names[0]])
    lines = [BEGIN, "| op family | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    for f in families:
        lines.append(f"| {f} | " + " | ".join(_cell(per[n][f]) for n in names) + " |")
    lines.append(END)
    return "\n".join(lines)


def mla_verify_bound() -> str:
    """docs/model.md's bound on a k = 1 verify block's MLA under-price: the module at twice the per-GPU heads
    (TP 8: 32 against 16) over the module at 16, batch 1-128, 1k-16k cached tokens, per GPU."""
    ds, out = get_model(MLA.TABLE_MODEL), []
    for name in ("h200", "b200"):
        rows = MLA.try_table(SYSTEMS[name], name, ds, 8)[0]
        two = MLA.table(rows.system, name, 32, rows.kv_dtype, rows.gemm_type)
        a, b = (r.measured("mla_generation_module_perf") for r in (rows, two))
        a, b = (x[(x.kernel_source == rows.decode_kernel) & (x.batch_size <= 128) & (x.step >= 1024)
                  & (x.step <= 16384)].set_index(["batch_size", "step"]).latency for x in (a, b))
        r = (b / a).dropna().to_numpy()
        out.append(f"{name}: +{np.median(r) - 1:.0%} ({r.min() - 1:.0%}–{r.max() - 1:.0%})")
    return "MLA verify bound (k = 1, TP 8): " + "; ".join(out)


def main() -> int:
    if "--mla-verify" in sys.argv[1:]:
        print(mla_verify_bound())
        return 0
    return docblock.main(DOC, table())


if __name__ == "__main__":
    sys.exit(main())
