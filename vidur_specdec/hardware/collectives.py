"""Collective model: the time of one all-reduce among the GPUs of a tensor-parallel group.

Two named models, chosen by ``engine.all_reduce`` (:data:`ALL_REDUCE_MODELS`):

* ``nccl``: every all-reduce is a measured-and-fitted NCCL all-reduce (below);
* ``vllm_custom`` (default): what vLLM does — its custom all-reduce
  (:mod:`vidur_specdec.hardware.custom_all_reduce`) for the sizes and TP degrees it
  supports, NCCL for the rest.

The NCCL model:

Physics first. A ring all-reduce of ``nbytes`` over ``n`` GPUs moves
``2(n-1)/n · nbytes`` per GPU ("bus bytes", the quantity ``nccl-tests`` divides
by to report bus bandwidth) over the NVLink fabric in ``2(n-1)`` pipelined
steps, so its time is a start-up cost that grows with the number of hops plus
the bus bytes over an effective bus bandwidth. Small messages do not follow
that line: measured all-reduces of up to a few MB all take about the same
time, a floor set by the call itself (kernel launch, NCCL's low-latency
protocol and the synchronisation of the measurement). So, in ms::

    t(n, B) = max(floor_ms,  latency_ms + hop_ms·(n-1) + 2(n-1)/n · B / bus_bandwidth)

with ``bus_bandwidth`` scaled by the device's NVLink bandwidth relative to the
A100 it was fitted on (H100/H200: ×1.5; latency, hop and floor kept fixed).

The four constants are fitted on Vidur's measured A100 NCCL all-reduce files
(``vidur-profiles/network/a100_dgx/all_reduce.csv``: intra-node rows of 2 and
8 GPUs) and checked on rows not fitted (4 GPUs of the same DGX, and the 2-GPU
NVLink pair of ``a100_pairwise_nvlink``). They live in
:mod:`vidur_specdec.hardware.collectives_fit`, with the files' hashes and the error
table, rewritten by::

    python -m vidur_specdec.hardware.collectives calibrate [--network DIR] [--write]

See docs/model.md, "The collective model", for the errors and their direction.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from functools import lru_cache
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from vidur_specdec.hardware import collectives_fit as FIT
from vidur_specdec.hardware import custom_all_reduce as CUSTOM_AR
from vidur_specdec.config import DEFAULT_ALL_REDUCE
from vidur_specdec.config.registry import register_choices
from vidur_specdec.hardware.devices import DeviceSpec
import numpy as np

TIME_COL = "time_stats.all_reduce.median"


@lru_cache(maxsize=8192)  # priced every step (the logits gather, the NCCL fallback); DeviceSpec is hashable
def all_reduce_ms(device: DeviceSpec, world: int, nbytes: int) -> float:
    """Time (ms) of one NCCL all-reduce of ``nbytes`` (per GPU, the tensor's size) among ``world`` GPUs.

    0.0 for ``world`` <= 1 or no bytes. Monotone non-decreasing in ``nbytes``
    and in ``world``. This is the ``nccl`` model of :data:`ALL_REDUCE_MODELS`.
    """
    if world <= 1 or nbytes <= 0:
        return 0.0
    return _model((FIT.FLOOR_MS, FIT.LATENCY_MS, FIT.HOP_MS, FIT.BUS_BANDWIDTH * _link_ratio(device)),
                  world, nbytes)


def vllm_custom_all_reduce_ms(device: DeviceSpec, world: int, nbytes: int) -> float:
    """Time (ms) of one tensor-parallel all-reduce as vLLM runs it: custom kernels where vLLM uses them, else NCCL.

    0.0 for ``world`` <= 1 or no bytes; NCCL (:func:`all_reduce_ms`) for TP
    sizes vLLM's custom all-reduce does not support and for messages of
    ``custom_all_reduce.MAX_BYTES`` (8 MiB) or more. Monotone non-decreasing in ``nbytes``.
    """
    if world <= 1 or nbytes <= 0:
        return 0.0
    if not CUSTOM_AR.applies(world, nbytes):
        return all_reduce_ms(device, world, nbytes)
    return CUSTOM_AR.custom_all_reduce_ms(device, world, nbytes)


# named collective models for ``engine.all_reduce``: name -> f(device, world, nbytes) -> ms
ALL_REDUCE_MODELS: Dict[str, Callable[[DeviceSpec, int, int], float]] = {
    "vllm_custom": vllm_custom_all_reduce_ms,
    "nccl": all_reduce_ms,
}
# engine.all_reduce's default is the config's (vidur_specdec.config.schema); it must name a model here
assert DEFAULT_ALL_REDUCE in ALL_REDUCE_MODELS, "engine.all_reduce's default must be a registered model"
register_choices("engine.all_reduce", lambda: tuple(ALL_REDUCE_MODELS))


def all_reduce_model(name: str) -> Callable[[DeviceSpec, int, int], float]:
    """The registered collective model ``name`` (a key of :data:`ALL_REDUCE_MODELS`)."""
    try:
        return ALL_REDUCE_MODELS[name]
    except KeyError:
        raise ValueError(f"engine.all_reduce: unknown model {name!r}; "
                         f"allowed: {', '.join(ALL_REDUCE_MODELS)}") from None


def _link_ratio(device: DeviceSpec) -> float:
    """The device's NVLink bandwidth relative to the device the constants were fitted on."""
    return float(device.nvlink_bandwidth) / FIT.REFERENCE_NVLINK_BANDWIDTH


def _model(theta: Sequence[float], world, nbytes):
    """t(n, B) in ms for parameters (floor_ms, latency_ms, hop_ms, bus_bandwidth bytes/s); numpy-friendly."""
    floor, lat, hop, bw = theta
    n = np.asarray(world, dtype=float)
    b = np.asarray(nbytes, dtype=float)
    t = np.maximum(floor, lat + hop * (n - 1) + 2 * (n - 1) / n * b / bw * 1e3)
    return float(t) if t.ndim == 0 else t


# --------------------------------------------------------------------------- calibration

DGX = "a100_dgx/all_reduce.csv"
PAIRWISE = "a100_pairwise_nvlink/all_reduce.csv"
FIT_ON = ((DGX, 2), (DGX, 8))  # (file, GPUs) fitted
HELD_OUT = ((DGX, 4), (PAIRWISE, 2))  # checked, never fitted
OUT_OF_SCOPE = ((PAIRWISE, 4),)  # two NVLink pairs joined over PCIe: not an NVLink ring
BANDS = ((0, 1 << 20, "< 1 MiB"), (1 << 20, 1 << 24, "1-16 MiB"), (1 << 24, 1 << 40, ">= 16 MiB"))


def default_network_dir() -> Path:
    """``../shared/vidur-profiles/network`` beside the checkout."""
    return Path(__file__).resolve().parents[3] / "shared" / "vidur-profiles" / "network"


def load_points(network: Path, rel: str, world: int):
    """Intra-node rows of one file for ``world`` GPUs, as half-octave bins: (size bytes, median ms).

    Binning (median of the rows whose size falls in each half-octave) damps
    the run-to-run noise of single small-message measurements.
    """
    import pandas as pd

    path = Path(network) / rel
    if not path.is_file():
        raise FileNotFoundError(f"collectives: measured file not found: {path}")
    d = pd.read_csv(path)
    d = d[(d["num_workers"] == world) & (d["devices_per_node"] == world)]
    if d.empty:
        raise ValueError(f"collectives: {path} has no intra-node rows for {world} GPUs")
    d = d.assign(bin=np.floor(np.log2(d["size"].astype(float)) * 2))
    g = d.groupby("bin").agg(size=("size", "median"), t=(TIME_COL, "median")).reset_index()
    return g["size"].to_numpy(float), g["t"].to_numpy(float)


def fit(points: List[Tuple[int, "object", "object"]]) -> Tuple[float, float, float, float]:
    """Least squares on log time (robust loss) over (world, sizes, times) groups."""
    from scipy.optimize import least_squares

    n = np.concatenate([np.full(len(s), w, float) for w, s, _ in points])
    s = np.concatenate([s for _, s, _ in points])
    t = np.concatenate([t for _, _, t in points])

    def resid(th):
        return np.log(_model((th[0], th[1], th[2], th[3] * 1e9), n, s)) - np.log(t)

    th = least_squares(resid, [0.05, 0.02, 0.002, 150.0], bounds=([1e-4, 0, 0, 1], [1, 1, 1, 2000]),
                       loss="soft_l1", f_scale=0.1).x
    return float(th[0]), float(th[1]), float(th[2]), float(th[3] * 1e9)


def error_table(theta, network: Path) -> List[Dict]:
    """Signed median, median |.| and max |.| relative error per (file, GPUs, size band)."""
    rows = []
    for role, groups in (("fitted", FIT_ON), ("held out", HELD_OUT), ("out of scope", OUT_OF_SCOPE)):
        for rel, w in groups:
            s, t = load_points(network, rel, w)
            r = _model(theta, w, s) / t - 1
            for lo, hi, name in BANDS + ((0, 1 << 62, "all"),):
                m = (s >= lo) & (s < hi)
                if not m.any():
                    continue
                rows.append({"file": rel.split("/")[0], "gpus": w, "role": role, "band": name, "bins": int(m.sum()),
                             "median_err": float(np.median(r[m])), "median_abs_err": float(np.median(np.abs(r[m]))),
                             "max_abs_err": float(np.max(np.abs(r[m])))})
    return rows


def format_table(rows: List[Dict]) -> str:
    lines = [f"{'file':22} {'gpus':>4} {'role':13} {'band':10} {'bins':>4} {'median':>8} {'med|e|':>7} {'max|e|':>7}"]
    for r in rows:
        lines.append(f"{r['file']:22} {r['gpus']:>4} {r['role']:13} {r['band']:10} {r['bins']:>4} "
                     f"{r['median_err']:+8.1%} {r['median_abs_err']:7.1%} {r['max_abs_err']:7.1%}")
    return "\n".join(lines)


def _sha(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def render_fit_module(theta, network: Path, rows: List[Dict]) -> str:
    """Source of :mod:`vidur_specdec.hardware.collectives_fit` for these constants."""
    floor, lat, hop, bw = theta
    held = {f"{r['file']}:{r['gpus']}": round(r["median_abs_err"], 4)
            for r in rows if r["role"] == "held out" and r["band"] == "all"}
    return f'''"""Fitted constants of the collective model (:mod:`vidur_specdec.hardware.collectives`).

GENERATED by ``python -m vidur_specdec.hardware.collectives calibrate --write``; do not edit by hand.

Fitted on: {", ".join(f"{f} ({w} GPUs, intra-node)" for f, w in FIT_ON)}
Held out:  {", ".join(f"{f} ({w} GPUs)" for f, w in HELD_OUT)}
Method:    half-octave median bins, least squares on log time (soft-L1 loss).
Files (sha256):
    {DGX}: {_sha(Path(network) / DGX)}
    {PAIRWISE}: {_sha(Path(network) / PAIRWISE)}
"""

FLOOR_MS = {floor:.6f}  # smallest time of any all-reduce call, ms
LATENCY_MS = {lat:.6f}  # start-up of the bandwidth-bound regime, ms
HOP_MS = {hop:.6f}  # extra start-up per additional GPU in the ring, ms
BUS_BANDWIDTH = {bw:.6e}  # effective bus bandwidth on the reference device, bytes/s
REFERENCE_NVLINK_BANDWIDTH = 600e9  # A100 NVLink3, bytes/s per GPU (hardware/devices.py); scaled by the device's

# median |relative error| over all sizes on the held-out rows ("file:GPUs"): a test holds the model to these
HELD_OUT_MEDIAN_ABS_ERR = {held!r}
'''


def calibrate(network: Optional[Path] = None, write: bool = False, out=sys.stdout):
    """Fit on :data:`FIT_ON`, print the error table, optionally rewrite ``collectives_fit.py``."""
    network = Path(network) if network else default_network_dir()
    points = [(w, *load_points(network, rel, w)) for rel, w in FIT_ON]
    theta = fit(points)
    rows = error_table(theta, network)
    floor, lat, hop, bw = theta
    print(f"floor {floor * 1e3:.1f} us, latency {lat * 1e3:.1f} us + {hop * 1e3:.2f} us/hop, "
          f"bus bandwidth {bw / 1e9:.1f} GB/s (A100)", file=out)
    print(format_table(rows), file=out)
    if write:
        path = Path(__file__).with_name("collectives_fit.py")
        path.write_text(render_fit_module(theta, network, rows), encoding="utf-8")
        print(f"wrote {path}", file=out)
    return theta, rows


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m vidur_specdec.hardware.collectives",
                                 description="Calibrate the all-reduce model on measured NCCL files.")
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("calibrate", help="fit, print the error table, optionally rewrite the constants")
    c.add_argument("--network", default=None, help="folder with a100_dgx/ and a100_pairwise_nvlink/ "
                   "(default: ../shared/vidur-profiles/network)")
    c.add_argument("--write", action="store_true", help="rewrite vidur_specdec/hardware/collectives_fit.py")
    a = ap.parse_args(argv)
    try:
        calibrate(a.network, a.write)
    except (FileNotFoundError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
