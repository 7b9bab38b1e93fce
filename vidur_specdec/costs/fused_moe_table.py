"""Routed-expert time of one MoE layer from vLLM's measured fused-MoE kernel tables.

The tables are ``aiconfigurator-core`` 0.12.0's (NVIDIA AIConfigurator; Apache-2.0)
``systems/data/<gpu>/moe/vllm/0.24.0/moe_perf.parquet``: the latency (ms, per GPU)
of vLLM's fused-MoE experts call (gate_up grouped GEMM, activation, down grouped
GEMM, the kernel's own permute / align / finalize; no router GEMM, no shared
experts) by ``num_tokens`` x hidden x expert width x top-k x experts x
``moe_tp_size`` x ``moe_ep_size`` x weight format x kernel x routing distribution.

Read here (verified on the tables, not assumed):

* ``inter_size`` is the whole expert width; ``moe_tp_size`` splits it (vLLM's
  default without expert parallelism) and ``moe_ep_size`` splits the experts.
* EP rows are the latency of ONE GPU and ``num_tokens`` is the step's whole token
  count, which every GPU sees (vLLM at data-parallel size 1 runs no all-to-all:
  ``FusedMoEParallelConfig.use_all2all_kernels`` needs dp > 1, vLLM 0.33.0
  ``model_executor/layers/fused_moe/config.py``). On H100 bf16 Qwen3-30B-A3B at
  16,384 tokens, EP 128 (one expert per GPU) still takes 0.89 ms against 2.91 at
  EP 1: the per-token routing work scales with the global count.
* ``balanced`` routing is deterministic: n tokens wake exactly ``min(E, n k)``
  experts (latency is linear in n up to ``n = E / k``, then flat until compute
  shows), so a row prices the weights of a known number of experts and the
  routing model reads it by the experts a step wakes
  (:func:`vidur_specdec.costs.moe_layer.routed_table_ms`); ``power_law_<a>`` rows
  draw expert loads from a density x^-a and are not read (scripts/routing_error.py
  holds the reading against them).

The kernel is the one vLLM 0.33.0's MoE oracle picks for the GPU family, format
and expert parallelism (:data:`KERNELS`, each entry citing its file); a missing
table, shape, TP/EP or distribution is one :class:`MoeTableError` line naming it.
Token counts between the table's points interpolate linearly; beyond its largest
(16,384) they extrapolate along its last segment (compute-bound, linear in tokens).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Dict, Optional, Tuple

import numpy as np

from vidur_specdec.config.errors import ConfigError
from vidur_specdec.costs.kernels import table_data as TD

VLLM_TABLE_VERSION = "0.24.0"  # the vLLM release the tables were collected on (the newest in 0.12.0)

#: AIConfigurator system -> the CUDA capability family vLLM's MoE oracle tests (``is_device_capability(90)``,
#: ``is_device_capability_family(100)`` ...): Hopper SM90, Blackwell datacenter SM100/SM103 (family 100),
#: Ada SM89, Blackwell RTX SM120. The A100 is left out on purpose: its only table is vLLM 0.14.0's, and
#: the A100 example keeps its shipped profile and the builder's MoE layer.
FAMILIES: Dict[str, str] = {"h100_sxm": "sm90", "h200_sxm": "sm90", "b200_sxm": "sm100", "b300_sxm": "sm100",
                            "gb200": "sm100", "gb300": "sm100", "l40s": "sm89", "rtx_pro_6000_server": "sm120"}

TABLE_DTYPE = {"": "bfloat16", "bf16": "bfloat16", "fp8": "fp8_block", "mxfp4": "w4a16_mxfp4",
               "modelopt_fp4": "nvfp4", "compressed-tensors": "int4_wo"}

_ORACLE = "vLLM 0.33.0 model_executor/layers/fused_moe/oracle/"


@dataclass(frozen=True)
class Kernel:
    """One fused-MoE kernel: the tables' ``kernel_source`` and why vLLM picks it."""

    kernel_source: str
    name: str  # short, for summary.json
    why: str  # the vLLM source that makes the choice


#: (format, capability family, expert parallel?) -> the kernel vLLM 0.33.0 picks; register new ones here.
KERNELS: Dict[Tuple[str, str, bool], Kernel] = {}


def register_kernel(fmt: str, families: Tuple[str, ...], ep: Tuple[bool, ...], kernel: Kernel) -> None:
    for fam in families:
        for e in ep:
            KERNELS[(fmt, fam, e)] = kernel


_BOTH = (False, True)
register_kernel("bfloat16", ("sm90", "sm89"), _BOTH, Kernel(
    "vllm_unquantizedfusedmoe_triton_tritonexperts", "triton",
    _ORACLE + "unquantized.py _get_priority_backends: on SM90 FlashInfer goes behind Triton; "
    "FlashInfer TRTLLM/CUTLASS do not run on SM89"))
register_kernel("bfloat16", ("sm100",), _BOTH, Kernel(
    "vllm_unquantizedfusedmoe_flashinfer_trtllm_trtllmbf16experts", "flashinfer_trtllm",
    _ORACLE + "unquantized.py: FLASHINFER_TRTLLM first on CUDA; experts/trtllm_bf16_moe.py: capability family 100"))
register_kernel("bfloat16", ("sm120",), _BOTH, Kernel(
    "vllm_unquantizedfusedmoe_flashinfer_cutlass_flashinferexperts", "flashinfer_cutlass",
    _ORACLE + "unquantized.py: TRTLLM needs family 100; experts/flashinfer_cutlass_moe.py runs on family 120"))
register_kernel("fp8_block", ("sm90",), (False,), Kernel(
    "vllm_fp8moe_triton_tritonexperts", "triton",
    _ORACLE + "fp8.py _get_priority_backends: on Hopper, block fp8 prefers Triton without expert parallelism"))
register_kernel("fp8_block", ("sm90",), (True,), Kernel(
    "vllm_fp8moe_flashinfer_cutlass_flashinferexperts", "flashinfer_cutlass",
    _ORACLE + "fp8.py _get_priority_backends: on Hopper, block fp8 prefers FlashInfer CUTLASS with expert parallelism"))
register_kernel("fp8_block", ("sm100",), _BOTH, Kernel(
    "vllm_fp8moe_flashinfer_trtllm_trtllmfp8expertsmonolithic", "flashinfer_trtllm",
    _ORACLE + "fp8.py: FLASHINFER_TRTLLM first; experts/trtllm_fp8_moe.py: family 100, block fp8"))
register_kernel("fp8_block", ("sm89",), _BOTH, Kernel(
    "vllm_fp8moe_triton_tritonexperts", "triton",
    _ORACLE + "fp8.py: FlashInfer and CUTLASS block-fp8 kernels need SM90+, Triton runs"))
register_kernel("w4a16_mxfp4", ("sm90",), _BOTH, Kernel(
    "vllm_gptossmxfp4moe_triton_oaitritonmxfp4expertsmonolithic", "oai_triton_mxfp4",
    _ORACLE + "mxfp4.py _get_priority_backends_for_gpt_oss: TRTLLM needs family 100, then OpenAI triton_kernels"))
register_kernel("w4a16_mxfp4", ("sm100",), _BOTH, Kernel(
    "vllm_gptossmxfp4moe_flashinfer_trtllm_mxfp4_bf16_trtllmmxfp4expertsmonolithic", "flashinfer_trtllm_mxfp4_bf16",
    _ORACLE + "mxfp4.py _get_priority_backends_for_gpt_oss: FLASHINFER_TRTLLM_MXFP4_BF16 first"))
register_kernel("w4a16_mxfp4", ("sm89", "sm120"), _BOTH, Kernel(
    "vllm_gptossmxfp4moe_marlin_marlinexperts", "marlin",
    _ORACLE + "mxfp4.py: on family 120 Triton goes behind Marlin; experts/gpt_oss_triton_kernels_moe.py: no SM89"))


# ModelOpt NVFP4 experts (W4A4): vLLM 0.33's oracle/nvfp4.py select_nvfp4_moe_backend tries FLASHINFER_TRTLLM first
# (experts/trtllm_nvfp4_moe.py: capability family 100; the monolithic kernel before the modular one), then the
# CuTe-DSL ones (family 100), then FLASHINFER_CUTLASS (experts/flashinfer_cutlass_moe.py: nvfp4 on 10.0+, family
# 120 included). The tables' rows were collected through compressed-tensors' NVFP4 method: the same kernels.
register_kernel("nvfp4", ("sm100",), _BOTH, Kernel(
    "vllm_compressedtensorsw4a4nvfp4moe_flashinfer_trtllm_trtllmnvfp4expertsmonolithic", "flashinfer_trtllm_nvfp4",
    _ORACLE + "nvfp4.py select_nvfp4_moe_backend: FLASHINFER_TRTLLM first; experts/trtllm_nvfp4_moe.py: family 100"))
register_kernel("nvfp4", ("sm120",), _BOTH, Kernel(
    "vllm_compressedtensorsw4a4nvfp4moe_flashinfer_cutlass_flashinferexperts", "flashinfer_cutlass_nvfp4",
    _ORACLE + "nvfp4.py: TRTLLM and CuTe-DSL need family 100; experts/flashinfer_cutlass_moe.py runs nvfp4 on 12.0"))
# compressed-tensors W4A16 int4 group-32 experts (Kimi-K2.5): CompressedTensorsWNA16MoEMethod, whose oracle
# (int_wna16.py _get_priority_backends) tries FlashInfer TRT-LLM's MxInt4 kernel first (family 100 only,
# experts/trtllm_mxint4_moe.py; the tables do not measure it), then Marlin: Marlin on Hopper, Ada and SM120
register_kernel("int4_wo", ("sm90", "sm89", "sm120"), _BOTH, Kernel(
    "vllm_compressedtensorswna16marlinmoe_marlin_marlinexperts", "marlin_int4",
    _ORACLE + "int_wna16.py: FLASHINFER_TRTLLM (MxInt4) needs family 100, then MARLIN"))


def moe_format(spec) -> str:
    """The checkpoint method the routed experts are stored in (a :data:`TABLE_DTYPE` key; "" for bf16)."""
    from vidur_specdec.architectures import quant

    return "" if "experts" in quant.parts_of(spec) else (spec.quantization or "")


class MoeTableError(ConfigError):
    """A fused-MoE table, shape, parallel layout or distribution the measured source does not hold."""


def table_path(system: str) -> Path:
    """The fused-MoE table of AIConfigurator system ``system`` (a missing package, version or file: one line)."""
    if system not in FAMILIES:
        raise MoeTableError(f"device: no vLLM {VLLM_TABLE_VERSION} fused-MoE table for {system!r} in "
                            f"{TD.PACKAGE} {TD.PACKAGE_VERSION} (tables: {', '.join(sorted(FAMILIES))})")
    return TD.table_path(system, "moe", "vllm", VLLM_TABLE_VERSION, "moe_perf")


_KEY = ["kernel_source", "moe_dtype", "hidden_size", "inter_size", "topk", "num_experts",
        "moe_tp_size", "moe_ep_size", "distribution"]


def _table(system: str):
    """``system``'s fused-MoE table (pandas; read once per process)."""
    table_path(system)
    return TD.load(system, "moe", "vllm", VLLM_TABLE_VERSION, "moe_perf")


@lru_cache(maxsize=256)
def _curve_rows(system: str, key: tuple) -> Tuple[np.ndarray, np.ndarray]:
    """(num_tokens ascending, latency ms) of the rows of ``system``'s table matching ``key`` (:data:`_KEY` order)."""
    df = _table(system)
    mask = np.ones(len(df), dtype=bool)
    for col, value in zip(_KEY, key):
        mask &= (df[col] == value).to_numpy()
    rows = df[mask].sort_values("num_tokens")
    return rows["num_tokens"].to_numpy(dtype=float), rows["latency"].to_numpy(dtype=float)


#: The tables' routing distribution the routing model reads (every popularity: a row is read by experts woken)
DISTRIBUTION = "balanced"


@dataclass(frozen=True)
class FusedMoeCurve:
    """One measured curve: routed-expert ms per GPU against the step's token count."""

    system: str  # AIConfigurator system folder (h100_sxm, ...)
    kernel: Kernel
    moe_dtype: str
    tokens: np.ndarray
    latency_ms: np.ndarray

    def ms(self, num_tokens: float) -> float:
        """Routed-expert ms per GPU at ``num_tokens`` (the step's, whole; may be fractional)."""
        x, y = self.tokens, self.latency_ms
        if num_tokens <= 0:
            return 0.0
        if num_tokens >= x[-1]:
            return float(y[-1] + (y[-1] - y[-2]) / (x[-1] - x[-2]) * (num_tokens - x[-1]))
        if num_tokens <= x[0]:  # below the smallest row (1 token): proportional
            return float(y[0] * num_tokens / x[0])
        return float(np.interp(num_tokens, x, y))

    def label(self) -> str:
        """The source as ``summary.json``'s ``kernel_sources`` names it (GPU, framework, version, kernel)."""
        return (f"measured: {self.system}, vllm {VLLM_TABLE_VERSION} ({TD.PACKAGE} {TD.PACKAGE_VERSION}); "
                f"fused MoE {self.moe_dtype}, {self.kernel.name}")


def kernel_for(system: str, quantization: str, ep: int) -> Tuple[Kernel, str]:
    """(kernel vLLM 0.33.0 picks, the tables' moe_dtype) for a checkpoint format on ``system``'s GPU."""
    table_path(system)  # raises, naming the system, when it has no table
    fmt = TABLE_DTYPE.get(quantization or "")
    if fmt is None:
        raise MoeTableError(f"quantization: no fused-MoE table rows for format {quantization!r}")
    fam = FAMILIES[system]
    kernel = KERNELS.get((fmt, fam, ep > 1))
    if kernel is None:
        raise MoeTableError(f"quantization: {system}'s fused-MoE table has no {fmt} kernel rows ({fam}; "
                            f"none registered in KERNELS)")
    return kernel, fmt


def curve(system: str, spec, tp: int, ep: int = 1) -> FusedMoeCurve:
    """The measured curve for ``spec``'s routed experts on ``system``'s GPU at TP ``tp`` (EP ``ep``: EP size = TP size).

    ``ep`` > 1 reads the rows of ``moe_tp_size`` 1 and ``moe_ep_size`` ``ep``
    (whole experts per GPU); else ``moe_tp_size`` ``tp``. :class:`MoeTableError`
    names what is missing.
    """
    kernel, fmt = kernel_for(system, moe_format(spec), ep)
    mtp, mep = (1, ep) if ep > 1 else (tp, 1)
    dist = DISTRIBUTION
    key = (kernel.kernel_source, fmt, spec.hidden_size, spec.expert_ffn_size, spec.experts_per_token,
           spec.num_experts, mtp, mep, dist)
    got = _curve_rows(system, key)
    if len(got[0]) < 2:
        raise MoeTableError(
            f"model: missing fused-MoE rows in {system}/moe/vllm/{VLLM_TABLE_VERSION}/moe_perf.parquet for "
            f"{spec.name} ({fmt}, kernel {kernel.kernel_source}, hidden {spec.hidden_size}, expert width "
            f"{spec.expert_ffn_size}, top-{spec.experts_per_token} of {spec.num_experts}, moe_tp {mtp}, "
            f"moe_ep {mep}, {dist})")
    return FusedMoeCurve(system, kernel, fmt, got[0], got[1])


@lru_cache(maxsize=64)
def try_curve(system: str, spec, tp: int, ep: int = 1) -> Tuple[Optional[FusedMoeCurve], str]:
    """(curve, "") when the tables cover the deployment; else (None, the one-line reason). Cached."""
    try:
        return curve(system, spec, tp, ep), ""
    except MoeTableError as e:
        return None, str(e)

