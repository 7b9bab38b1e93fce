"""vLLM's custom all-reduce: when vLLM uses it, which kernel runs, and what one call costs (ms).

vLLM 0.33.0 first tries FlashInfer's all-reduce (:func:`flashinfer_applies`, its size limits by GPU and
world size); messages FlashInfer does not take go the custom all-reduce's way described below. The measured
kernel tables price both (:mod:`vidur_specdec.costs.kernels.tables`); the roofline prices every message as below.

What vLLM does (followed from its source, vllm-project/vllm):

* ``vllm/distributed/device_communicators/cuda_communicator.py`` (commit
  00b5a01dd29b5e84c9434de139fbabd49e84efa6), ``CudaCommunicator.all_reduce``:
  the tensor-parallel group tries the custom all-reduce first and falls back to
  PyNCCL when ``should_custom_ar`` says no (or ``disable_custom_all_reduce``).
* ``vllm/distributed/device_communicators/custom_all_reduce.py`` (commit
  00d618aab60448acdf3fac3e9c4e2e22d0c6c753): ``_SUPPORTED_WORLD_SIZES = [2, 4, 6, 8]``,
  single node only, ``max_size = 8192 * 1024`` bytes and ``should_custom_ar``
  takes a message only if ``inp_size < max_size`` (and the GPUs are 2 or fully
  NVLink-connected). Under CUDA graphs the input buffers are registered, so no
  copy into the IPC buffer.
* ``csrc/custom_all_reduce.cuh`` (commit 036bb685581dbedcd6cf7fc845fe87268c7d1191),
  ``CustomAllreduce::allreduce``: 2 GPUs always run the one-shot kernel
  ``cross_device_reduce_1stage``; on full NVLink, 4 GPUs below 512 KiB and 6-8
  GPUs below 256 KiB run it too, larger messages run the two-shot
  ``cross_device_reduce_2stage`` (reduce-scatter, barrier, all-gather).

The cost, from physics. Each call pays a fixed latency (the start/end flag
handshake over NVLink and the kernel itself) and then moves bytes over each
GPU's NVLink ingress:

* one-shot: every GPU reads the whole message from each of its ``n-1`` peers,
  ``(n-1)·B`` bytes;
* two-shot: every GPU reads ``1/n`` of each peer's message (reduce-scatter),
  then ``1/n`` of each peer's reduced slice (all-gather), ``2(n-1)/n·B`` bytes —
  the same bus bytes as NCCL's ring — and pays a second barrier and pass.

    t(n, B) = latency_ms + [two-shot] extra_ms(n) + bytes(n, B) / effective_bandwidth

``extra_ms(n)``, the two-shot's extra fixed cost, is not a published figure:
vLLM switches kernels where they cost the same, so it is the byte saving at
vLLM's switch size ``S(n)``, ``((n-1) - 2(n-1)/n)·S(n) / effective_bandwidth``.
That keeps the time continuous (and monotone) in ``B`` across the switch.

``effective_bandwidth`` is the device's NVLink bandwidth
(:attr:`DeviceSpec.nvlink_bandwidth`) times the efficiency NCCL reaches on
large messages in the calibrated collective model
(``collectives_fit.BUS_BANDWIDTH / collectives_fit.REFERENCE_NVLINK_BANDWIDTH``,
fitted on Vidur's measured A100 files): nothing about the bandwidth is fitted
here. ``latency_ms`` is :data:`LATENCY_MS`, the median of the published
small-message (<= 16 KiB, where the byte term is under 0.1 µs) times of vLLM's
custom all-reduce on H100 in :data:`PUBLISHED_H100`; the larger rows of the
same table are the held-out check (:func:`error_table`). See docs/model.md,
"The collective model".
"""

from __future__ import annotations

import statistics
from typing import Dict, List, Optional

from vidur_specdec.hardware import collectives_fit as FIT
from vidur_specdec.hardware.devices import DeviceSpec, get_device

KIB = 1024
MIB = 1024 * 1024

SUPPORTED_WORLD_SIZES = (2, 4, 6, 8)  # CustomAllreduce._SUPPORTED_WORLD_SIZES
MAX_BYTES = 8192 * 1024  # CustomAllreduce(max_size=8192 * 1024); used only if nbytes < MAX_BYTES


def one_shot_limit(world: int) -> float:
    """Messages below this many bytes run the one-shot kernel on full NVLink (custom_all_reduce.cuh)."""
    if world == 2:
        return float("inf")
    return 512 * KIB if world <= 4 else 256 * KIB


# vLLM's custom all-reduce on H100 (NVLink4), as published by SGLang PR #2904
# (https://github.com/sgl-project/sglang/pull/2904, "unit test performance in H100 (without
# cuda graph)", the "vllm" table; benchmark sgl-kernel/tests/test_trt_reduce.py: float32
# tensors of `data size` elements, 5000 back-to-back vllm_ops.all_reduce calls timed on the host,
# each copying its input into the registered IPC buffer first).
# Rows: (GPUs, float32 elements, ms per call).
PUBLISHED_H100 = (
    (2, 512, 0.0095), (4, 512, 0.0091), (8, 512, 0.0101),
    (2, 4096, 0.0088), (4, 4096, 0.0085), (8, 4096, 0.0093),
    (2, 32768, 0.0087), (4, 32768, 0.0092), (8, 32768, 0.0118),
    (2, 262144, 0.0129), (4, 262144, 0.0206), (8, 262144, 0.0241),
    (2, 524288, 0.0177), (4, 524288, 0.0269), (8, 524288, 0.0304),
    (2, 1048576, 0.0266), (4, 1048576, 0.0402), (8, 1048576, 0.0450),
)
PUBLISHED_ELEMENT_BYTES = 4  # float32
LATENCY_FROM_BYTES = 16 * KIB  # rows at or below this size set the latency; the rest are held out

# fixed cost of one custom all-reduce call, ms: median of the published small-message rows (9.2 µs)
LATENCY_MS = statistics.median(t for _, n, t in PUBLISHED_H100 if n * PUBLISHED_ELEMENT_BYTES <= LATENCY_FROM_BYTES)


# vLLM 0.33.0 tries FlashInfer's all-reduce before its custom one (vllm/distributed/device_communicators/
# cuda_communicator.py, CudaCommunicator.all_reduce: fi_ar_comm first; vllm/envs.py VLLM_ALLREDUCE_USE_FLASHINFER,
# default 1 in 0.33.0, 0 in 0.24.0), for a tensor-parallel message of at most FLASHINFER_MAX_MIB[capability][world]
# MiB (vllm/compilation/passes/fusion/allreduce_rms_fusion.py FI_ALLREDUCE_FUSION_MAX_SIZE_MB; no entry for the
# capability or world size: FlashInfer's all-reduce is off), or, with its MNNVL backend — the one auto-selected on a
# node with NVSwitch (flashinfer_all_reduce.py _resolve_fi_ar_backend) — the tuned MNNVL_MAX_MIB
# (all_reduce_utils.py FI_MNNVL_ALLREDUCE_MAX_SIZE_MB, keyed by capability, world and nodes).
#: device name -> CUDA compute capability as vLLM keys it (major * 10 + minor); only GPUs FlashInfer's all-reduce runs on
CAPABILITY = {"h100": 90, "h200": 90, "b200": 100, "gb200": 100, "b300": 103, "gb300": 103}
FLASHINFER_MAX_MIB = {90: {2: 64, 4: 2, 8: 0.5}, 100: {2: 64, 4: 32, 8: 1, 16: 64},
                      103: {2: 64, 4: 64, 8: 4, 16: 64}}
MNNVL_MAX_MIB = {(100, 8, 1): 128, (100, 8, 2): 128, (103, 4, 1): 80, (103, 8, 1): 128, (103, 8, 2): 128,
                 (103, 16, 4): 8}
#: GPUs per node (host): a GB200 / GB300 compute tray holds 4 (NVIDIA GB200 NVL72), an HGX board 8
GPUS_PER_NODE = {"gb200": 4, "gb300": 4}


def flashinfer_limit_bytes(device_name: str, world: int) -> float:
    """The largest message (bytes) vLLM 0.33 all-reduces with FlashInfer among ``world`` GPUs of ``device_name``;
    0 where FlashInfer's all-reduce is off (capability or world size not listed)."""
    cap = CAPABILITY.get(device_name)
    if cap is None or world not in FLASHINFER_MAX_MIB.get(cap, {}):
        return 0.0
    nodes = -(-world // GPUS_PER_NODE.get(device_name, 8))
    return float(MNNVL_MAX_MIB.get((cap, world, nodes), FLASHINFER_MAX_MIB[cap][world]) * MIB)


def flashinfer_applies(device_name: str, world: int, nbytes: int) -> bool:
    """Whether vLLM 0.33 runs this tensor-parallel all-reduce with FlashInfer's kernels (before its custom one)."""
    return 0 < nbytes <= flashinfer_limit_bytes(device_name, world)


def applies(world: int, nbytes: int) -> bool:
    """Whether vLLM runs this all-reduce with its custom kernels (else it falls back to NCCL)."""
    return world in SUPPORTED_WORLD_SIZES and 0 < nbytes < MAX_BYTES


def algorithm(world: int, nbytes: int) -> str:
    """``"one_shot"`` or ``"two_shot"``: the kernel vLLM picks for ``nbytes`` among ``world`` GPUs (full NVLink)."""
    return "one_shot" if nbytes < one_shot_limit(world) else "two_shot"


def bytes_in(world: int, nbytes: int) -> float:
    """Bytes each GPU reads from its peers over NVLink for one call."""
    if algorithm(world, nbytes) == "one_shot":
        return (world - 1) * float(nbytes)
    return 2.0 * (world - 1) / world * nbytes


def effective_bandwidth(device: DeviceSpec) -> float:
    """bytes/s: the device's NVLink bandwidth at the efficiency NCCL reaches on large messages (collectives_fit)."""
    return float(device.nvlink_bandwidth) * FIT.BUS_BANDWIDTH / FIT.REFERENCE_NVLINK_BANDWIDTH


def two_shot_extra_ms(device: DeviceSpec, world: int) -> float:
    """The two-shot kernel's extra fixed cost (ms): equal cost of both kernels at vLLM's switch size."""
    limit = one_shot_limit(world)
    if limit == float("inf"):
        return 0.0
    saved = ((world - 1) - 2.0 * (world - 1) / world) * limit
    return saved / effective_bandwidth(device) * 1e3


def custom_all_reduce_ms(device: DeviceSpec, world: int, nbytes: int) -> float:
    """Time (ms) of one custom all-reduce of ``nbytes`` among ``world`` GPUs; only where :func:`applies`."""
    extra = two_shot_extra_ms(device, world) if algorithm(world, nbytes) == "two_shot" else 0.0
    return LATENCY_MS + extra + bytes_in(world, nbytes) / effective_bandwidth(device) * 1e3


def error_table(device: DeviceSpec) -> List[Dict]:
    """Model against :data:`PUBLISHED_H100`, row by row, with each row's role (latency or held out)."""
    rows = []
    for world, n, t in PUBLISHED_H100:
        b = n * PUBLISHED_ELEMENT_BYTES
        m = custom_all_reduce_ms(device, world, b)
        rows.append({"gpus": world, "bytes": b, "algorithm": algorithm(world, b), "published_ms": t,
                     "model_ms": m, "err": m / t - 1,
                     "role": "latency" if b <= LATENCY_FROM_BYTES else "held out"})
    return rows


def format_table(rows: List[Dict]) -> str:
    lines = [f"{'gpus':>4} {'bytes':>9} {'kernel':9} {'role':9} {'published':>9} {'model':>8} {'err':>7}  (ms)"]
    for r in rows:
        lines.append(f"{r['gpus']:>4} {r['bytes']:>9} {r['algorithm']:9} {r['role']:9} "
                     f"{r['published_ms']:9.4f} {r['model_ms']:8.4f} {r['err']:+7.1%}")
    held = [abs(r["err"]) for r in rows if r["role"] == "held out"]
    lines.append(f"held out: median |err| {statistics.median(held):.1%}, max |err| {max(held):.1%} "
                 f"over {len(held)} rows; latency {LATENCY_MS * 1e3:.2f} us")
    return "\n".join(lines)


def main(argv: Optional[List[str]] = None) -> int:
    print("vLLM custom all-reduce model vs SGLang PR #2904 (H100):")
    print(format_table(error_table(get_device("h100"))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
