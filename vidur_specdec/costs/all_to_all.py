"""Expert-parallel all-to-all of one MoE layer (dispatch, then combine) from measured DeepEP tables.

With data parallel > 1 and expert parallel on, vLLM sends every token's hidden
state to the GPUs holding its top-k experts before the experts run (dispatch)
and brings the weighted outputs back after (combine): vLLM 0.33.0
``model_executor/layers/fused_moe/all2all_utils.py`` builds DeepEP's
``DeepEPLLPrepareAndFinalize`` (low latency) or ``DeepEPHTPrepareAndFinalize``
(high throughput, DeepEP's "normal" mode). Both are priced here from
``aiconfigurator-core`` 0.12.0's tables, in microseconds per call, read per
GPU at the tokens ONE rank sends, as the tables' own coverage allows:

* **the measured rows**: ``systems/data/<gpu>/comm/vllm/0.24.0/moe_a2a_perf.parquet``
  (vLLM 0.24.0, DeepEP), ``deepep_ll`` and ``deepep_ht`` rows by hidden size x
  top-k x experts x tokens per rank, at the table's own EP (8 GPUs of an HGX
  node; 4, one compute tray, on GB200/GB300); an EP at or below it reads them as
  they are;
* **within an NVLink domain beyond the table's EP** (GB200/GB300 NVL72: 72 GPUs on
  one NVLink switch fabric, NVIDIA GB200 NVL72 datasheet): the rows times the
  measured ratio of EP x to the table's EP of TensorRT-LLM 1.3.0rc10's NVLink
  all-to-all on GB200 (``trtllm_alltoall_perf``, ``NVLinkTwoSided``, DeepSeek-V3's
  shape, EP 2-64 — the kernels FlashInfer's NVLink all2all backends of vLLM 0.33
  run; DeepEP's low-latency buffers cross the same fabric with
  ``VLLM_DEEPEP_LOW_LATENCY_USE_MNNVL``), at the same tokens, interpolated in
  log2 EP (:func:`domain_factor`); GB300 reads GB200's; EP 72 extrapolates the
  EP 32-64 step;
* **across NVLink domains** (EP above 8 on HGX, above 72 on NVL72): times the
  measured ratio of ``node_num`` N to 1 node in SGLang 0.5.6.post2's DeepEP
  tables (``wideep_deepep_ll_perf`` / ``wideep_deepep_normal_perf``, DeepSeek-V3's
  shape, 8-GPU nodes, N = 2, 4, 8; H100's and H200's: another GPU reads
  H200's), at the same tokens, as a function of the share of a rank's traffic
  that leaves its domain, ``f = 1 - domain / EP`` (``1 - 1/N`` at the measured
  points): linear in f between them, the last step's slope beyond 8 nodes
  (:func:`cross_factor`).

Which rows are measured and which scaled for a run is :func:`describe` (its
``summary.json`` ``kernel_sources.all_to_all``); docs/model.md names each
scaling's direction of error.

Which mode a step uses (:data:`STEP_MODE`): low latency for a step of decodes and
verify blocks only, high throughput ("normal") for a step holding a prefill chunk
(the aiconfigurator tables file ``deepep_ll`` under generation and ``deepep_ht``
under context). Bytes per token at the format sent (:func:`wire_bytes`): vLLM
dispatches block-fp8 models (DeepSeek-V3) in FP8 with one fp32 scale per 128
values, others in BF16; combine is BF16. A model whose (hidden, top-k) the table
lacks, or a format other than the table's, is read at the token count carrying
the same bytes (``tokens x bytes x top-k`` over the table row's). Token counts
between the table's points interpolate linearly; beyond the last, in proportion.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Tuple

import numpy as np

from vidur_specdec.config.errors import ConfigError
from vidur_specdec.costs.kernels import table_data as TD

VLLM_A2A_VERSION = "0.24.0"  # the vLLM release the in-node all-to-all rows were measured on
MULTI_NODE_VERSION = "0.5.6.post2"  # the SGLang release whose DeepEP tables hold 1, 2, 4 and 8 nodes
MULTI_NODE_SYSTEM = "h200_sxm"  # whose multi-node ratio a GPU without its own reads (its closest measured peer)
NVLINK_A2A_VERSION = "1.3.0rc10"  # the TensorRT-LLM release whose NVLink all-to-all rows hold EP 2-64 on GB200
NVLINK_A2A_SYSTEM = "gb200"
GPUS_PER_NODE = 8  # HGX H100/H200/B200/B300 nodes: 8 GPUs on one NVLink switch; more cross the RDMA network
#: GPUs of one NVLink domain where it is not one 8-GPU node: GB200/GB300 NVL72 racks (NVIDIA GB200 NVL72
#: datasheet: 72 Blackwell GPUs in one NVLink domain, 130 TB/s)
NVLINK_DOMAIN = {"gb200": 72, "gb300": 72}

#: DeepEP mode of a step: ``decode`` (decodes and verify blocks only) or ``prefill`` (a prefill chunk in it)
STEP_MODE = {"decode": "deepep_ll", "prefill": "deepep_ht"}
#: the tables' wire format, bytes per hidden value on dispatch (DeepEP's defaults: low-latency dispatch
#: ``use_fp8=True`` with one fp32 scale per 128 values; normal dispatch sends the bf16 activations as given)
TABLE_DISPATCH_BYTES = {"deepep_ll": 1.0 + 4.0 / 128, "deepep_ht": 2.0}
COMBINE_BYTES = 2.0  # combine returns bf16 outputs in both modes
_SGLANG = {"deepep_ll": ("wideep_deepep_ll_perf", "{}_avg_t_us", None),
           "deepep_ht": ("wideep_deepep_normal_perf", "{}_transmit_us", 20)}


def wire_bytes(spec, phase: str) -> float:
    """Bytes per hidden value a token carries in ``phase`` (vLLM 0.33.0 ``all2all_utils.py``: FP8 dispatch for
    block-fp8 checkpoints, DeepEP's 1x128 scale block; ``prepare_finalize/deepep_ht.py`` quantizes before dispatch
    for block-quantized models); combine is BF16."""
    if phase == "combine":
        return COMBINE_BYTES
    return 1.0 + 4.0 / 128 if spec.quantization == "fp8" else 2.0


def domain_of(system: str) -> int:
    """GPUs of one NVLink domain on ``system`` (:data:`NVLINK_DOMAIN`; an HGX node's 8 otherwise)."""
    return NVLINK_DOMAIN.get(system, GPUS_PER_NODE)


def remote_share(system: str, ep: int) -> float:
    """Share of a rank's dispatched tokens that leave its NVLink domain under uniform routing: ``1 - domain / EP``
    (0 within one domain; ``1 - 1/N`` over N whole domains)."""
    return max(0.0, 1.0 - domain_of(system) / ep)


@lru_cache(maxsize=16)
def _one_node_rows(system: str):
    """``{(backend, phase): rows}`` of ``system``'s one-node all-to-all table (split once)."""
    try:
        d = TD.load(system, "comm", "vllm", VLLM_A2A_VERSION, "moe_a2a_perf")
    except TD.TableFileError:
        raise
    except ConfigError:
        raise ConfigError(f"parallel.data_parallel_size: no measured all-to-all table for {system} "
                          f"(vLLM {VLLM_A2A_VERSION} moe_a2a_perf); data parallel > 1 is not modelled on it") from None
    d = d[d["node_num"] == 1]
    return {key: rows for key, rows in d.groupby(["comm_backend", "phase"])}


@lru_cache(maxsize=64)
def _curve(system: str, backend: str, phase: str, hidden: int, topk: int, experts: int):
    """(tokens, us, payload per token of the row chosen, the rows' EP) for the table row shape nearest the
    model's."""
    d = _one_node_rows(system).get((backend, phase))  # a group of the split is never empty
    if d is None:
        raise ConfigError(f"parallel.data_parallel_size: {system}'s all-to-all table has no {backend} {phase} rows")
    want = hidden * topk
    shapes = d[["hidden_size", "topk", "num_experts"]].drop_duplicates().to_numpy()
    # exact (hidden, top-k) first, then the payload nearest in ratio; then the expert count nearest
    best = min(shapes, key=lambda s: (abs(math.log(s[0] * s[1] / want)), abs(math.log(s[2] / experts))))
    rows = d[(d["hidden_size"] == best[0]) & (d["topk"] == best[1]) & (d["num_experts"] == best[2])]
    g = rows.groupby("num_tokens")["latency"].mean().sort_index()
    return g.index.to_numpy(float), g.to_numpy(float), float(best[0] * best[1]), int(rows["ep_size"].max())


def table_ep(system: str) -> int:
    """The EP the measured rows of ``system`` were taken at (8 on an HGX node, 4 on a GB200/GB300 tray)."""
    return _curve(system, STEP_MODE["decode"], "dispatch", 7168, 8, 256)[3]


# --------------------------------------------------------------------------- within an NVLink domain

def _nvlink_system(system: str) -> str:
    """Whose NVLink all-to-all rows scale ``system``'s: its own when the package holds them, else GB200's."""
    try:
        TD.table_path(system, "comm", "trtllm", NVLINK_A2A_VERSION, "trtllm_alltoall_perf")
        return system
    except ConfigError:
        return NVLINK_A2A_SYSTEM


@lru_cache(maxsize=64)
def _nvlink_curves(system: str, phase: str, dtype: str):
    """``{EP: (tokens, us)}`` of TensorRT-LLM's two-sided NVLink all-to-all on ``system`` (``phase``: dispatch or
    combine, ``dtype``: ``fp8`` or ``bfloat16``), each smoothed by a running median over three token counts
    (a few single rows sit 2-5x off their neighbours)."""
    d = TD.load(system, "comm", "trtllm", NVLINK_A2A_VERSION, "trtllm_alltoall_perf")
    d = d[(d["op_name"] == f"alltoall_{phase}") & (d["kernel_source"] == "NVLinkTwoSided") & (d["moe_dtype"] == dtype)]
    out = {}
    for ep, rows in d.groupby("moe_ep_size"):
        g = rows.groupby("num_tokens")["latency"].mean().sort_index()
        out[int(ep)] = (g.index.to_numpy(float), g.rolling(3, center=True, min_periods=1).median().to_numpy(float))
    return out


def domain_factor(system: str, phase: str, spec, ep: int, tokens: float) -> float:
    """Slowdown of an all-to-all over ``ep`` GPUs of one NVLink domain against the measured rows' EP, at
    ``tokens`` per rank: 1 up to the rows' EP; above it TensorRT-LLM's NVLink all-to-all ratio EP / rows' EP
    (module docstring), interpolated in log2 EP between its measured sizes, the last step extrapolated."""
    base = table_ep(system)
    ep = min(ep, domain_of(system))
    if ep <= base:
        return 1.0
    dtype = "fp8" if phase == "dispatch" and wire_bytes(spec, phase) < 2.0 else "bfloat16"
    curves = _nvlink_curves(_nvlink_system(system), phase, dtype)
    eps = np.array(sorted(curves), dtype=float)
    at = np.array([np.interp(tokens, *curves[int(e)]) for e in eps])
    y = np.log2(eps)
    t = np.interp(np.log2(ep), y, at) if ep <= eps[-1] else at[-1] + (at[-1] - at[-2]) * (
        (np.log2(ep) - y[-1]) / (y[-1] - y[-2]))
    return float(t / np.interp(np.log2(base), y, at))


# --------------------------------------------------------------------------- across NVLink domains

def _cross_system(system: str, backend: str, phase: str) -> str:
    """Whose multi-node rows scale ``system``'s: its own when it has them, else :data:`MULTI_NODE_SYSTEM`'s."""
    return system if _node_ratio(system, backend, phase, 2) is not None else MULTI_NODE_SYSTEM


@lru_cache(maxsize=64)
def _node_means(system: str, backend: str, phase: str):
    """``{node count: mean us by num_token}`` of ``phase`` in SGLang's multi-node DeepEP table (one grouping of
    the table for every node count); None without the table."""
    table, col, sms = _SGLANG[backend]
    d = TD.load_optional(system, "comm", "sglang", MULTI_NODE_VERSION, table)  # a bad file: raised
    if d is None:
        return None
    if sms is not None:
        d = d[d["dispatch_sms"] == sms]
    means = d.groupby(["node_num", "num_token"])[col.format(phase)].mean()
    return {int(n): g.droplevel(0) for n, g in means.groupby(level=0)}


@lru_cache(maxsize=256)
def _node_ratio(system: str, backend: str, phase: str, nodes: int):
    """(tokens, ratio of ``nodes`` nodes to 1) from SGLang's multi-node DeepEP tables; None without rows."""
    means = _node_means(system, backend, phase)
    if means is None or 1 not in means or nodes not in means:
        return None
    one, many = means[1], means[nodes]
    both = one.index.intersection(many.index)
    if len(both) == 0:
        return None
    return both.to_numpy(float), (many[both] / one[both]).to_numpy(float)


@lru_cache(maxsize=64)
def measured_nodes(system: str, backend: str, phase: str) -> Tuple[int, ...]:
    """Node counts above 1 whose rows ``system``'s SGLang DeepEP table holds (beside one-node rows)."""
    try:
        d = TD.load(system, "comm", "sglang", MULTI_NODE_VERSION, _SGLANG[backend][0])
    except ConfigError:
        return ()
    counts = sorted(int(n) for n in d["node_num"].unique() if n > 1)
    return tuple(n for n in counts if _node_ratio(system, backend, phase, n) is not None)


def cross_factor(system: str, backend: str, phase: str, ep: int, tokens: float) -> float:
    """Slowdown of an all-to-all over ``ep`` GPUs spanning NVLink domains against one domain, at ``tokens`` per
    rank: the measured N-node ratio at the remote share ``f = 1 - domain / EP`` (``1 - 1/N`` at N measured
    nodes), linear in f from 1 at f = 0 through the measured points, the last step's slope beyond them."""
    f = remote_share(system, ep)
    if f <= 0.0:
        return 1.0
    src = _cross_system(system, backend, phase)
    nodes = measured_nodes(src, backend, phase)
    if not nodes:
        raise ConfigError(f"parallel.data_parallel_size: no measured multi-node all-to-all rows for {system} "
                          f"(SGLang {MULTI_NODE_VERSION} DeepEP tables); expert parallel across NVLink domains is "
                          "not modelled on it")
    fs = [0.0] + [1.0 - 1.0 / n for n in nodes]
    rs = [1.0] + [float(np.interp(tokens, *_node_ratio(src, backend, phase, n))) for n in nodes]
    if f <= fs[-1]:
        return float(np.interp(f, fs, rs))
    return rs[-1] + (rs[-1] - rs[-2]) / (fs[-1] - fs[-2]) * (f - fs[-1])


# --------------------------------------------------------------------------- one layer

def a2a_us(system: str, spec, mode: str, phase: str, tokens: float, ep: int) -> float:
    """One ``phase`` (dispatch or combine) of one MoE layer, us, for ``tokens`` sent by the busiest rank."""
    if tokens <= 0:
        return 0.0
    backend = STEP_MODE[mode]
    xs, ys, row_payload, _ = _curve(system, backend, phase, int(spec.hidden_size), int(spec.experts_per_token),
                                    int(spec.num_experts))
    table_b = COMBINE_BYTES if phase == "combine" else TABLE_DISPATCH_BYTES[backend]
    eff = tokens * (spec.hidden_size * spec.experts_per_token * wire_bytes(spec, phase)) / (row_payload * table_b)
    us = float(TD.interp1(eff, xs, ys))
    return us * domain_factor(system, phase, spec, ep, tokens) * cross_factor(system, backend, phase, ep, tokens)


def layer_ms(system: str, spec, mode: str, tokens: float, ep: int) -> Tuple[float, float]:
    """(dispatch ms, combine ms) of one MoE layer for ``tokens`` per rank at ``mode`` (decode / prefill)."""
    return (a2a_us(system, spec, mode, "dispatch", tokens, ep) * 1e-3,
            a2a_us(system, spec, mode, "combine", tokens, ep) * 1e-3)


def check(system: str, spec, ep: int) -> None:
    """Raise one :class:`ConfigError` line if the tables cannot price this deployment's all-to-all."""
    for mode in STEP_MODE:
        for phase in ("dispatch", "combine"):
            a2a_us(system, spec, mode, phase, 1.0, ep)


def describe(system: str, spec, ep: int) -> str:
    """Where a run's all-to-all comes from, measured or scaled (``summary.json`` ``kernel_sources.all_to_all``)."""
    base, domain = table_ep(system), domain_of(system)
    out = (f"measured: {system}, vllm {VLLM_A2A_VERSION} DeepEP low-latency and normal rows at EP {base} "
           f"({TD.PACKAGE} {TD.PACKAGE_VERSION})")
    inside = min(ep, domain)
    if inside > base:
        src = _nvlink_system(system)
        eps = sorted(_nvlink_curves(src, "dispatch", "bfloat16"))
        how = "measured ratio" if inside in eps else ("interpolated between measured EPs" if inside < eps[-1]
                                                       else f"extrapolated past the measured EP {eps[-1]}")
        out += (f"; EP {inside} within the {domain}-GPU NVLink domain: scaled by trtllm {NVLINK_A2A_VERSION} "
                f"NVLink all-to-all EP {inside} / EP {base} on {src} ({how}"
                + (f", {src}'s rows for {system}" if src != system else "") + ")")
    f = remote_share(system, ep)
    if f > 0.0:
        backend = STEP_MODE["decode"]
        src = _cross_system(system, backend, "dispatch")
        nodes = measured_nodes(src, backend, "dispatch")
        fs = [1.0 - 1.0 / n for n in nodes]
        how = ("measured ratio" if any(abs(f - x) < 1e-12 for x in fs) else
               "interpolated between measured node counts" if f < fs[-1] else
               f"extrapolated past the measured {nodes[-1]} nodes")
        out += (f"; across NVLink domains ({ep} GPUs, {f:.0%} of a rank's traffic off its {domain}-GPU domain): "
                f"scaled by SGLang {MULTI_NODE_VERSION} DeepEP N-node / 1-node on {src} ({how}"
                + (f", {src}'s rows for {system}" if src != system else "") + ")")
    return out
