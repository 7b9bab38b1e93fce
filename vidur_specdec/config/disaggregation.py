"""The ``disaggregation:`` section: prefill and decode on separate pools of instances.

A deployment is a topology of pools (:mod:`vidur_specdec.engine.topology`).
Without this section (``prefill_instances`` and ``decode_instances`` both 0)
it is one mixed pool of ``parallel.num_replicas`` identical instances, as
before. With both set, requests are prefilled on a prefill instance and decoded
on a decode instance after their KV cache has moved between them, as vLLM does
with ``--kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'``
behind a proxy that sends each request first to a prefiller (``max_tokens=1``)
and then to a decoder ("xPyD": x prefill, y decode instances; llm-d names
the two roles ``prefill`` and ``decode``).

Each pool's keys (``disaggregation.prefill.*`` / ``disaggregation.decode.*``)
are vLLM's engine arguments of the same names, one ``vllm serve`` per
instance; null takes the run's own value (``parallel.*``, ``device``,
``scheduler.*``). Units: times in ms unless the name ends in ``_s``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from vidur_specdec.config.fields import _f

TP_SIZES = (1, 2, 4, 8)  # as schema.TP_SIZES (one 8-GPU node per instance)
# each pool's `vllm serve --kv-transfer-config`: vLLM 0.33's NIXL connector on both roles (vllm/config/kv_transfer.py:
# kv_connector needs a kv_role; kv_both lets one instance send and receive, as vLLM's disaggregated examples run it)
KV_TRANSFER_CONFIG = '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'
# data-parallel ranks of one instance at most (parallel.data_parallel_size, and a pool's own): wide expert
# parallel spans hundreds of GPUs (DeepSeek's decode deployment: 320 GPUs, DeepSeek-V3 technical report,
# arXiv 2412.19437, section 3.4.2); the all-to-all is priced at any size (vidur_specdec/costs/all_to_all.py),
# this bound only keeps a typo from building thousands of ranks
MAX_DP = 1024
ROUTERS = ("round_robin", "least_loaded")
KV_LINKS = ("auto", "nvlink", "pcie", "infiniband_ndr", "roce_400g")
DRAFT_KV = ("transfer", "recompute")


@dataclass
class PoolConfig:
    """One pool's instances: vLLM's per-instance engine arguments; null = the run's own value."""

    tensor_parallel_size: Optional[int] = _f(None, choices=TP_SIZES,
                                             doc="GPUs per instance; null = parallel.tensor_parallel_size")
    enable_expert_parallel: Optional[bool] = _f(None, doc="null = parallel.enable_expert_parallel")
    data_parallel_size: Optional[int] = _f(None, lo=1, hi=MAX_DP,
                                           doc="data-parallel ranks of each instance (attention per rank, experts "
                                               "over all ranks); null = parallel.data_parallel_size")
    enable_eplb: Optional[bool] = _f(None, doc="null = parallel.enable_eplb")
    num_redundant_experts: Optional[int] = _f(None, lo=0, hi=4096, doc="null = parallel.num_redundant_experts")
    enable_dbo: Optional[bool] = _f(None, doc="null = parallel.enable_dbo")
    dbo_decode_token_threshold: Optional[int] = _f(None, lo=0, hi=1_000_000,
                                                   doc="null = parallel.dbo_decode_token_threshold")
    dbo_prefill_token_threshold: Optional[int] = _f(None, lo=0, hi=1_000_000,
                                                    doc="null = parallel.dbo_prefill_token_threshold")
    device: Optional[str] = _f(None, doc="null = device")
    max_num_batched_tokens: Optional[int] = _f(None, lo=1, hi=1_000_000,
                                               doc="token budget per step; null = scheduler.max_num_batched_tokens")
    max_num_seqs: Optional[int] = _f(None, lo=1, hi=100_000, doc="requests per step; null = scheduler.max_num_seqs")
    speculative: Any = _f(None, doc="speculative.* keys this pool's instances use instead of the run's "
                                    "(a mapping); null = the run's speculative section")


@dataclass
class DisaggregationConfig:
    """Prefill/decode disaggregation; both instance counts 0 = colocated (one mixed pool)."""

    prefill_instances: int = _f(0, lo=0, hi=1024, doc="prefill instances (x of xPyD); 0 with decode_instances "
                                                      "0 = colocated")
    decode_instances: int = _f(0, lo=0, hi=1024, doc="decode instances (y of xPyD)")
    prefill: PoolConfig = _f(PoolConfig())
    decode: PoolConfig = _f(PoolConfig())
    router: str = _f("round_robin", choices=ROUTERS,
                     doc="how the proxy picks a prefill and a decode instance: round_robin (vLLM's "
                         "disaggregated proxy examples) or least_loaded (fewest requests queued or running)")
    kv_link: str = _f("auto", choices=KV_LINKS,
                      doc="link the KV cache moves over: auto = the node's own link (nvlink, or pcie on cards "
                          "without NVLink: L40S, RTX PRO 6000) when every instance fits one 8-GPU node, else "
                          "infiniband_ndr; per-GPU figures in docs/model.md")
    kv_transfer_latency_ms: Optional[float] = _f(None, lo=0.0, hi=1e4,
                                                 doc="fixed time per request's transfer (ms); null = the link's")
    draft_kv: str = _f("transfer", choices=DRAFT_KV,
                       doc="EAGLE/MTP draft KV: transfer (moved with the target's, vLLM 0.33's NIXL connector) "
                           "or recompute (left out; the decode instance runs the drafter over the prompt)")

    @property
    def enabled(self) -> bool:
        """True when requests are split between prefill and decode pools."""
        return self.prefill_instances > 0 or self.decode_instances > 0
