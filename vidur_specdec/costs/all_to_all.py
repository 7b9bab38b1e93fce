"""Expert-parallel all-to-all of one MoE layer (dispatch, then combine) from measured DeepEP tables.

With data parallel > 1 and expert parallel on, vLLM sends every token's hidden
state to the GPUs holding its top-k experts before the experts run (dispatch)
and brings the weighted outputs back after (combine): vLLM 0.33.0
``model_executor/layers/fused_moe/all2all_utils.py`` builds DeepEP's
``DeepEPLLPrepareAndFinalize`` (low latency) or ``DeepEPHTPrepareAndFinalize``
(high throughput, DeepEP's "normal" mode). Both are priced here from
``aiconfigurator-core`` 0.12.0's tables, in microseconds per call, read per
GPU at the tokens ONE rank sends:

* within a node: ``systems/data/<gpu>/comm/vllm/0.24.0/moe_a2a_perf.parquet``
  (vLLM 0.24.0, DeepEP, EP 8 on one node), ``deepep_ll`` and ``deepep_ht`` rows
  by hidden size x top-k x experts x tokens per rank;
* across nodes (EP above the 8 GPUs of a node): the same rows times the measured
  ratio of ``node_num`` N to 1 node in SGLang 0.5.6.post2's DeepEP tables
  (``wideep_deepep_ll_perf`` / ``wideep_deepep_normal_perf``, DeepSeek-V3's shape,
  the only one they hold), at the same tokens (:func:`node_factor`).

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
GPUS_PER_NODE = 8  # HGX H100/H200/B200 nodes: 8 GPUs on one NVLink switch; more cross the RDMA network

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


def nodes_of(ep: int) -> int:
    """Nodes an expert-parallel group of ``ep`` GPUs spans (:data:`GPUS_PER_NODE` per node)."""
    return max(1, math.ceil(ep / GPUS_PER_NODE))


@lru_cache(maxsize=64)
def _curve(system: str, backend: str, phase: str, hidden: int, topk: int, experts: int):
    """(tokens, us, payload per token of the row chosen) for the table row shape nearest the model's."""
    try:
        d = TD.load(system, "comm", "vllm", VLLM_A2A_VERSION, "moe_a2a_perf")
    except TD.TableFileError:
        raise
    except ConfigError:
        raise ConfigError(f"parallel.data_parallel_size: no measured all-to-all table for {system} "
                          f"(vLLM {VLLM_A2A_VERSION} moe_a2a_perf); data parallel > 1 is not modelled on it") from None
    d = d[(d["comm_backend"] == backend) & (d["phase"] == phase) & (d["node_num"] == 1)]
    if d.empty:
        raise ConfigError(f"parallel.data_parallel_size: {system}'s all-to-all table has no {backend} {phase} rows")
    want = hidden * topk
    shapes = d[["hidden_size", "topk", "num_experts"]].drop_duplicates().to_numpy()
    # exact (hidden, top-k) first, then the payload nearest in ratio; then the expert count nearest
    best = min(shapes, key=lambda s: (abs(math.log(s[0] * s[1] / want)), abs(math.log(s[2] / experts))))
    rows = d[(d["hidden_size"] == best[0]) & (d["topk"] == best[1]) & (d["num_experts"] == best[2])]
    g = rows.groupby("num_tokens")["latency"].mean().sort_index()
    return g.index.to_numpy(float), g.to_numpy(float), float(best[0] * best[1])


@lru_cache(maxsize=64)
def _node_ratio(system: str, backend: str, phase: str, nodes: int):
    """(tokens, ratio of ``nodes`` nodes to 1) from SGLang's multi-node DeepEP tables; None without rows."""
    table, col, sms = _SGLANG[backend]
    d = TD.load_optional(system, "comm", "sglang", MULTI_NODE_VERSION, table)  # a bad file: raised
    if d is None:
        return None
    if sms is not None:
        d = d[d["dispatch_sms"] == sms]
    col = col.format(phase)
    one = d[d["node_num"] == 1].groupby("num_token")[col].mean()
    many = d[d["node_num"] == nodes].groupby("num_token")[col].mean()
    both = one.index.intersection(many.index)
    if len(both) == 0:
        return None
    return both.to_numpy(float), (many[both] / one[both]).to_numpy(float)


def node_factor(system: str, backend: str, phase: str, nodes: int, tokens: float) -> float:
    """Measured slowdown of an all-to-all spread over ``nodes`` nodes against one node, at ``tokens`` per rank."""
    if nodes <= 1:
        return 1.0
    r = _node_ratio(system, backend, phase, nodes)
    if r is None:
        raise ConfigError(f"parallel.data_parallel_size: no measured {nodes}-node all-to-all rows for {system} "
                          f"(SGLang {MULTI_NODE_VERSION} DeepEP tables); data parallel x tensor parallel above "
                          f"{GPUS_PER_NODE} GPUs is not modelled on it")
    xs, ys = r
    return float(np.interp(tokens, xs, ys))


def a2a_us(system: str, spec, mode: str, phase: str, tokens: float, ep: int) -> float:
    """One ``phase`` (dispatch or combine) of one MoE layer, us, for ``tokens`` sent by the busiest rank."""
    if tokens <= 0:
        return 0.0
    backend = STEP_MODE[mode]
    xs, ys, row_payload = _curve(system, backend, phase, int(spec.hidden_size), int(spec.experts_per_token),
                                 int(spec.num_experts))
    table_b = COMBINE_BYTES if phase == "combine" else TABLE_DISPATCH_BYTES[backend]
    eff = tokens * (spec.hidden_size * spec.experts_per_token * wire_bytes(spec, phase)) / (row_payload * table_b)
    us = float(TD.interp1(eff, xs, ys))
    return us * node_factor(system, backend, phase, nodes_of(ep), tokens)


def layer_ms(system: str, spec, mode: str, tokens: float, ep: int) -> Tuple[float, float]:
    """(dispatch ms, combine ms) of one MoE layer for ``tokens`` per rank at ``mode`` (decode / prefill)."""
    return (a2a_us(system, spec, mode, "dispatch", tokens, ep) * 1e-3,
            a2a_us(system, spec, mode, "combine", tokens, ep) * 1e-3)


def check(system: str, spec, ep: int) -> None:
    """Raise one :class:`ConfigError` line if the tables cannot price this deployment's all-to-all."""
    for mode in STEP_MODE:
        for phase in ("dispatch", "combine"):
            a2a_us(system, spec, mode, phase, 1.0, ep)
