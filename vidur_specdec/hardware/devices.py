"""GPUs the simulator knows: spec-sheet figures, by name or from a YAML file.

One place for every device figure. The analytical profile builder
(:mod:`vidur_specdec.profiles`), the memory model and the collective model read
them from here. ``device:`` in a run config is a built-in name (``a100``,
``h100``, ``h200``, ``b200``, ``b300``, ``gb200``, ``gb300``, ``l40s``, ``rtx_pro_6000``) or the path of a YAML file with the fields of
:class:`DeviceSpec` (see ``docs/config.md``)::

    name: l4
    memory_bytes: 24e9        # HBM (or GDDR) capacity, bytes
    hbm_bandwidth: 300e9      # bytes/s
    bf16_flops: 121e12        # dense BF16 tensor-core FLOP/s (no sparsity)
    nvlink_bandwidth: 64e9    # bytes/s per GPU, both directions together (PCIe here)
    sms: 58                   # optional: streaming multiprocessors (default: A100's 108)
    l2_bytes: 48e6            # optional: L2 size (default: A100's 40 MiB)
    fp8_flops: 242e12         # optional: dense FP8 tensor-core FLOP/s (default 0: no FP8)
    fp4_flops: 0              # optional: dense FP4 (NVFP4) tensor-core FLOP/s (default 0: no FP4)
    interconnect: pcie        # optional: nvlink (default) or pcie, the link between a node's GPUs

Units: bytes, bytes/s, FLOP/s.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Dict, Mapping, Union

from vidur_specdec.config import ConfigError
from vidur_specdec.config.files import parse_yaml_text  # duplicate keys refused, as in any config file

GIB = 1024**3
MIB = 1024**2


class DeviceError(ConfigError):
    """A bad device name or device file; the message is one line naming the cause."""


@dataclass(frozen=True)
class DeviceSpec:
    """One GPU's spec-sheet figures (bytes, bytes/s, FLOP/s)."""

    name: str
    memory_bytes: int  # usable device memory as the driver reports it (nvidia-smi memory.total)
    hbm_bandwidth: float  # bytes/s
    bf16_flops: float  # dense BF16/FP16 tensor-core FLOP/s
    nvlink_bandwidth: float  # bytes/s per GPU, both directions together, as spec sheets quote it
    sms: int = 108
    l2_bytes: int = 40 * MIB
    fp8_flops: float = 0.0  # dense FP8 (e4m3) tensor-core FLOP/s; 0 = the GPU has no FP8 tensor cores
    fp4_flops: float = 0.0  # dense FP4 (NVFP4 e2m1) tensor-core FLOP/s; 0 = the GPU has no FP4 tensor cores
    interconnect: str = "nvlink"  # GPU-to-GPU link in one node: nvlink, or pcie (a card without NVLink)

    def builder_fields(self) -> Dict:
        """The mapping the analytical profile builder reads (its historical key names).

        ``fp8_flops`` is added only when the device has an FP8 rate, so a device
        without one keeps the mapping (and built-profile keys) it always had.
        """
        d = {"peak_flops": self.bf16_flops, "mem_bw": self.hbm_bandwidth, "mem_bytes": self.memory_bytes,
             "sms": self.sms, "l2_bytes": self.l2_bytes}
        if self.fp8_flops:
            d["fp8_flops"] = self.fp8_flops
        if self.fp4_flops:
            d["fp4_flops"] = self.fp4_flops
        return d

    def to_dict(self) -> Dict:
        return asdict(self)


# Spec-sheet figures. Memory is what nvidia-smi reports as memory.total for the SXM
# parts (A100 80GB: 81,920 MiB = 80 GiB; H100 SXM5 80GB: 81,559 MiB; H200 SXM: 143,771 MiB,
# sold as "141 GB"). Compute and HBM: NVIDIA's A100 / H100 / H200 datasheets (dense BF16;
# A100 80GB SXM HBM2e 2,039 GB/s; H100 SXM5 HBM3 3.35 TB/s; H200 SXM HBM3e 4.8 TB/s).
# NVLink: A100 NVLink3 600 GB/s, H100/H200 NVLink4 900 GB/s per GPU (both directions).
# FP8: NVIDIA H100 SXM5 and H200 SXM datasheets quote 3,958 TFLOPS FP8 tensor core "with
# sparsity", i.e. 1,979 TFLOPS dense (twice their dense BF16 989); the A100 (Ampere, SM80) has
# no FP8 tensor cores (fp8_flops 0).
BUILTIN: Dict[str, DeviceSpec] = {
    d.name: d
    for d in (
        DeviceSpec("a100", 80 * GIB, 2039e9, 312e12, 600e9, sms=108, l2_bytes=40 * MIB),
        DeviceSpec("h100", 81559 * MIB, 3350e9, 989e12, 900e9, sms=132, l2_bytes=50 * MIB, fp8_flops=1979e12),
        DeviceSpec("h200", 143771 * MIB, 4800e9, 989e12, 900e9, sms=132, l2_bytes=50 * MIB, fp8_flops=1979e12),
        # Blackwell (SM100/SM103) and the PCIe cards: see the note below
        DeviceSpec("b200", 184320 * MIB, 7700e9, 2250e12, 1800e9, sms=148, l2_bytes=126 * MIB,
                   fp8_flops=4500e12, fp4_flops=9000e12),
        DeviceSpec("b300", 275040 * MIB, 7750e9, 2250e12, 1800e9, sms=148, l2_bytes=126 * MIB,
                   fp8_flops=4500e12, fp4_flops=14000e12),
        DeviceSpec("gb200", 189471 * MIB, 8000e9, 2500e12, 1800e9, sms=148, l2_bytes=126 * MIB,
                   fp8_flops=5000e12, fp4_flops=10000e12),
        DeviceSpec("gb300", 284208 * MIB, 8000e9, 2500e12, 1800e9, sms=148, l2_bytes=126 * MIB,
                   fp8_flops=5000e12, fp4_flops=15000e12),
        DeviceSpec("l40s", 46068 * MIB, 864e9, 362.05e12, 64e9, sms=142, l2_bytes=96 * MIB, fp8_flops=733e12,
                   interconnect="pcie"),
        DeviceSpec("rtx_pro_6000", 97887 * MIB, 1792e9, 467.8e12, 128e9, sms=188, l2_bytes=128 * MIB,
                   fp8_flops=935.6e12, fp4_flops=1871.2e12, interconnect="pcie"),
    )
}
# Blackwell and PCIe cards. Memory (nvidia-smi memory.total), HBM/GDDR bandwidth and dense BF16/FP8
# tensor-core rates are those of aiconfigurator-core 0.12.0's system files (systems/<gpu>.yaml: b200_sxm,
# b300_sxm, gb200, gb300, l40s, rtx_pro_6000_server), which quote NVIDIA's datasheets (HGX B200: 180 GB
# HBM3e, 7.7 TB/s, 2.25 PFLOPS dense BF16, 4.5 PFLOPS dense FP8; HGX B300: 7.75 TB/s; GB200/GB300 NVL72:
# 8 TB/s, 2.5 / 5 PFLOPS; L40S datasheet: 48 GB GDDR6, 864 GB/s, 362.05 TFLOPS BF16, 733 TFLOPS FP8;
# RTX PRO 6000 Blackwell Server Edition: 96 GB GDDR7, 1.792 TB/s, BF16/FP8 at its 2,430 MHz boost as the
# system file scales them); B200's 184,320 MiB is the HGX B200's 180 GiB as aiconfigurator states it.
# NVLink: fifth generation, 1.8 TB/s per GPU both directions (NVIDIA Blackwell datasheets); the L40S
# (PCIe 4.0 x16) and RTX PRO 6000 (PCIe 5.0 x16) have no NVLink: 64 and 128 GB/s both directions.
# SMs and L2 (the builder's wave and L2 terms only): B200 148 SMs and 126 MiB L2 (NVIDIA Blackwell
# architecture technical brief; kept for B300/GB200/GB300, the same die family); L40S 142 SMs, 96 MiB L2
# (NVIDIA Ada Lovelace architecture whitepaper, AD102); RTX PRO 6000 188 SMs, 128 MiB L2 (NVIDIA RTX
# Blackwell GPU architecture whitepaper, GB202).
# FP4 (NVFP4) dense tensor-core rates, the same system files' fp4_tc_flops: B200 9 PFLOPS, B300 14, GB200 10,
# GB300 15 (NVIDIA's B300/GB300 datasheets: 14 and 15 PFLOPS dense FP4), RTX PRO 6000 1,871.2 TFLOPS at its
# 2,430 MHz boost; Hopper, Ada and Ampere have no FP4 tensor cores (0).

REQUIRED = ("memory_bytes", "hbm_bandwidth", "bf16_flops", "nvlink_bandwidth")
INTERCONNECTS = ("nvlink", "pcie")  # DeviceSpec.interconnect: how a node's GPUs reach each other


def from_mapping(data: Mapping, where: str = "device") -> DeviceSpec:
    """A :class:`DeviceSpec` from a mapping of its fields; :class:`DeviceError` names a missing or bad figure."""
    if not isinstance(data, Mapping):
        raise DeviceError(f"{where}: must be a mapping of device figures")
    allowed = {f.name for f in fields(DeviceSpec)}
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise DeviceError(f"{where}: unknown field {unknown[0]!r}; allowed: {', '.join(sorted(allowed))}")
    for key in REQUIRED:
        if key not in data or data[key] is None:
            raise DeviceError(f"{where}: missing figure {key!r} (needs {', '.join(REQUIRED)})")
    name = data.get("name")
    if name is not None and not isinstance(name, str):
        raise DeviceError(f"{where}: name must be a string, got {name!r}")
    out = {"name": name or Path(where).stem}
    if "interconnect" in data:
        if data["interconnect"] not in INTERCONNECTS:
            raise DeviceError(f"{where}: interconnect must be one of {', '.join(INTERCONNECTS)}, got "
                              f"{data['interconnect']!r}")
        out["interconnect"] = data["interconnect"]
    for f in fields(DeviceSpec):
        if f.name in ("name", "interconnect") or f.name not in data:
            continue
        out[f.name] = _figure(f.name, data[f.name], f.type in (int, "int"), where)
    return DeviceSpec(**out)


# Ranges of the device figures (inclusive): counts are whole numbers. Upper bounds are 100x the largest
# current part (B200: 192 GB HBM3e, 8 TB/s, 2.25 PFLOPS dense BF16, 1.8 TB/s NVLink5, 148 SMs, 126 MB L2).
RANGES = {
    "memory_bytes": (1, 100 * 192e9),
    "hbm_bandwidth": (1, 100 * 8e12),
    "bf16_flops": (1, 100 * 2.25e15),
    "nvlink_bandwidth": (1, 100 * 1.8e12),
    "sms": (1, 100 * 148),
    "l2_bytes": (1, 100 * 126 * MIB),
    "fp8_flops": (0, 100 * 4.5e15),
    "fp4_flops": (0, 100 * 15e15),
}


def _figure(key: str, v, integer: bool, where: str):
    """One device figure, typed and range-checked: a number (a count: a whole number) within :data:`RANGES`."""
    lo, hi = RANGES[key]
    what = "a whole number" if integer else "a number"
    bad = DeviceError(f"{where}: {key} must be {what} in [{lo:g}, {hi:g}], got {v!r}")
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise bad  # a string or true/false where a number belongs
    if v != v or not lo <= v <= hi or (integer and float(v) != int(v)):
        raise bad
    return int(v) if integer else float(v)


def get_device(name_or_path: Union[str, Path, Mapping, DeviceSpec]) -> DeviceSpec:
    """A built-in device by name, a YAML file of :class:`DeviceSpec` fields, or a mapping.

    A relative file path was already resolved against the config that named it
    (:func:`vidur_specdec.config.paths.resolve_paths`).
    """
    if isinstance(name_or_path, DeviceSpec):
        return name_or_path
    if isinstance(name_or_path, Mapping):
        return from_mapping(name_or_path)
    key = str(name_or_path)
    if key in BUILTIN:
        return BUILTIN[key]
    path = Path(key).expanduser()
    if not (key.endswith((".yaml", ".yml")) or path.is_file()):
        raise DeviceError(f"device: unknown device {key!r}; must be one of {', '.join(BUILTIN)}, "
                          "or the path of a YAML file of device figures")
    if not path.is_file():
        raise DeviceError(f"device: file not found: {path}")

    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        raise DeviceError(f"device: {path} is not valid YAML") from None
    return from_mapping(parse_yaml_text(text, str(path), "device") or {}, where=f"device: {path}")
