"""Moving a request's KV cache from its prefill instance to its decode instance.

Bytes come from the models and formats: per GPU, ``tokens × KV bytes per token
per GPU`` of the target at the pool's TP (KV heads split over the GPUs, an MLA
latent replicated on each; ``kv_cache_dtype`` fp8 halves it), plus the
drafter's (an EAGLE/MTP head's or a draft model's) when ``disaggregation.draft_kv``
is ``transfer``. vLLM 0.33's NIXL connector registers the draft layers' KV with
the target's and moves both (``kv_connector/v1/nixl/base_worker.py``: the
draft's regions, a head-sharded draft under an MLA target included); left out,
the decode instance has to rebuild it (``recompute``).

Every GPU moves its own share in parallel over its own link, so a transfer
takes ``latency + max(bytes per sending GPU, bytes per receiving GPU) /
bandwidth per GPU`` (a prefill pool at a smaller TP than the decode pool sends
more per GPU). Link figures: :mod:`vidur_specdec.hardware.links`.

vLLM's decode instance loads every prompt token and then recomputes the last
one to sample (``_update_waiting_for_remote_kv`` in
``vllm/v1/core/sched/scheduler.py`` sets ``num_computed_tokens = num_tokens - 1``
when the whole prompt was loaded), so ``tokens`` is the prompt length.
"""

from __future__ import annotations

from dataclasses import dataclass

from vidur_specdec.config import ConfigError
from vidur_specdec.hardware import links

NODE_GPUS = 8  # GPUs in one NVLink domain (an HGX H100/H200 or A100 node)


@dataclass(frozen=True)
class KVLink:
    """The link between the pools and the KV bytes per token on each side (bytes per GPU)."""

    name: str
    bandwidth: float  # bytes/s per GPU, one direction
    latency_ms: float  # per transfer
    send_bytes_per_token: int  # per prefill GPU: target (+ draft when transferred)
    recv_bytes_per_token: int  # per decode GPU
    recv_gpus: int  # GPUs that receive one request's KV: a decode instance's, or one data-parallel rank's
    draft_transferred: bool

    def time_ms(self, tokens: int) -> float:
        """Time (ms) to move ``tokens`` tokens' KV from a prefill to a decode instance."""
        per_gpu = tokens * max(self.send_bytes_per_token, self.recv_bytes_per_token)
        return self.latency_ms + per_gpu / self.bandwidth * 1e3

    def bytes(self, tokens: int) -> int:
        """Bytes the decode instance receives for ``tokens`` tokens (all its GPUs together)."""
        return tokens * self.recv_bytes_per_token * self.recv_gpus


def _per_token(mem, with_draft: bool) -> int:
    return int(mem.target_kv_bytes_per_token) + (int(mem.draft_kv_bytes_per_token) if with_draft else 0)


def build_link(cfg, top) -> KVLink:
    """The KV link of a topology (``disaggregation.kv_link``, ``kv_transfer_latency_ms``, ``draft_kv``)."""
    d = cfg.disaggregation
    pre, dec = top.pool("prefill"), top.pool("decode")
    gpus = pre.gpus + dec.gpus
    same_device = pre.deployment.device.name == dec.deployment.device.name
    name = d.kv_link
    local = links.in_node(dec.deployment.device)  # nvlink, or pcie on a card without NVLink
    if name == "auto":
        name = local if gpus <= NODE_GPUS and same_device else "infiniband_ndr"
    elif name in ("nvlink", "pcie") and (gpus > NODE_GPUS or not same_device):
        why = f"{gpus} GPUs" if gpus > NODE_GPUS else "two different devices"
        raise ConfigError(f"disaggregation.kv_link: {name} needs every instance in one {NODE_GPUS}-GPU node; "
                          f"this topology has {why}; allowed: infiniband_ndr, roce_400g")
    elif name in ("nvlink", "pcie") and name != local:
        raise ConfigError(f"disaggregation.kv_link: {name}: {dec.deployment.device.name}'s GPUs reach each other "
                          f"over {local} in one node; set {local} (or auto), infiniband_ndr or roce_400g")
    bw, lat = links.link(name, dec.deployment.device)
    if d.kv_transfer_latency_ms is not None:
        lat = d.kv_transfer_latency_ms
    with_draft = d.draft_kv == "transfer"
    return KVLink(name, bw, lat, _per_token(pre.prepared.memory, with_draft),
                  _per_token(dec.prepared.memory, with_draft), dec.deployment.tp,
                  with_draft and dec.prepared.memory.draft_kv_bytes_per_token > 0)
