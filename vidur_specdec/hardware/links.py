"""Links a request's KV cache moves over from its prefill to its decode instance (``disaggregation.kv_link``).

Each link is registered under its config name with a function of the device
giving ``(bandwidth bytes/s per GPU in one direction, latency ms per transfer)``.
vLLM's NIXL connector moves every GPU's share of the KV in parallel (each decode
worker reads from its prefill peers, one RDMA READ per block run), so a
transfer's time is ``latency + bytes per GPU / bandwidth per GPU``
(:mod:`vidur_specdec.engine.kv_transfer`).

Figures and their sources:

* ``nvlink`` — both instances in one NVLink domain (an 8-GPU HGX node). The
  bandwidth is the effective NVLink bus bandwidth this project measured for
  NCCL all-reduce (:mod:`vidur_specdec.hardware.collectives_fit`, fitted on
  Vidur's A100 ``a100_dgx/all_reduce.csv``: 150 GB/s on NVLink3's nominal
  600 GB/s), scaled by the device's NVLink bandwidth (H100/H200 NVLink4:
  225 GB/s); the latency is that fit's start-up latency (0.033 ms).
* ``pcie`` — both instances in one node of cards without NVLink (L40S, RTX PRO 6000;
  ``DeviceSpec.interconnect``): the same formula at the card's PCIe bandwidth (its
  ``nvlink_bandwidth`` figure holds the PCIe figure, both directions), the same
  NCCL efficiency and start-up latency as the NVLink fit (an assumption: P2P over
  PCIe through a switch reaches a similar fraction of its line rate). ``nvlink`` on
  such a card is refused (:mod:`vidur_specdec.engine.kv_transfer`), and so is
  ``pcie`` on an NVLink card.
* ``infiniband_ndr`` — across nodes over InfiniBand NDR, one 400 Gb/s
  ConnectX-7 port per GPU, as NVIDIA's DGX H100/H200 compute fabric is built
  (NVIDIA DGX H100/H200 User Guide, "Network Ports": eight single-port
  ConnectX-7 400 Gb/s for the compute fabric): 50 GB/s per GPU at line rate.
* ``roce_400g`` — across nodes over 400 GbE RoCE (ConnectX-7 or BlueField-3 in
  Ethernet mode, NVIDIA Spectrum-X reference design): 50 GB/s per GPU at line rate.

The cross-node latency (0.05 ms per transfer: RDMA READ round trips plus
NIXL's completion notification) is an assumption, not a measured figure;
``disaggregation.kv_transfer_latency_ms`` replaces it. docs/model.md lists the
direction of error of each figure.
"""

from __future__ import annotations

from typing import Callable, Dict, Tuple

from vidur_specdec.config.registry import registrar
from vidur_specdec.hardware import collectives_fit as fit
from vidur_specdec.hardware.devices import DeviceSpec

#: name -> f(device) -> (bytes/s per GPU, one direction; ms per transfer)
LINKS: Dict[str, Callable[[DeviceSpec], Tuple[float, float]]] = {}

NIC_400G_BYTES_S = 400e9 / 8  # one 400 Gb/s port (ConnectX-7), line rate
NETWORK_LATENCY_MS = 0.05  # assumed per-transfer start-up across nodes (see the module notes)


register = registrar(LINKS)  # a link figure function under a value of disaggregation.kv_link


@register("nvlink")
def _nvlink(device: DeviceSpec) -> Tuple[float, float]:
    return fit.BUS_BANDWIDTH * device.nvlink_bandwidth / fit.REFERENCE_NVLINK_BANDWIDTH, fit.LATENCY_MS


@register("pcie")
def _pcie(device: DeviceSpec) -> Tuple[float, float]:
    return fit.BUS_BANDWIDTH * device.nvlink_bandwidth / fit.REFERENCE_NVLINK_BANDWIDTH, fit.LATENCY_MS


def in_node(device: DeviceSpec) -> str:
    """The link between two instances in one node of ``device``: ``nvlink``, or ``pcie`` for a card without it."""
    return "pcie" if device.interconnect == "pcie" else "nvlink"


@register("infiniband_ndr")
def _ib_ndr(device: DeviceSpec) -> Tuple[float, float]:
    return NIC_400G_BYTES_S, NETWORK_LATENCY_MS


@register("roce_400g")
def _roce(device: DeviceSpec) -> Tuple[float, float]:
    return NIC_400G_BYTES_S, NETWORK_LATENCY_MS


def link(name: str, device: DeviceSpec) -> Tuple[float, float]:
    """``(bytes/s per GPU, ms per transfer)`` of link ``name`` on ``device``; KeyError if unknown."""
    return LINKS[name](device)
