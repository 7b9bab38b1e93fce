"""Multi-head latent attention (DeepSeek-V3/R1) from vLLM's measured MLA module tables (AIConfigurator).

``aiconfigurator-core`` 0.12.0 ships, per GPU, vLLM 0.24.0 timings of one whole
``DeepseekV2MLAAttention`` forward (``mla/vllm/0.24.0``; collector ``collector/vllm/collect_mla_module.py``):
the fused q_a/kv_a down-projection, the q_a/kv_a norms, q_b, RoPE and the KV-cache write,
the absorbed ``W_UK``/``W_UV`` batched GEMMs (decode) or the kv_b up-projection (prefill),
the attention kernel and o_proj. ``mla_generation_module_perf``: ``batch_size`` requests with
one query token each over ``step`` cached tokens; ``mla_context_module_perf``: ``batch_size``
prompts of ``isl`` tokens, nothing cached. AIConfigurator's own vLLM backend prices the MLA
block from exactly these rows (``sdk/models/deepseek.py``: ``MLAModule`` as the primary of the
``context_mla_block`` / ``generation_mla_block`` fallbacks, replacing the projections and the
attention); its granular fallback for vLLM reads no ``mla_bmm`` rows either (those feed the
TRT-LLM and SGLang graphs), so the ``mla_bmm`` table is not read here: its BMMs are inside the
module rows.

The simulator splits a layer into per-token ops (``attn_pre_proj``, ``attn_rope``,
``attn_post_proj``, priced by the run's kernel source) and attention
(``attn_decode`` per batch x context, ``attn_prefill`` per chunk). So that the block sums to the
measured module, attention is the module row less those three ops at the row's token count
(``batch_size`` decode tokens, ``isl`` prompt tokens), computed at the table's own points and
interpolated as :mod:`.tables` interpolates attention: bilinear in (batch, ``step``); a prefill
chunk after cached tokens is ``max(M(c), M(kv + c) - M(kv))`` of the module M (linear in ``isl``;
beyond the last row its per-token part proportional, the rest quadratic), less those ops at the
chunk's tokens. The simulator's projections are vLLM's MLA GEMMs (:meth:`MLAAttention.projections`).

Rows read (per GPU, at the per-GPU heads ``num_heads / tp``, the KV dtype, the GEMM dtype of the
q/kv projections' format: ``fp8_block`` for fp8 DeepSeek, ``nvfp4`` for NVFP4 ones, ``bfloat16`` otherwise — an
NVFP4 DeepSeek whose checkpoint keeps q/kv bf16 reads the bf16 rows, as AIConfigurator does for such mixed
checkpoints, ``sdk/models/deepseek.py``; ``mla_dtype`` bfloat16):
decode from the first kernel of vLLM 0.33's MLA priority list for the GPU (``vllm/platforms/cuda.py``,
``use_mla``) that the collector ran at that KV dtype (:data:`DECODE_KERNELS`); prefill from
FlashAttention (``vllm/platforms/interface.py``, ``get_mla_prefill_backend_cls``: the only
prefill backend on Hopper and older, the first for DeepSeek's head sizes on Blackwell), except
that a prompt no longer than the decode kernel's ``reorder_batch_threshold`` runs on the decode
path (:data:`DECODE_PATH_TOKENS`), as vLLM reorders it. Times in ms.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Dict, Optional, Tuple

import numpy as np

from vidur_specdec.architectures import quant
from vidur_specdec.costs.kernels import table_data as TD

MLA_VERSION = "0.24.0"  # the vLLM release the MLA module tables were collected on
TABLE_MODEL = "deepseek-ai/DeepSeek-V3"
# the layer shape the module rows were collected at (DeepSeek-V3's config.json); other MLA shapes are not covered
TABLE_DIMS = {"hidden_size": 7168, "kv_lora_rank": 512, "q_lora_rank": 1536, "qk_rope_head_dim": 64,
              "head_dim": 192, "v_head_dim": 128}
# vLLM 0.33's MLA decode priorities (vllm/platforms/cuda.py, _get_backend_priorities, use_mla): SM100 first
# FlashInfer MLA; SM90 and older FlashAttention MLA, then FlashMLA; SM120 Triton MLA
_SM100 = ("FLASHINFER_MLA", "TOKENSPEED_MLA", "CUTLASS_MLA", "FLASH_ATTN_MLA", "FLASHMLA", "TRITON_MLA")
_SM90 = ("FLASH_ATTN_MLA", "FLASHMLA", "FLASHINFER_MLA", "TRITON_MLA")
DECODE_KERNELS = {"h100": _SM90, "h200": _SM90, "b200": _SM100, "b300": _SM100, "gb200": _SM100,
                  "gb300": _SM100, "l40s": _SM90, "rtx_pro_6000": ("TRITON_MLA",)}
PREFILL_KERNEL = "FLASH_ATTN"
# prompts up to this many tokens run on the decode kernel (its reorder_batch_threshold: flashattn_mla.py 512,
# flashmla.py 128; mla_attention.py's default 1 for the others)
DECODE_PATH_TOKENS = {"FLASH_ATTN_MLA": 512, "FLASHMLA": 128}
# the simulator's per-token ops that the module rows also contain
MODULE_OPS = ("attn_pre_proj", "attn_rope", "attn_post_proj")
# the module rows' gemm_type for the format of the layer's q/kv projections (quant.gemm_dtype "attention")
GEMM_TYPES = {"fp8": "fp8_block", "bf16": "bfloat16", "nvfp4": "nvfp4"}
KV_TYPES = {"fp8": "fp8", "": "bfloat16"}


class MLATableError(Exception):
    """The tables do not cover this MLA layer (the message says why, in one line)."""


def is_mla(spec) -> bool:
    """True for a multi-head latent attention layer (``kv_lora_rank`` > 0)."""
    return bool(getattr(spec, "kv_lora_rank", 0))


class MLAModuleTable:
    """The measured MLA module rows of one GPU at one (per-GPU heads, KV dtype, GEMM dtype)."""

    def __init__(self, system: str, device: str, heads: int, kv_dtype: str, gemm_type: str) -> None:
        self.system, self.heads, self.kv_dtype, self.gemm_type = system, heads, kv_dtype, gemm_type
        gen = self.measured("mla_generation_module_perf")
        self.decode_kernel = next((k for k in DECODE_KERNELS[device] if (gen.kernel_source == k).any()), None)
        if self.decode_kernel is None:
            raise MLATableError(f"no MLA decode rows for {system} at {heads} heads, KV {kv_dtype}, GEMM {gemm_type}")
        self.gen = TD.dense_grid(gen[gen.kernel_source == self.decode_kernel], "batch_size", "step")
        ctx = self.measured("mla_context_module_perf")
        ctx = ctx[ctx.batch_size == 1]
        short = DECODE_PATH_TOKENS.get(self.decode_kernel, 1)
        ctx = ctx[((ctx.kernel_source == self.decode_kernel) & (ctx.isl <= short))
                  | ((ctx.kernel_source == PREFILL_KERNEL) & (ctx.isl > short))].sort_values("isl")
        if ctx.empty or ctx.isl.duplicated().any():
            raise MLATableError(f"no single MLA prefill curve for {system} at {heads} heads, KV {kv_dtype}")
        self.ctx = (ctx.isl.to_numpy(float), ctx.latency.to_numpy(float))

    def measured(self, table: str):
        """The rows of ``table`` (``mla_generation_module_perf`` / ``mla_context_module_perf``) at this shape."""
        df = TD.load(self.system, "mla", "vllm", MLA_VERSION, table)
        return df[(df.model == TABLE_MODEL) & (df.num_heads == self.heads) & (df.kv_cache_dtype == self.kv_dtype)
                  & (df.gemm_type == self.gemm_type) & (df.mla_dtype == "bfloat16")]

    def generation_ms(self, bs, kv):
        """The module (ms) for ``bs`` requests, one query token each, over ``kv`` cached tokens."""
        return TD.grid2(bs, kv, *self.gen)

    def context_ms(self, isl):
        """The module (ms) for one ``isl``-token prompt, nothing cached."""
        return TD.interp1(isl, *self.ctx, power=2.0)

    def label(self) -> str:
        return (f"measured: {self.system}, vllm {MLA_VERSION} ({TD.PACKAGE} {TD.PACKAGE_VERSION}); "
                f"MLA module {self.decode_kernel} / {PREFILL_KERNEL}")


@lru_cache(maxsize=64)
def table(system: str, device: str, heads: int, kv_dtype: str, gemm_type: str) -> MLAModuleTable:
    """The module rows (cached); a missing table file is a ConfigError naming it."""
    return MLAModuleTable(system, device, heads, kv_dtype, gemm_type)


def try_table(system: str, device: str, spec, tp: int) -> Tuple[Optional[MLAModuleTable], str]:
    """(rows, "") when the tables cover ``spec``'s MLA layers at ``tp``; else (None, the one-line reason)."""
    off = [f"{k} {getattr(spec, k, None)}" for k, v in TABLE_DIMS.items() if getattr(spec, k, None) != v]
    if off:
        return None, f"MLA rows are {TABLE_MODEL}'s shape; {spec.name} has {', '.join(off)}"
    fmt = quant.gemm_dtype(spec, "attention")
    gemm = GEMM_TYPES.get(fmt)
    if gemm is None:
        return None, f"no MLA module rows for {fmt} projections"
    try:
        return table(system, device, spec.num_heads // tp, KV_TYPES[getattr(spec, "kv_cache_dtype", "") or ""],
                     gemm), ""
    except MLATableError as e:
        return None, str(e)


class MLAAttention:
    """MLA attention of ``spec`` at ``tp`` priced from the module rows, less the module ops ``kernels`` prices
    per token (:data:`MODULE_OPS`); ``rows`` None: not covered (``why``), the roofline prices it."""

    def __init__(self, kernels, spec, tp: int) -> None:
        self.kernels, self.spec, self.tp = kernels, spec, int(tp)
        self.rows, self.why = try_table(kernels.system, kernels.device.name, spec, self.tp)
        self._grids: Dict[str, tuple] = {}

    def label(self, phase: str) -> Optional[str]:
        """``kernel_sources`` for ``phase`` (``decode`` / ``prefill``) when covered, else None."""
        return self.rows.label() if self.rows is not None else None

    def projections(self):
        """vLLM's MLA projection GEMMs per GPU as (k, n) (``deepseek_v2.py``; as AIConfigurator's granular
        graph): ``attn_pre_proj`` the replicated down-projection (fused q_a + kv_a: hidden -> q_lora + kv_lora
        + rope; without q_lora, q_proj and kv_a) and q_b (q_lora -> heads x qk head size); ``attn_post_proj``
        o_proj (heads x v_head_dim -> hidden). kv_b (prefill) and the absorbed BMMs (decode) stay inside the
        attention op (the module less these)."""
        s, heads = self.spec, self.spec.num_heads // self.tp
        h, latent = s.hidden_size, s.kv_lora_rank + s.qk_rope_head_dim
        if s.q_lora_rank:
            pre = [(h, s.q_lora_rank + latent), (s.q_lora_rank, heads * s.head_dim)]
        else:
            pre = [(h, heads * s.head_dim + latent)]
        return {"attn_pre_proj": pre, "attn_post_proj": [(heads * s.v_head_dim, h)]}

    def warnings(self):
        return [f"{self.why}; MLA attention is priced on the builder's roofline"] if self.rows is None else []

    def _module_ops(self, tokens: np.ndarray) -> np.ndarray:
        """The module's own per-token ops at its rows' GEMM dtype (o_proj at the q/kv projections' format: an
        NVFP4 DeepSeek keeps q/kv bf16 and o_proj NVFP4, read from the bf16 rows; the run prices its own o_proj)."""
        ops = self.kernels.mlp_op_times(quant.module_spec(self.spec), self.tp, tokens)
        return sum(np.asarray(ops[op], dtype=float) for op in MODULE_OPS)

    def _attention_grids(self):
        if not self._grids:
            bs, steps, z = self.rows.gen
            self._grids["decode"] = (bs, steps, np.maximum(z - self._module_ops(bs)[:, None], 0.0))
            isl, lat = self.rows.ctx
            ops = self._module_ops(isl)
            self._grids["prefill"] = (isl, lat - ops, ops)
        return self._grids

    def decode_ms(self, bs, kv):
        """Attention (ms) of ``bs`` one-token requests over ``kv`` cached tokens: the module less its per-token ops."""
        return TD.grid2(bs, kv, *self._attention_grids()["decode"])

    def prefill_block_ms(self, chunk, kv):
        """The module (ms) for one ``chunk``-token piece after ``kv`` cached tokens: ``max(M(c), M(kv + c) - M(kv))``
        of the full-prompt rows, whose per-token part extrapolates proportionally beyond the last row and the
        rest quadratically (causal attention)."""
        isl, rest, ops = self._attention_grids()["prefill"]

        def full(length):
            length = np.asarray(length, dtype=float)
            m = TD.interp1(length, isl, rest, power=2.0) + TD.interp1(length, isl, ops)
            return np.where(length > 0, m, 0.0)

        c, kv = np.asarray(chunk, dtype=float), np.asarray(kv, dtype=float)
        return np.maximum(full(c), full(kv + c) - full(kv))

    def prefill_ms(self, chunk, kv):
        """Attention (ms) of one ``chunk``-token piece after ``kv`` cached tokens: the module less its per-token ops."""
        return np.maximum(self.prefill_block_ms(chunk, kv) - self._module_ops(np.asarray(chunk, dtype=float)), 0.0)

    def op_times(self, out: dict, bs, kv, chunk) -> dict:
        """``out`` (the roofline's attention ops) with ``attn_decode`` / ``attn_prefill`` from the rows."""
        if self.rows is None:
            return out
        pre = chunk > 0
        out["attn_decode"] = np.where(pre, np.nan, self.decode_ms(np.where(pre, 1.0, bs), kv))
        out["attn_prefill"] = np.where(pre, self.prefill_ms(np.where(pre, chunk, 1.0), kv), np.nan)
        return out
