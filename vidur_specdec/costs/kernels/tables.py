"""The ``tables`` kernel source: vLLM's kernel latencies measured by NVIDIA's AIConfigurator.

Tables (``aiconfigurator-core`` 0.12.0, read by :mod:`.table_data`), per GPU of
:data:`SYSTEMS`, collected on vLLM :data:`VLLM_VERSION`:

* ``gemm``: ``gemm_perf`` by m x n x k; ``bf16`` rows (``torch.nn.functional.linear``), for
  ``fp8`` (W8A8 per-tensor) the ``fp8`` rows (``CutlassFP8ScaledMMLinearKernel``), for ``nvfp4``
  (W4A4) the ``nvfp4`` rows of the kernel vLLM runs on the GPU (:data:`NVFP4_GEMM_KERNELS`); each
  projection at its checkpoint's format (:data:`OP_PARTS`, ``architectures/quant.py``). Trilinear in
  (m, n, k); beyond the largest n or k (an LM head's vocabulary shard) proportional.
* ``attention_decode``: ``generation_attention_perf`` by batch x cached tokens (``step``) at the
  layer's per-GPU query heads, KV heads, head size and KV dtype, window 0, with the kernel vLLM
  picks on that GPU (:data:`ATTENTION_KERNELS`). Bilinear; proportional beyond the grid.
* ``attention_prefill``: ``context_attention_perf`` at batch 1 by prompt length L (no cached
  tokens). A chunk of c tokens after kv cached ones is priced ``max(t(c), t(kv + c) - t(kv))``:
  the two full prefills differ by exactly the chunk's attention FLOPs (``4 d q c (kv + c/2)``).
  Linear in L; quadratic beyond the largest L (causal attention's FLOPs).
* ``all_reduce``: as vLLM 0.33 dispatches a tensor-parallel all-reduce: FlashInfer's all-reduce first, up to
  its size limit for the GPU and world size (:func:`vidur_specdec.hardware.custom_all_reduce.flashinfer_applies`),
  read from the TRT-LLM all-reduce rows (``comm/trtllm/<TRTLLM_AR_VERSION>/custom_allreduce_perf``, kernel
  ``TRTLLM``: TensorRT-LLM's one-/two-shot kernels, which FlashInfer's all-reduce ports; timed between compute
  kernels, as in a model); then vLLM's custom all-reduce under CUDA graphs (``custom_allreduce_perf``,
  ``vLLM_custom_graph``) where vLLM uses it (:func:`vidur_specdec.hardware.custom_all_reduce.applies`),
  NCCL's all-reduce (``nccl_perf``) otherwise and for ``engine.all_reduce: nccl``; by world size
  (2, 4, 8) and message size (the tables' ``message_size`` counts bf16 elements). Linear in bytes. A world
  size a GPU's tables lack (GB200: 2 and 4 only, one compute tray) is the roofline's.

What no table covers stays on the calibrated roofline (:mod:`.roofline`) and
:meth:`TableKernels.sources` says so per op family: elementwise kernels (norms,
RoPE, activation, residual add, embedding: no table of the package measures them, its own
``ElementWise`` op is analytical from memory bandwidth), the MoE layer's router and shared
experts (its routed experts come from the fused-MoE table, :mod:`vidur_specdec.costs.fused_moe_table`,
where it holds the deployment's rows), attention shapes the tables lack (e.g. more than 8 KV
heads per GPU in decode), world sizes other than 2, 4, 8. Multi-head latent attention (DeepSeek)
is read from the MLA module tables (:mod:`.mla_table`). Each attention kind is one reader of
:data:`ATTENTION_READERS`. Sliding-window layers are priced at window 0 (full attention), as the
roofline prices them. Times in ms.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Dict, Sequence, Tuple

import numpy as np

from vidur_specdec.architectures import quant
from vidur_specdec.config import ConfigError
from vidur_specdec.config.memo import BoundedMemo
from vidur_specdec.costs import fused_moe_table as FM
from vidur_specdec.costs import all_to_all, moe_layer, routing
from vidur_specdec.costs import sparse_attention as SA
from vidur_specdec.costs.kernels import gdn as GDN
from vidur_specdec.costs.kernels import mla_table as MLA
from vidur_specdec.costs.kernels import table_data as TD
from vidur_specdec.costs.kernels.base import NO_MOE, OP_FAMILIES
from vidur_specdec.costs.kernels.roofline import BUILT, RooflineKernels
from vidur_specdec.costs.profiles.builder import GEMM_OPS, shard
from vidur_specdec.hardware import custom_all_reduce as CUSTOM_AR

TABLES = "tables"
VLLM_VERSION = "0.24.0"  # the vLLM release the GEMM and attention tables were collected on
# device name -> AIConfigurator system folder
SYSTEMS = {"h100": "h100_sxm", "h200": "h200_sxm", "b200": "b200_sxm", "b300": "b300_sxm", "gb200": "gb200",
           "gb300": "gb300", "l40s": "l40s", "rtx_pro_6000": "rtx_pro_6000_server"}
# the custom all-reduce table's vLLM release where it differs from VLLM_VERSION (the newest the package has)
CUSTOM_AR_VERSIONS = {"l40s": "0.22.0"}
# the NCCL table's release per GPU (the newest the package has)
NCCL_VERSIONS = {"l40s": "2.27.3"}
NCCL_DEFAULT = "2.29.2"
# the TRT-LLM all-reduce table's release (the newest the package has): FlashInfer's all-reduce kernels
TRTLLM_AR_VERSION = "1.3.0rc20"
# (decode, prefill) attention kernels vLLM runs by default on the GPU (vllm/platforms/cuda.py, backend
# priorities: FlashAttention 3 on Hopper, FlashInfer's TRT-LLM kernels on Blackwell, FlashAttention 2 on
# Ada and SM120), as the tables name them
_FA3 = ("vllm_flash_attn_fa3", "vllm_flash_attn_fa3")
_TRTLLM = ("vllm_flashinfer_trtllmdecode", "vllm_flashinfer_trtllmprefill")
_FA2 = ("vllm_flash_attn_fa2", "vllm_flash_attn_fa2")
ATTENTION_KERNELS = {"h100": _FA3, "h200": _FA3, "b200": _TRTLLM, "b300": _TRTLLM, "gb200": _TRTLLM,
                     "gb300": _TRTLLM, "l40s": _FA2, "rtx_pro_6000": _FA2}
GEMM_DTYPES = {"bf16": ("bfloat16", "torch.nn.functional.linear"), "fp8": ("fp8", "CutlassFP8ScaledMMLinearKernel")}
# W4A4 NVFP4 GEMMs: the first kernel of vLLM 0.33's _POSSIBLE_NVFP4_KERNELS (model_executor/kernels/linear/
# __init__.py) that runs on the GPU family: FlashInfer CuTe-DSL on SM100/SM103 (nvfp4/flashinfer.py: "requires
# sm_10x"), FlashInfer CUTLASS on SM120 (">= sm_100"); the tables hold exactly these rows. No FP4 tensor cores
# elsewhere (quant.check_device refuses NVFP4 there)
NVFP4_GEMM_KERNELS = {"sm100": "FlashInferCuteDslNvFp4LinearKernel", "sm120": "FlashInferCutlassNvFp4LinearKernel"}
KV_DTYPES = {"bf16": "bfloat16", "fp8": "fp8"}
AR_WORLDS = (2, 4, 8)
#: the part of a model each GEMM op of the per-layer profile belongs to (its format: quant.gemm_dtype)
OP_PARTS = {"attn_pre_proj": "attention", "attn_post_proj": "o_proj", "mlp_up_proj": "dense_mlp",
            "mlp_down_proj": "dense_mlp"}
#: ``kernel_sources.elementwise`` on the tables: why it is the roofline's
ELEMENTWISE_SOURCE = (f"built (no measured table: {TD.PACKAGE} {TD.PACKAGE_VERSION} times norms, RoPE, activation "
                      "and residual add analytically from memory bandwidth)")


def has_tables(device) -> bool:
    """True when :data:`SYSTEMS` maps the device's name to an AIConfigurator system."""
    return getattr(device, "name", None) in SYSTEMS


class TableKernels(RooflineKernels):
    """Kernel times from the measured tables of ``device``'s GPU; the roofline for what they do not cover."""

    name = TABLES

    def __init__(self, device, all_reduce=None) -> None:
        if device.name not in SYSTEMS:
            raise ConfigError(f"profiles: no measured kernel tables for device {device.name!r}; the tables cover "
                              f"{', '.join(SYSTEMS)}; set profiles: built for the analytical roofline")
        self.algorithm = all_reduce if isinstance(all_reduce, str) else "vllm_custom"
        super().__init__(device, all_reduce)
        self.system = SYSTEMS[device.name]
        self.ar_version = CUSTOM_AR_VERSIONS.get(device.name, VLLM_VERSION)
        self.nccl_version = NCCL_VERSIONS.get(device.name, NCCL_DEFAULT)
        for op, table in (("gemm", "gemm_perf"), ("attention", "generation_attention_perf"),
                          ("attention", "context_attention_perf")):
            TD.table_path(self.system, op, "vllm", VLLM_VERSION, table)  # a missing table: one line, now
        TD.table_path(self.system, "comm", "vllm", self.ar_version, "custom_allreduce_perf")
        TD.table_path(self.system, "comm", "nccl", self.nccl_version, "nccl_perf")
        if device.name in CUSTOM_AR.CAPABILITY:  # FlashInfer's all-reduce runs on this GPU
            TD.table_path(self.system, "comm", "trtllm", TRTLLM_AR_VERSION, "custom_allreduce_perf")
        # grids and curves read from the tables, shared by every instance on this GPU (a plan prepares hundreds)
        self._grids: Dict[tuple, object] = TD.derived(("grids", self.system, device.name, self.ar_version,
                                                       self.nccl_version), dict)
        self._ar = BoundedMemo(65536)  # (kind, GPUs, bytes) -> ms
        self._readers: Dict[tuple, object] = {}

    # ------------------------------------------------------------------ naming
    def label(self) -> str:
        return f"{TD.PACKAGE}=={TD.PACKAGE_VERSION}/{self.system}/vllm-{VLLM_VERSION}"

    def identity(self):
        return {"kernels": self.name, "package": TD.PACKAGE_VERSION, "system": self.system, "vllm": VLLM_VERSION,
                "code": _CODE_DIGEST}

    def _measured(self, framework: str = "vllm", version: str = VLLM_VERSION) -> str:
        return f"measured: {self.system}, {framework} {version} ({TD.PACKAGE} {TD.PACKAGE_VERSION})"

    def sources(self, tp: int = 1, specs: Sequence = (), ep: int = 1) -> Dict[str, str]:
        out = {f: BUILT for f in OP_FAMILIES}
        out["elementwise"] = ELEMENTWISE_SOURCE
        curve = self._moe_curve(specs[0], tp, ep)[0] if specs and specs[0].is_moe else None
        if curve is not None:
            out["moe"] = curve.label()
        elif specs and not specs[0].is_moe:
            out["moe"] = NO_MOE
        if specs and specs[0].is_moe:  # only a MoE target's summary names its routing model
            out["moe_routing"] = routing.describe(specs[0])
        out["gemm"] = out["lm_head"] = self._measured()
        if specs:
            out["gemm"] += self._gemm_rows(specs[0])
        readers = [self._attention(s, tp) for s in specs]
        for phase in ("decode", "prefill"):
            labels = [r.label(phase) for r in readers]
            if all(labels):
                out[f"attention_{phase}"] = " + ".join(dict.fromkeys(labels)) or self._measured()
        if specs and SA.applies(specs[0]):  # the target's DSA: decode from its module table (or built); prefill built
            out["attention_decode"] = SA.source(self, specs[0], tp)
            out["attention_prefill"] = BUILT
        if tp > 1 and not self._has_ar_rows("nccl", tp):
            out["all_reduce"] = f"built ({self.system}'s tables hold no {tp}-GPU all-reduce rows)"
        elif tp in AR_WORLDS and self.algorithm != "vllm_custom":
            out["all_reduce"] = self._measured("nccl", self.nccl_version)
        elif tp in AR_WORLDS:
            limit = CUSTOM_AR.flashinfer_limit_bytes(self.device.name, tp)
            fi = (f"trtllm {TRTLLM_AR_VERSION} all-reduce kernels (FlashInfer's, as vLLM 0.33 runs them) up to "
                  f"{limit / 2**20:g} MiB, then " if limit and self._has_ar_rows("flashinfer", tp) else "")
            out["all_reduce"] = (f"measured: {self.system}, {fi}vllm {self.ar_version} custom all-reduce and nccl "
                                 f"{self.nccl_version} ({TD.PACKAGE} {TD.PACKAGE_VERSION})")
        elif tp <= 1:
            out["all_reduce"] = "none (tensor parallel size 1)"
        if specs and getattr(specs[0], "linear_layers", 0):  # only a hybrid model's summary names this family
            out["linear_attention"] = GDN.label(self.system) if GDN.table(self.system, specs[0], tp) else BUILT
        return out

    def _gemm_rows(self, spec) -> str:
        """``; <dtype> <kernel> (<parts>), ...``: the GEMM rows a quantized model's projections read ("" if bf16)."""
        parts = ("attention", "o_proj") + (("dense_mlp",) if spec.num_layers > spec.num_moe_layers else ())
        by: Dict[str, list] = {}
        for part in parts:
            by.setdefault(quant.gemm_dtype(spec, part), []).append(part)
        if set(by) == {"bf16"}:
            return ""
        by.setdefault("bf16", []).append("lm_head")
        rows = []
        for dtype in sorted(by):
            try:
                gd, kernel = self._gemm_kernel(dtype)
            except ConfigError:
                gd, kernel = dtype, "no rows"
            rows.append(f"{gd} {kernel} ({', '.join(by[dtype])})")
        return "; GEMM rows: " + ", ".join(rows)

    def linear_attention_ms(self, spec, tp: int, decode_groups, prefill_chunks) -> float:
        """The gated-delta-net layer from vLLM's ``gdn_perf`` table where it holds the shape (:mod:`.gdn`)."""
        t = GDN.table(self.system, spec, tp)
        if t is None:
            return super().linear_attention_ms(spec, tp, decode_groups, prefill_chunks)
        return t.decode_ms(decode_groups) + t.prefill_ms(sum(prefill_chunks))

    # ------------------------------------------------------------------ MoE
    def _moe_curve(self, spec, tp: int, ep: int):
        """(measured routed-expert curve or None, why not) for ``spec``'s MoE layers at ``tp`` / ``ep``."""
        return FM.try_curve(self.system, spec, int(tp), int(ep))

    def fused_moe_ms(self, spec, tp: int, groups: Sequence[int], ep: int = 1,
                     redundant: int = 0, scope: str = "all", dispatched: bool = False) -> Tuple[float, float]:
        """The MoE layer with its routed experts from vLLM's fused-MoE table (:mod:`vidur_specdec.costs.fused_moe_table`)
        where it holds the deployment's rows; router and shared experts on the roofline. ``dispatched``: the
        EP-1 table at the busiest GPU's received rows (:func:`vidur_specdec.costs.moe_layer.moe_layer_ms`)."""
        curve = self._moe_curve(spec, tp, 1 if dispatched else ep)[0]
        return moe_layer.moe_layer_ms(spec, self.fields, tp, groups, ep=ep, routed=curve, redundant=redundant,
                                      scope=scope, dispatched=dispatched)

    def all_to_all_ms(self, spec, mode: str, tokens: float, ep: int) -> Tuple[float, float]:
        """DeepEP dispatch and combine from the measured tables (:mod:`vidur_specdec.costs.all_to_all`)."""
        return all_to_all.layer_ms(self.system, spec, mode, tokens, ep)

    def all_to_all_source(self, spec, ep: int) -> str:
        """The tables behind :meth:`all_to_all_ms` at ``ep``, measured and scaled (:func:`all_to_all.describe`)."""
        return all_to_all.describe(self.system, spec, ep)

    def warnings(self, tp: int = 1, specs: Sequence = (), ep: int = 1):
        out = [w for s in specs if not SA.applies(s) for w in self._attention(s, tp).warnings()]
        if specs and getattr(specs[0], "linear_layers", 0) and GDN.table(self.system, specs[0], tp) is None:
            out.append(f"no gdn_perf rows for {specs[0].name}'s linear-attention shape at tensor_parallel_size "
                       f"{tp} on {self.system}; its linear-attention layers are priced on the roofline")
        if not specs or not specs[0].is_moe:
            return out
        why = self._moe_curve(specs[0], tp, ep)[1]
        out += [f"{why}; the MoE layers are priced on the builder's roofline"] if why else []
        mtp = quant.mtp_spec(specs[0])
        if specs[0].mtp_layers and mtp is not specs[0] and self._moe_curve(mtp, tp, ep)[0] is None:
            out.append(f"{specs[0].name} keeps its MTP module in bf16 (its checkpoint's exclude list) and "
                       f"{self.system}'s fused-MoE table has no bf16 rows for its experts; an MTP drafter's MoE "
                       "layer is priced on the builder's roofline")
        return out

    # ------------------------------------------------------------------ GEMM
    def _gemm_grid(self, dtype: str):
        key = ("gemm", dtype)
        g = self._grids.get(key)
        if g is None:
            gd, kernel = self._gemm_kernel(dtype)
            df = TD.load(self.system, "gemm", "vllm", VLLM_VERSION, "gemm_perf")
            df = df[(df.gemm_dtype == gd) & (df.kernel_source == kernel)]
            if df.empty:
                raise ConfigError(f"quantization: {self.system}'s gemm_perf table has no {gd} rows of {kernel} "
                                  f"({TD.PACKAGE} {TD.PACKAGE_VERSION})")
            ms, ns, ks = (np.sort(df[c].unique()).astype(float) for c in ("m", "n", "k"))
            z = np.full((len(ms), len(ns), len(ks)), np.nan)
            z[np.searchsorted(ms, df.m.to_numpy(float)), np.searchsorted(ns, df.n.to_numpy(float)),
              np.searchsorted(ks, df.k.to_numpy(float))] = df.latency.to_numpy(float)
            for j in range(len(ns)):  # a few holes: filled along m from the same (n, k) column
                TD.fill_holes(z[:, j, :].T, ms)
            g = self._grids[key] = (ms, ns, ks, z)
        return g

    def _gemm_kernel(self, dtype: str) -> Tuple[str, str]:
        """(the tables' gemm_dtype, kernel_source) vLLM runs a ``dtype`` GEMM with on this GPU."""
        if dtype == "nvfp4":
            kernel = NVFP4_GEMM_KERNELS.get(FM.FAMILIES.get(self.system, ""))
            if kernel is None:
                raise ConfigError(f"quantization: {self.system} has no FP4 tensor cores; NVFP4 GEMMs are priced on "
                                  f"{', '.join(s for s, f in FM.FAMILIES.items() if f in NVFP4_GEMM_KERNELS)}")
            return "nvfp4", kernel
        return GEMM_DTYPES["fp8" if dtype == "fp8" else "bf16"]

    def gemm_ms(self, m, k: int, n: int, dtype: str = "bf16"):
        ms, ns, ks, z = self._gemm_grid(dtype if dtype in ("fp8", "nvfp4") else "bf16")
        i0, i1, wn, sn = TD.bracket(float(n), ns)
        j0, j1, wk, sk = TD.bracket(float(k), ks)
        col = ((1 - wn) * ((1 - wk) * z[:, i0, j0] + wk * z[:, i0, j1])
               + wn * ((1 - wk) * z[:, i1, j0] + wk * z[:, i1, j1])) * sn * sk
        t = TD.interp1(m, ms, col)
        return float(t) if np.ndim(t) == 0 else t

    # ------------------------------------------------------------------ attention
    def _attention(self, spec, tp: int):
        """The reader of :data:`ATTENTION_READERS` for ``spec``'s attention kind at ``tp`` (cached)."""
        key = (spec, int(tp))
        r = self._readers.get(key)
        if r is None:
            r = self._readers[key] = ATTENTION_READERS[attention_kind(spec)](self, spec, int(tp))
        return r

    @staticmethod
    def _attention_shape(spec, tp: int):
        """(q heads, KV heads, head size, KV dtype) per GPU of a multi-head (GQA) attention layer."""
        _, hd, qh, kvh, _ = shard(spec, tp)
        return qh, kvh, hd, "fp8" if getattr(spec, "kv_cache_dtype", "") == "fp8" else "bf16"

    def _attention_rows(self, table: str, qh: int, kvh: int, hd: int, kv_dtype: str):
        df = TD.load(self.system, "attention", "vllm", VLLM_VERSION, table)
        kernel = ATTENTION_KERNELS[self.device.name][0 if table.startswith("generation") else 1]
        return df[(df.kernel_source == kernel) & (df.num_heads == qh) & (df.num_key_value_heads == kvh)
                  & (df.head_dim == hd) & (df.kv_cache_dtype == KV_DTYPES[kv_dtype]) & (df.window_size == 0)]

    def _covers(self, table: str, qh: int, kvh: int, hd: int, kv_dtype: str) -> bool:
        return self._attention_grid(table, qh, kvh, hd, kv_dtype) is not None

    def _attention_grid(self, table: str, qh: int, kvh: int, hd: int, kv_dtype: str):
        key = (table, qh, kvh, hd, kv_dtype)
        if key not in self._grids:
            rows = self._attention_rows(table, qh, kvh, hd, kv_dtype)
            if table.startswith("generation"):
                self._grids[key] = TD.dense_grid(rows, "batch_size", "step") if len(rows) else None
            else:
                one = rows[rows.batch_size == 1].sort_values("isl")
                self._grids[key] = (one.isl.to_numpy(float), one.latency.to_numpy(float)) if len(one) else None
        return self._grids[key]

    def decode_attention_ms(self, bs, kv, q_heads: int, kv_heads: int, head_dim: int, kv_dtype: str = "bf16"):
        g = self._attention_grid("generation_attention_perf", q_heads, kv_heads, head_dim, kv_dtype)
        if g is None:
            return super().decode_attention_ms(bs, kv, q_heads, kv_heads, head_dim, kv_dtype)
        return TD.grid2(bs, kv, *g)

    def _full_prefill(self, length, g):
        length = np.asarray(length, dtype=float)
        return np.where(length > 0, TD.interp1(length, g[0], g[1], power=2.0), 0.0)

    def prefill_attention_ms(self, chunk, kv, q_heads: int, kv_heads: int, head_dim: int, kv_dtype: str = "bf16"):
        g = self._attention_grid("context_attention_perf", q_heads, kv_heads, head_dim, kv_dtype)
        if g is None:
            return super().prefill_attention_ms(chunk, kv, q_heads, kv_heads, head_dim, kv_dtype)
        c, kv = np.asarray(chunk, dtype=float), np.asarray(kv, dtype=float)
        own = self._full_prefill(c, g)
        return np.maximum(own, self._full_prefill(kv + c, g) - self._full_prefill(kv, g))

    # ------------------------------------------------------------------ collectives
    def _ar_curve(self, kind: str, world: int):
        key = ("ar", kind, world)
        g = self._grids.get(key)
        if g is None:
            if kind == "custom":
                df = TD.load(self.system, "comm", "vllm", self.ar_version, "custom_allreduce_perf")
                df = df[(df.kernel_source == "vLLM_custom_graph") & (df.num_gpus == world)]
            elif kind == "flashinfer":
                df = TD.load(self.system, "comm", "trtllm", TRTLLM_AR_VERSION, "custom_allreduce_perf")
                df = df[(df.kernel_source == "TRTLLM") & (df.allreduce_dtype == "bfloat16") & (df.num_gpus == world)]
            else:
                df = TD.load(self.system, "comm", "nccl", self.nccl_version, "nccl_perf")
                df = df[(df.op_name == "all_reduce") & (df.nccl_dtype == "half") & (df.num_gpus == world)]
            df = df.sort_values("message_size")
            g = self._grids[key] = (df.message_size.to_numpy(float) * 2.0, df.latency.to_numpy(float))  # bytes
        return g

    def _table_ar(self, kind: str, world: int, nbytes: int) -> float:
        key = (kind, world, nbytes)
        t = self._ar.get(key)
        if t is None:
            t = self._ar.put(key, float(TD.interp1(float(nbytes), *self._ar_curve(kind, world))))
        return t

    def _has_ar_rows(self, kind: str, world: int) -> bool:
        """Whether the ``kind`` all-reduce table (``custom``, ``flashinfer``, ``nccl``) holds ``world``-GPU rows."""
        return world in AR_WORLDS and len(self._ar_curve(kind, world)[0]) >= 2

    def all_reduce_ms(self, world: int, nbytes: int) -> float:
        """vLLM 0.33's dispatch: FlashInfer's all-reduce up to its limit, then the custom one, then NCCL."""
        if world <= 1 or nbytes <= 0:
            return 0.0
        if not self._has_ar_rows("nccl", world):
            return super().all_reduce_ms(world, nbytes)
        if self.algorithm == "vllm_custom":
            if CUSTOM_AR.flashinfer_applies(self.device.name, world, nbytes) and self._has_ar_rows("flashinfer", world):
                return self._table_ar("flashinfer", world, int(nbytes))
            if CUSTOM_AR.applies(world, nbytes) and self._has_ar_rows("custom", world):
                return self._table_ar("custom", world, int(nbytes))
        return self._table_ar("nccl", world, int(nbytes))

    def nccl_all_reduce_ms(self, world: int, nbytes: int) -> float:
        if world <= 1 or nbytes <= 0:
            return 0.0
        if not self._has_ar_rows("nccl", world):
            return super().nccl_all_reduce_ms(world, nbytes)
        return self._table_ar("nccl", world, int(nbytes))

    # ------------------------------------------------------------------ per-layer profiles
    def mlp_op_times(self, spec, tp: int, num_tokens):
        out = super().mlp_op_times(spec, tp, num_tokens)  # elementwise ops: the roofline
        h, hd, qh, kvh, ffn = shard(spec, tp)
        shapes = {"mlp_up_proj": [(h, 2 * ffn)], "mlp_down_proj": [(ffn, h)],
                  **self._attention(spec, tp).projections()}
        t = np.asarray(num_tokens, dtype=float)
        for op in GEMM_OPS:
            dtype = quant.gemm_dtype(spec, OP_PARTS[op])  # each projection at its checkpoint format
            first, *rest = shapes[op]
            out[op] = self.gemm_ms(t, *first, dtype)
            for k, n in rest:
                out[op] = out[op] + self.gemm_ms(t, k, n, dtype)
        return out

    def attention_op_times(self, spec, tp: int, batch_size, kv_cache_size, prefill_chunk_size):
        out = super().attention_op_times(spec, tp, batch_size, kv_cache_size, prefill_chunk_size)
        if SA.applies(spec):  # DeepSeek sparse attention: priced by super() (costs/sparse_attention.py, its tables)
            return out
        bs, kv, chunk = np.broadcast_arrays(*(np.asarray(a, dtype=float) for a in
                                              (batch_size, kv_cache_size, prefill_chunk_size)))
        return self._attention(spec, tp).op_times(out, bs, kv, chunk)


class MHAAttention:
    """Multi-head (GQA) attention from ``generation_attention_perf`` / ``context_attention_perf`` where they
    hold the layer's per-GPU shape; the roofline's figures otherwise."""

    def __init__(self, kernels: TableKernels, spec, tp: int) -> None:
        self.kernels, self.shape, self.hidden = kernels, kernels._attention_shape(spec, tp), spec.hidden_size

    def projections(self):
        """``attn_pre_proj`` (fused QKV) and ``attn_post_proj`` (o_proj) as (k, n) GEMMs per GPU."""
        qh, kvh, hd, _ = self.shape
        h = self.hidden
        return {"attn_pre_proj": [(h, (qh + 2 * kvh) * hd)], "attn_post_proj": [(qh * hd, h)]}

    def label(self, phase: str):
        table = "generation_attention_perf" if phase == "decode" else "context_attention_perf"
        return self.kernels._measured() if self.kernels._covers(table, *self.shape) else None

    def warnings(self):
        return []

    def op_times(self, out: dict, bs, kv, chunk) -> dict:
        qh, kvh, hd, kvd = self.shape
        pre = chunk > 0
        dec = self.kernels.decode_attention_ms(np.where(pre, 1.0, bs), kv, qh, kvh, hd, kvd)
        pf = self.kernels.prefill_attention_ms(np.where(pre, chunk, 1.0), kv, qh, kvh, hd, kvd)
        out["attn_decode"] = np.where(pre, np.nan, dec)
        out["attn_prefill"] = np.where(pre, pf, np.nan)
        return out


#: attention kind -> its table reader (``reader(kernels, spec, tp)``: ``label``, ``warnings``, ``projections``,
#: ``op_times``)
ATTENTION_READERS = {"mha": MHAAttention, "mla": MLA.MLAAttention}


def attention_kind(spec) -> str:
    """``mla`` for multi-head latent attention (``kv_lora_rank`` > 0), else ``mha``."""
    return "mla" if MLA.is_mla(spec) else "mha"


# what a profile priced by the tables depends on beyond the tables themselves (its cache key)
_CODE_DIGEST = hashlib.sha256(b"".join(Path(__file__).with_name(n).read_bytes() for n in
                                       ("tables.py", "mla_table.py", "gdn.py", "table_data.py"))).hexdigest()[:16]
